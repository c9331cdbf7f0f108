# A Trace is the plain-data view of a torch.profiler run: spans in lanes (CPU threads, CUDA
# streams) with their nesting depth, the launch->kernel flows, and the profiler steps. It is
# built from the Chrome trace JSON that torch.profiler exports, so the same code reads a
# fresh run, a stored trace and the small recorded traces under tests/data. No torch here.
from __future__ import annotations

import gzip
import json
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from statistics import median

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
# What occupies a stream: the work a launch put there. A `gpu_range` only marks it.
GPU_WORK = frozenset({"kernel", "memcpy", "memset"})
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
        return [getattr(self, f.name) for f in fields(self)]

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
    return replace(span, start_us=_ns(span.start_us + by))


def _is_step(event: Mapping) -> bool:
    """A profiler step's own span (its GPU annotation has the same name)."""
    name, category = str(event.get("name", "")), event.get("cat")
    return name.startswith(STEP_PREFIX) and category != "gpu_user_annotation"


def trim_chrome(chrome: Mapping) -> dict:
    """Keep only what lies in the profiler's steps (plus the GPU work they launched).

    Metadata events that name processes and threads are kept so viewers label lanes.
    """
    events = chrome.get("traceEvents", [])
    steps = [e for e in events if e.get("ph") == "X" and _is_step(e)]
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
    first_ts: dict[tuple, float] = {}
    for e in events:
        kind = KINDS.get(e.get("cat", ""))
        if kind is None or e.get("ph") != "X":
            continue
        key = (e.get("pid"), e.get("tid"))
        if key in names:
            continue
        if kind in GPU_KINDS:
            stream = (e.get("args") or {}).get("stream", e.get("tid"))
            names[key] = f"GPU stream {stream}"
        else:
            first_ts[key] = min(first_ts.get(key, float("inf")), float(e["ts"]))
    # Threads are numbered by when they first appear in time, not in the file (Kineto's
    # event order is not chronological), so the thread that opened the first step, the one
    # that runs the Python code, is "CPU thread 0" and an autograd thread comes after it.
    cpu_threads = sorted(first_ts, key=lambda key: (first_ts[key], str(key)))
    for index, key in enumerate(cpu_threads):
        names[key] = "CPU thread" if len(cpu_threads) == 1 else f"CPU thread {index}"
    return names


def _parse(events: list[Mapping]) -> Trace:
    timed = [e for e in events if e.get("ph") == "X" and "dur" in e]
    if not timed:
        return Trace(spans=(), lanes=())
    lane_of = _lane_names(timed)
    origin = min(float(e["ts"]) for e in timed)
    # Each profiler step as (start, end, its number), in time order.
    bounds = sorted(
        (
            float(e["ts"]),
            float(e["ts"]) + float(e["dur"]),
            int(str(e["name"]).removeprefix(STEP_PREFIX)),
        )
        for e in timed
        if _is_step(e)
    )

    def step_at(ts: float) -> int | None:
        return next((sid for lo, hi, sid in bounds if lo <= ts <= hi), None)

    # CPU spans first: their step is where they start; a kernel inherits its launch's step.
    raw = [
        (e, KINDS[e.get("cat", "")])
        for e in timed
        if e.get("cat", "") in KINDS and not str(e.get("name", "")).startswith(STEP_PREFIX)
    ]
    step_of_flow = {
        (e.get("args") or {}).get("correlation"): step_at(float(e["ts"]))
        for e, kind in raw
        if kind not in GPU_KINDS
    }

    by_lane: dict[str, list[Span]] = defaultdict(list)
    for e, kind in raw:
        correlation = (e.get("args") or {}).get("correlation")
        ts = float(e["ts"])
        gpu_launched = kind in GPU_KINDS and correlation is not None
        step = step_of_flow.get(correlation) if gpu_launched else step_at(ts)
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
        for lo, hi, sid in bounds
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
        replace(s, depth=depth_of[i], self_us=_ns(max(s.dur_us - child_time[i], 0.0)))
        for i, s in enumerate(ordered)
    ]


_EPS = 1e-3  # times are kept to the nanosecond (see _ns)


