# A hand-made `forward_times` entry at one measurement's shape, so that renderers which read
# unprofiled times can be tested on tiny shapes with known numbers.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

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

    def row(name: str, t: tuple[float, float, float]) -> tuple:
        median, low, high = t
        return (
            name,
            shape.batch_size,
            shape.num_heads,
            shape.seq_len,
            shape.head_dim,
            shape.dtype,
            shape.causal,
            median,
            low,
            high,
            9,
            fwd.OK,
        )

    rows = [row(fwd.NAIVE, naive)]
    rows += [row(fwd.STEP_PREFIX + label, t) for label, t in (steps or {}).items()]
    return replace(
        m,
        experiment="forward_times",
        tables={"times": Table(fwd.COLUMNS, tuple(rows))},
        facts={"method": "CUDA events" if m.device_kind == "cuda" else "torch.utils.benchmark"},
        steps=(),
        ops=(),
        timeline=None,
    )
