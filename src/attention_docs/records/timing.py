# A timing as plain data: the time per call of every round, and how it was taken. Its value,
# its interval and whether two timings tie are derived here from the rounds, in one place, so
# a better statistic needs no new measurement.
# Noise on a shared machine only adds time, so the value is the rounds' *lower quartile*
# (up to three rounds in four may be disturbed without moving it), and its interval a
# distribution-free confidence interval for that quartile: the pair of order statistics that
# holds it with at least 90 % probability, or all rounds' range when no pair reaches 90 %.
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# The quantile of the rounds a timing states, and the confidence of its interval.
QUANTILE = 0.25
CONFIDENCE = 0.90
# A round is kept to the nanosecond: finer digits are noise, and they bloat the store.
ROUND_DIGITS = 3


def quantile(values: Sequence[float], p: float) -> float:
    """The `p`-quantile of `values`, linearly interpolated between order statistics."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("quantile of no values")
    position = p * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def interval_ranks(n: int, p: float = QUANTILE, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """1-based ranks (j, k) of the order statistics X(j) <= X(k) that hold the p-quantile with
    at least `confidence` probability, the narrowest such pair (the one nearest the quantile
    among equals); (1, n) when no pair reaches it.

    P(X(j) <= q_p <= X(k)) = P(j <= B <= k - 1) for B ~ Binomial(n, p).
    """
    if n < 2:
        return (1, max(n, 1))
    pmf = [math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(n + 1)]
    best = None
    for j in range(1, n):
        covered = 0.0
        for k in range(j + 1, n + 1):
            covered += pmf[k - 1]
            if covered >= confidence:
                width = k - j
                centre = abs((j + k) / 2 - (p * (n - 1) + 1))
                if best is None or (width, centre) < best[0]:
                    best = ((width, centre), (j, k))
                break
    return best[1] if best else (1, n)


@dataclass(frozen=True)
class Timing:
    """One callable's time in microseconds, from separate rounds.

    `rounds_us` holds each round's time per call (the mean over the calls of its block);
    `runs` is how many calls were timed in all. `time_us` is the rounds' lower quartile, and
    `low_us`/`high_us` its 90 % interval, the interval a comparison uses.

    A measurement makes one with `from_rounds` (a time per round) or `from_calls` (the times
    of single calls, grouped by round), never field by field: they keep every round to the
    same precision.
    """

    rounds_us: tuple[float, ...]
    runs: int
    method: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "rounds_us", tuple(self.rounds_us))
        if not self.rounds_us:
            raise ValueError("a Timing needs its rounds")
        bad = [x for x in self.rounds_us if not (math.isfinite(x) and x >= 0)]
        if bad:
            raise ValueError(f"a Timing's rounds are times, never {bad[0]!r} µs")

    @classmethod
    def from_rounds(
        cls, rounds_us: Sequence[float], method: str, runs: int | None = None
    ) -> Timing:
        """A timing of rounds that each give a time per call in µs; `runs`, the calls timed in
        all, is one per round unless given."""
        rounds = tuple(round(float(x), ROUND_DIGITS) for x in rounds_us)
        return cls(rounds, len(rounds) if runs is None else runs, method)

    @classmethod
    def from_calls(cls, calls_by_round: Sequence[Sequence[float]], method: str) -> Timing:
        """A timing of single calls' times in µs, grouped by round: each round's time is its
        calls' median (one slow call in a round does not move it)."""
        return cls.from_rounds(
            [statistics.median(calls) for calls in calls_by_round],
            method,
            runs=sum(len(calls) for calls in calls_by_round),
        )

    @property
    def time_us(self) -> float:
        """The time this timing states: the rounds' lower quartile."""
        return quantile(self.rounds_us, QUANTILE)

    @property
    def low_us(self) -> float:
        j, _ = interval_ranks(len(self.rounds_us))
        return sorted(self.rounds_us)[j - 1]

    @property
    def high_us(self) -> float:
        _, k = interval_ranks(len(self.rounds_us))
        return sorted(self.rounds_us)[k - 1]

    @property
    def spread(self) -> float:
        """The interval's width relative to the time (0.05: 5 % of it)."""
        return (self.high_us - self.low_us) / self.time_us if self.time_us else 0.0

    def scaled(self, factor: float) -> Timing:
        """The same timing with every round multiplied by `factor` (per layer, per token)."""
        return Timing(tuple(x * factor for x in self.rounds_us), self.runs, self.method)

    def to_json(self) -> dict:
        return {"rounds_us": list(self.rounds_us), "runs": self.runs, "method": self.method}

    @classmethod
    def from_json(cls, data: Mapping) -> Timing:
        return cls(rounds_us=tuple(data["rounds_us"]), runs=data["runs"], method=data["method"])
