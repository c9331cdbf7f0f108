# A Trace is the plain-data view of a torch.profiler run: spans in lanes (CPU threads, CUDA
# streams) with their nesting depth, the launch->kernel flows, and the profiler steps. It is
# built from the Chrome trace JSON that torch.profiler exports, so the same code reads a
# fresh run, a stored trace and the small recorded traces under tests/data. No torch here.
from __future__ import annotations

import gzip
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# Chrome-trace categories -> our span kinds. Anything else (python functions, instant
# events, overhead markers) is dropped: the figures and tables never show it.
KINDS = {
    "user_annotation": "range",
    "cpu_op": "op",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "gpu_user_annotation": "gpu_range",
}
GPU_KINDS = frozenset({"kernel", "memcpy", "memset", "gpu_range"})
STEP_PREFIX = "ProfilerStep#"


@dataclass(frozen=True)
class Span:
    """One timed thing: an op, a labelled range, a runtime call or a kernel."""

    name: str
    kind: str
    lane: str
    start_us: float
    dur_us: float
    depth: int = 0
    self_us: float = 0.0
    flow: int | None = None
    step: int | None = None

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us

    def to_json(self) -> list:
        return [
            self.name,
            self.kind,
            self.lane,
            self.start_us,
            self.dur_us,
            self.depth,
            self.self_us,
            self.flow,
            self.step,
        ]

    @classmethod
    def from_json(cls, row: list) -> Span:
        return cls(*row)


@dataclass(frozen=True)
class Trace:
    """Spans grouped into lanes; times in microseconds from the first kept span."""

    spans: tuple[Span, ...]
    lanes: tuple[str, ...]
    steps: tuple[Span, ...] = field(default=())

    @property
    def has_gpu(self) -> bool:
        return any(s.kind in GPU_KINDS for s in self.spans)

    @property
    def duration_us(self) -> float:
        return max((s.end_us for s in self.spans), default=0.0)

    def of_kind(self, *kinds: str) -> list[Span]:
        return [s for s in self.spans if s.kind in kinds]

    def named(self, name: str) -> list[Span]:
        return [s for s in self.spans if s.name == name]

    def in_step(self, step: int) -> Trace:
        """The spans of one profiler step (GPU work included through its flows), rebased to 0."""
        step_span = next(s for s in self.steps if s.step == step)
        kept = [s for s in self.spans if s.step == step]
        if not kept:
            return Trace(spans=(), lanes=(), steps=())
        origin = min(*(s.start_us for s in kept), step_span.start_us)
        rebased = [_shift(s, -origin) for s in kept]
        lanes = tuple(lane for lane in self.lanes if any(s.lane == lane for s in rebased))
        return Trace(spans=tuple(rebased), lanes=lanes, steps=(_shift(step_span, -origin),))

    def to_json(self) -> dict:
        return {
            "lanes": list(self.lanes),
            "steps": [s.to_json() for s in self.steps],
            "spans": [s.to_json() for s in self.spans],
        }

    @classmethod
    def from_json(cls, data: Mapping) -> Trace:
        return cls(
            spans=tuple(Span.from_json(r) for r in data["spans"]),
            lanes=tuple(data["lanes"]),
            steps=tuple(Span.from_json(r) for r in data["steps"]),
        )

    @classmethod
    def from_chrome(cls, chrome: Mapping) -> Trace:
        """Build a Trace from a Chrome trace dict as exported by torch.profiler."""
        return _parse(chrome.get("traceEvents", []))


def _ns(us: float) -> float:
    """Times are kept to the nanosecond, so that they survive a JSON round trip exactly."""
    return round(us, 3)


def _shift(span: Span, by: float) -> Span:
    return Span(
        span.name,
        span.kind,
        span.lane,
        _ns(span.start_us + by),
        span.dur_us,
        span.depth,
        span.self_us,
        span.flow,
        span.step,
    )


