# Memory: the peak a callable allocates above what was live before it, and the allocation
# timeline behind that peak. On CUDA the caching allocator's own statistics are exact; on
# the CPU the profiler's `[memory]` events (profile_memory=True) are summed.
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch.profiler import profile

from attention_docs.profiling.device import synchronize
from attention_docs.profiling.profile import activities_on, chrome_of


@dataclass(frozen=True)
class MemoryEvent:
    """One allocation (bytes > 0) or free (bytes < 0), `t_us` from the start of the call."""

    t_us: float
    bytes: int
    live: int  # bytes allocated by the call and still live after this event


def is_out_of_memory(exc: BaseException) -> bool:
    """True for CUDA's OutOfMemoryError and the CPU allocator's 'can't allocate memory'."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "can't allocate memory" in text or "out of memory" in text
    )


def release_cached_memory() -> None:
    """After an out-of-memory, hand the CUDA caching allocator's free blocks back, so that the
    next point of a sweep starts from what is really in use (a no-op without CUDA)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def peak_memory_bytes(fn: Callable[[], object], device: torch.device) -> int:
    """Peak bytes allocated by `fn()` above what was allocated before it (outputs included)."""
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = fn()
        synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        del result
        return int(peak)
    # The profiler's allocation timeline; the output's free comes after the peak.
    chrome = profiled_call(fn, device, warmup=0)
    return max((e.live for e in events_from_chrome(chrome, device.type)), default=0)


def events_from_chrome(chrome: Mapping, device_type: str) -> list[MemoryEvent]:
    """The `[memory]` events of one device type from a Chrome trace, as a running total."""
    wanted = 1 if device_type == "cuda" else 0  # the profiler's "Device Type": 0 CPU, 1 CUDA
    raw = sorted(
        (e for e in chrome.get("traceEvents", []) if e.get("name") == "[memory]"),
        key=lambda e: float(e["ts"]),
    )
    raw = [e for e in raw if int(e.get("args", {}).get("Device Type", 0)) == wanted]
    if not raw:
        return []
    origin = float(raw[0]["ts"])
    live = 0
    events = []
    for e in raw:
        delta = int(e["args"]["Bytes"])
        live += delta
        events.append(MemoryEvent(round(float(e["ts"]) - origin, 3), delta, live))
    return events


@dataclass(frozen=True)
class StepBand:
    """One labelled range of a profiled call, `start_us`/`end_us` from the start of the call."""

    label: str
    start_us: float
    end_us: float


@dataclass(frozen=True)
class MemoryTimeline:
    """The allocations of one call, each attributed to the labelled step it happened in."""

    events: tuple[MemoryEvent, ...]
    steps: tuple[str | None, ...]  # per event: the label of the range it fell in, or None
    bands: tuple[StepBand, ...]


def timeline_from_chrome(
    chrome: Mapping, labels: tuple[str, ...] | list[str], device_type: str
) -> MemoryTimeline:
    """Attribute the `[memory]` events of a Chrome trace to the labelled ranges around them.

    An event belongs to the range whose [start, end] holds its timestamp: allocations happen
    on the thread that runs the op, inside the `record_function` range that called it (on a
    GPU too: the caching allocator hands out memory when the kernel is launched). Events
    outside every range (the frees when the function returns) get None. Times are relative
    to the first range or event, whichever is earlier.
    """
    wanted = 1 if device_type == "cuda" else 0
    trace_events = chrome.get("traceEvents", [])
    ranges = sorted(
        (
            e
            for e in trace_events
            if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") in labels
        ),
        key=lambda e: float(e["ts"]),
    )
    raw = sorted(
        (
            e
            for e in trace_events
            if e.get("name") == "[memory]"
            and int(e.get("args", {}).get("Device Type", 0)) == wanted
        ),
        key=lambda e: float(e["ts"]),
    )
    starts = [float(e["ts"]) for e in ranges] + [float(e["ts"]) for e in raw]
    if not starts:
        return MemoryTimeline(events=(), steps=(), bands=())
    origin = min(starts)
    bands = tuple(
        StepBand(
            str(e["name"]),
            round(float(e["ts"]) - origin, 3),
            round(float(e["ts"]) + float(e["dur"]) - origin, 3),
        )
        for e in ranges
    )
    # --8<-- [start:attribute]
    live = 0
    events = []
    steps = []
    for e in raw:
        t = round(float(e["ts"]) - origin, 3)
        delta = int(e["args"]["Bytes"])
        live += delta
        events.append(MemoryEvent(t, delta, live))
        steps.append(next((b.label for b in bands if b.start_us <= t <= b.end_us), None))
    # --8<-- [end:attribute]
    return MemoryTimeline(events=tuple(events), steps=tuple(steps), bands=bands)


def step_allocations(timeline: MemoryTimeline, labels: tuple[str, ...] | list[str]) -> dict:
    """Per label: allocations made, bytes allocated and bytes freed inside that step's ranges.

    Summed over every range with that label in the timeline; divide by the number of calls
    profiled for a per-call figure.
    """
    result = {label: {"allocations": 0, "allocated": 0, "freed": 0} for label in labels}
    for event, step in zip(timeline.events, timeline.steps, strict=True):
        if step not in result:
            continue
        if event.bytes > 0:
            result[step]["allocations"] += 1
            result[step]["allocated"] += event.bytes
        else:
            result[step]["freed"] -= event.bytes
    return result


def profiled_call(fn: Callable[[], object], device: torch.device, *, warmup: int = 2) -> dict:
    """The Chrome trace of one call of `fn` (after `warmup` calls), every allocation and free
    recorded: the output's free is part of the call's story, it ends the timeline."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    with profile(activities=activities_on(device), profile_memory=True) as prof:
        result = fn()
        del result
        synchronize(device)
    return chrome_of(prof)


def memory_timeline(
    fn: Callable[[], object],
    device: torch.device,
    labels: tuple[str, ...] | list[str],
    *,
    warmup: int = 2,
) -> MemoryTimeline:
    """Profile one call of `fn` (after `warmup` calls) and attribute its allocations to steps."""
    return timeline_from_chrome(profiled_call(fn, device, warmup=warmup), labels, device.type)
