# The steps of naive attention on this machine's roofline. The roof is the measured ceilings
# (`machine_ceilings`); a step's place under it is its cost-model intensity and the FLOP/s it
# reached in its *unprofiled* time (each step timed alone, `forward_times`); its verdict is
# findings/bound.py's, with the step's fixed cost read on the same clock: on a GPU the idle
# time before its kernels (naive_steps' trace, GPU clock), on a CPU its top-level op calls ×
# the per-call floor of `op_size_sweep` (the chapter-01 fact). Facts and flags only.
from __future__ import annotations

import math
from dataclasses import dataclass

from attention_docs.analytic.cost import StepCost, itemsize
from attention_docs.analytic.roofline import FIXED_SHARE, OVERHEAD_FACTOR, Roof
from attention_docs.findings.bound import Bound, bound
from attention_docs.findings.facts import (
    COUNTED,
    MODEL,
    MODEL_DEVICE,
    SPEC,
    UNPROFILED,
    Fact,
    Quantity,
    one_device,
)
from attention_docs.findings.forward import ceiling
from attention_docs.findings.primer import size_sweep
from attention_docs.findings.steps import FLOP_RATE, Step, model_fact, steps
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.steps import MATMULS
from attention_docs.records.trace import Trace

# The verdict's two thresholds (analytic/roofline.py), as the page states them.
OVERHEAD = Fact(
    Quantity(
        "threshold", "time ÷ roofline floor for a ceiling to explain a step", MODEL_DEVICE, MODEL
    ),
    OVERHEAD_FACTOR,
    "×",
)
FIXED = Fact(
    Quantity("threshold", "fixed cost's share of an overhead-bound step", MODEL_DEVICE, MODEL),
    FIXED_SHARE,
    "%",
)


def overlap(a: Fact, b: Fact) -> bool:
    """Two facts' ranges overlap: their difference is inside the noise."""

    def ends(f: Fact) -> tuple[float, float]:
        return (f.value if f.low is None else f.low, f.value if f.high is None else f.high)

    (a_low, a_high), (b_low, b_high) = ends(a), ends(b)
    return a_low <= b_high and b_low <= a_high


# Two steps "move the same bytes" when their minimum bytes differ by less than this share.
SAME_BYTES = 0.1


def ops_inside(trace: Trace, label: str, depth: int = 2) -> tuple[str, ...]:
    """The names of the ops inside the labelled range, `depth` levels down at most, in the
    order they first ran (each name once)."""
    top = next(s for s in trace.spans if s.kind == "range" and s.name == label)
    found = [
        s
        for s in trace.spans
        if s.kind == "op"
        and s.lane == top.lane
        and top.depth < s.depth <= top.depth + depth
        and top.start_us <= s.start_us
        and s.end_us <= top.end_us + 1e-3
    ]
    return tuple(dict.fromkeys(s.name for s in sorted(found, key=lambda s: s.start_us)))


def same_bytes(
    placed: tuple[Placed, ...], trace: Trace | None, device: str, shape
) -> tuple[SameBytes, ...]:
    """Memory-side steps slower in every round than the fastest one per byte among them
    that moves about the same minimum bytes."""
    timed = [
        p for p in placed if p.bound.roof == "memory" and p.bound.measured and p.step.cost.bytes
    ]
    if len(timed) < 2:
        return ()
    like = min(timed, key=lambda p: p.bound.measured.time_us / p.step.cost.bytes)
    ref, out = like.bound.measured, []
    for p in timed:
        t, b = p.bound.measured, p.step.cost.bytes
        if p is like or abs(b - like.step.cost.bytes) > SAME_BYTES * like.step.cost.bytes:
            continue
        if t.low_us <= ref.high_us:
            continue  # not slower in every round
        q = Quantity(
            "time ÷ the time of a step moving the same bytes",
            f"{p.step.label} ÷ {like.step.label}",
            device,
            UNPROFILED,
            shape,
        )
        ratio = Fact(
            q, t.time_us / ref.time_us, "×", t.low_us / ref.high_us, t.high_us / ref.low_us
        )
        ops = ops_inside(trace, p.step.label) if trace is not None else ()
        out.append(SameBytes(p.step.label, like.step.label, like.step.bytes, ratio, ops))
    return tuple(out)


