# Sweeps over a parameter: measure each point, and turn an out-of-memory or an unavailable
# backend into a row that says so instead of an exception that kills the experiment. A point
# whose estimated footprint exceeds the free memory is not tried at all: on the CPU going past
# the memory there is gets the process killed rather than an exception, and on a GPU a failed
# try fragments the allocator for the points after it.
from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

from attention_docs.measurements.schema import Table
from attention_docs.profiling.headroom import drop_traceback, free_memory_bytes
from attention_docs.profiling.memory import is_out_of_memory, release_cached_memory
from attention_docs.profiling.timing import time_callables

OUT_OF_MEMORY = "out of memory"
SKIPPED_AFTER_OOM = "skipped after an out-of-memory"
TOO_LARGE = "too large for the free memory"


def sweep(
    points: Iterable[Mapping[str, Any]],
    measure: Callable[[Mapping[str, Any]], Mapping[str, Any]],
    *,
    columns: Sequence[str],
    units: Mapping[str, str] | None = None,
    stop_after_oom: bool = True,
    estimate_bytes: Callable[[Mapping[str, Any]], float | None] | None = None,
    device: torch.device | str | None = None,
) -> tuple[Table, list[str]]:
    """Run `measure(point)` for each point; returns the table and notes on what failed.

    A point that runs out of memory gets None in every measured column and a `status` of
    "out of memory"; with `stop_after_oom`, larger points are skipped (they would fail too).
    After an out-of-memory the failed point's tensors are let go of (its traceback held
    them) and the CUDA allocator's cache is released before the next point.

    Args:
        estimate_bytes: the memory a point will need, in bytes (None: unknown). A point whose
            estimate exceeds what `free_memory_bytes(device)` reports just before it is not
            run: its status says "too large for the free memory (needs …, … free)", and the
            points after it are still tried.
        device: where `measure` allocates, for the free-memory check; default CUDA when it is
            in use in this process, else the CPU.
    """
    rows = []
    notes = []
    stopped = False
    for point in points:
        if stopped:
            rows.append(_row(point, {}, columns, SKIPPED_AFTER_OOM))
            continue
        too_large = _too_large(point, estimate_bytes, device)
        if too_large:
            rows.append(_row(point, {}, columns, f"{TOO_LARGE} ({too_large})"))
            notes.append(f"{_point_text(point)} was not run: it {too_large}.")
            continue
        result, failed = _unless_out_of_memory(lambda point=point: measure(point))
        if failed:
            rows.append(_row(point, {}, columns, OUT_OF_MEMORY))
            notes.append(f"{_point_text(point)} ran out of memory on this device.")
            stopped = stop_after_oom
            continue
        rows.append(_row(point, result, columns, "ok"))
        del result
    full = (*columns, "status")
    return Table(columns=full, rows=tuple(rows), units=dict(units or {})), notes


def timed_sweep(
    points: Iterable[Mapping[str, Any]],
    prepare: Callable[[Mapping[str, Any]], tuple[Mapping[str, Any], Callable[[], object] | None]],
    *,
    columns: Sequence[str],
    device: torch.device,
    units: Mapping[str, str] | None = None,
    time_column: str = "time",
    **timing: Any,
) -> tuple[Table, list[str]]:
    """`sweep` for points a page compares with each other (a curve, a slope, a ranking):
    `prepare(point)` returns the point's other fields and the callable to time (None: not
    timed), its inputs allocated (a point that runs out of memory there is a row that says
    so, as in `sweep`);
    then every prepared point is timed in the same interleaved rounds
    (`time_callables(..., **timing)`), so that a slow moment of the machine cannot bend one
    point of the curve. The times are column `time_column`, before `status`; an
    out-of-memory while timing marks every timed point."""
    points = list(points)
    calls: dict[int, Callable[[], object]] = {}

    def measure(point):
        fields, call = prepare(point)
        if call is not None:
            calls[id(point)] = call
        return fields

    table, notes = sweep(points, measure, columns=columns, units=units, device=device)
    timings, failed = {}, False
    if calls:
        timings, failed = _unless_out_of_memory(lambda: time_callables(calls, device, **timing))
    if failed:
        timings = {}
        notes.append("the points ran out of memory while they were timed together")
    rows = []
    for point, row in zip(points, table.rows, strict=True):
        *fields, status = row
        status = OUT_OF_MEMORY if failed and id(point) in calls else status
        rows.append((*fields, timings.get(id(point)), status))
    full = (*columns, time_column, "status")
    return Table(full, tuple(rows), {**dict(units or {}), time_column: "µs"}), notes


def _unless_out_of_memory(run: Callable[[], Any]) -> tuple[Any, bool]:
    """(`run()`, False), or (None, True) when it ran out of memory: then what it allocated
    is let go of (its traceback held it) and the allocator's cache released."""
    failed = False
    try:
        return run(), False
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        drop_traceback(exc)
        failed = True
    # Outside the except block: there the exception, and so the failed run's frames, would
    # still be alive while the cache is emptied.
    if failed:
        gc.collect()  # tensors kept only by reference cycles are still allocated
        release_cached_memory()
    return None, True


def _too_large(
    point: Mapping[str, Any],
    estimate_bytes: Callable[[Mapping[str, Any]], float | None] | None,
    device: torch.device | str | None,
) -> str:
    """'needs X, Y free' when the point's estimate exceeds the free memory, else ''."""
    if estimate_bytes is None:
        return ""
    need = estimate_bytes(point)
    if need is None:
        return ""
    if device is None:
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        device = "cuda" if cuda else "cpu"
    free = free_memory_bytes(device)
    if free is None or need <= free:
        return ""
    return f"needs {_gib(need)}, {_gib(free)} free"


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.2f} GiB"


def _row(
    point: Mapping[str, Any], result: Mapping[str, Any], columns: Sequence[str], status: str
) -> tuple:
    merged = {**point, **result}
    return (*(merged.get(c) for c in columns), status)


def _point_text(point: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items())
