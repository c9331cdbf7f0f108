import math
import re
from dataclasses import replace

import pytest

from attention_docs import render
from attention_docs.analytic.memory import naive_peak
from attention_docs.attention.naive import STEPS
from attention_docs.experiments.registry import get
from attention_docs.experiments.runner import run_experiment
from attention_docs.experiments.wall import sweep_shapes
from attention_docs.measurements import Measurement, Sourced, Table
from attention_docs.measurements import forward as fwd
from attention_docs.render import words as fmt


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


def test_seq_len_sweep_measures_time_with_its_rounds_memory_and_steps(wall):
    rows = wall.tables["seq_len"].records()
    assert [r["seq_len"] for r in rows] == [8, 16, 32]
    for r in rows:
        assert r["status"] == "ok"
        assert r["time_low_us"] <= r["time_us"] <= r["time_high_us"]
        model = naive_peak(1, 2, r["seq_len"], 64, causal=True)
        assert r["peak_bytes"] == model.peak_bytes
        assert r["quadratic_bytes"] == 2 * model.matrix_bytes + model.mask_bytes
        assert r["flops"] == 4 * 2 * r["seq_len"] ** 2 * 64
    spread = wall.tables["step_rounds"].records()
    assert len(spread) == 3 * len(STEPS)
    by_key = {(s["seq_len"], s["step"]): s for s in spread}
    for r in rows:
        for label in STEPS:
            s = by_key[(r["seq_len"], label)]
            assert s["low_us"] <= r[label] <= s["high_us"]
    assert wall.facts["rounds"] == 3


def test_the_last_level_cache_is_read_from_sysfs(tmp_path):
    from attention_docs.profiling.cache import cpu_last_level_cache

    for name, level, kind, size in (
        ("index0", 1, "Data", "32K"),
        ("index1", 1, "Instruction", "32K"),
        ("index2", 2, "Unified", "512K"),
        ("index3", 3, "Unified", "32768K"),
    ):
        d = tmp_path / name
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    cache = cpu_last_level_cache(tmp_path)
    assert (cache.level, cache.size_bytes) == (3, 32 * 2**20)
    assert cache.source.endswith("/index3")
    assert cpu_last_level_cache(tmp_path / "missing") is None


def test_batch_heads_sweep_holds_tokens_and_width_fixed(split):
    tokens = split.tables["tokens"].records()
    assert [(r["batch_size"], r["seq_len"]) for r in tokens] == [(1, 64), (2, 32), (4, 16)]
    # With the tokens fixed, FLOPs are proportional to seq_len, not its square.
    assert [r["flops"] for r in tokens] == [tokens[0]["flops"] / 2**i for i in range(3)]
    heads = split.tables["heads"].records()
    assert [(r["num_heads"], r["head_dim"]) for r in heads] == [(1, 32), (2, 16), (4, 8)]
    assert len({r["flops"] for r in heads}) == 1
    assert heads[-1]["peak_bytes"] > heads[0]["peak_bytes"]
    assert all(r["time_low_us"] <= r["time_us"] <= r["time_high_us"] for r in tokens + heads)


def test_head_dim_sweep(dims):
    rows = dims.tables["head_dim"].records()
    assert [r["head_dim"] for r in rows] == [8, 16, 32]
    assert all(r["status"] == "ok" and r["attention.scores"] > 0 for r in rows)
    assert {s["head_dim"] for s in dims.tables["step_rounds"].records()} == {8, 16, 32}


@pytest.mark.parametrize("kind", ["cpu", "cuda"])
@pytest.mark.parametrize("name", ["wall_seq_len", "wall_batch_heads", "wall_head_dim"])
def test_no_default_sweep_point_is_a_shape_of_the_forward_time_grid(kind, name):
    """A shape the grid holds has one forward time on the site: the sweeps stay off it."""
    grid = set(fwd.GRIDS[kind].shapes())
    shapes = sweep_shapes(name, get(name).resolve({}, kind))
    assert shapes
    assert not [s for s in shapes if fwd.Shape.of(s) in grid]


def test_a_sweep_point_too_large_for_the_free_memory_is_a_row_in_words(monkeypatch):
    import attention_docs.experiments._sweep as sweep_module

    monkeypatch.setattr(sweep_module, "free_memory_bytes", lambda device: 200_000)
    m = run_experiment(
        "wall_seq_len", {"min_seq_len": 8, "max_seq_len": 64, "num_heads": 2}, device="cpu"
    )
    status = {r["seq_len"]: r["status"] for r in m.tables["seq_len"].records()}
    assert status[8] == status[16] == "ok"
    assert status[64].startswith("too large for the free memory (needs")
    assert m.tables["seq_len"].records()[-1]["time_us"] is None
    assert any("was not run" in n for n in m.notes)


XS = [16, 32, 64, 128, 256, 512]


