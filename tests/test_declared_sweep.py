# The declarative sweep: the spec (records/sweep.py), measuring through it on the CPU
# (experiments/_declared_sweep.py), its findings — fact ids derived from the spec, the
# ranking at each value with ties, who leads where — and what render/sweep.py states. The
# findings and renderers run on made-up timings whose ties are known before they run.
from __future__ import annotations

import re
from dataclasses import replace

import pytest
import torch
from recorded import recorded
from timings import stated

from attention_docs.experiments._declared_sweep import measure_sweep
from attention_docs.experiments._sweep import OUT_OF_MEMORY
from attention_docs.findings import decode as fdecode
from attention_docs.findings import sweep as fsw
from attention_docs.findings.facts import Quantity
from attention_docs.measurements.schema import Sourced, Table
from attention_docs.records.shape import Shape
from attention_docs.records.sweep import SWEEPS, Sweep
from attention_docs.render import sweep as rsw

SPEC = Sweep(
    table="prepare",
    x="seq_len",
    x_unit="tokens",
    lines=("bool mask", "float bias"),
    metric="causal mask preparation time",
    given=("dtype",),
)


def entry(rows: list[tuple], spec: Sweep = SPEC, **params) -> Sourced:
    """A stored entry of `spec` holding `rows` (x, one Timing per line, status)."""
    base = recorded("naive_steps")
    m = replace(
        base,
        experiment="mask_cost",
        params={"dtype": "float32", **params},
        tables={spec.table: Table((*spec.columns, "status"), tuple(rows))},
        facts={SWEEPS: {spec.table: spec.to_json()}},
        notes=(),
    )
    return Sourced(m, "from the store", "x.json")


def test_a_spec_survives_the_store_and_refuses_a_line_named_twice():
    assert Sweep.from_json(SPEC.to_json()) == SPEC
    with pytest.raises(ValueError, match="each once"):
        Sweep("t", "seq_len", ("a", "a"), "time")
    with pytest.raises(ValueError, match="names both x and a line"):
        Sweep("t", "seq_len", ("seq_len",), "time")


def test_measuring_a_sweep_keeps_every_round_and_the_spec():
    def lines_at(n):
        x = torch.ones(n)
        return {"bool mask": lambda: x + 1, "float bias": lambda: x * 2}

    observed = measure_sweep(SPEC, [8, 16], lines_at, torch.device("cpu"), min_run_time=0.01)
    table = observed.tables["prepare"]
    assert table.columns == ("seq_len", "bool mask", "float bias", "status")
    assert table.column("seq_len") == [8, 16] and table.column("status") == ["ok", "ok"]
    assert all(len(t.rounds_us) > 1 for t in table.column("bool mask"))
    assert table.units == {"bool mask": "µs", "float bias": "µs"}
    assert observed.facts[SWEEPS]["prepare"] == SPEC.to_json()
    with pytest.raises(ValueError, match="the spec's lines"):
        measure_sweep(SPEC, [8], lambda n: {"bool mask": lambda: None}, torch.device("cpu"))


def test_findings_derive_ids_rank_with_ties_and_say_who_leads_where():
    rows = [
        (128, stated(10, 9, 11), stated(30, 28, 33), "ok"),  # bool mask clearly fastest
        (256, stated(20, 18, 22), stated(40, 38, 44), "ok"),
        (512, stated(50, 45, 60), stated(55, 52, 58), "ok"),  # within noise: a tie
        (1024, None, None, OUT_OF_MEMORY),
    ]
    found = fsw.sweep_findings(entry(rows).measurement)
    first = found.points[0]
    assert first.facts["bool mask"].id == (
        "causal mask preparation time;bool mask;;unprofiled;"
        f"{found.device_id};seq_len=128, dtype=float32"
    )
    assert (first.facts["bool mask"].low, first.facts["bool mask"].high) == (9, 11)
    assert first.lead("bool mask") == fsw.CLEAR and first.lead("float bias") == ""
    tie = found.points[2]
    assert tie.lead("bool mask") == tie.lead("float bias") == fsw.TIE
    assert found.points[3].facts == {"bool mask": None, "float bias": None}
    assert found.points[3].ranking is None and found.failed
    assert [(lead.leaders, lead.xs) for lead in found.leads] == [
        (("bool mask",), (128, 256)),
        (("bool mask", "float bias"), (512,)),
    ]
    # The slowest against the fastest at the last value measured: a tie there.
    assert found.last_x == 512 and found.last.comparison.tie
    assert found.last.fact.id.startswith("speed ratio;bool mask vs float bias;")
    assert found.last.fact.id.endswith("causal mask preparation time, seq_len=512, dtype=float32")