def op_calls(trace: Trace, label: str) -> int:
    """Top-level op calls inside the labelled range (each pays the per-call floor)."""
    top = next(s for s in trace.spans if s.kind == "range" and s.name == label)
    return sum(
        1
        for s in trace.spans
        if s.kind == "op"
        and s.lane == top.lane
        and s.depth == top.depth + 1
        and top.start_us <= s.start_us
        and s.end_us <= top.end_us + 1e-3
    )


@dataclass(frozen=True)
class Placed:
    step: Step
    bound: Bound
    floor: Fact  # max(FLOPs ÷ peak, bytes ÷ bandwidth) on the measured ceilings
    compute: Fact  # FLOPs ÷ peak
    memory: Fact  # bytes ÷ bandwidth
    ratio: Fact | None  # unprofiled time ÷ floor, range over the rounds
    attained: Fact | None  # achieved ÷ attainable rate at the step's intensity
    fixed: Fact | None  # fixed cost per forward on the step's clock
    beats_roof: bool  # faster than its floor in every round: the roof was not this step's


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


def roofline(
    naive: Measurement, ceilings: Measurement, times: Measurement, sweep: Measurement | None
) -> Roofline:
    """Every step of `naive` (naive_steps) under the roof of `ceilings`, at its unprofiled
    time from `times`; `sweep` (op_size_sweep) gives a CPU's per-call floor."""
    one_device(
        "a roofline (its steps, ceilings and times)",
        naive.device_id,
        ceilings.device_id,
        times.device_id,
    )
    dtype = str(naive.params["dtype"])
    key = f"peak_flops_{dtype}"
    if key not in ceilings.facts or "bandwidth_bs" not in ceilings.facts:
        raise ValueError(
            f"machine_ceilings on {ceilings.device_id} has no {key} or bandwidth_bs; "
            f"measure it with --dtypes {dtype}"
        )
    peak, bandwidth = ceiling(ceilings, key), ceiling(ceilings, "bandwidth_bs")
    roof = Roof(peak.value, bandwidth.value)
    device = naive.device_id
    found = steps(naive, times)
    shape = found.shape
    gaps = naive.facts.get("gpu_steps")
    floor_call = None
    if not gaps and sweep is not None:
        floor_call = size_sweep(sweep).floor
    out = []
    for s in found.steps:
        timing = fwd.step_timing(times, s.label, shape) if s.alone else None
        fixed = None
        if gaps:
            fixed = gaps[s.label]["gap_us"]
        elif floor_call is not None and naive.timeline is not None:
            fixed = op_calls(naive.timeline, s.label) * floor_call.value
        b = bound(StepCost(s.label, s.cost.flops, s.cost.bytes), roof, timing, fixed)

        def q(metric: str, clock: str = MODEL, label: str = s.label) -> Quantity:
            return Quantity(metric, label, device, clock, shape)

        compute, memory = s.cost.flops / roof.peak_flops * 1e6, s.cost.bytes / roof.bandwidth * 1e6
        ratio = attained = None
        if timing is not None and b.floor_us:
            lo, hi = timing.low_us / b.floor_us, timing.high_us / b.floor_us
            ratio = Fact(q("time ÷ roofline floor", UNPROFILED), b.ratio, "×", lo, hi)
            attained = Fact(
                q("share of the attainable rate", UNPROFILED), 1 / b.ratio, "%", 1 / hi, 1 / lo
            )
        out.append(
            Placed(
                s,
                b,
                Fact(q("roofline floor"), b.floor_us, "µs"),
                Fact(q("FLOPs ÷ peak"), compute, "µs"),
                Fact(q("bytes ÷ bandwidth"), memory, "µs"),
                ratio,
                attained,
                None if fixed is None else Fact(q("fixed cost per forward"), fixed, "µs"),
                timing is not None and timing.high_us < b.floor_us,
            )
        )
    copies = [c for c in ceiling_rows(ceilings) if c.kind == "copy" and c.rate]
    small = copies[0].rate if len(copies) > 1 else None
    head_dim = int(naive.params["head_dim"])
    cap = 2 * head_dim / itemsize(dtype)
    return Roofline(
        roof,
        peak,
        bandwidth,
        Fact(Quantity("ridge", f"{dtype} matmul", device, UNPROFILED), roof.ridge, "FLOP/B"),
        small,
        small is not None and overlap(small, bandwidth),
        model_fact("matmul intensity limit", "2 · head_dim / itemsize", shape, cap, "FLOP/B"),
        cap >= roof.ridge,
        tuple(out),
        "gaps" if gaps else "floor",
        floor_call,
        same_bytes(tuple(out), naive.timeline, device, shape),
    )


