# The method page's findings (findings/method.py) and sentences (render/method.py): on
# made-up rounds, where the rule is the point, and on the recorded entry.
from __future__ import annotations

import html
from dataclasses import replace

import pytest
from recorded import recorded, sourced

from attention_docs.findings import method as fmethod
from attention_docs.measurements.schema import Table
from attention_docs.records.timing import Timing
from attention_docs.render import method as rm


def rounds(*values: float) -> Timing:
    return Timing(tuple(values), len(values), "test")


def with_steps(m, alone: list[float], in_sequence: list[float], forward: list[float]):
    """timing_method with five steps of the given per-round times (each step the same)."""
    steps = tuple(
        (f"attention.{s}", rounds(*alone), rounds(*in_sequence))
        for s in ("scores", "scale", "mask", "softmax", "weighted_sum")
    )
    tables = {
        **m.tables,
        "steps": Table(("step", "alone", "in_sequence"), steps),
        "forward": Table(("what", "time"), (("forward", rounds(*forward)),)),
    }
    return replace(m, tables=tables)


def test_a_sum_of_steps_is_taken_round_by_round_against_the_forward():
    m = recorded("timing_method")
    # Each round the forward and its steps move together: the round's share stays 1.0 (in
    # sequence) and 0.6 (alone) however much the rounds differ from one another.
    forward = [1000.0 * (1 + 0.05 * (i % 7)) for i in range(20)]
    found = fmethod.steps(
        with_steps(m, [f * 0.12 for f in forward], [f * 0.2 for f in forward], forward)
    )
    assert found.in_sequence.value == pytest.approx(1.0)
    assert (found.in_sequence.low, found.in_sequence.high) == pytest.approx((1.0, 1.0))
    assert found.alone.value == pytest.approx(0.6)
    assert (found.in_sequence_verdict, found.alone_verdict) == (
        fmethod.ADDS_UP_TO,
        fmethod.SHORT_OF,
    )
    # Rounds whose shares straddle the tolerance leave it undecided.
    wide = [f * (0.12 if i % 2 else 0.2) for i, f in enumerate(forward)]
    assert fmethod.steps(with_steps(m, wide, wide, forward)).alone_verdict == fmethod.UNDECIDED


def test_the_method_page_states_the_recorded_run_with_its_verdicts():
    s = sourced("timing_method")
    found = fmethod.steps(s.measurement)
    text = rm.finding(s)
    assert text.startswith(f"On {s.measurement.provenance.device.label}, naive attention's")
    assert f'data-fact="{html.escape(found.alone.quantity.id)}"' in text
    assert f'data-fact="{html.escape(found.in_sequence.quantity.id)}"' in text
    # Each verdict in words follows the finding, never the other way round.
    said = {
        fmethod.ADDS_UP_TO: "within a fifth",
        fmethod.SHORT_OF: "short of it",
        fmethod.UNDECIDED: "does not decide",
    }
    if found.alike:  # one verdict for both, said once
        assert f": both {said[found.alone_verdict]}" in text and "; in sequence," not in text
    else:
        assert said[found.alone_verdict] in text.split("; in sequence,")[0]
        assert said[found.in_sequence_verdict] in text.split("; in sequence,")[1]
    # Either way round, from made-up rounds: the steps adding up in sequence and not alone,
    # then adding up both ways.
    forward = [1000.0 * (1 + 0.05 * (i % 7)) for i in range(20)]
    unlike = with_steps(
        s.measurement, [f * 0.12 for f in forward], [f * 0.2 for f in forward], forward
    )
    text = rm.finding(replace(s, measurement=unlike))
    assert "timed alone, short of it" in text and "; in sequence, within a fifth" in text
    alike = with_steps(
        s.measurement, [f * 0.2 for f in forward], [f * 0.2 for f in forward], forward
    )
    text = rm.finding(replace(s, measurement=alike))
    assert ": both within a fifth of it over their whole interval." in text
    assert "timed alone, within" not in text
    table = rm.steps_table(s)
    assert table.count("| `attention.") == 5 and 'class="ad-caption"' in table


def test_threads_compare_each_count_beside_a_busy_process_with_itself_alone():
    m = recorded("timing_method")
    rows = (
        (1, False, rounds(*[100.0] * 12)),
        (2, False, rounds(*[60.0] * 12)),
        (1, True, rounds(*[102.0] * 12)),
        (2, True, rounds(*[180.0] * 12)),
    )
    m = replace(
        m,
        tables={**m.tables, "threads": Table(("threads", "other_process", "forward"), rows)},
        facts={**m.facts, "cores": 2},
    )
    found = fmethod.threads(m)
    assert (found.worker.threads, found.every_core.threads) == (1, 2)
    assert found.worker.ratio.value == pytest.approx(1.02)
    assert found.every_core.ratio.value == pytest.approx(3.0)
    assert found.every_core_hurt_more
    assert found.idle_speedup.value == pytest.approx(100 / 60)
    text = rm.threads(sourced("timing_method").__class__(m, "now", "x.json"))
    assert "half the cores so that its numbers depend on the forward" in text
    # Where the neighbour hurt both alike, the page says the run does not show it.
    same = replace(
        m,
        tables={
            **m.tables,
            "threads": Table(
                ("threads", "other_process", "forward"),
                (*rows[:3], (2, True, rounds(*([61.0] * 12)))),
            ),
        },
    )
    assert not fmethod.threads(same).every_core_hurt_more
    assert "was not hurt more" in rm.threads(
        sourced("timing_method").__class__(same, "now", "x.json")
    )
    # A GPU run, or one core: not measured, and said so.
    gpu = replace(m, tables={k: v for k, v in m.tables.items() if k != "threads"})
    assert fmethod.threads(gpu) is None
    assert rm.threads(sourced("timing_method").__class__(gpu, "now", "x.json")).startswith(
        "Threads were not measured here"
    )
