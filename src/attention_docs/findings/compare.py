# Two timings compared: the ratio of their medians and its range over the rounds, and
# whether the difference is inside the noise. The one place a tie is decided.
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.records.timing import Timing


@dataclass(frozen=True)
class Comparison:
    """How `slow` compares with `fast`: the ratio of medians and its range over the rounds."""

    ratio: float  # slow.median / fast.median: > 1 means `fast` is faster
    low: float  # slow.low / fast.high: the least favourable reading
    high: float  # slow.high / fast.low
    tie: bool  # the two intervals overlap: the difference is inside the noise

    @property
    def as_ordered(self) -> bool:
        """The side given as `fast` has the lower (or equal) median: ratio ≥ 1. A sentence
        that states a ratio above 1 names the sides in this order, else the other way round
        (a tie says neither is faster, whichever way it is read)."""
        return self.ratio >= 1

    @property
    def flipped(self) -> Comparison:
        """The same comparison read from the other side (`fast` and `slow` swapped)."""
        return Comparison(1 / self.ratio, 1 / self.high, 1 / self.low, self.tie)


def compare(fast: Timing, slow: Timing) -> Comparison:
    """Compare two timings; a tie when their round ranges overlap."""
    return Comparison(
        ratio=slow.time_us / fast.time_us,
        low=slow.low_us / fast.high_us,
        high=slow.high_us / fast.low_us,
        tie=slow.low_us <= fast.high_us and fast.low_us <= slow.high_us,
    )
