# Timings with chosen statistics, for tests of what findings and renderers do with them.
# A Timing states its rounds' lower quartile and that quartile's 90 % interval
# (records/timing.py); `stated(value, low, high)` builds twenty rounds whose statistics are
# exactly these, so a test can say "a time of 10 µs, 9-12 µs" without knowing the rule.
from __future__ import annotations

import statistics
from collections.abc import Sequence

from attention_docs.records.timing import Timing, interval_ranks

ROUNDS = 20


def stated(value: float, low: float | None = None, high: float | None = None) -> Timing:
    """A Timing whose time is `value` and whose interval is `low`-`high` (default: none)."""
    low = value if low is None else low
    high = value if high is None else high
    if not low <= value <= high:
        raise ValueError(f"need low <= value <= high, got {low}, {value}, {high}")
    j, k = interval_ranks(ROUNDS)
    rounds = [low] * j + [value] * (k - 1 - j) + [high] * (ROUNDS - k + 1)
    t = Timing(tuple(rounds), ROUNDS, "test")
    assert (t.time_us, t.low_us, t.high_us) == (value, low, high), (t, value, low, high)
    return t


def spanning(rounds: Sequence[float]) -> Timing:
    """A Timing stating the median of `rounds` with their whole range as its interval (how a
    test of three readings means them)."""
    return stated(statistics.median(rounds), min(rounds), max(rounds))


def measured_in_rounds(t: Timing) -> bool:
    """A Timing profiling/timing.py took: between FEWEST_ROUNDS and ROUNDS interleaved rounds
    (fewer for callables too slow for twenty), as its method says."""
    from attention_docs.profiling.timing import FEWEST_ROUNDS
    from attention_docs.profiling.timing import ROUNDS as MOST

    n = len(t.rounds_us)
    return FEWEST_ROUNDS <= n <= MOST and f"{n} interleaved rounds" in t.method
