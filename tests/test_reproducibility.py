"""The rules `nox -s bench -- repro` judges runs by (findings/reproducibility.py), on stated
timings and on three recorded runs (tests/data/repro/: the bench's `--out` on a 2-core
virtual machine — two idle runs and one beside a CPU-bound process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from timings import stated

from attention_docs.findings import reproducibility as rep
from attention_docs.records.timing import Timing

RECORDED = Path(__file__).parent / "data" / "repro"


def recorded(name: str) -> dict[str, Timing]:
    data = json.loads((RECORDED / f"{name}.json").read_text(encoding="utf-8"))
    return {n: Timing.from_json(t) for n, t in data.items()}


def test_agreement_counts_overlapping_intervals_and_how_far_each_time_moved():
    a = {"x": stated(10, 9, 11), "y": stated(20, 19, 21), "only a": stated(1)}
    b = {"x": stated(11, 10.9, 12), "y": stated(16, 15, 17), "only b": stated(1)}
    found = rep.agreement(a, b)
    assert (found.compared, found.overlapping, found.disagreeing) == (2, 1, ("y",))
    assert found.share == 0.5 and found.shifts == (0.8, 1.1)
    assert found.median_shift == pytest.approx(0.95)
    assert found.largest_shift == pytest.approx(1.25)  # 20 → 16: a factor of 1.25 either way
    same = rep.agreement(a, a)
    assert same.share == 1 and same.largest_shift == 1


def test_a_verdict_reversed_is_a_miss_and_a_tie_in_one_run_is_not():
    timed = ("fast", "slow", "near")
    a = {"fast": stated(10, 9, 11), "slow": stated(20, 19, 21), "near": stated(12, 11.5, 12.5)}
    # The same order for (fast, slow); (fast, near) tied here but ordered in `a`.
    b = {"fast": stated(10, 9, 11), "slow": stated(20, 19, 21), "near": stated(11, 10.5, 11.5)}
    found = rep.verdicts(a, b, [timed])
    assert found.compared == 3 and found.reversed == ()
    assert found.changed == ("fast vs near",) and found.met and found.same == 2
    flipped = {**b, "slow": stated(5, 4, 6)}  # now faster than `fast` beyond the noise
    found = rep.verdicts(a, flipped, [timed])
    assert "fast vs slow" in found.reversed and not found.met
    # Only names timed together are paired: two groups of one compare nothing.
    assert rep.verdicts(a, flipped, [["fast"], ["slow"]]).compared == 0


def test_physics_checks_bound_what_they_say():
    forward = stated(100, 95, 105)
    assert rep.steps_sum("p", forward, [stated(50), stated(45)]).holds  # 0.95
    assert not rep.steps_sum("p", forward, [stated(50), stated(25)]).holds  # 0.75
    assert rep.equal_flops("p", stated(10), stated(12)).holds
    off = rep.equal_flops("p", stated(20), stated(10))  # the slower first: still 2×
    assert off.ratio == 2 and not off.holds
    assert rep.median_width({"x": stated(10, 9, 11), "y": stated(10, 10, 10.2)}) == pytest.approx(
        (0.2 + 0.02) / 2
    )
    with pytest.raises(ValueError, match="no timings"):
        rep.median_width({})


def test_three_recorded_runs_are_judged_as_the_bench_prints_them():
    """What the bench found on that machine: each interval narrow, and between runs, idle
    or loaded, times that moved by more than their intervals while no verdict between two
    timings of one shape reversed."""
    idle = recorded("idle")
    groups = rep.by_point(idle)
    assert all(n.endswith(f" @ {point}") for point, names in groups.items() for n in names)
    assert len(groups) == 4 and len(idle) > 20 and rep.median_width(idle) <= rep.WIDTH_TARGET
    for other in ("idle-again", "loaded"):
        run = recorded(other)
        assert set(run) == set(idle) and rep.median_width(run) <= rep.WIDTH_TARGET
        found = rep.verdicts(idle, run, list(groups.values()))
        assert found.compared > 50 and found.met, found.reversed
        assert rep.agreement(idle, run).compared == len(idle)
