# Rankings with ties: which of several timed things is fastest, and which are within noise of
# the fastest. "Fastest" is said only of a clear leader; a leader within noise of another is a
# tie, and the pages say so.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from attention_docs.findings.compare import Comparison, compare
from attention_docs.records.timing import Timing


@dataclass(frozen=True)
class Ranking:
    """Names ordered fastest first (by the time each states), with the leaders: the fastest and every
    name whose range overlaps it. `against_fastest[name]` compares the fastest with it."""

    order: tuple[str, ...]
    leaders: tuple[str, ...]
    against_fastest: Mapping[str, Comparison]

    @property
    def fastest(self) -> str:
        return self.order[0]

    @property
    def clear(self) -> bool:
        """One leader, outside the noise of every other."""
        return len(self.leaders) == 1


def rank(timings: Mapping[str, Timing]) -> Ranking:
    """Rank timed things; empty input is an error (there is nothing to rank)."""
    if not timings:
        raise ValueError("nothing to rank: no timings were given")
    order = tuple(sorted(timings, key=lambda name: timings[name].time_us))
    fastest = timings[order[0]]
    against = {name: compare(fastest, timings[name]) for name in order[1:]}
    leaders = (order[0], *(name for name in order[1:] if against[name].tie))
    return Ranking(order, leaders, against)
