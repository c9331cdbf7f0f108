# Memory: the peak a callable allocates above what was live before it, and the allocation
# timeline behind that peak. On CUDA the caching allocator's own statistics are exact; on
# the CPU the profiler's `[memory]` events (profile_memory=True) are summed.
from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from attention_docs.profiling.device import synchronize


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
    return max((e.live for e in memory_events(fn, device)), default=0)


def memory_events(fn: Callable[[], object], device: torch.device) -> list[MemoryEvent]:
    """Allocation timeline of one call of `fn` on `device`, from the profiler."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, profile_memory=True) as prof:
        result = fn()
        synchronize(device)
    del result
    with tempfile.TemporaryDirectory(prefix="attention-docs-memory-") as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        chrome = json.loads(path.read_text(encoding="utf-8"))
    return events_from_chrome(chrome, device.type)


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
