# Shares of a whole: what fraction of a forward each step takes, with its range over the
# profiled forwards (each forward's own fractions), and which part is the largest beyond the
# noise. Shares are structure: they may come from profiled time, speed verdicts may not.
from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Share:
    """`part`'s fraction of the whole: the median over samples and its range."""

    part: str
    fraction: float
    low: float
    high: float


def shares(samples: Mapping[str, Sequence[float]]) -> dict[str, Share]:
    """Each part's share of the sum, sample by sample (e.g. profiled forward by forward).

    `samples[part][i]` is the part's value in sample i; every part has the same samples.
    """
    lengths = {len(v) for v in samples.values()}
    if len(lengths) != 1 or 0 in lengths:
        raise ValueError(f"every part needs the same, non-zero number of samples: {lengths}")
    n = lengths.pop()
    totals = [sum(values[i] for values in samples.values()) for i in range(n)]
    out = {}
    for part, values in samples.items():
        fractions = [v / t if t else 0.0 for v, t in zip(values, totals, strict=True)]
        out[part] = Share(part, statistics.median(fractions), min(fractions), max(fractions))
    return out


def joint_share(per: Mapping[str, Sequence[float]], group: Iterable[str]) -> Share:
    """The share of the parts in `group` together, sample by sample."""
    inside = [sum(v) for v in zip(*(per[x] for x in per if x in group), strict=True)]
    rest = [sum(v) for v in zip(*(per[x] for x in per if x not in group), strict=True)]
    return shares({"in": inside, "rest": rest})["in"]


@dataclass(frozen=True)
class Largest:
    """The part with the largest share, and whether it clears every other beyond the noise
    (its smallest share above every other part's largest); `rivals`: those it does not clear."""

    part: str
    clear: bool
    rivals: tuple[str, ...]


def largest(found: Mapping[str, Share]) -> Largest:
    ordered = sorted(found.values(), key=lambda s: s.fraction, reverse=True)
    top = ordered[0]
    rivals = tuple(s.part for s in ordered[1:] if s.high >= top.low)
    return Largest(top.part, not rivals, rivals)
