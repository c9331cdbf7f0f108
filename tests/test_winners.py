# Chapter 12: the winners map drawn from a forward_times table whose winners, ties and margins
# are known in advance; the closing "what each trick removed" experiment at a tiny shape.
from dataclasses import replace

import pytest
import torch
from synthetic_forward import forward_times, row

from attention_docs import render
from attention_docs.experiments.forward import candidates
from attention_docs.experiments.runner import run_experiment
from attention_docs.measurements import Sourced
from attention_docs.measurements import forward as fwd
from attention_docs.render import winners

UNAVAILABLE = "not available on this device for these inputs"


def shape(n, causal):
    return fwd.Shape(1, 2, n, 16, "float32", causal)


A, B, C, D = shape(128, True), shape(256, True), shape(128, False), shape(256, False)


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """Four cells: A a clear win, B a tie, C another winner, D only one ran."""
    base = run_experiment(
        "naive_steps", {"seq_len": 32, "num_heads": 2, "head_dim": 16}, device="cpu"
    )
    rows = [
        row(fwd.NAIVE, A, 1000.0),
        row(fwd.SDPA_FLASH, A, 100.0, 95.0, 105.0),
        row(fwd.FLEX, A, 150.0, 145.0, 155.0),
        row(fwd.NAIVE, B, 4000.0),
        row(fwd.SDPA_FLASH, B, 200.0, 180.0, 220.0),
        row(fwd.FLEX, B, 210.0, 205.0, 215.0),
        row(fwd.NAIVE, C, 600.0),
        row(fwd.COMPILED, C, 300.0, 290.0, 310.0),
        row(fwd.SDPA_FLASH, C, 400.0, 390.0, 410.0),
        row(fwd.NAIVE, D, None, status="out of memory"),
        row(fwd.SDPA_FLASH, D, 500.0, 490.0, 510.0),
    ]
    for s in (A, B, C, D):
        rows.append(row(fwd.SDPA_EFFICIENT, s, None, status=UNAVAILABLE))
        rows.append(row(fwd.STEP_PREFIX + "attention.softmax", s, 1.0))  # not a contender
    m = forward_times(base, rows)
    return Sourced(m, "from the store", "x.json")


def test_cells_rank_the_implementations_and_find_winner_tie_and_margin(known):
    cells = {c.shape: c for c in winners.cells(known)}
    assert list(cells) == [A, B, C, D]  # causal first, then seq_len
    a = cells[A]
    assert (a.winner, a.runner_up, a.tied) == (fwd.SDPA_FLASH, fwd.FLEX, ())
    assert a.margin.ratio == pytest.approx(1.5)
    assert (a.margin.low, a.margin.high) == (pytest.approx(145 / 105), pytest.approx(155 / 95))
    b = cells[B]
    assert b.winner == fwd.SDPA_FLASH and b.tied == (fwd.FLEX,) and b.tie
    assert cells[C].winner == fwd.COMPILED and not cells[C].tie
    assert cells[D].winner == fwd.SDPA_FLASH and cells[D].margin is None
    for c in cells.values():  # single naive steps never compete
        assert all(not name.startswith(fwd.STEP_PREFIX) for name, _ in c.ranked)
    assert winners.implementations(known) == [
        fwd.NAIVE,
        fwd.SDPA_FLASH,
        fwd.FLEX,
        fwd.COMPILED,
        fwd.SDPA_EFFICIENT,
    ]


def test_the_map_draws_a_tie_as_a_tie(known):
    cells = {c.shape: c for c in winners.cells(known)}
    assert winners.cell_label(cells[A]) == "SDPA flash\n1.50× (1.38–1.63×)"
    assert winners.cell_label(cells[B]).startswith("tie: SDPA flash\n≈ FlexAttention")
    assert "only one ran" in winners.cell_label(cells[D])
    figure = render.winners.winners_figure(known)
    assert "FlexAttention within noise (1.05× apart)" in figure  # the alt text
    assert figure.count("<figcaption") == 1 and "hatched: a tie" in figure


def test_the_claim_counts_clear_wins_and_ties_separately(known):
    claim = render.winners.winners_claim(known)
    assert "**SDPA flash** is fastest outside the noise in 2" in claim  # A and D
    assert "**naive + torch.compile** is fastest outside the noise in 1" in claim  # C
    assert "In 1 cell the fastest are within noise of each other: FlexAttention ≈ SDPA flash" in (
        claim
    )
    # naive's gap: smallest at C (2.00×), largest at B (20.00×); both facts, with ranges.
    assert "naive + torch.compile is 2.00× (1.94–2.07×) faster than naive (eager)" in claim
    assert "SDPA flash is 20.00× (18.18–22.22×) faster than naive (eager)" in claim
    assert "attention.softmax" not in claim


def test_the_trend_claim_checks_ranges_and_names_a_changing_winner(known):
    trend = winners.trend_claim(known)
    assert "changes with seq_len in 1 of 2 series" in trend
    assert "naive + torch.compile at seq_len 128, SDPA flash at 256" in trend
    # causal: 10× (9.5–10.5×) at 128 against 20× (18–22×) at 256: grows outside the noise;
    # no mask: naive ran out of memory at 256, so that series is not compared.
    assert "grows outside the noise in 1 of 1 series" in trend