def test_a_shaped_sweep_names_its_quantity_by_the_attention_shape():
    spec = replace(SPEC, shape=True, given=())
    params = {"batch_size": 1, "num_heads": 2, "head_dim": 64, "causal": True}
    found = fsw.sweep_findings(
        entry([(256, stated(5), stated(6), "ok")], spec, **params).measurement
    )
    assert ";b1 h2 n256 d64 float32 causal;" in found.points[0].facts["float bias"].id
    # A subject template keeps an existing fact id: chapter 08's block sweep states the
    # tiled loop's forward time at each block size under this one.
    blocks = Sweep("blocks", "block", ("tiled",), "forward time", shape=True,
                   subject="tiled (Python loop), {x}×{x} tiles")  # fmt: skip
    rows = [(32, stated(9), "ok"), (64, stated(5), "ok")]
    params = {**params, "seq_len": 256, "dtype": "float32"}
    found = fsw.sweep_findings(entry(rows, blocks, **params).measurement)
    assert found.points[1].facts["tiled"].id == (
        f"forward time;tiled (Python loop), 64×64 tiles;b1 h2 n256 d64 float32 causal;"
        f"unprofiled;{found.device_id}"
    )
    # One line: its values ranked against each other (which block size is fastest), with ties.
    assert found.across.order == ("64", "32") and found.last is None and found.leads == ()
    tied = [(32, stated(5.1, 4, 6), "ok"), (64, stated(5, 4, 6), "ok")]
    assert not fsw.sweep_findings(entry(tied, blocks, **params).measurement).across.clear


def test_the_table_sentence_and_figure_state_the_findings_in_words():
    rows = [
        (1024, stated(7590, 7500, 7700), stated(16000, 15800, 16300), "ok"),
        (16384, stated(120000, 110000, 130000), stated(125000, 118000, 131000), "ok"),
    ]
    sourced = entry(rows)
    table = rsw.sweep_table(sourced)
    assert table.splitlines()[0] == "| Sequence length | Bool mask | Float bias |"
    text = re.sub(r"<[^>]+>", "", table)
    # One unit rule for the whole column: 7.59 ms and 16 ms, never "7,590" beside "16 k".
    assert "| 1,024 tokens | 7.59 ms (7.5–7.7 ms) (fastest) | 16 ms (15.8–16.3 ms) |" in text
    assert "(tied for fastest: within noise)" in text and "16,384 tokens" in text
    assert table.count('data-fact="causal mask preparation time;') == 4
    claim = rsw.sweep_claim(sourced, names={"bool mask": "the bool mask"})
    assert re.sub(r"<[^>]+>", "", claim) == (
        "The bool mask is fastest at sequence length 1,024 tokens; the bool mask and float bias"
        " are within noise of each other, tied for fastest at sequence length 16,384 tokens."
        " At sequence length 16,384 tokens, float bias and the bool mask are within noise"
        " (1.04×)."
    )
    figure = rsw.sweep_figure(sourced, "Time to prepare each mask.")
    alt = re.search(r'aria-label="([^"]*)"', figure).group(1)
    assert "1,024 tokens → 7.59 ms (7.5–7.7 ms)" in alt and "16,384 tokens → 120 ms" in alt
    assert "1,020" not in alt and "16.4 k" not in alt
    assert figure.count("<path") > 4  # two lines and their bands