class _Claims:
    """Which spans ran on behalf of a labelled range, for every range of one trace.

    The rule (see `attribute`) needs, for each CPU span, the outermost range open on its own
    thread when it started; that is computed once here rather than once per range.
    """

    def __init__(self, trace: Trace) -> None:
        self.cpu = [s for s in trace.spans if s.kind not in GPU_KINDS]
        self.work_of_flow: dict[int, list[Span]] = defaultdict(list)
        for s in trace.spans:
            if s.kind in GPU_WORK and s.flow is not None:
                self.work_of_flow[s.flow].append(s)
        tops: dict[str, list[Span]] = defaultdict(list)
        for r in sorted(
            (s for s in self.cpu if s.kind == "range"), key=lambda s: (s.start_us, -s.dur_us)
        ):
            lane_tops = tops[r.lane]
            if not lane_tops or r.start_us > lane_tops[-1].end_us + _EPS:
                lane_tops.append(r)
        starts = {lane: [r.start_us for r in found] for lane, found in tops.items()}
        self.outer: list[Span | None] = []
        for s in self.cpu:
            i = bisect_right(starts.get(s.lane, []), s.start_us + _EPS) - 1
            top = tops[s.lane][i] if i >= 0 else None
            self.outer.append(top if top is not None and s.start_us <= top.end_us + _EPS else None)

    def cpu_of(self, rng: Span) -> list[Span]:
        found = []
        for s, outer in zip(self.cpu, self.outer, strict=True):
            if s is rng or not (rng.start_us <= s.start_us <= rng.end_us):
                continue
            if (
                s.lane == rng.lane
                or outer is None
                or (rng.start_us - _EPS <= outer.start_us and outer.end_us <= rng.end_us + _EPS)
            ):
                found.append(s)
        return found

    def work_of(self, cpu: Iterable[Span]) -> list[Span]:
        return [
            w
            for s in cpu
            if s.kind == "runtime" and s.flow is not None
            for w in self.work_of_flow.get(s.flow, ())
        ]


def attribute(trace: Trace, labels: Iterable[str]) -> dict[str, list[Span]]:
    """Per label: every span that ran on behalf of a range of that name, CPU and GPU.

    A CPU span (op, runtime call, nested range) belongs to a labelled range when it starts
    inside the range's time window and

    1. runs on the range's own thread (ordinary nesting), or
    2. runs on another thread of the profiled process, and the outermost range open on its
       own thread when it started, if any, also lies inside the window. This is how the
       autograd engine's thread is counted: on CUDA it runs the backward while the calling
       thread waits inside `backward()`, so the kernels of `attention.backward` are launched
       from a thread that never entered that range. Work inside a range the other thread
       opened during the window (`## Call CompiledFxGraph ##` of a compiled backward) counts
       too: it ran because of the range. Work inside a range that thread had already open
       before the window began is its own business, not the range's.

    GPU work (kernels, memcpys, memsets) belongs to a range when the runtime call that
    launched it does, linked by the correlation id that Kineto's `ac2g` flows also carry.
    Like nesting on one thread, this is inclusive: a kernel counts for every enclosing range.

    Why not Kineto's `gpu_user_annotation` spans: Kineto builds them per thread, so the one
    for a range opened on the calling thread spans only the work that thread launched. For a
    backward that is the gradient seed's fill kernel, a few microseconds, while the
    backward's real kernels come from the autograd thread (a recorded ResNet trace shows a
    56 ms `## backward ##` range whose GPU annotation spans 28 µs). They mark a window, not
    the kernels inside it: a kernel another thread launched can run in that window too.

    Limitation: a thread that launches work of its own, outside any range, while a range is
    open elsewhere (a data-loader thread) would be counted for that range. The profiled
    attention code never does that.

    Args:
        trace: The trace; a CPU-only trace has one thread, so only rule 1 applies.
        labels: Range names (`attention.softmax`). A name with no range gets an empty list.

    Returns:
        Per label, the spans in trace order, each once; the ranges themselves excluded.
    """
    claims = _Claims(trace)
    order = {id(s): i for i, s in enumerate(trace.spans)}
    result: dict[str, list[Span]] = {}
    for label in labels:
        found: dict[int, Span] = {}
        for rng in (s for s in trace.spans if s.kind == "range" and s.name == label):
            cpu = claims.cpu_of(rng)
            for s in (*cpu, *claims.work_of(cpu)):
                if s.name != label or s.kind != "range":
                    found[id(s)] = s
        result[label] = sorted(found.values(), key=lambda s: order[id(s)])
    return result


def has_gpu_work(trace: Trace) -> bool:
    """True when the trace holds kernels, memcpys or memsets (it ran on a GPU)."""
    return any(s.kind in GPU_WORK for s in trace.spans)