def test_what_did_not_run_is_said_in_the_sites_words(known):
    text = winners.not_run(known)
    assert "**SDPA efficient** (every shape): not available on this device: PyTorch has no " in (
        text
    )
    assert "memory-efficient kernel for the CPU" in text
    assert "**naive (eager)** (seq_len 256, head_dim 16, no mask): ran out of memory" in text
    assert "turning off both" not in text
    gpu = winners.why_not(fwd.SDPA_CUDNN, UNAVAILABLE, "cuda")
    assert "cuDNN backend refused them when pinned" in gpu


def test_every_timing_is_in_a_tab_with_winner_and_ties_marked(known):
    tabs = winners.times_tabs(known)
    assert tabs.count('=== "') == 2 and '=== "causal, head_dim 16"' in tabs
    causal = tabs.split('=== "no mask')[0]
    flex_row = next(line for line in causal.splitlines() if "| FlexAttention |" in line)
    assert flex_row.count("≈ ") == 1  # tied with the winner at seq_len 256 only
    flash_row = next(line for line in causal.splitlines() if "| SDPA flash |" in line)
    assert flash_row.count("**") == 4  # bold in both cells: the winner (or tied first) twice


def test_devices_claim_depends_on_the_devices_in_the_store(known):
    one = winners.devices_claim([known])
    assert "one device only" in one and "cannot be shown" in one
    m = known.measurement
    device = replace(m.provenance.device, kind="cuda", name="NVIDIA H200")
    other = replace(m, provenance=replace(m.provenance, device=device, device_id="cuda-h200"))
    two = winners.devices_claim([known, Sourced(other, "from the store", "y.json")])
    assert "from 2 devices" in two and two.count("- **") == 2
    assert "The same implementation wins most cells on every device." in two


def test_implementations_agree_numerically():
    from attention_docs.inputs import make_qkv

    impls, _ = candidates(torch.device("cpu"))
    q, k, v = make_qkv(1, 2, 128, 16, seed=int(torch.randint(0, 10_000, ()).item()))
    for causal in (True, False):
        outs = {}
        for c in impls:
            try:
                outs[c.name] = c.build(causal)(q, k, v)
            except RuntimeError:
                continue  # a backend this device does not have
        reference = outs.pop(fwd.NAIVE)
        assert fwd.SDPA_FLASH in outs and fwd.FLEX in outs
        for name, out in outs.items():
            torch.testing.assert_close(out, reference, atol=2e-5, rtol=2e-5, msg=name)


def test_summary_counts_work_at_every_depth_and_reads_times_from_forward_times():
    params = {"seq_len": 128, "head_dim": 16, "num_heads": 2}
    m = run_experiment("winners_summary", params, device="cpu")
    rows = {r["implementation"]: r for r in m.tables["summary"].records()}
    naive, flash, math = rows[fwd.NAIVE], rows[fwd.SDPA_FLASH], rows[fwd.SDPA_MATH]
    # SDPA's math backend is one call that dispatches dozens of ops: all of them count.
    assert math["work_per_forward"] > naive["work_per_forward"] > flash["work_per_forward"]
    assert flash["work_per_forward"] >= 2  # the SDPA entry op and the CPU flash kernel
    # Compiled code counts its generated kernels (Inductor's kernel profiling is on).
    assert rows[fwd.FLEX]["work_per_forward"] >= 1
    assert rows[fwd.COMPILED]["work_per_forward"] >= 3  # two bmm and the fused kernel
    assert naive["peak_bytes"] > flash["peak_bytes"] > 0
    assert rows[fwd.SDPA_EFFICIENT]["status"] == "not available on this device for these inputs"
    assert "time" not in " ".join(m.tables["summary"].columns)
    shape = fwd.Shape.of(m.params)
    times = forward_times(
        m,
        [
            row(fwd.NAIVE, shape, 800.0, 790.0, 810.0),
            row(fwd.SDPA_FLASH, shape, 200.0, 195.0, 205.0),
            *(
                row(n, shape, 400.0, 300.0, 500.0)
                for n in rows
                if n not in (fwd.NAIVE, fwd.SDPA_FLASH)
            ),
        ],
    )
    table = render.winners.summary_table(Sourced(m, "measured now", "x.json"), times)
    assert "Ops (every depth) / forward" in table
    assert "200 µs (195 µs–205 µs over 3 rounds)" in table and "4.00× (3.85–4.15×)" in table
    assert "PyTorch has no memory-efficient kernel for the CPU" in table
    assert "Every implementation ran there." not in winners.summary_size_note(m)


@pytest.mark.parametrize("kind", ["cpu", "cuda"])
def test_every_experiment_that_reads_forward_times_runs_at_a_shape_of_its_grid(kind):
    from attention_docs.experiments.registry import get

    grid = set(fwd.GRIDS[kind].shapes())
    for name in ("fusion_kernels", "sdpa_backends", "winners_summary", "flex_masks"):
        params = get(name).resolve({}, kind)
        assert fwd.Shape.of({"causal": True, **params}) in grid, (name, kind, params)
