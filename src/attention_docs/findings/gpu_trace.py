# Attention read from any torch.profiler trace of a GPU run, beside the model's forecast.
# The trace may come from a reader's machine or from others (docs/assets/cited/): it holds no
# labelled ranges, so attention is found by its ATen ops, in whatever ops a model uses (naive:
# matmul -> scale -> mask -> softmax -> matmul on one scores tensor; SDPA: the op, and its
# backend by the names of its kernels). An op's GPU time is the durations of the kernels it
# launched, linked launch -> kernel by Kineto's correlation ids: the kernel clock, as
# records/trace.py has it. Works on the Chrome-trace events themselves, because a `Span`
# keeps no op arguments and the shapes are in them. No torch, no words: render/gpu_trace.py
# says it.
from __future__ import annotations

import functools
import gzip
import hashlib
import json
import zlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod
from pathlib import Path
from statistics import median

from attention_docs.analytic.gpu import Range, flash_range, naive_kernels, realistic
from attention_docs.findings.facts import KERNEL, SPEC, Fact, On
from attention_docs.records.device import SpecSheet, spec_sheet_for
from attention_docs.records.kernels import is_bookkeeping
from attention_docs.records.ops import OpList, TensorArg, ops_from_chrome, tensor_inputs
from attention_docs.records.shape import Shape
from attention_docs.records.steps import STEPS
from attention_docs.records.trace import GPU_WORK, KINDS, STEP_PREFIX, Trace

SDPA_OP = "aten::scaled_dot_product_attention"
# The one labelled step of an SDPA call (the label the recorded SDPA ops carry, records/ops.py).
SDPA_STEP = "attention.sdpa"
SCORES, SCALE, MASK, SOFTMAX, WEIGHTED_SUM = STEPS
MATMUL_OPS = frozenset({"aten::bmm", "aten::matmul"})
SCALE_OPS = frozenset({"aten::mul", "aten::div"})
MASK_OPS = frozenset({"aten::masked_fill", "aten::masked_fill_", "aten::add", "aten::where"})
SOFTMAX_OPS = frozenset({"aten::softmax", "aten::_softmax"})
# Dropout sits between softmax and the second matmul in many models; in inference it launches
# nothing, and it is no step of the site's vocabulary, so it is passed over.
DROPOUT_OPS = frozenset({"aten::dropout", "aten::native_dropout"})
# Below half the span busy, the GPU spends more time waiting for launches than running them.
CPU_BOUND_SHARE = 0.5
# SDPA's backend by its kernels' names, checked in this order (cuDNN's names say "flash" too).
BACKENDS = (
    ("sdpa-cudnn", ("cudnn",)),
    ("sdpa-flash", ("flash_fwd",)),
    ("sdpa-efficient", ("fmha", "efficient_attention", "mem_eff")),
)
SDPA_MATH = "sdpa-math"
_EPS = 1e-3  # µs: a nested event may end a rounding error after the op around it
_GZIP_MAGIC = b"\x1f\x8b"
# Where the site keeps the traces others recorded, under docs/ (published beside the pages).
CITED = "assets/cited/tracelens-h100/"


class TraceError(ValueError):
    """A file that cannot be read as a torch.profiler trace of a GPU run."""


@dataclass(frozen=True)
class StepTime:
    """One step of an attention site: its kernels and their GPU time per call (median)."""

    step: str
    kernels: tuple[str, ...]
    gpu_us: float
    forecast: Range | None


@dataclass(frozen=True)
class Site:
    """Every call of one attention at one shape: `kind` is "naive" or an "sdpa-..." backend.

    `shape` has batch_size 1 and num_heads the product of the leading dims (a 3-D bmm knows
    only batch times heads)."""

    kind: str
    shape: Shape
    calls: int
    gpu_us: float  # the median over calls of the call's kernel time
    forecast: Range | None
    steps: tuple[StepTime, ...]


