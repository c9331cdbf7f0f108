# A timing as plain data: the median over separate rounds and each round's median, so that
# the spread between rounds (the machine drifting, another process waking up) travels with
# the number from the worker to the page. profiling/timing.py measures it; findings/ judges
# it (ties, rankings); render/words.py says it.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Timing:
    """One callable's time in microseconds: the median over rounds and their range.

    `rounds_us` holds each round's median; `low_us`/`high_us` are their minimum and maximum,
    the interval a comparison uses. `iqr_us` is the interquartile range of the individual
    runs pooled over all rounds.
    """

    median_us: float
    iqr_us: float
    runs: int
    method: str
    rounds_us: tuple[float, ...] = ()

    @property
    def low_us(self) -> float:
        return min(self.rounds_us) if self.rounds_us else self.median_us

    @property
    def high_us(self) -> float:
        return max(self.rounds_us) if self.rounds_us else self.median_us

    @property
    def spread(self) -> float:
        """The rounds' range relative to the median (0.05 = ±2.5 %)."""
        return (self.high_us - self.low_us) / self.median_us if self.median_us else 0.0

    def to_json(self) -> dict:
        data = asdict(self)
        data["rounds_us"] = list(self.rounds_us)
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> Timing:
        return cls(**{**data, "rounds_us": tuple(data.get("rounds_us", ()))})
