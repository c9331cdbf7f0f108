# Trends along a sweep: local log-log slopes between neighbouring points with their range
# over the rounds, where a curve turns quadratic, and whether each step up or down is beyond
# the noise. A trend word ("doubles", "quadratic", "rises") is said only when the whole range
# is on that side.
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from attention_docs.records.timing import Timing

QUADRATIC = 1.5  # a local slope whose whole range is at or above this grows "like N²"


@dataclass(frozen=True)
class Slope:
    """The log-log slope between x0 and x1: from the medians, and its range (the later
    point's fastest round against the earlier point's slowest, and the reverse)."""

    x0: float
    x1: float
    slope: float
    low: float
    high: float


def slope(x0: float, x1: float, a: Timing, b: Timing) -> Slope:
    span = math.log(x1 / x0)
    return Slope(
        x0,
        x1,
        math.log(b.time_us / a.time_us) / span,
        math.log(b.low_us / a.high_us) / span,
        math.log(b.high_us / a.low_us) / span,
    )


def local_slopes(xs: Sequence[float], ts: Sequence[Timing]) -> list[Slope]:
    """Slopes between neighbouring points of a sweep (xs ascending)."""
    return [
        slope(x0, x1, a, b) for (x0, x1), (a, b) in zip(pairwise(xs), pairwise(ts), strict=True)
    ]


def end_to_end(xs: Sequence[float], ts: Sequence[Timing]) -> Slope:
    """The slope from the first point to the last, with its range."""
    return slope(xs[0], xs[-1], ts[0], ts[-1])


def turning_point(slopes: Sequence[Slope], threshold: float = QUADRATIC) -> float | None:
    """The first x from which every later local slope is at least `threshold` over its
    whole range; None if the sweep never settles there."""
    for i, s in enumerate(slopes):
        if all(later.low >= threshold for later in slopes[i:]):
            return s.x0
    return None


def fitted_slope(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """Least-squares slope of log(y) against log(x) over the points where y is a number > 0
    (a slope of 2: y grows with the square of x); None with fewer than two such points."""
    pts = [
        (math.log(x), math.log(y))
        for x, y in zip(xs, ys, strict=True)
        if y is not None and y > 0 and x > 0
    ]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


RISES, FALLS, FLAT = "rises", "falls", "within noise"


def steps(ts: Sequence[Timing]) -> list[str]:
    """Each move from one point to the next: RISES or FALLS beyond the noise, else FLAT."""
    out = []
    for a, b in pairwise(ts):
        if b.low_us > a.high_us:
            out.append(RISES)
        elif b.high_us < a.low_us:
            out.append(FALLS)
        else:
            out.append(FLAT)
    return out


def table_slopes(table, x: str, ys: Sequence[str]) -> dict[str, float | None]:
    """`fitted_slope` of each column in `ys` against column `x` of a measurement's table (a
    Timing cell counts as its time), for a figure's legend: each over the rows where every
    column has a number, so that lines which agree where they meet get one slope (a
    prediction may run past the lengths measured)."""
    xs, cols = table.numbers(x), {y: table.numbers(y) for y in ys}
    rows = [i for i in range(len(xs)) if all((c[i] or 0) > 0 for c in cols.values())]
    return {y: fitted_slope([xs[i] for i in rows], [c[i] for i in rows]) for y, c in cols.items()}