def load_chrome(path: Path) -> dict:
    """Read a Chrome trace file, gzipped or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def trim_chrome(chrome: Mapping) -> dict:
    """Keep only what lies in the profiler's steps (plus the GPU work they launched).

    Metadata events that name processes and threads are kept so viewers label lanes.
    """
    events = chrome.get("traceEvents", [])
    steps = [
        e
        for e in events
        if e.get("ph") == "X"
        and str(e.get("name", "")).startswith(STEP_PREFIX)
        and e.get("cat") != "gpu_user_annotation"
    ]
    if not steps:
        return dict(chrome)
    lo = min(e["ts"] for e in steps)
    hi = max(e["ts"] + e["dur"] for e in steps)
    launched: set = set()
    kept = []
    for e in events:
        if e.get("ph") == "M":
            kept.append(e)
        elif e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"):
            continue
        elif e.get("ph") in ("X", "i", "s", "f") and lo <= float(e.get("ts", lo - 1)) <= hi:
            kept.append(e)
            correlation = (e.get("args") or {}).get("correlation")
            if correlation is not None:
                launched.add(correlation)
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            if (e.get("args") or {}).get("correlation") in launched:
                kept.append(e)
        elif e.get("cat") == "gpu_user_annotation" and lo <= float(e.get("ts", 0)) <= hi + 1e6:
            kept.append(e)
    trimmed = {k: v for k, v in chrome.items() if k != "traceEvents"}
    trimmed["traceEvents"] = kept
    return trimmed


def _lane_names(events: Iterable[Mapping]) -> dict[tuple, str]:
    names: dict[tuple, str] = {}
    cpu_threads: list[tuple] = []
    for e in events:
        kind = KINDS.get(e.get("cat", ""))
        if kind is None or e.get("ph") != "X":
            continue
        key = (e.get("pid"), e.get("tid"))
        if key in names or key in cpu_threads:
            continue
        if kind in GPU_KINDS:
            stream = (e.get("args") or {}).get("stream", e.get("tid"))
            names[key] = f"GPU stream {stream}"
        else:
            cpu_threads.append(key)
    for index, key in enumerate(cpu_threads):
        names[key] = "CPU thread" if len(cpu_threads) == 1 else f"CPU thread {index}"
    return names


def _parse(events: list[Mapping]) -> Trace:
    timed = [e for e in events if e.get("ph") == "X" and "dur" in e]
    if not timed:
        return Trace(spans=(), lanes=())
    lane_of = _lane_names(timed)
    origin = min(float(e["ts"]) for e in timed)
    steps_raw = sorted(
        (
            e
            for e in timed
            if str(e.get("name", "")).startswith(STEP_PREFIX)
            and e.get("cat") != "gpu_user_annotation"
        ),
        key=lambda e: e["ts"],
    )
    step_bounds = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in steps_raw]
    step_ids = [int(str(e["name"]).removeprefix(STEP_PREFIX)) for e in steps_raw]

    def step_at(ts: float) -> int | None:
        for (lo, hi), sid in zip(step_bounds, step_ids, strict=True):
            if lo <= ts <= hi:
                return sid
        return None

    # CPU spans first: their step is where they start; a kernel inherits its launch's step.
    raw: list[tuple[Mapping, str]] = []
    for e in timed:
        kind = KINDS.get(e.get("cat", ""))
        if kind is None or str(e.get("name", "")).startswith(STEP_PREFIX):
            continue
        raw.append((e, kind))
    step_of_flow: dict[int, int | None] = {}
    for e, kind in raw:
        if kind not in GPU_KINDS:
            correlation = (e.get("args") or {}).get("correlation")
            if correlation is not None:
                step_of_flow[correlation] = step_at(float(e["ts"]))

    by_lane: dict[str, list[Span]] = defaultdict(list)
    for e, kind in raw:
        correlation = (e.get("args") or {}).get("correlation")
        ts = float(e["ts"])
        if kind in GPU_KINDS:
            step = step_of_flow.get(correlation) if correlation is not None else step_at(ts)
        else:
            step = step_at(ts)
        lane = lane_of[(e.get("pid"), e.get("tid"))]
        by_lane[lane].append(
            Span(
                name=str(e["name"]),
                kind=kind,
                lane=lane,
                start_us=_ns(ts - origin),
                dur_us=_ns(float(e["dur"])),
                flow=correlation if kind != "range" else None,
                step=step,
            )
        )
    spans: list[Span] = []
    for lane_spans in by_lane.values():
        spans.extend(_nest(lane_spans))
    lanes = sorted(by_lane, key=lambda lane: (lane.startswith("GPU"), lane))
    spans.sort(key=lambda s: (lanes.index(s.lane), s.start_us, -s.dur_us))
    steps = tuple(
        Span(f"{STEP_PREFIX}{sid}", "step", lanes[0], _ns(lo - origin), _ns(hi - lo), step=sid)
        for (lo, hi), sid in zip(step_bounds, step_ids, strict=True)
    )
    return Trace(spans=tuple(spans), lanes=tuple(lanes), steps=steps)


def _nest(spans: list[Span]) -> list[Span]:
    """Depth and self time within one lane: a span contains those that start and end inside it."""
    ordered = sorted(spans, key=lambda s: (s.start_us, -s.dur_us))
    depth_of: list[int] = []
    child_time = [0.0] * len(ordered)
    stack: list[int] = []
    eps = 1e-3
    for i, span in enumerate(ordered):
        while stack and ordered[stack[-1]].end_us < span.start_us + eps:
            stack.pop()
        while stack and span.end_us > ordered[stack[-1]].end_us + eps:
            stack.pop()  # overlaps without nesting (async GPU work): not a child
        if stack:
            child_time[stack[-1]] += span.dur_us
        depth_of.append(len(stack))
        stack.append(i)
    return [
        Span(
            s.name,
            s.kind,
            s.lane,
            s.start_us,
            s.dur_us,
            depth_of[i],
            _ns(max(s.dur_us - child_time[i], 0.0)),
            s.flow,
            s.step,
        )
        for i, s in enumerate(ordered)
    ]


def step_span_times(trace: Trace, labels: Iterable[str]) -> dict[str, dict[str, float]]:
    """Per labelled range: calls, CPU time and device time, summed over the trace's steps.

    Device time of a range is the summed duration of the kernels launched inside it (through
    the launch->kernel flows); on a CPU-only trace it equals the CPU time.
    """
    launches = [s for s in trace.spans if s.kind == "runtime" and s.flow is not None]
    kernel_time: dict[int, float] = defaultdict(float)
    for s in trace.spans:
        if s.kind in ("kernel", "memcpy", "memset") and s.flow is not None:
            kernel_time[s.flow] += s.dur_us
    result: dict[str, dict[str, float]] = {}
    for label in labels:
        ranges = [s for s in trace.spans if s.kind == "range" and s.name == label]
        cpu = sum(r.dur_us for r in ranges)
        gpu = 0.0
        for r in ranges:
            for launch in launches:
                if launch.lane == r.lane and r.start_us <= launch.start_us <= r.end_us:
                    gpu += kernel_time.get(launch.flow, 0.0)
        result[label] = {
            "calls": float(len(ranges)),
            "cpu_us": cpu,
            "device_us": gpu if trace.has_gpu else cpu,
        }
    return result


def op_stats(trace: Trace) -> list[dict]:
    """Self and total time per op (CPU) or kernel (GPU) name, summed over the trace."""
    table: dict[tuple[str, str], dict] = {}
    for s in trace.spans:
        if s.kind not in ("op", "kernel", "memcpy", "memset"):
            continue
        where = "GPU" if s.kind in GPU_KINDS else "CPU"
        row = table.setdefault(
            (where, s.name),
            {"name": s.name, "where": where, "calls": 0, "self_us": 0.0, "total_us": 0.0},
        )
        row["calls"] += 1
        row["self_us"] += s.self_us if where == "CPU" else s.dur_us
        row["total_us"] += s.dur_us
    return sorted(table.values(), key=lambda r: (r["where"] != "GPU", -r["self_us"], r["name"]))


def chrome_bytes(chrome: Mapping) -> bytes:
    """Gzipped, deterministic bytes of a Chrome trace (for the store and downloads)."""
    payload = json.dumps(chrome, separators=(",", ":"), sort_keys=True).encode()
    return gzip.compress(payload, mtime=0)
