# The steps of naive attention on this machine's roofline (`machine_ceilings`): each step at
# its cost-model intensity and the FLOP/s of its unprofiled time, judged by findings/bound.py
# with its fixed cost on the same clock (on a GPU the idle time before its kernels, on a CPU
# its op calls × `op_size_sweep`'s per-call floor). A step's bandwidth is the copy matching
# its working set (`held_to`): against a copy past every cache, a step whose bytes sit in a
# cache would look memory-bound. The ridge stays the large copy's.
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from attention_docs.analytic.cost import itemsize
from attention_docs.analytic.roofline import FIXED_SHARE, OVERHEAD_FACTOR, Roof
from attention_docs.findings.bound import Bound, bound
from attention_docs.findings.compare import compare
from attention_docs.findings.facts import (
    COUNTED,
    MODEL,
    SPEC,
    UNPROFILED,
    Fact,
    On,
    Quantity,
    model_fact,
    one_device,
)
from attention_docs.findings.forward import ceiling
from attention_docs.findings.primer import size_sweep
from attention_docs.findings.steps import FLOP_RATE, Step, steps
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.shape import Shape
from attention_docs.records.steps import MATMULS
from attention_docs.records.timing import Timing
from attention_docs.records.trace import Trace


def _threshold(what: str, value: float, unit: str) -> Fact:
    return model_fact("threshold", what, None, value, unit)


# The verdict's two thresholds (analytic/roofline.py), as the page states them.
OVERHEAD = _threshold("time ÷ roofline floor for a ceiling to explain a step", OVERHEAD_FACTOR, "×")
FIXED = _threshold("fixed cost's share of an overhead-bound step", FIXED_SHARE, "%")
# Two steps "move the same bytes" when their minimum bytes differ by less than this share.
SAME_BYTES = 0.1
SAME_BYTES_RATIO = "time ÷ the time of a step moving the same bytes"


@dataclass(frozen=True)
class Placed:
    step: Step
    bound: Bound
    compute: Fact  # FLOPs ÷ peak
    memory: Fact  # bytes ÷ bandwidth
    bandwidth: Fact  # the copy bandwidth the step is held to (`held_to`)
    ratio: Fact | None  # unprofiled time ÷ floor, range over the rounds
    attained: Fact | None  # achieved ÷ attainable rate at the step's intensity
    fixed: Fact | None  # fixed cost per forward on the step's clock
    beats_roof: bool  # faster than its floor in every round: the roof was not this step's


@dataclass(frozen=True)
class SameBytes:
    """A memory-side step slower, in every round, than another that moves the same minimum
    bytes (within `SAME_BYTES`): the bandwidth the faster one reached does not hold it, so
    its "memory-bound" says only which roof is nearer. `ops` are the ATen ops its profile
    records inside its range (counted, not timed): what the code makes of the step."""

    step: str
    like: str  # the fastest memory-side step of about the same bytes
    bytes: Fact  # the faster step's minimum bytes
    ratio: Fact  # the step's time ÷ the faster one's, range from both intervals
    ops: tuple[str, ...]


@dataclass(frozen=True)
class Roofline:
    roof: Roof
    peak: Fact
    bandwidth: Fact
    ridge: Fact
    small_copy: Fact | None  # a copy small enough for a cache, beside the large one
    small_copy_tie: bool
    cap: Fact  # a matmul's intensity as N grows: 2 · head_dim / itemsize
    cap_above_ridge: bool
    placed: tuple[Placed, ...]
    fixed_from: str  # "gaps" (GPU trace) or "floor" (op calls × the per-call floor)
    floor_call: Fact | None  # the per-call floor (CPU)
    same_bytes: tuple[SameBytes, ...] = ()  # memory-side steps slower than one moving as much


def _inside(trace: Trace, label: str):
    """The labelled range and the op spans nested in it on its lane."""
    top = next(s for s in trace.spans if s.kind == "range" and s.name == label)
    return top, [
        s
        for s in trace.spans
        if s.kind == "op"
        and s.lane == top.lane
        and s.depth > top.depth
        and top.start_us <= s.start_us
        and s.end_us <= top.end_us + 1e-3
    ]


def ops_inside(trace: Trace, label: str, depth: int = 2) -> tuple[str, ...]:
    """The names of the ops inside the labelled range, `depth` levels down at most, in the
    order they first ran (each name once)."""
    top, found = _inside(trace, label)
    found = sorted((s for s in found if s.depth <= top.depth + depth), key=lambda s: s.start_us)
    return tuple(dict.fromkeys(s.name for s in found))


def op_calls(trace: Trace, label: str) -> int:
    """Top-level op calls inside the labelled range (each pays the per-call floor)."""
    top, found = _inside(trace, label)
    return sum(s.depth == top.depth + 1 for s in found)


