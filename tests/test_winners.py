import pytest

from attention_docs import render
from attention_docs.experiments.runner import run_experiment
from attention_docs.experiments.winners import candidates
from attention_docs.measurements import Sourced


@pytest.fixture(scope="module")
def grid():
    m = run_experiment(
        "winners_map", {"seq_lens": "128,256", "head_dims": "16", "num_heads": 2}, device="cpu"
    )
    return Sourced(m, "measured now", "x.json")


def test_every_implementation_has_a_row_per_cell_with_a_time_or_a_reason(grid):
    m = grid.measurement
    names = m.facts["implementations"]
    assert names[0] == "naive (eager)" and "SDPA flash" in names and "FlexAttention" in names
    times = m.tables["times"].records()
    assert len(times) == len(names) * 2 * 2  # two seq_lens, causal and not
    for r in times:
        assert (r["time"] is not None and r["time"] > 0 and r["status"] == "ok") or (
            r["time"] is None
            and r["status"].startswith(("not available on this device", "out of memory"))
        )
    # On a CPU the GPU-only SDPA backends become rows saying why, never an error.
    assert any(
        r["implementation"] == "SDPA efficient" and r["status"].startswith("not available")
        for r in times
    )


def test_the_winner_is_the_fastest_row_of_its_cell(grid):
    times = grid.measurement.tables["times"].records()
    for w in grid.measurement.tables["winners"].records():
        cell = [
            r
            for r in times
            if (r["seq_len"], r["head_dim"], r["causal"])
            == (w["seq_len"], w["head_dim"], w["causal"])
            and r["time"]
        ]
        fastest = min(cell, key=lambda r: r["time"])
        assert w["fastest"] == fastest["implementation"] and w["time"] == fastest["time"]
        assert w["margin"] >= 1.0


def test_implementations_agree_numerically():
    import torch

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
        reference = outs.pop("naive (eager)")
        for name, out in outs.items():
            torch.testing.assert_close(out, reference, atol=2e-5, rtol=2e-5, msg=name)


def test_renderers(grid):
    figure = render.winners_figure(grid)
    assert '<svg role="img" aria-label="Which attention is fastest.' in figure
    assert "<figcaption" in figure
    claim = render.winners_claim(grid.measurement)
    assert "is fastest in" in claim and "of 4 cells" in claim
    table = render.times_table(grid)
    assert "Did not run here:" in table and "**SDPA efficient**" in table


def test_summary_counts_work_and_memory():
    m = run_experiment(
        "winners_summary", {"seq_len": 32, "head_dim": 16, "num_heads": 2}, device="cpu"
    )
    rows = {r["implementation"]: r for r in m.tables["summary"].records()}
    naive, flash = rows["naive (eager)"], rows["SDPA flash"]
    assert naive["ops or kernels"] > flash["ops or kernels"] >= 1
    assert naive["peak memory"] > flash["peak memory"] > 0
    assert naive["speed-up vs naive"] == 1.0
    table = render.summary_table(Sourced(m, "measured now", "x.json"))
    assert "| naive (eager) |" in table and "Top-level ops / forward" in table
