# A forward_times measurement made up for renderer tests: known medians and round ranges at
# known shapes, so that a winner, a tie or a break-even is known before the renderer runs.
from __future__ import annotations

from dataclasses import replace

from timings import stated

from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Table


def row(name: str, shape: fwd.Shape, median, low=None, high=None, *, status: str = fwd.OK) -> tuple:
    """One row of the `times` table; a status other than "ok" leaves the time empty."""
    dims = tuple(getattr(shape, f) for f in fwd.SHAPE_COLUMNS)
    if status != fwd.OK:
        return (name, *dims, None, status)
    return (name, *dims, stated(median, low, high), status)


def forward_times(base: Measurement, rows: list[tuple], **facts) -> Measurement:
    """`base` (any real measurement, for its provenance) turned into a forward_times entry."""
    return replace(
        base,
        experiment="forward_times",
        params={"tiny": False},
        tables={"times": Table(fwd.COLUMNS, tuple(rows))},
        facts={"method": "test", **facts},
        notes=(),
    )


def at(base: Measurement, shape: fwd.Shape, timings: dict) -> Measurement:
    """forward_times holding `timings` ({name: (median, low, high)}) at one shape."""
    return forward_times(base, [row(name, shape, *t) for name, t in timings.items()])
