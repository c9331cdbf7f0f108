# Scratch told apart from tensors: an allocation an op frees again before it returns (a
# backend's workspace, such as oneDNN's scratchpad for a bfloat16 matmul on CPUs with AVX-512
# bf16 or AMX, or cuBLAS's workspace on a GPU) is not a tensor the op hands back, and a memory
# model that counts tensors does not see it. This profiles one call like
# profiling/memory.memory_timeline and marks each `[memory]` event with the op around it and
# whether it is scratch. (Its own module, so that the experiments measuring memory_timeline
# alone are not re-measured when this changes.)
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from attention_docs.profiling.memory import MemoryTimeline, profiled_call, timeline_from_chrome


@dataclass(frozen=True)
class OpTimeline:
    """A memory timeline, and per event the innermost op around it (None outside every op)
    and whether the block is scratch (its allocation and its free both marked)."""

    timeline: MemoryTimeline
    ops: tuple[str | None, ...]
    scratch: tuple[bool, ...]


def ops_around(chrome: Mapping, device_type: str) -> tuple[tuple[str | None, bool], ...]:
    """Per `[memory]` event of `device_type` (in timeline_from_chrome's order): the innermost
    op around it, and whether it is scratch — the free of its address follows before the
    outermost op around the allocation ends."""
    wanted = 1 if device_type == "cuda" else 0
    events = chrome.get("traceEvents", [])
    raw = sorted(
        (e for e in events if e.get("name") == "[memory]" and int(e.get("args", {}).get("Device Type", 0)) == wanted),
        key=lambda e: float(e["ts"]),
    )  # fmt: skip
    ops = [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), str(e["name"]))
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "cpu_op"
    ]

    def around(t: float) -> list[tuple[float, float, str]]:
        return [o for o in ops if o[0] <= t <= o[1]]

    out: list[tuple[str | None, bool]] = []
    allocated: dict[object, int] = {}  # address -> index of its live allocation in `out`
    for e in raw:
        t, args = float(e["ts"]), e.get("args", {})
        here = around(t)
        op = min(here, key=lambda o: o[1] - o[0])[2] if here else None
        if int(args["Bytes"]) > 0:
            allocated[args.get("Addr")] = len(out)
            out.append((op, False))
            continue
        start = allocated.pop(args.get("Addr"), None)
        outer = around(float(raw[start]["ts"])) if start is not None else []
        scratch = bool(outer) and t <= min(outer, key=lambda o: (o[0], -o[1]))[1]
        if scratch:
            out[start] = (out[start][0], True)
        out.append((op, scratch))
    return tuple(out)


def op_timeline(
    fn: Callable[[], object],
    device: torch.device,
    labels: tuple[str, ...] | list[str],
    *,
    warmup: int = 2,
) -> OpTimeline:
    """Profile one call of `fn` (after `warmup` calls): its allocations by step and by op."""
    chrome = profiled_call(fn, device, warmup=warmup)
    found = ops_around(chrome, device.type)
    timeline = timeline_from_chrome(chrome, labels, device.type)
    return OpTimeline(timeline, tuple(o for o, _ in found), tuple(s for _, s in found))


def tensor_peak(t: OpTimeline) -> int:
    """The peak of the running total with scratch left out: the tensors alone."""
    live = most = 0
    for e, scratch in zip(t.timeline.events, t.scratch, strict=True):
        if not scratch:
            live += e.bytes
            most = max(most, live)
    return most


def scratch_by_op(t: OpTimeline) -> dict[tuple[str | None, str | None], tuple[int, int]]:
    """(step, op) -> (scratch allocations, the largest one in bytes), in event order."""
    found: dict[tuple[str | None, str | None], tuple[int, int]] = {}
    tl = t.timeline
    for e, step, op, scratch in zip(tl.events, tl.steps, t.ops, t.scratch, strict=True):
        if scratch and e.bytes > 0:
            count, largest = found.get((step, op), (0, 0))
            found[(step, op)] = (count + 1, max(largest, e.bytes))
    return found