def test_an_entry_without_a_sweep_is_refused_by_name():
    m = replace(recorded("naive_steps"), facts={})
    with pytest.raises(ValueError, match="declares no sweep"):
        fsw.sweep_findings(m)


# --- a view: a sweep named over a long table an experiment measured by its own loop ----------

# Chapter 11's cache sweep (findings/decode.py), on two of its lines; the rows are made up.
VIEW = replace(fdecode.CACHE, lines=("MHA", "MQA"))


def long_entry(rows: list[tuple]) -> Sourced:
    """A long table: a row per (variant, impl, batch, cache) cell."""
    base = recorded("naive_steps")
    columns = ("variant", "impl", "batch_size", "num_kv_heads", "cache_len", "time", "status")
    m = replace(
        base,
        experiment="decode_steps",
        params={"num_heads": 4, "head_dim": 64, "dtype": "float32", "working_set_mb": 8},
        tables={"steps": Table(columns, tuple(rows))},
        facts={},
        notes=(),
    )
    return Sourced(m, "from the store", "x.json")


def test_a_view_picks_its_rows_groups_them_by_x_and_names_each_cell_by_its_row():
    rows = [
        ("MHA", "sdpa", 1, 4, 512, stated(20, 19, 21), "ok"),
        ("MQA", "sdpa", 1, 1, 512, stated(8, 7, 9), "ok"),
        ("MHA", "naive", 1, 4, 256, stated(1), "ok"),  # another path: not the view's
        ("MHA", "sdpa", 8, 4, 256, stated(1), "ok"),  # another batch: not the view's
        ("MHA", "sdpa", 1, 4, 256, stated(10, 9, 12), "ok"),
        ("MQA", "sdpa", 1, 1, 256, stated(10.5, 9, 12), "ok"),
        ("MHA", "sdpa", 1, 4, 1024, None, "out of memory"),
        ("MQA", "sdpa", 1, 1, 1024, stated(15), "ok"),
    ]
    found = fsw.sweep_findings(long_entry(rows).measurement, spec=VIEW)
    assert [p.x for p in found.points] == [256, 512, 1024]  # sorted, other rows left out
    fact = found.points[0].facts["MQA"]
    shape = Shape(1, 4, 1, 64, "float32", False, num_kv_heads=1, kv_len=256)
    detail = "per layer, 8 MB read per timed step"
    want = Quantity("decode step time", "sdpa", found.device_id, "unprofiled", shape, detail)
    assert fact.id == want.id and fact.value == 10.5
    assert found.points[0].lead("MHA") == found.points[0].lead("MQA") == fsw.TIE
    assert found.points[1].lead("MQA") == fsw.CLEAR
    # A cell that did not run leaves its line out there and gives the value its status.
    last = found.points[2]
    assert last.facts["MHA"] is None and last.status == "out of memory" and found.failed
    # Lines sharing a subject ("sdpa") are named by their keys in the ratio's id.
    assert found.last_x == 512 and found.last.fact.id.startswith("speed ratio;MQA vs MHA;")
    table = re.sub(r"<[^>]+>", "", rsw.sweep_table(long_entry(rows), spec=VIEW))
    assert "| 512 tokens | 20 µs (19–21 µs) | 8 µs (7–9 µs) (fastest) | ok |" in table
    assert "| 1,024 tokens | — | 15 µs" in table and "out of memory" in table


def test_a_view_refuses_a_line_column_that_is_also_x():
    with pytest.raises(ValueError, match="names both the line and x"):
        replace(VIEW, line="cache_len")
    # A view may leave its lines to the table; a wide sweep may not.
    with pytest.raises(ValueError, match="one or more lines"):
        Sweep("t", "seq_len", (), "time")
    assert replace(VIEW, lines=()).lines == ()
    assert Sweep.from_json(VIEW.to_json()) == VIEW