def same_bytes(placed: tuple[Placed, ...], trace: Trace | None, device_id: str, shape):
    """Memory-side steps slower in every round than the fastest one per byte among them
    that moves about the same minimum bytes."""
    timed = [
        p for p in placed if p.bound.roof == "memory" and p.bound.measured and p.step.cost.bytes
    ]
    if len(timed) < 2:
        return ()
    like = min(timed, key=lambda p: p.bound.measured.time_us / p.step.cost.bytes)
    ref, near = like.bound.measured, like.step.cost.bytes

    def slower(p: Placed) -> SameBytes:
        subject, k = f"{p.step.label} ÷ {like.step.label}", compare(ref, p.bound.measured)
        ratio = On(device_id, shape)(SAME_BYTES_RATIO, subject, UNPROFILED, k)
        ops = ops_inside(trace, p.step.label) if trace is not None else ()
        return SameBytes(p.step.label, like.step.label, like.step.bytes, ratio, ops)

    return tuple(
        slower(p)
        for p in timed
        if abs(p.step.cost.bytes - near) <= SAME_BYTES * near
        and p.bound.measured.low_us > ref.high_us  # slower in every round
    )


def held_to(copies: tuple[CeilingRow, ...], nbytes: float, largest: Fact) -> Fact:
    """The bandwidth a step moving `nbytes` is held to: the smallest measured copy that moves
    at least as many bytes, within `SAME_BYTES` (its working set no smaller than the step's,
    so no likelier to sit in a cache), else `largest` (the large copy's ceiling)."""
    fits = sorted((c for c in copies if c.kind == "copy" and c.rate), key=lambda c: c.size)
    # A copy of `size` bytes reads them and writes them: it moves twice its buffer.
    return next((c.rate for c in fits if 2 * c.size >= (1 - SAME_BYTES) * nbytes), largest)


def _place(
    s: Step,
    peak: float,
    bandwidth: Fact,
    timing: Timing | None,
    fixed: float | None,
    *,
    device_id: str,
    shape: Shape,
) -> Placed:
    roof = Roof(peak, bandwidth.value)
    b = bound(s.cost, roof, timing, fixed)

    def f(metric: str, value: float, unit: str, *ends: float, clock: str = MODEL) -> Fact:
        return Fact(Quantity(metric, s.label, device_id, clock, shape), value, unit, *ends)

    ratio = attained = None
    if timing is not None and b.floor_us:
        lo, hi = timing.low_us / b.floor_us, timing.high_us / b.floor_us
        ratio = f("time ÷ roofline floor", b.ratio, "×", lo, hi, clock=UNPROFILED)
        attained = f(
            "share of the attainable rate", 1 / b.ratio, "%", 1 / hi, 1 / lo, clock=UNPROFILED
        )
    return Placed(
        s,
        b,
        f("FLOPs ÷ peak", s.cost.flops / roof.peak_flops * 1e6, "µs"),
        f("bytes ÷ bandwidth", s.cost.bytes / roof.bandwidth * 1e6, "µs"),
        bandwidth,
        ratio,
        attained,
        None if fixed is None else f("fixed cost per forward", fixed, "µs"),
        timing is not None and timing.high_us < b.floor_us,
    )


def roofline(
    naive: Measurement, ceilings: Measurement, times: Measurement, sweep: Measurement | None
) -> Roofline:
    """Every step of `naive` (naive_steps) under the roof of `ceilings`, at its unprofiled
    time from `times`; `sweep` (op_size_sweep) gives a CPU's per-call floor."""
    what = "a roofline (its steps, ceilings and times)"
    device_id = one_device(what, naive.device_id, ceilings.device_id, times.device_id)
    dtype = str(naive.params["dtype"])
    key = f"peak_flops_{dtype}"
    if key not in ceilings.facts or "bandwidth_bs" not in ceilings.facts:
        raise ValueError(
            f"machine_ceilings on {ceilings.device_id} has no {key} or bandwidth_bs; "
            f"measure it with --dtypes {dtype}"
        )
    peak, bandwidth = ceiling(ceilings, key), ceiling(ceilings, "bandwidth_bs")
    roof = Roof(peak.value, bandwidth.value)
    found = steps(naive, times)
    shape = found.shape
    gaps = naive.facts.get("gpu_steps")
    floor_call = size_sweep(sweep).floor if not gaps and sweep is not None else None
    rows = ceiling_rows(ceilings)
    placed = []
    for s in found.steps:
        fixed = None
        if gaps:
            fixed = gaps[s.label]["gap_us"]
        elif floor_call is not None and naive.timeline is not None:
            fixed = op_calls(naive.timeline, s.label) * floor_call.value
        timing = fwd.step_timing(times, s.label, shape) if s.alone else None
        held = held_to(rows, s.cost.bytes, bandwidth)
        placed.append(_place(s, peak.value, held, timing, fixed, device_id=device_id, shape=shape))
    copies = [c for c in rows if c.kind == "copy" and c.rate]
    small = copies[0].rate if len(copies) > 1 else None
    cap = 2 * int(naive.params["head_dim"]) / itemsize(dtype)
    return Roofline(
        roof,
        peak,
        bandwidth,
        On(device_id)("ridge", f"{dtype} matmul", UNPROFILED, roof.ridge, "FLOP/B"),
        small,
        small is not None and _overlap(small, bandwidth),
        model_fact("matmul intensity limit", "2 · head_dim / itemsize", shape, cap, "FLOP/B"),
        cap >= roof.ridge,
        tuple(placed),
        "gaps" if gaps else "floor",
        floor_call,
        same_bytes(tuple(placed), naive.timeline, device_id, shape),
    )