@dataclass(frozen=True)
class LaunchPicture:
    """How the CPU fed the GPU over the whole trace."""

    median_delay_us: float  # launch call's start -> its kernel's start, median over kernels
    gpu_busy_share: float  # union of GPU work / first launch to last work's end

    @property
    def verdict(self) -> str:
        """ "cpu-bound" when the GPU was busy under half the span (it waited on launches),
        else "gpu-bound"."""
        return "cpu-bound" if self.gpu_busy_share < CPU_BOUND_SHARE else "gpu-bound"


@dataclass(frozen=True)
class TraceReading:
    """What one trace says about attention, forecast for `gpu` (None: no forecast)."""

    device_name: str | None  # as the trace records it (deviceProperties)
    gpu: SpecSheet | None
    sites: tuple[Site, ...]
    launch: LaunchPicture

    def to_json(self) -> dict:
        return {
            "gpu": self.gpu.slug if self.gpu else None,
            "attention": [_site_json(s) for s in self.sites],
            "launch": {
                "median_delay_us": self.launch.median_delay_us,
                "gpu_busy_share": self.launch.gpu_busy_share,
                "verdict": self.launch.verdict,
            },
        }


def _range_json(r: Range | None) -> dict | None:
    return None if r is None else {"floor_us": r.floor_us, "low_us": r.low_us, "high_us": r.high_us}


def _site_json(s: Site) -> dict:
    shape = {
        "batch_heads": s.shape.num_heads,
        "seq_len": s.shape.seq_len,
        "kv_len": s.shape.keys,
        "head_dim": s.shape.head_dim,
        "dtype": s.shape.dtype,
    }
    steps = [
        {
            "step": t.step,
            "kernels": list(t.kernels),
            "gpu_us": t.gpu_us,
            "forecast": _range_json(t.forecast),
        }
        for t in s.steps
    ]
    return {
        "kind": s.kind,
        "shape": shape,
        "calls": s.calls,
        "gpu_us": s.gpu_us,
        "forecast": _range_json(s.forecast),
        "steps": steps,
    }


def load_chrome(path: Path) -> dict:
    """The JSON object of a trace file, gzipped or not.

    Raises:
        TraceError: The file is missing, unreadable, a damaged gzip, not JSON, or not a
            torch.profiler trace.
    """
    hint = "give a trace that torch.profiler exported (.json or .json.gz)"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read {path} ({exc.strerror or exc}); {hint}") from None
    if raw.startswith(_GZIP_MAGIC):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            raise TraceError(f"{path} is a truncated or damaged gzip file; {hint}") from None
    elif path.suffix == ".gz":
        raise TraceError(f"{path} is not a gzip file, though its name ends in .gz; {hint}")
    try:
        chrome = json.loads(raw)
    except ValueError:  # not UTF-8, or not JSON
        raise TraceError(f"{path} is not JSON; {hint}") from None
    if not isinstance(chrome, dict) or not isinstance(chrome.get("traceEvents"), list):
        raise TraceError(
            f"{path} is not a torch.profiler trace (it has no traceEvents list); {hint}"
        )
    return chrome


def device_name(chrome: Mapping) -> str | None:
    """The first GPU's name as the trace records it ("NVIDIA H100 80GB HBM3"), or None."""
    props = chrome.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], Mapping):
        name = props[0].get("name")
        return str(name) if name else None
    return None


def read_trace(chrome: Mapping, gpu: SpecSheet | None = None) -> TraceReading:
    """Every attention in a Chrome trace that torch.profiler exported from a GPU run.

    Args:
        chrome: The trace as parsed JSON.
        gpu: The GPU to forecast for; None: the trace's own GPU where a data sheet names it,
            else no forecast.

    Raises:
        TraceError: No `traceEvents` list, or no GPU work launched by a recorded call.
    """
    name = device_name(chrome)
    if gpu is None and name is not None:
        gpu = spec_sheet_for(name)
    work, launches, calls = _calls(chrome)
    return TraceReading(name, gpu, _sites(calls, work, gpu), _launch_picture(launches, work))


