# Sweeps over a parameter: measure each point, and turn an out-of-memory or an unavailable
# backend into a row that says so instead of an exception that kills the experiment.
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from attention_docs.measurements.schema import Table
from attention_docs.profiling.memory import is_out_of_memory, release_cached_memory

OUT_OF_MEMORY = "out of memory"


def sweep(
    points: Iterable[Mapping[str, Any]],
    measure: Callable[[Mapping[str, Any]], Mapping[str, Any]],
    *,
    columns: Sequence[str],
    units: Mapping[str, str] | None = None,
    stop_after_oom: bool = True,
) -> tuple[Table, list[str]]:
    """Run `measure(point)` for each point; returns the table and notes on what failed.

    A point that runs out of memory gets None in every measured column and a `status` of
    "out of memory"; with `stop_after_oom`, larger points are skipped (they would fail too).
    After an out-of-memory the CUDA allocator's cache is released before the next point.
    """
    rows = []
    notes = []
    stopped = False
    for point in points:
        if stopped:
            rows.append(_row(point, {}, columns, "skipped after an out-of-memory"))
            continue
        try:
            result = measure(point)
            rows.append(_row(point, result, columns, "ok"))
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            release_cached_memory()
            rows.append(_row(point, {}, columns, OUT_OF_MEMORY))
            notes.append(f"{_point_text(point)} ran out of memory on this device.")
            stopped = stop_after_oom
    full = (*columns, "status")
    return Table(columns=full, rows=tuple(rows), units=dict(units or {})), notes


def _row(
    point: Mapping[str, Any], result: Mapping[str, Any], columns: Sequence[str], status: str
) -> tuple:
    merged = {**point, **result}
    return (*(merged.get(c) for c in columns), status)


def _point_text(point: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items())
