# What docs/method.md concludes from one `timing_method` run: ratios within that run only
# (its forward times are forward_times' facts, stated on the chapters). Whether the steps
# timed alone add up to the forward, whether timed in sequence they do, and what a thread
# per core costs beside one other busy process.
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import UNPROFILED, Fact, On
from attention_docs.findings.reproducibility import STEPS_SUM_TOLERANCE
from attention_docs.measurements.schema import Measurement
from attention_docs.records.timing import Timing, interval_ranks, quantile

RUN = "timing_method's run"
# The steps' sum "adds up" to the forward within this share of it: the reproducibility
# benchmark's physics target.
ADDS_UP = STEPS_SUM_TOLERANCE


def _run(m: Measurement) -> On:
    return On.of(m, causal=True)


def sum_share(m: Measurement, parts: Sequence[Timing], whole: Timing, subject: str) -> Fact:
    """The sum of `parts` as a share of `whole`, round by round (all were timed in the same
    interleaved rounds): the median of the rounds' shares, with its 90 % interval."""
    shares = [
        sum(t.rounds_us[r] for t in parts) / whole.rounds_us[r] for r in range(len(whole.rounds_us))
    ]
    j, k = interval_ranks(len(shares), 0.5)
    ordered = sorted(shares)
    q = _run(m).quantity("share of the forward", subject, UNPROFILED, RUN)
    return Fact(q, quantile(shares, 0.5), "%", ordered[j - 1], ordered[k - 1])


@dataclass(frozen=True)
class StepRatio:
    label: str
    ratio: Fact  # in sequence ÷ alone
    comparison: Comparison


# Whether a sum of steps adds up to the forward: within ADDS_UP of it over its whole
# interval, short of it over its whole interval, or neither (the noise does not decide).
ADDS_UP_TO, SHORT_OF, UNDECIDED = "adds up", "short", "undecided"


@dataclass(frozen=True)
class Steps:
    alone: Fact  # the five steps timed alone, summed, as a share of the forward
    in_sequence: Fact  # the same, timed one after another
    alone_verdict: str  # ADDS_UP_TO, SHORT_OF or UNDECIDED
    in_sequence_verdict: str
    ratios: tuple[StepRatio, ...]

    @property
    def alike(self) -> bool:
        """Both ways of timing the steps reach the same verdict."""
        return self.alone_verdict == self.in_sequence_verdict


def _verdict(f: Fact) -> str:
    if f.low >= 1 - ADDS_UP and f.high <= 1 + ADDS_UP:
        return ADDS_UP_TO
    if f.high < 1 - ADDS_UP:
        return SHORT_OF
    return UNDECIDED


def steps(m: Measurement) -> Steps:
    rows = m.tables["steps"].records()
    forward = m.tables["forward"].records()[0]["time"]
    alone = sum_share(m, [r["alone"] for r in rows], forward, "five steps timed alone")
    seq = sum_share(m, [r["in_sequence"] for r in rows], forward, "five steps in sequence")
    ratios = []
    for r in rows:
        c = compare(r["alone"], r["in_sequence"])
        ratio = _run(m)("in sequence ÷ alone", r["step"], UNPROFILED, c, detail=RUN)
        ratios.append(StepRatio(r["step"], ratio, c))
    return Steps(alone, seq, _verdict(alone), _verdict(seq), tuple(ratios))


@dataclass(frozen=True)
class Neighbour:
    """What one other busy process did to the forward at one thread count."""

    threads: int
    ratio: Fact  # beside one busy process ÷ alone
    comparison: Comparison


@dataclass(frozen=True)
class Threads:
    cores: int
    # Per thread count, the worker's first (what a worker gives torch: half the cores).
    neighbours: tuple[Neighbour, ...]
    idle_speedup: Fact  # alone: the worker's threads' time ÷ one thread per core's
    idle_comparison: Comparison

    @property
    def worker(self) -> Neighbour:
        return self.neighbours[0]

    @property
    def every_core_hurt_more(self) -> bool:
        """A busy neighbour slowed a thread per core more than the worker's threads, beyond
        the noise of both ratios."""
        return self.every_core.comparison.low > self.worker.comparison.high

    @property
    def every_core(self) -> Neighbour:
        return self.neighbours[-1]


def threads(m: Measurement) -> Threads | None:
    """None where the run did not measure threads (a GPU, a machine with one core)."""
    table = m.tables.get("threads")
    if table is None:
        return None
    times = {(r["threads"], r["other_process"]): r["forward"] for r in table.records()}
    counts = sorted({t for t, _ in times})

    def fact(subject: str, c: Comparison) -> Fact:
        return _run(m)("time ratio", subject, UNPROFILED, c, detail=RUN)

    neighbours = []
    for t in counts:
        c = compare(times[t, False], times[t, True])
        neighbours.append(
            Neighbour(t, fact(f"forward, {t} threads, beside one busy process ÷ alone", c), c)
        )
    idle = compare(times[counts[-1], False], times[counts[0], False])
    subject = f"forward alone, {counts[0]} threads ÷ {counts[-1]} threads"
    return Threads(m.facts["cores"], tuple(neighbours), fact(subject, idle), idle)
