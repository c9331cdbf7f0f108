# A hand-made `forward_times` entry at one measurement's shape, so that renderers which read
# unprofiled times can be tested on tiny shapes with known numbers.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from synthetic_forward import row

from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Table


def forward_times_for(
    m: Measurement,
    naive: tuple[float, float, float],
    steps: Mapping[str, tuple[float, float, float]] | None = None,
) -> Measurement:
    """A forward_times Measurement holding the naive forward (median, low, high µs) and, if
    given, each step timed alone, at `m`'s shape and on `m`'s device."""
    shape = fwd.Shape.of(m.params)

    rows = [row(fwd.NAIVE, shape, *naive)]
    rows += [row(fwd.STEP_PREFIX + label, shape, *t) for label, t in (steps or {}).items()]
    return replace(
        m,
        experiment="forward_times",
        tables={"times": Table(fwd.COLUMNS, tuple(rows))},
        facts={"method": "CUDA events" if m.device_kind == "cuda" else "torch.utils.benchmark"},
        steps=(),
        ops=(),
        timeline=None,
    )
