# Distributions: when repeated observations fall into separate groups (page faults: 4 in most
# calls, 257-260 in others), a median hides the shape. This finds the groups so a page can
# show them instead.
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

# Two sorted neighbours further apart than this factor start a new group.
GAP_FACTOR = 3.0


@dataclass(frozen=True)
class Mode:
    low: float
    high: float
    count: int


@dataclass(frozen=True)
class Distribution:
    values: tuple[float, ...]  # sorted
    modes: tuple[Mode, ...]

    @property
    def multimodal(self) -> bool:
        return len(self.modes) > 1


def distribution(values: Sequence[float], gap_factor: float = GAP_FACTOR) -> Distribution:
    """Group sorted values: a new group starts where a value exceeds its predecessor by more
    than `gap_factor` times (and by more than 1, so that 0 -> 1 is no gap)."""
    ordered = tuple(sorted(values))
    if not ordered:
        raise ValueError("a distribution needs at least one value")
    groups: list[list[float]] = [[ordered[0]]]
    for previous, current in itertools.pairwise(ordered):
        if current - previous > 1 and current > gap_factor * max(previous, 1e-12):
            groups.append([])
        groups[-1].append(current)
    return Distribution(ordered, tuple(Mode(g[0], g[-1], len(g)) for g in groups))