@dataclass(frozen=True)
class CeilingRow:
    kind: str  # "matmul" or "copy"
    dtype: str
    size: int  # a matmul's side n, a copy's buffer bytes
    status: str
    rate: Fact | None  # FLOP/s or bytes/s over the rounds; the device's ceiling fact if it is one
    spec: Fact | None  # the data sheet's figure (known GPUs)
    buffer: Fact | None  # a copy's buffer size (a parameter)


def ceiling_rows(m: Measurement) -> tuple[CeilingRow, ...]:
    """Every point of `machine_ceilings`, smallest first within its kind, as facts: the best
    matmul per dtype and the largest copy are the device's ceilings (one fact each)."""
    records = m.tables["ceilings"].records()
    out = []
    for r in records:
        matmul = r["kind"] == "matmul"
        unit = "FLOP/s" if matmul else "B/s"
        subject = f"matmul {r['dtype']} n={r['size']}" if matmul else f"copy of {r['size']} B"
        key = f"peak_flops_{r['dtype']}" if matmul else "bandwidth_bs"
        achieved = r["flop_per_s"] if matmul else r["bytes_per_s"]
        rate = None
        if achieved is not None and achieved == m.facts.get(key):  # this row is the ceiling
            rate = ceiling(m, key)
        elif r["time_us"] is not None:
            work = r["flops"] if matmul else r["bytes"]
            q = Quantity(
                FLOP_RATE if matmul else "copy bandwidth", subject, m.device_id, UNPROFILED
            )
            rate = Fact(
                q,
                work / r["time_us"] * 1e6,
                unit,
                work / r["high_us"] * 1e6,
                work / r["low_us"] * 1e6,
            )
        spec = None
        if r["spec_per_s"]:
            spec = Fact(
                Quantity("data-sheet rate", subject, m.device_id, SPEC), r["spec_per_s"], unit
            )
        buffer = (
            None
            if matmul
            else Fact(Quantity("buffer size", subject, MODEL_DEVICE, MODEL), r["size"], "B")
        )
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
    ours = sum(s.cost.flops for s in mm)
    theirs = sum(counted.values())
    return ProfilerFlops(
        Fact(
            Quantity(
                "FLOPs per forward",
                "every op torch.profiler counts",
                m.device_id,
                COUNTED,
                found.shape,
                "with_flops",
            ),
            theirs,
            "FLOP",
        ),
        model_fact("FLOPs", " + ".join(s.label for s in mm), found.shape, ours, "FLOP"),
        tuple(sorted(counted)),
        math.isclose(ours, theirs, rel_tol=1e-6),
    )


def right_of_ridge(r: Roofline, p: Placed) -> bool:
    """Whether step `p` sits at or right of the ridge: intense enough for compute to bound it."""
    return p.step.intensity.value >= r.ridge.value
