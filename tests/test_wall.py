import re
from dataclasses import replace

import pytest

from attention_docs import render
from attention_docs.attention.naive import STEPS
from attention_docs.experiments.runner import run_experiment
from attention_docs.measurements import Measurement, Sourced, Table
from attention_docs.memory_model import naive_peak


@pytest.fixture(scope="module")
def wall():
    return run_experiment(
        "wall_seq_len", {"min_seq_len": 8, "max_seq_len": 32, "num_heads": 2}, device="cpu"
    )


@pytest.fixture(scope="module")
def split():
    return run_experiment(
        "wall_batch_heads", {"tokens": 64, "model_dim": 32, "seq_len": 16}, device="cpu"
    )


@pytest.fixture(scope="module")
def dims():
    return run_experiment(
        "wall_head_dim", {"seq_len": 16, "min_head_dim": 8, "max_head_dim": 32}, device="cpu"
    )


def sourced(m: Measurement) -> Sourced:
    return Sourced(m, "measured now", "x.json", base="")


def test_seq_len_sweep_measures_time_memory_and_steps(wall):
    rows = wall.tables["seq_len"].records()
    assert [r["seq_len"] for r in rows] == [8, 16, 32]
    for r in rows:
        assert r["status"] == "ok" and r["time_us"] > 0
        assert r["peak_bytes"] == naive_peak(1, 2, r["seq_len"], 64, causal=True).peak_bytes
        assert r["flops"] == 4 * 2 * r["seq_len"] ** 2 * 64
        assert all(r[s] > 0 for s in STEPS)


def test_batch_heads_sweep_holds_tokens_and_width_fixed(split):
    tokens = split.tables["tokens"].records()
    assert [(r["batch_size"], r["seq_len"]) for r in tokens] == [(1, 64), (2, 32), (4, 16)]
    # With the tokens fixed, FLOPs are proportional to seq_len, not its square.
    assert [r["flops"] for r in tokens] == [tokens[0]["flops"] / 2**i for i in range(3)]
    heads = split.tables["heads"].records()
    assert [(r["num_heads"], r["head_dim"]) for r in heads] == [(1, 32), (2, 16), (4, 8)]
    assert len({r["flops"] for r in heads}) == 1
    assert heads[-1]["peak_bytes"] > heads[0]["peak_bytes"]


def test_head_dim_sweep(dims):
    rows = dims.tables["head_dim"].records()
    assert [r["head_dim"] for r in rows] == [8, 16, 32]
    assert all(r["status"] == "ok" and r["attention.scores"] > 0 for r in rows)


def test_local_slopes_and_turning_point():
    xs = [16, 32, 64, 128, 256, 512]
    ys = [100, 110, 120, 400, 1600, 6400]
    slopes = render.local_slopes(xs, ys)
    assert slopes[-1] == pytest.approx(2.0)
    assert render.turning_point(xs, ys) == 64
    assert render.turning_point(xs, [1] * 6) is None


def synthetic(m: Measurement, times, peaks) -> Measurement:
    xs = [16, 32, 64, 128, 256, 512]
    rows = tuple(
        (x, t, p, 1.0, *(t / 5,) * 5, "ok") for x, t, p in zip(xs, times, peaks, strict=True)
    )
    table = Table(("seq_len", "time_us", "peak_bytes", "flops", *STEPS, "status"), rows)
    return replace(m, tables={"seq_len": table})


def test_seq_len_claim_names_the_overhead_range_and_the_wall(wall):
    m = synthetic(
        wall, [100, 110, 120, 400, 1600, 6400], [x * x for x in (16, 32, 64, 128, 256, 512)]
    )
    text = render.seq_len_claim(m)
    assert "peak memory with **2.00**" in text
    assert "From 16 to 64 tokens each doubling costs less than double" in text
    assert "From **64** tokens on" in text
    flat = render.seq_len_claim(synthetic(wall, [1, 2, 4, 8, 16, 32], [1, 4, 16, 64, 256, 1024]))
    assert "longer sequences would be needed" in flat and "less than double" not in flat


def test_step_shares_claim_groups_consecutive_rows(wall):
    rows = (
        (16, 5.0, 1.0, 1.0, 1.0, 1.0, "ok"),
        (32, 5.0, 1.0, 1.0, 1.0, 1.0, "ok"),
        (48, 4.0, 1.0, 1.0, 1.0, 1.0, "ok"),
        (64, 1.0, 1.0, 1.0, 9.0, 1.0, "ok"),
    )
    m = replace(wall, tables={"t": Table(("seq_len", *STEPS, "status"), rows)})
    text = render.step_shares_claim(m, "t", "seq_len")
    assert "`attention.scores` at seq len 16 to 48 (50.0%–55.6%)" in text
    assert "`attention.softmax` at seq len 64 (69.2%)" in text
    assert text.endswith("66.7% of the five steps at seq len 16 and 15.4% at 64.")


def test_sweep_claims_and_tables_from_real_measurements(wall, split, dims):
    assert "fitted log-log slope" in render.seq_len_claim(wall)
    assert re.search(
        r"The same 64 tokens as one sequence of 64 take \*\*[\d.]+ [µm]?s\*\*",
        render.tokens_claim(split),
    )
    assert "leaves the matmul FLOPs unchanged" in render.heads_claim(split)
    assert "From head_dim 8 to 32 the FLOPs grow 4×" in render.head_dim_claim(dims)
    table = render.sweep_table(
        sourced(wall), "seq_len", ["seq_len", "time_us", "peak_bytes", "flops", "status"]
    )
    assert "| seq len | forward time | peak memory | matmul FLOPs | status |" in table
    assert 'class="ad-caption"' in table


def test_sweep_figures_are_byte_stable_and_state_the_slope(wall):
    s = sourced(wall)
    one = render.sweep_figure(s, "seq_len", x="seq_len", y="peak_bytes", label="peak", what="Peak.")
    two = render.sweep_figure(s, "seq_len", x="seq_len", y="peak_bytes", label="peak", what="Peak.")
    assert one == two and "(slope " in one
    shares = render.step_share_figure(s, "seq_len", x="seq_len", what="Shares.")
    assert shares == render.step_share_figure(s, "seq_len", x="seq_len", what="Shares.")
    assert "attention.softmax" in shares