def kernel_time_us(trace: Trace, labels: Iterable[str]) -> dict[str, float] | None:
    """Per labelled range (attributed as `attribute` says): the summed durations of the GPU
    work it launched, in microseconds (0.0 for a label that launched nothing); None when the
    trace has no GPU work at all: a CPU trace has no kernel clock, and callers use the CPU
    time of the ranges instead (`step_span_times`'s `cpu_us`). For one profiler step, pass
    `trace.in_step(n)`.

    GPU work is kernels, memcpys and memsets: a copy occupies its stream like a kernel, and
    leaving it out would make a step that copies look faster than it is. Durations are
    summed, not merged: work on two streams at once counts twice, as busy GPU time, not as
    elapsed time.
    """
    if not has_gpu_work(trace):
        return None
    found = attribute(trace, labels)
    return {
        label: sum(s.dur_us for s in spans if s.kind in GPU_WORK) for label, spans in found.items()
    }


@dataclass(frozen=True)
class LaunchGaps:
    """Idle time between consecutive pieces of GPU work on one stream, within one step.

    When the CPU launches work faster than the GPU runs it, the next kernel is queued and
    the gap is the GPU's own switch time (a microsecond or two); when launching is the
    bottleneck the GPU waits for each launch, and the gap is that exposed launch overhead.
    Either way it is measured on the GPU's clock, like kernel durations.
    """

    count: int  # gaps measured: (pieces of work - 1) per stream and step
    median_us: float | None  # None when no stream ran two pieces of work in one step
    total_us: float  # the idle time summed over every gap
    busy_us: float  # the work's summed durations on the same streams and steps

    @property
    def idle_share(self) -> float | None:
        """Idle time as a share of the streams' span from first work to last, 0..1."""
        span = self.total_us + self.busy_us
        return self.total_us / span if span else None


def launch_gaps(trace: Trace) -> LaunchGaps | None:
    """The gaps between consecutive kernels (memcpys, memsets) on each stream, per step.

    Work is grouped by stream and by the profiler step it was launched in, and ordered by
    start. A gap is the time from the end of the work so far to the start of the next; work
    that overlaps the previous piece (clock rounding) gives a gap of zero, which is counted.
    Gaps never cross a step boundary: the time between steps is the profiler's and the
    Python loop's, not the code under study. Work launched outside every step is ignored.
    For one step, pass `trace.in_step(n)`.

    Returns:
        The gaps pooled over every stream and step, or None when the trace has no GPU work:
        on a CPU there are no kernels to leave gaps between, and callers fall back to the
        CPU-side cost of a call (the time of a tiny op).
    """
    if not has_gpu_work(trace):
        return None
    groups: dict[tuple[int, str], list[Span]] = defaultdict(list)
    for s in trace.spans:
        if s.kind in GPU_WORK and s.step is not None:
            groups[(s.step, s.lane)].append(s)
    gaps: list[float] = []
    busy = 0.0
    for work in groups.values():
        work.sort(key=lambda s: (s.start_us, s.end_us))
        busy += sum(s.dur_us for s in work)
        end = work[0].end_us
        for s in work[1:]:
            gaps.append(_ns(max(s.start_us - end, 0.0)))
            end = max(end, s.end_us)
    return LaunchGaps(
        count=len(gaps),
        median_us=median(gaps) if gaps else None,
        total_us=_ns(sum(gaps)),
        busy_us=_ns(busy),
    )


def step_span_times(trace: Trace, labels: Iterable[str]) -> dict[str, dict[str, float]]:
    """Per labelled range: calls, CPU time and device time, summed over the trace's steps.

    Device time of a range is the summed duration of the GPU work it launched, on any
    thread (`kernel_time_us`, attributed as `attribute` says); on a CPU-only trace it
    equals the CPU time.
    """
    labels = list(labels)
    device_us = kernel_time_us(trace, labels)
    result: dict[str, dict[str, float]] = {}
    for label in labels:
        ranges = [s for s in trace.spans if s.kind == "range" and s.name == label]
        cpu = sum(r.dur_us for r in ranges)
        result[label] = {
            "calls": float(len(ranges)),
            "cpu_us": cpu,
            "device_us": device_us[label] if device_us is not None else cpu,
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


def step_span_rounds(trace: Trace, labels: Iterable[str]) -> dict[str, list[float]]:
    """Per labelled range: its device time in each profiler step of the trace, in step order.

    Each profiler step is one call of the profiled function, so the list is one sample per
    call: its spread is the noise a comparison between the ranges must clear. Device time
    is as `step_span_times` has it (kernel clock on a GPU trace, attributed across threads;
    CPU time on a CPU trace).
    """
    labels = list(labels)
    result: dict[str, list[float]] = {label: [] for label in labels}
    for step in sorted(s.step for s in trace.steps):
        times = step_span_times(trace.in_step(step), labels)
        for label in labels:
            result[label].append(times[label]["device_us"])
    return result
