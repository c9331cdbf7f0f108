# How reproducible a set of unprofiled timings is: runs of the same timings (idle twice, and
# beside a CPU-bound process) compared by the verdicts a page states from them, by how far
# their times moved, how wide their intervals are, and what physics requires within a run.
# Verdicts carry the target and times do not: a machine's state between runs moves every
# time of a run alike, by more than one run's interval, while two timings of the same rounds
# move together. `nox -s bench` prints these against their targets.
from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from attention_docs.findings.compare import compare
from attention_docs.records.timing import Timing

# The targets (DESIGN principle 8): no verdict reverses between runs, an interval is narrow
# enough to decide a comparison, and the numbers obey physics.
WIDTH_TARGET = 0.10  # median interval width relative to its time
# No verdict reverses between the runs: where one run finds A faster beyond the noise, the
# other never finds B faster beyond it. (A tie in one and an order in the other is a point
# near the noise, reported and allowed.)
REVERSED_TARGET = 0
STEPS_SUM_TOLERANCE = 0.20  # the steps in sequence sum to the forward within this share
EQUAL_FLOPS_RATIO = 1.3  # two matmuls of equal FLOPs within this ratio of each other

Run = Mapping[str, Timing]


@dataclass(frozen=True)
class Agreement:
    """How the times of two runs of the same timings agree (reported, not a target)."""

    compared: int
    overlapping: int
    disagreeing: tuple[str, ...]  # names whose intervals do not overlap
    shifts: tuple[float, ...]  # each time in the second run ÷ in the first, smallest first

    @property
    def share(self) -> float:
        return self.overlapping / self.compared if self.compared else 0.0

    @property
    def median_shift(self) -> float:
        return statistics.median(self.shifts) if self.shifts else 1.0

    @property
    def largest_shift(self) -> float:
        """The farthest any time moved, as a factor of at least 1 either way."""
        return max((max(s, 1 / s) for s in self.shifts), default=1.0)


def agreement(a: Run, b: Run) -> Agreement:
    """The timings both runs hold, which of them overlap, and how far each time moved."""
    common = sorted(set(a) & set(b))
    apart = tuple(n for n in common if a[n].low_us > b[n].high_us or b[n].low_us > a[n].high_us)
    shifts = tuple(sorted(b[n].time_us / a[n].time_us for n in common))
    return Agreement(len(common), len(common) - len(apart), apart, shifts)


@dataclass(frozen=True)
class Verdicts:
    """How the verdicts of two runs agree, pair by pair of timings timed together."""

    compared: int  # pairs
    changed: tuple[str, ...]  # a tie in one run, an order in the other
    reversed: tuple[str, ...]  # an order in one run, the opposite order in the other

    @property
    def same(self) -> int:
        return self.compared - len(self.changed) - len(self.reversed)

    @property
    def met(self) -> bool:
        return len(self.reversed) <= REVERSED_TARGET


def by_point(run: Run) -> dict[str, list[str]]:
    """The names of a run grouped by the point after " @ " (`"SDPA flash @ b1 h4 n256 …"`):
    the timings taken together, in the same rounds, as a page compares them."""
    found: dict[str, list[str]] = {}
    for name in sorted(run):
        found.setdefault(name.split(" @ ", 1)[1], []).append(name)
    return found


def _verdict(a: Timing, b: Timing) -> str:
    c = compare(a, b)
    return "tie" if c.tie else ("first" if c.as_ordered else "second")


def verdicts(a: Run, b: Run, groups: Sequence[Sequence[str]]) -> Verdicts:
    """Every pair within each group (names timed together, whose comparisons a page states)
    that both runs hold, its verdict in `a` against its verdict in `b`."""
    compared, changed, reversed_ = 0, [], []
    for group in groups:
        names = [n for n in group if n in a and n in b]
        for i, x in enumerate(names):
            for y in names[i + 1 :]:
                compared += 1
                va, vb = _verdict(a[x], a[y]), _verdict(b[x], b[y])
                if va != vb:
                    (changed if "tie" in (va, vb) else reversed_).append(f"{x} vs {y}")
    return Verdicts(compared, tuple(changed), tuple(reversed_))


def median_width(run: Run) -> float:
    """The median of the timings' interval widths relative to their times."""
    if not run:
        raise ValueError("no timings to measure the width of")
    return statistics.median(t.spread for t in run.values())


@dataclass(frozen=True)
class Check:
    """One physical requirement at one point: the ratio found and whether it holds."""

    name: str
    ratio: float  # the value the requirement bounds
    low: float  # the least and most favourable readings of the intervals
    high: float
    holds: bool


def steps_sum(point: str, forward: Timing, steps: Sequence[Timing]) -> Check:
    """The steps, timed in sequence, summed against the forward: their times' sum within the
    tolerance of the forward's (the intervals' readings are reported beside it)."""
    ratio = sum(t.time_us for t in steps) / forward.time_us
    low = sum(t.low_us for t in steps) / forward.high_us
    high = sum(t.high_us for t in steps) / forward.low_us
    holds = abs(ratio - 1) <= STEPS_SUM_TOLERANCE
    return Check(f"steps sum to the forward at {point}", ratio, low, high, holds)


def equal_flops(point: str, a: Timing, b: Timing) -> Check:
    """Two matmuls of equal FLOPs: the slower's time over the faster's within
    EQUAL_FLOPS_RATIO (the intervals' readings are reported beside it)."""
    c = compare(*sorted((a, b), key=lambda t: t.time_us))
    return Check(
        f"equal-FLOP matmuls at {point}", c.ratio, c.low, c.high, c.ratio <= EQUAL_FLOPS_RATIO
    )
