# Runs a callable under torch.profiler with a wait/warmup/active schedule and returns plain
# data: the trimmed Chrome trace (what readers download and open in Perfetto), the Trace
# parsed from it, and the profiler's own FLOP counts per op. The first steps are skipped on
# purpose: they pay for lazy initialisation, allocator growth and cache misses.
from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from attention_docs.profiling.device import synchronize
from attention_docs.records.trace import Trace, trim_chrome

try:
    import resource
except ImportError:  # not a Unix: no page-fault count
    resource = None

# Fresh pages under the profiler. A worker's malloc keeps what it frees
# (profiling/environment.py), and still, on the 2-core guest the site is built on, profiled
# naive forwards faulted 256–1,024 fresh pages each (1–4 MB) while the same forwards
# unprofiled faulted none: the allocating steps were charged for the hypervisor's page
# faults. The likely cause, not measured apart: the profiler allocates its records between
# the ops it times, takes blocks those ops freed, and the next call's tensors land on pages
# the heap has just grown by. Touched and freed before the profiler starts, 64 MiB of heap
# (in blocks below malloc's mmap threshold, so that they come from the heap and stay in it)
# took those faults to none in a process of its own and to tens per forward in a build's
# worker; every profile counts its calls' faults (`page_faults`), and chapter 02 states them.
SETTLE_BLOCK = 16 * 1024 * 1024
SETTLE_BLOCKS = 4


@dataclass(frozen=True)
class Schedule:
    """torch.profiler's schedule: skip `wait` steps, warm up for `warmup`, record `active`.
    Five recorded forwards by default: a share's median then stands if two of them spike."""

    wait: int = 1
    warmup: int = 2
    active: int = 5

    @property
    def total(self) -> int:
        return self.wait + self.warmup + self.active


@dataclass(frozen=True)
class ProfileRun:
    chrome: dict
    trace: Trace
    flops_by_op: dict[str, float]  # per profiled step, as counted by torch.profiler
    schedule: Schedule
    # Page faults per profiled call (the comment above SETTLE_BLOCK says why); None where
    # the operating system does not count them.
    page_faults: float | None = None


def profile_callable(
    fn: Callable[[], object],
    device: torch.device,
    *,
    sched: Schedule = Schedule(),
    record_shapes: bool = True,
    profile_memory: bool = True,
    with_flops: bool = True,
) -> ProfileRun:
    """Profile `sched.total` calls of `fn` on `device`; one profiler step per call, and the
    page faults of the profiled ones counted."""
    settle_heap()
    faults: list[int | None] = []
    fn = _counting_faults(fn, faults)
    # --8<-- [start:profile]
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(
        activities=activities,
        schedule=schedule(wait=sched.wait, warmup=sched.warmup, active=sched.active, repeat=1),
        record_shapes=record_shapes,
        profile_memory=profile_memory,
        with_flops=with_flops,
    ) as prof:
        for _ in range(sched.total):
            fn()
            synchronize(device)
            prof.step()
    # --8<-- [end:profile]
    chrome = _strip_private(trim_chrome(chrome_of(prof)))
    flops: dict[str, float] = {}
    for event in prof.key_averages():
        if event.flops:
            flops[event.key] = event.flops / sched.active
    active = faults[sched.wait + sched.warmup :]
    counted = None if None in active else sum(active) / sched.active
    return ProfileRun(
        chrome=chrome,
        trace=Trace.from_chrome(chrome),
        flops_by_op=flops,
        schedule=sched,
        page_faults=counted,
    )


def _counting_faults(fn: Callable[[], object], counts: list[int | None]) -> Callable[[], object]:
    """`fn`, appending the page faults each call takes to `counts` (None where not counted)."""

    def counted() -> object:
        before = minor_faults()
        out = fn()
        after = minor_faults()
        counts.append(None if before is None or after is None else after - before)
        return out

    return counted


def activities_on(device: torch.device) -> list[ProfilerActivity]:
    """What torch.profiler records on `device`: the CPU, and CUDA on a GPU."""
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])


def chrome_of(prof: profile) -> dict:
    """The Chrome trace of a finished profiler run, as JSON data.

    torch.profiler only writes one to a file: it goes to a temporary folder (under TMPDIR)
    that is removed once read back.
    """
    with tempfile.TemporaryDirectory(prefix="attention-docs-trace-") as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return json.loads(path.read_text(encoding="utf-8"))


def _strip_private(chrome: dict) -> dict:
    """Drop what would identify the machine a trace was made on: host name, trace id, and the
    temporary path the profiler wrote to (pids stay)."""
    return {k: v for k, v in chrome.items() if k not in ("host_name", "trace_id", "traceName")}


def settle_heap() -> None:
    """Grow the heap by SETTLE_BLOCKS touched blocks and free them: later allocations, the
    profiler's records among them, reuse pages that are already mapped."""
    blocks = [torch.ones(SETTLE_BLOCK, dtype=torch.uint8) for _ in range(SETTLE_BLOCKS)]
    del blocks


def minor_faults() -> int | None:
    """The page faults this process has taken that needed no disk (fresh pages among them);
    None where the operating system does not count them."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource else None