def _overlap(a: Fact, b: Fact) -> bool:
    """Two facts' ranges overlap: their difference is inside the noise."""
    (a_low, a_high), (b_low, b_high) = (
        (f.value if f.low is None else f.low, f.value if f.high is None else f.high) for f in (a, b)
    )
    return a_low <= b_high and b_low <= a_high


@dataclass(frozen=True)
class CeilingRow:
    kind: str  # "matmul" or "copy"
    dtype: str
    size: int  # a matmul's side n, a copy's buffer bytes
    status: str
    rate: Fact | None  # FLOP/s or bytes/s over the rounds; the device's ceiling fact if it is one
    spec: Fact | None  # the data sheet's figure (known GPUs)
    buffer: Fact | None  # a copy's buffer size (a parameter)


# A row's kind: its rate's metric and unit, the column of its work and of its achieved rate.
_KINDS = {
    "matmul": (FLOP_RATE, "FLOP/s", "flops", "flop_per_s"),
    "copy": ("copy bandwidth", "B/s", "bytes", "bytes_per_s"),
}


def ceiling_rows(m: Measurement) -> tuple[CeilingRow, ...]:
    """Every point of `machine_ceilings`, smallest first within its kind, as facts: the best
    matmul per dtype and the largest copy are the device's ceilings (one fact each)."""
    out = []
    for r in m.tables["ceilings"].records():
        metric, unit, work, achieved = _KINDS[r["kind"]]
        matmul = r["kind"] == "matmul"
        subject = f"matmul {r['dtype']} n={r['size']}" if matmul else f"copy of {r['size']} B"
        key = f"peak_flops_{r['dtype']}" if matmul else "bandwidth_bs"
        rate = spec = buffer = None
        if r[achieved] is not None and r[achieved] == m.facts.get(key):  # the device's ceiling
            rate = ceiling(m, key)
        elif r["time_us"] is not None:
            per_s = [r[work] / r[c] * 1e6 for c in ("time_us", "high_us", "low_us")]
            rate = Fact(
                Quantity(metric, subject, m.device_id, UNPROFILED), per_s[0], unit, *per_s[1:]
            )
        if r["spec_per_s"]:
            spec = On(m.device_id)("data-sheet rate", subject, SPEC, r["spec_per_s"], unit)
        if not matmul:
            buffer = model_fact("buffer size", subject, None, r["size"], "B")
        out.append(CeilingRow(r["kind"], r["dtype"], r["size"], r["status"], rate, spec, buffer))
    return tuple(out)


@dataclass(frozen=True)
class ProfilerFlops:
    counted: Fact  # torch.profiler's with_flops count per forward, every op it has a formula for
    model: Fact  # the cost model's two matmuls
    names: tuple[str, ...]  # the ops the profiler counted
    agree: bool


def profiler_flops(m: Measurement) -> ProfilerFlops | None:
    """torch.profiler's own FLOP count against the cost model's; None when it counted none."""
    counted = m.facts.get("profiler_flops") or {o.name: o.flops for o in m.ops if o.flops}
    if not counted:
        return None
    found = steps(m)
    mm = [s for s in found.steps if s.label in MATMULS]
    ours, theirs = sum(s.cost.flops for s in mm), sum(counted.values())
    metric, subject = "FLOPs per forward", "every op torch.profiler counts"
    return ProfilerFlops(
        On(m.device_id, found.shape)(metric, subject, COUNTED, theirs, "FLOP", detail="with_flops"),
        model_fact("FLOPs", " + ".join(s.label for s in mm), found.shape, ours, "FLOP"),
        tuple(sorted(counted)),
        math.isclose(ours, theirs, rel_tol=1e-6),
    )


def most_inefficient(placed: Sequence[Placed]) -> Placed | None:
    """The inefficient step furthest from its floor, if any."""
    slow = [p for p in placed if p.bound.verdict == "inefficient" and p.ratio]
    return max(slow, key=lambda p: p.ratio.value, default=None)


def right_of_ridge(r: Roofline, p: Placed) -> bool:
    """Whether step `p` sits at or right of the ridge of its own roof (the peak over the
    bandwidth it is held to): intense enough for compute to bound it."""
    return p.step.intensity.value >= r.peak.value / p.bandwidth.value