def call_timeline(chrome: Mapping, site: Site) -> Trace:
    """One call of `site` (read_trace's) as a timeline draws it: its ops on their CPU thread
    under a range named after each step, the launches inside them, and the GPU work they
    launched, linked by their flows. The call is the one whose GPU time is the median."""
    work, _, calls = _calls(chrome)
    runs = [c for c in calls if (c.kind, c.shape) == (site.kind, site.shape)]

    def gpu_us(call: _Call) -> float:
        return sum(w["dur"] for _, ops in call.steps for w in _work_of(ops, work))

    call = sorted(runs, key=gpu_us)[len(runs) // 2]
    events: list[Mapping] = []
    for step, ops in call.steps:
        first, last = ops[0].event, ops[-1].event
        events.append({
            "ph": "X", "cat": "user_annotation", "name": step, "pid": first.get("pid"),
            "tid": first.get("tid"), "ts": first["ts"], "dur": last["ts"] + last["dur"] - first["ts"],
        })  # fmt: skip
        events += [e for op in ops for e in (op.event, *op.inside)]
        events += _work_of(ops, work)
    return Trace.from_chrome({"traceEvents": events})


@dataclass(frozen=True)
class Recorded:
    """An attention in a trace others recorded, as a page shows it: what the trace says,
    the site of one kind that took the most GPU time, one of its calls as a timeline, and
    what the trace's metadata says of the run (None where it says nothing)."""

    reading: TraceReading
    site: Site
    timeline: Trace
    model: str | None  # the model that ran, as its metadata names it
    torch: str | None  # torch's version


@dataclass(frozen=True)
class CitedTrace:
    """A trace others recorded, as a page names it: its file, the digest of its bytes (so
    that a build's cache of what was drawn from it follows the file, not only its name),
    and the kind of attention the page shows from it."""

    path: str
    sha256: str
    kind: str

    @property
    def recorded(self) -> Recorded:
        return recorded(Path(self.path), self.kind)


def cited_trace(path: Path, kind: str) -> CitedTrace:
    """The trace at `path` for a page: cheap (a digest), read only when drawn."""
    return CitedTrace(str(path), hashlib.sha256(path.read_bytes()).hexdigest(), kind)


@functools.cache
def recorded(path: Path, kind: str) -> Recorded:
    """The attention of `kind` ("naive", "sdpa-flash"...) in the trace at `path`.

    Raises:
        TraceError: As load_chrome and read_trace; or no attention of `kind` in it."""
    chrome = load_chrome(path)
    reading = read_trace(chrome)
    sites = [s for s in reading.sites if s.kind == kind]
    if not sites:
        raise TraceError(f"{path} holds no {kind} attention")
    site = max(sites, key=lambda s: s.calls * s.gpu_us)
    meta = chrome.get("metadata") if isinstance(chrome.get("metadata"), Mapping) else {}
    model = (meta.get("experiment") or {}).get("repo_id")
    torch = ((meta.get("system") or {}).get("torch_env_info") or {}).get("torch_version")
    return Recorded(reading, site, call_timeline(chrome, site), model, torch)


def _calls(chrome: Mapping) -> tuple[dict[object, list[Mapping]], list[Mapping], list[_Call]]:
    """The trace's GPU work by flow, the launches that put it there, and its attention calls."""
    events = chrome.get("traceEvents")
    if not isinstance(events, list):
        raise TraceError("it is not a torch.profiler trace: it has no traceEvents list")
    timed = [e for e in events if isinstance(e, Mapping) and e.get("ph") == "X" and _timed(e)]
    work: dict[object, list[Mapping]] = defaultdict(list)
    for e in timed:
        if KINDS.get(e.get("cat", "")) in GPU_WORK and _flow(e) is not None:
            work[_flow(e)].append(e)
    if not work:
        raise TraceError(
            "it has no GPU kernel events; profile a run on a GPU with ProfilerActivity.CUDA"
        )
    launches = [e for e in timed if KINDS.get(e.get("cat", "")) == "runtime" and _flow(e) in work]
    if not launches:
        raise TraceError("none of its kernels is linked to the call that launched it")
    calls: list[_Call] = []
    for tops in _top_ops(timed, launches).values():
        calls += _sdpa_calls(tops, work) + _naive_calls(tops)
    return work, launches, calls


def _timed(e: Mapping) -> bool:
    return isinstance(e.get("ts"), int | float) and isinstance(e.get("dur"), int | float)


def _flow(e: Mapping) -> object:
    args = e.get("args")
    return args.get("correlation") if isinstance(args, Mapping) else None


@dataclass(frozen=True)
class _Op:
    """A top-level op (no other op encloses it on its thread) and the events inside it."""

    event: Mapping
    inside: tuple[Mapping, ...]  # nested ops and launch calls, in time order

    @property
    def name(self) -> str:
        return str(self.event.get("name", ""))

    @property
    def inputs(self) -> tuple[TensorArg, ...]:
        args = self.event.get("args")
        return tensor_inputs(args) if isinstance(args, Mapping) else ()


def _top_ops(timed: Sequence[Mapping], launches: Sequence[Mapping]) -> dict[tuple, list[_Op]]:
    """Per thread, its top-level ops in time order, each with the ops and launches inside it."""
    by_thread: dict[tuple, list[Mapping]] = defaultdict(list)
    ops = (
        e
        for e in timed
        if e.get("cat") == "cpu_op" and not str(e.get("name")).startswith(STEP_PREFIX)
    )
    for e in [*ops, *launches]:
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    tops: dict[tuple, list[_Op]] = {}
    for thread, found in by_thread.items():
        found.sort(key=lambda e: (e["ts"], -e["dur"]))
        ops: list[tuple[Mapping, list[Mapping]]] = []
        for e in found:
            if ops and e["ts"] + e["dur"] <= ops[-1][0]["ts"] + ops[-1][0]["dur"] + _EPS:
                ops[-1][1].append(e)
            elif e.get("cat") == "cpu_op":
                ops.append((e, []))
        tops[thread] = [_Op(op, tuple(inside)) for op, inside in ops]
    return tops


@dataclass(frozen=True)
class _Call:
    """One call of an attention: its kind, shape and steps, each with the ops that ran it."""

    kind: str
    shape: Shape
    steps: tuple[tuple[str, tuple[_Op, ...]], ...]

    @property
    def start_us(self) -> float:
        return self.steps[0][1][0].event["ts"]


def _sdpa_calls(tops: Sequence[_Op], work: Mapping) -> list[_Call]:
    calls = []
    for op in tops:
        if op.name != SDPA_OP or len(op.inputs) < 2 or len(op.inputs[0].dims) < 2:
            continue
        q, k = op.inputs[:2]
        names = " ".join(w["name"] for w in _work_of([op], work)).lower()
        kind = next((kind for kind, marks in BACKENDS if any(m in names for m in marks)), SDPA_MATH)
        concrete = op.event["args"].get("Concrete Inputs") or []
        causal = len(concrete) > 5 and concrete[5] == "True"  # is_causal
        shape = _shape(q, k.dims[-2], causal, kv_heads=prod(k.dims[:-2]))
        if shape is not None:
            calls.append(_Call(kind, shape, ((SDPA_STEP, (op,)),)))
    return calls


def _naive_calls(tops: Sequence[_Op]) -> list[_Call]:
    """Every matmul -> [scale] -> [mask] -> softmax -> [dropout] -> matmul chain, in order."""
    calls = []
    i = 0
    while i < len(tops):
        found = _chain(tops, i)
        if found is None:
            i += 1
            continue
        call, i = found
        calls.append(call)
    return calls


def _chain(tops: Sequence[_Op], start: int):
    """The naive attention that starts at `tops[start]` and the index after it, or None."""
    first = tops[start]
    if first.name not in MATMUL_OPS or len(first.inputs) < 2:
        return None
    q, k = first.inputs[:2]
    if len(q.dims) < 2 or len(k.dims) < 2 or q.dims[-1] != k.dims[-2]:
        return None
    n, m = q.dims[-2], k.dims[-1]
    numel = prod(q.dims[:-1]) * m

    def is_scores(t: TensorArg) -> bool:
        return len(t.dims) >= 2 and t.dims[-2:] == (n, m) and t.numel == numel

    steps: dict[str, list[_Op]] = {SCORES: [first]}
    for i in range(start + 1, len(tops)):
        op, inputs = tops[i], tops[i].inputs
        done = list(steps)
        if is_bookkeeping(op.name) or (op.name in DROPOUT_OPS and done[-1] == SOFTMAX):
            continue
        if not inputs:
            return None
        if op.name in SCALE_OPS and done == [SCORES] and is_scores(inputs[0]):
            steps[SCALE] = [op]
        elif op.name in MASK_OPS and SOFTMAX not in done and any(map(is_scores, inputs)):
            steps.setdefault(MASK, []).append(op)  # a model may add two masks
        elif op.name in SOFTMAX_OPS and SOFTMAX not in done and is_scores(inputs[0]):
            steps[SOFTMAX] = [op]
        elif op.name in MATMUL_OPS and SOFTMAX in done and is_scores(inputs[0]):
            steps[WEIGHTED_SUM] = [op]
            shape = _shape(q, m, causal=False)
            ordered = tuple((s, tuple(steps[s])) for s in STEPS if s in steps)
            return None if shape is None else (_Call("naive", shape, ordered), i + 1)
        else:
            return None
    return None


def _shape(q: TensorArg, kv_len: int, causal: bool, kv_heads: int | None = None) -> Shape | None:
    """The attention problem of q (batch and heads folded into one), or None where the site's
    Shape cannot hold it (a dtype it does not model, such as float64)."""
    try:
        return Shape(1, prod(q.dims[:-2]), q.dims[-2], q.dims[-1], q.dtype, causal,
                     num_kv_heads=kv_heads, kv_len=kv_len)  # fmt: skip
    except ValueError:
        return None


def _work_of(ops: Sequence[_Op], work: Mapping) -> list[Mapping]:
    """The GPU work (kernels, memcpys, memsets) the launches inside `ops` put on the GPU."""
    return [
        w
        for op in ops
        for e in op.inside
        if e.get("cat") != "cpu_op"
        for w in work.get(_flow(e), ())
    ]


def _sites(calls: list[_Call], work: Mapping, gpu: SpecSheet | None) -> tuple[Site, ...]:
    """Calls grouped by kind and shape, in the order their first call appears."""
    groups: dict[tuple[str, Shape], list[_Call]] = defaultdict(list)
    for call in sorted(calls, key=lambda c: c.start_us):
        groups[(call.kind, call.shape)].append(call)
    sites = []
    for (kind, shape), runs in groups.items():
        total, by_step = _forecast(runs[0], gpu)
        steps = []
        for index, (step, _) in enumerate(runs[0].steps):
            done = [_work_of(run.steps[index][1], work) for run in runs]
            kernels = tuple(dict.fromkeys(w["name"] for found in done for w in found))
            gpu_us = float(median(sum(w["dur"] for w in found) for found in done))
            steps.append(StepTime(step, kernels, gpu_us, by_step.get(step)))
        per_call = [
            sum(w["dur"] for _, ops in run.steps for w in _work_of(ops, work)) for run in runs
        ]
        sites.append(Site(kind, shape, len(runs), float(median(per_call)), total, tuple(steps)))
    return tuple(sites)


def _forecast(call: _Call, gpu: SpecSheet | None) -> tuple[Range | None, dict[str, Range]]:
    """The forecast of a call and of each of its steps, where the model has one.

    A flash kernel is the model's FlashAttention forward; naive attention and SDPA's math
    backend are priced from the ops the call recorded, so the forecast models the code the
    trace ran. Other backends, and ops the model does not price, have no forecast."""
    if gpu is None:
        return None, {}
    if call.kind == "sdpa-flash":
        r = flash_range(gpu, call.shape)
        return r, {SDPA_STEP: r}
    if call.kind not in ("naive", SDPA_MATH):
        return None, {}
    # Each step's ops inside a range named after the step, as a labelled profile records them.
    ranges = [
        {"ph": "X", "name": step, "tid": op.event.get("tid"), "ts": op.event["ts"], "dur": op.event["dur"]}
        for step, ops in call.steps for op in ops
    ]  # fmt: skip
    recorded = [e for _, ops in call.steps for op in ops for e in (op.event, *op.inside)]
    labels = [step for step, _ in call.steps]
    try:
        ops = OpList("trace", call.shape, ops_from_chrome([*ranges, *recorded], labels))
        kernels = naive_kernels(gpu, call.shape, ops)
    except ValueError:  # an op the model does not price, or dims it cannot scale
        return None, {}
    by_step = {step: realistic(gpu, [k for k in kernels if k.label == step]) for step in labels}
    return realistic(gpu, kernels), by_step


def _launch_picture(launches: Sequence[Mapping], work: Mapping) -> LaunchPicture:
    delays = [w["ts"] - e["ts"] for e in launches for w in work[_flow(e)]]
    spans = sorted((w["ts"], w["ts"] + w["dur"]) for e in launches for w in work[_flow(e)])
    busy, end = 0.0, float("-inf")
    for lo, hi in spans:  # the union of the intervals: overlapping work counts once
        busy += max(hi - max(lo, end), 0.0)
        end = max(end, hi)
    span = end - min(e["ts"] for e in launches)
    return LaunchPicture(median(delays), busy / span if span > 0 else 1.0)


# --- a recorded attention's numbers as the site's facts ------------------------------------
GPU_TIME = "GPU time per call"
RECORDED_OVER_FORECAST = "recorded ÷ realistic forecast"
ALL_STEPS = "all steps"


@dataclass(frozen=True)
class StepFacts:
    """One step of a recorded attention (or ALL_STEPS), as facts: its GPU time per call
    (kernel clock, device `trace:MODEL`), the forecast's floor and realistic range for the
    trace's GPU, and the recorded time over that range; None where the model has none."""

    step: str
    kernels: tuple[str, ...]
    time: Fact
    floor: Fact | None
    realistic: Fact | None
    ratio: Fact | None


def trace_device(r: Recorded) -> str:
    """Who recorded the numbers: the trace, by the model it ran (never this build's device)."""
    return f"trace:{r.model or 'unnamed model'}"


def step_facts(r: Recorded) -> list[StepFacts]:
    """The site's steps, then ALL_STEPS when there are several."""
    rows = [(t.step, t.kernels, t.gpu_us, t.forecast) for t in r.site.steps]
    if len(rows) > 1:
        rows.append((ALL_STEPS, (), r.site.gpu_us, r.site.forecast))
    out, traced = [], On(trace_device(r), r.site.shape)
    for step, kernels, gpu_us, forecast in rows:
        time = traced(GPU_TIME, step, KERNEL, gpu_us, "µs")
        floor = realistic = ratio = None
        if forecast is not None and r.reading.gpu is not None:
            sheet = On.spec(r.reading.gpu, r.site.shape)
            floor = sheet(GPU_TIME, step, SPEC, forecast.floor_us, "µs", detail="floor")
            if forecast.low_us and forecast.high_us:
                q = sheet.quantity(GPU_TIME, step, SPEC, "realistic range")
                realistic = Fact(q, None, "µs", forecast.low_us, forecast.high_us)
                q = traced.quantity(RECORDED_OVER_FORECAST, step, KERNEL, sheet.device_id)
                ratio = Fact(q, None, "×", gpu_us / forecast.high_us, gpu_us / forecast.low_us)
        out.append(StepFacts(step, kernels, time, floor, realistic, ratio))
    return out


def slowest_step(r: Recorded) -> StepFacts:
    """The step that took the most GPU time per call."""
    return max((f for f in step_facts(r) if f.step != ALL_STEPS), key=lambda f: f.time.value)


def busy_fact(r: Recorded) -> Fact:
    """The share of the run (first launch to last kernel's end) the GPU was busy."""
    busy = r.reading.launch.gpu_busy_share
    return On(trace_device(r))("GPU busy share", "whole run", KERNEL, busy, "%")
