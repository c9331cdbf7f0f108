# Measuring a declared sweep (records/sweep.py): at each value of its parameter, its lines'
# callables timed together in interleaved rounds (profiling/timing.time_callables), each
# cell a Timing that keeps its rounds, so that findings can decide ties; a point that runs
# out of memory, or that would not fit, becomes a row that says so (experiments/_sweep.py).
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.registry import ExperimentError, Observed
from attention_docs.profiling.timing import time_callables
from attention_docs.records.sweep import SWEEPS, Sweep


def measure_sweep(
    spec: Sweep,
    values: Iterable[Any],
    lines_at: Callable[[Any], Mapping[str, Callable[[], Any]]],
    device: torch.device,
    *,
    estimate_bytes: Callable[[Mapping[str, Any]], float | None] | None = None,
    **timing: Any,
) -> Observed:
    """Time `lines_at(x)` — one callable per line of `spec` — at each of `values`.

    `timing` goes to `time_callables` (min_run_time, cuda_runs, rounds); `estimate_bytes`
    to `sweep`, which skips a point that cannot fit. The result holds the table and the
    spec it was measured by.
    """

    def measure(point: Mapping[str, Any]) -> dict[str, Any]:
        callables = dict(lines_at(point[spec.x]))
        if set(callables) != set(spec.lines):
            raise ExperimentError(
                f"sweep {spec.table} at {spec.x}={point[spec.x]}: the callables are "
                f"{sorted(callables)}, the spec's lines {sorted(spec.lines)}"
            )
        return {spec.x: point[spec.x], **time_callables(callables, device, **timing)}

    table, notes = sweep(
        [{spec.x: x} for x in values],
        measure,
        columns=spec.columns,
        units=dict.fromkeys(spec.lines, spec.unit),
        estimate_bytes=estimate_bytes,
        device=device,
    )
    return Observed(
        tables={spec.table: table},
        facts={SWEEPS: {spec.table: spec.to_json()}},
        notes=tuple(notes),
    )