def synthetic(
    m: Measurement, times, peaks, *, spread=0.01, quadratic=None, llc=None
) -> Measurement:
    """A seq_len sweep with the given medians and a ±`spread` range around each."""
    quadratic = quadratic or peaks
    rows = tuple(
        (x, t, t * (1 - spread), t * (1 + spread), p, q, 1.0, *(t / 5,) * 5, "ok")
        for x, t, p, q in zip(XS, times, peaks, quadratic, strict=True)
    )
    columns = (
        "seq_len",
        "time_us",
        "time_low_us",
        "time_high_us",
        "peak_bytes",
        "quadratic_bytes",
        "flops",
        *STEPS,
        "status",
    )
    step_rows = tuple(
        (x, label, t / 5 * (1 - spread), t / 5 * (1 + spread))
        for x, t in zip(XS, times, strict=True)
        for label in STEPS
    )
    facts = {"llc_bytes": llc, "llc_level": 3} if llc else {}
    return replace(
        m,
        tables={
            "seq_len": Table(columns, rows),
            "step_rounds": Table(("seq_len", "step", "low_us", "high_us"), step_rows),
        },
        facts=facts,
    )


def test_slopes_carry_the_range_of_the_rounds():
    slopes = render.wall.slope_ranges([16, 32], [(100.0, 90.0, 110.0), (400.0, 380.0, 420.0)])
    (s,) = slopes
    assert s.slope == pytest.approx(2.0)
    assert s.low == pytest.approx(math.log2(380 / 110))
    assert s.high == pytest.approx(math.log2(420 / 90))


def test_seq_len_claim_names_the_overhead_range_and_the_wall(wall):
    m = synthetic(wall, [100, 110, 120, 400, 1600, 6400], [x * x for x in XS])
    text = render.wall.seq_len_claim(m)
    assert "From 16 to 64 tokens each doubling costs less than double" in text
    assert "From **64** tokens on" in text
    assert "fitted slope of **2.00**, close to 2" in text
    assert "No doubling is steeper than N² outside the rounds' noise." in text
    flat = render.wall.seq_len_claim(synthetic(wall, [1, 2, 4, 8, 16, 32], [x * x for x in XS]))
    assert "longer sequences would be needed" in flat and "less than double" not in flat


def test_trend_words_are_withheld_inside_the_noise(wall):
    # The same medians as above, but every round range spans a factor of 3.
    noisy = synthetic(wall, [100, 110, 120, 400, 1600, 6400], [x * x for x in XS], spread=0.5)
    text = render.wall.seq_len_claim(noisy)
    assert "less than double" not in text and "From **64** tokens on" not in text
    assert "outside the noise" in text


def test_a_super_quadratic_doubling_is_explained_by_the_cache_only_when_it_crosses_it(wall):
    times = [100, 400, 1600, 6400, 25600, 25600 * 2**3.2]
    peaks = [x * x * 8 for x in XS]  # 256 tokens: 524 kB; 512 tokens: 2.1 MB
    crossing = render.wall.seq_len_claim(synthetic(wall, times, peaks, llc=1_000_000))
    assert "Between 256 and 512 tokens the local slope is **3.20" in crossing
    assert "past the 1 MB last-level (L3) cache" in crossing
    # Every step bends alike in this synthetic sweep, outside its noise.
    assert "`attention.softmax` 3.20" in crossing
    inside = render.wall.seq_len_claim(synthetic(wall, times, peaks, llc=10**9))
    assert "still inside" in inside and "do not say what does" in inside
    unknown = render.wall.seq_len_claim(synthetic(wall, times, peaks))
    assert "not explained here" in unknown


def test_a_memory_slope_below_two_says_so_and_why(wall):
    # Peak = N² terms + a term that grows like N (the output).
    quadratic = [x * x for x in XS]
    peaks = [q + 200 * x for q, x in zip(quadratic, XS, strict=True)]
    text = render.wall.seq_len_claim(
        synthetic(wall, [100, 400, 1600, 6400, 25600, 102400], peaks, quadratic=quadratic)
    )
    whole = render.plots.loglog_slope(XS, peaks)
    assert whole < 1.9
    assert f"fitted slope of **{whole:.2f}** over the whole sweep, below 2" in text
    assert "It is below 2 because not all of the peak is N×N" in text
    assert f"{100 * 256 / (256 + 3200):.1f}% of the measured peak" in text
    assert "a slope of 1.00" in text  # the rest grows like N
    assert "close to 2" not in text


def step_table(m: Measurement, medians, spreads) -> Measurement:
    """A per-step table: medians[x] = five step times; spreads[x] = relative half-range."""
    rows = tuple((x, *medians[x], "ok") for x in medians)
    spread_rows = tuple(
        (x, label, t * (1 - spreads[x]), t * (1 + spreads[x]))
        for x in medians
        for label, t in zip(STEPS, medians[x], strict=True)
    )
    return replace(
        m,
        tables={
            "t": Table(("seq_len", *STEPS, "status"), rows),
            "step_rounds": Table(("seq_len", "step", "low_us", "high_us"), spread_rows),
        },
    )


def test_the_largest_step_is_named_only_outside_the_noise(wall):
    medians = {
        16: (5.0, 1.0, 4.8, 1.0, 1.0),  # scores and mask overlap
        32: (5.0, 1.0, 4.9, 1.0, 1.0),
        48: (4.0, 1.0, 1.0, 1.0, 1.0),  # scores clear
        64: (1.0, 1.0, 1.0, 9.0, 1.0),  # softmax clear
    }
    spreads = {16: 0.1, 32: 0.1, 48: 0.1, 64: 0.1}
    text = render.wall.step_shares_claim(step_table(wall, medians, spreads), "t", "seq_len")
    assert (
        "at seq len 16 to 32 no step is the largest outside the noise: `attention.scores`, "
        "`attention.mask` are within noise of each other" in text
    )
    assert "`attention.scores` is the largest at seq len 48 (50.0%)" in text
    assert "`attention.softmax` is the largest at seq len 64 (69.2%)" in text
    assert text.endswith("of the five steps at seq len 16 and 15.4% at 64.")
    # Tight ranges: the same medians give a clear leader at 16 and 32.
    tight = dict.fromkeys(medians, 0.001)
    clear = render.wall.step_shares_claim(step_table(wall, medians, tight), "t", "seq_len")
    assert "`attention.scores` is the largest at seq len 16 to 48" in clear
    assert "no step is the largest" not in clear


def sweep_rows(m: Measurement, table: str, columns, rows) -> Measurement:
    return replace(m, tables={table: Table(columns, tuple(rows))})


HEADS = ("num_heads", "head_dim", "time_us", "time_low_us", "time_high_us", "peak_bytes", "flops")


def test_heads_claim_states_the_change_of_time_with_its_range_or_a_tie(split):
    apart = sweep_rows(
        split,
        "heads",
        HEADS,
        [(1, 64, 100.0, 95.0, 105.0, 1000, 8.0), (8, 8, 300.0, 290.0, 310.0, 8000, 8.0)],
    )
    text = render.wall.heads_claim(apart)
    assert "multiplies time by **3.00×** (2.76–3.26×)" in text
    assert "multiplies peak memory by **8.0×**" in text
    tied = sweep_rows(
        split,
        "heads",
        HEADS,
        [(1, 64, 100.0, 80.0, 130.0, 1000, 8.0), (8, 8, 110.0, 90.0, 140.0, 8000, 8.0)],
    )
    assert "leaves time within noise (1.10× apart)" in render.wall.heads_claim(tied)


def test_sweep_claims_and_tables_from_real_measurements(wall, split, dims):
    assert "fitted log-log slope" in render.wall.seq_len_claim(wall)
    assert re.search(
        r"The same 64 tokens as one sequence of 64 take \*\*[\d.]+ [µm]?s \([\d.]+ [µm]?s–",
        render.wall.tokens_claim(split),
    )
    assert "leaves the matmul FLOPs unchanged" in render.wall.heads_claim(split)
    assert "From head_dim 8 to 32 the FLOPs grow 4×" in render.wall.head_dim_claim(dims)
    table = render.wall.sweep_table(
        sourced(wall), "seq_len", ["seq_len", "time_us", "peak_bytes", "flops", "status"]
    )
    assert (
        "| seq len | Forward time (median; range over rounds) | Peak memory | Matmul FLOPs "
        "| Status |" in table
    )
    first = wall.tables["seq_len"].records()[0]
    low, mid, high = (fmt.time_us(first[c]) for c in ("time_low_us", "time_us", "time_high_us"))
    assert f"| {mid} ({low}–{high}) |" in table
    assert 'class="ad-caption"' in table


def test_sweep_figures_are_byte_stable_and_draw_the_rounds(wall):
    s = sourced(wall)
    args = {"x": "seq_len", "y": "time_us", "label": "t", "what": "Time.", "ylabel": "time (µs)"}
    one = render.wall.sweep_figure(s, "seq_len", **args)
    assert one == render.wall.sweep_figure(s, "seq_len", **args) and "(slope " in one
    assert "range over rounds" in one and "time (µs)" in one
    peak = render.wall.sweep_figure(
        s, "seq_len", x="seq_len", y="peak_bytes", label="peak", what="Peak.", ylabel="bytes"
    )
    assert "range over rounds" not in peak
    shares = render.wall.step_share_figure(s, "seq_len", x="seq_len", what="Shares.")
    assert shares == render.wall.step_share_figure(s, "seq_len", x="seq_len", what="Shares.")
    assert "attention.softmax" in shares
