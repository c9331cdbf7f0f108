# Verdicts about the labelled steps of a profiled forward. From the profile (structure): each
# step's time and share over the profiled forwards, the largest share, the matmuls' share of
# the profiled time against their share of the FLOPs, the profiled sum against the unprofiled
# forward. From `forward_times` (speed): each step's unprofiled time and the FLOP/s and bytes/s
# it reached. From the shape (the cost model): FLOPs, minimum bytes, intensity. And the same
# steps forecast on a GPU from its data sheet, checked against that GPU's `forward_times`
# entry when the store holds one. Facts and flags only: the renderers say them.
from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, replace

from attention_docs.analytic import gpu as gpus
from attention_docs.analytic.cost import StepCost, itemsize
from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import (
    COUNTED,
    PROFILED,
    UNPROFILED,
    Fact,
    On,
    model_fact,
    per_second,
)
from attention_docs.findings.forecast import Check, check, forecast, measured_on
from attention_docs.findings.forward import FORWARD_TIME, STEP_TIME, forward_time, step_time
from attention_docs.findings.share import Largest, Share, joint_share, largest, shares
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape
from attention_docs.records.steps import MATMULS, STEPS
from attention_docs.records.timing import Timing

FLOP_RATE, BYTE_RATE = "achieved FLOP/s", "achieved bandwidth"


def shape_of(m: Measurement) -> Shape | None:
    """The attention shape a measurement ran at, or None when its parameters name none."""
    try:
        return Shape.of(m.params)
    except (TypeError, ValueError):
        return None


def _rates(
    label: str, flops: float, nbytes: float, times: Measurement, shape: Shape
) -> tuple[Fact, Fact]:
    """FLOP/s and bytes/s over `label`'s unprofiled time in `times` (forward_times); each
    range from the rounds' extremes."""
    t, on = fwd.step_timing(times, label, shape), On(times.device_id, shape)
    return (
        per_second(on.quantity(FLOP_RATE, label, UNPROFILED), flops, t, "FLOP/s"),
        per_second(on.quantity(BYTE_RATE, label, UNPROFILED), nbytes, t, "B/s"),
    )


@dataclass(frozen=True)
class Step:
    label: str
    cost: StepCost
    profiled: Fact  # per forward: the profiled forwards' lower quartile, their range
    share: Fact  # of the profiled steps' sum, forward by forward
    flops: Fact  # the cost model's
    bytes: Fact  # the cost model's minimum
    intensity: Fact | None  # None for a step that moves no bytes
    alone: Fact | None  # timed alone without the profiler (forward_times); None: not timed
    flop_rate: Fact | None  # FLOPs ÷ that time
    byte_rate: Fact | None

    @property
    def rate(self) -> Fact | None:
        """The rate the step's roof is about: FLOP/s for a matmul, bytes/s otherwise."""
        return self.flop_rate if self.label in MATMULS else self.byte_rate


@dataclass(frozen=True)
class Steps:
    shape: Shape | None
    steps: tuple[Step, ...]
    forwards: int  # profiled forwards behind the ranges
    total: Timing  # the profiled steps' sum, forward by forward
    summed: Fact  # that sum as a fact
    largest: Largest
    matmul_flops: Fact | None  # the matmuls' share of the FLOPs (model)
    matmul_time: Fact | None  # and of the profiled time, forward by forward

    def step(self, label: str) -> Step:
        return next(s for s in self.steps if s.label == label)


def _samples(m: Measurement) -> dict[str, list[float]]:
    """Each step's profiled time in each profiled forward (the mean when not kept apart)."""
    table = m.tables.get("per_forward")
    if table is not None and table.rows:
        return {s.label: table.column(s.label) for s in m.steps}
    return {s.label: [s.time_us] for s in m.steps}


def steps(m: Measurement, times: Measurement | None = None) -> Steps:
    """The facts of every labelled step of `m`; unprofiled ones when `times` is given."""
    shape = shape_of(m)
    clock = "kernel time" if m.device_kind == "cuda" else ""
    detail = ("" if shape else m.experiment) or clock
    per = _samples(m)
    found = shares(per)
    forwards, on = len(next(iter(per.values()))), On(m.device_id, shape)

    def profiled(metric: str, label: str, value: Timing | Share) -> Fact:
        return on(metric, label, PROFILED, value, detail=detail)

    out = []
    for s in m.steps:
        alone = flop_rate = byte_rate = None
        if times is not None and shape is not None:
            with suppress(fwd.NotMeasuredError):  # not in forward_times' grid
                alone = step_time(times, s.label, shape)
        if alone is not None:
            flop_rate, byte_rate = _rates(s.label, s.flops, s.bytes, times, shape)
        t = Timing.from_rounds(per[s.label], "profiled forwards")
        cost = StepCost(s.label, s.flops, s.bytes)
        intensity = model_fact("arithmetic intensity", s.label, shape, cost.intensity, "FLOP/B")
        out.append(
            Step(
                s.label,
                cost,
                profiled("profiled step time per forward", s.label, t),
                profiled("share of the profiled steps", s.label, found[s.label]),
                model_fact("FLOPs", s.label, shape, s.flops, "FLOP"),
                model_fact("minimum bytes", s.label, shape, s.bytes, "B"),
                intensity if s.bytes else None,
                alone,
                flop_rate if s.flops else None,
                byte_rate if s.bytes else None,
            )
        )
    labels = [s.label for s in m.steps]
    total = Timing.from_rounds([sum(f) for f in zip(*(per[x] for x in labels), strict=True)], "sum")
    matmul_flops = matmul_time = None
    mm = [label for label in labels if label in MATMULS]
    if mm and len(mm) < len(labels):
        all_flops = sum(s.flops for s in m.steps)
        if all_flops:
            flops = sum(m.step(label).flops for label in mm) / all_flops
            matmul_flops = model_fact("share of the FLOPs", " + ".join(mm), shape, flops, "%")
        matmul_time = profiled("share of the profiled steps", " + ".join(mm), joint_share(per, mm))
    summed = profiled("profiled steps' sum per forward", " + ".join(labels), total)
    return Steps(
        shape, tuple(out), forwards, total, summed, largest(found), matmul_flops, matmul_time
    )


@dataclass(frozen=True)
class Profiled:
    """The profiled steps' sum beside the unprofiled forward of the same shape.

    The two are timed in separate processes (naive_steps, forward_times), and on a shared
    machine a process's times can move as a whole (docs/method.md, "Reproducible, and
    checked"): their difference is no measure of the profiler's cost, which chapter 01 takes
    within one process, and is never stated: only whether the two tie."""

    summed: Fact
    unprofiled: Fact
    versus: Comparison  # ratio = profiled sum ÷ unprofiled forward
    # Page faults per profiled forward on a CPU, where a step's time pays for them; None on a
    # GPU (kernel times do not) and where they were not counted.
    faults: Fact | None


def profiled_vs_unprofiled(m: Measurement, times: Measurement) -> Profiled | None:
    shape = shape_of(m)
    unprofiled = fwd.timing(times, fwd.NAIVE, shape) if shape else None
    if unprofiled is None:
        return None
    found, counted = steps(m), m.facts.get("page_faults_per_forward")
    if m.device_kind == "cuda":  # a kernel's time pays for no page fault
        counted = None
    faults = On(m.device_id, shape)("page faults per profiled forward", fwd.NAIVE, COUNTED, counted)
    unprofiled_fact = forward_time(times, fwd.NAIVE, shape)
    return Profiled(found.summed, unprofiled_fact, compare(unprofiled, found.total), faults)


@dataclass(frozen=True)
class ShapeShares:
    label: str  # "256×64" (seq_len×head_dim)
    shares: Mapping[str, Fact]  # per step
    largest: Largest
    matmuls: Fact  # the two matmuls' share together


def shares_by_shape(sweep: Measurement, point: Measurement) -> tuple[ShapeShares, ...]:
    """The shares sweep with `point` (naive_steps) in it at its own shape: one shape, one
    share. Rows of the sweep at that shape give way to it."""
    here = shape_of(point)
    rows: dict[tuple[int, int], dict[str, list[float]]] = {}
    table = sweep.tables["shares"]
    labels = [c for c in table.columns if c.startswith("attention.")]
    for r in table.records():
        per = rows.setdefault((r["seq_len"], r["head_dim"]), {label: [] for label in labels})
        for label in labels:
            per[label].append(r[label])
    base = Shape.of(sweep.params, seq_len=1, head_dim=1)
    if replace(here, seq_len=1, head_dim=1) != base:
        raise ValueError(f"naive_steps ran at {here.text()}, the sweep at {base.text()}")
    rows[(here.seq_len, here.head_dim)] = _samples(point)
    out = []
    for (n, d), per in sorted(rows.items()):
        shape = Shape.of(sweep.params, seq_len=n, head_dim=d)
        source = point if (n, d) == (here.seq_len, here.head_dim) else sweep
        found, on = shares(per), On(source.device_id, shape)
        clock = "kernel time" if source.device_kind == "cuda" else ""
        metric = "share of the profiled steps"
        out.append(
            ShapeShares(
                f"{n}×{d}",
                {x: on(metric, x, PROFILED, s, detail=clock) for x, s in found.items()},
                largest(found),
                on(metric, " + ".join(MATMULS), PROFILED, joint_share(per, MATMULS), detail=clock),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class StepForecast:
    label: str
    kernel: gpus.KernelForecast
    intensity: Fact  # the cost model's, at the forecast shape
    floor: Check  # the roofline floor against the step timed alone on that GPU
    rate: Check  # attainable FLOP/s (bytes/s for a step without FLOPs) against the achieved


@dataclass(frozen=True)
class GpuSteps:
    gpu: SpecSheet
    shape: Shape
    ridge: Fact  # where the shape's dtype's matmul peak meets the bandwidth
    ridge_float32: Fact
    cap: Fact  # a matmul's intensity as N grows: 2 · head_dim / itemsize
    cap_float32: Fact  # the same in float32
    steps: tuple[StepForecast, ...]
    forward: Check  # the five kernels' floors against the naive forward

    @property
    def cap_above_ridge(self) -> bool:
        return self.cap.value >= self.ridge.value

    @property
    def cap_float32_above_ridge(self) -> bool:
        return self.cap_float32.value >= self.ridge_float32.value

    @property
    def densest_elementwise(self) -> StepForecast:
        """The element-wise step with the most FLOPs per byte."""
        rest = [s for s in self.steps if s.label not in MATMULS]
        return max(rest, key=lambda s: s.kernel.intensity)


def gpu_steps(entries: Iterable = ()) -> GpuSteps:
    """Each naive step on the forecast GPU at the forecast shape from its data sheet, checked
    against that GPU's forward_times entry when `entries` (every device's,
    `measure_each_device`) hold one."""
    gpu, shape = gpus.sheet(), gpus.FORECAST_SHAPE
    measured = measured_on(entries, gpu)
    out = []
    for k in gpus.naive_steps(gpu, shape):
        alone = step_time(measured, k.label, shape) if measured else None
        # A step with FLOPs is placed by them; the mask, which has none, by its bytes.
        by = 0 if k.flops else 1
        metric, amount, unit = ((FLOP_RATE, k.flops, "FLOP/s"), (BYTE_RATE, k.bytes, "B/s"))[by]
        achieved = None
        if alone is not None:
            achieved = _rates(k.label, k.flops, k.bytes, measured, shape)[by]
        attainable = amount / k.floor_us * 1e6
        rate = forecast(metric, k.label, gpu, attainable, unit, shape=shape, detail="attainable")
        floor = forecast(
            STEP_TIME, k.label, gpu, k.floor_us, "µs", shape=shape, detail="roofline floor"
        )
        intensity = model_fact("arithmetic intensity", k.label, shape, k.intensity, "FLOP/B")
        out.append(StepForecast(k.label, k, intensity, check(floor, alone), check(rate, achieved)))
    naive = forward_time(measured, fwd.NAIVE, shape) if measured else None
    floor = forecast(
        FORWARD_TIME,
        fwd.NAIVE,
        gpu,
        gpus.naive_floor_us(gpu, shape),
        "µs",
        shape=shape,
        detail="roofline floor, kernels of the recorded ops",
    )

    def ridge(dtype: str) -> Fact:
        return forecast("ridge", f"{dtype} matmul", gpu, gpus.ridge(gpu, dtype), "FLOP/B")

    def cap(dtype: str) -> Fact:
        limit = 2 * shape.head_dim / itemsize(dtype)
        on = replace(shape, dtype=dtype)
        return model_fact("matmul intensity limit", "2 · head_dim / itemsize", on, limit, "FLOP/B")

    return GpuSteps(
        gpu,
        shape,
        ridge(shape.dtype),
        ridge("float32"),
        cap(shape.dtype),
        cap("float32"),
        tuple(out),
        check(floor, naive),
    )


@dataclass(frozen=True)
class Op:
    name: str
    where: str
    calls: float
    own: Fact  # self time per forward (profiled)
    share: Fact  # of all self time on its side (CPU or GPU)
    total: Fact
    flops: Fact | None  # torch.profiler's with_flops count, where it has a formula


def ops(m: Measurement, subject: str | None = None, limit: int = 10) -> tuple[Op, ...]:
    """The most expensive ops (CPU, by self time) and kernels (GPU) of `m`'s profile, per
    forward; `subject` names what was profiled (default: the experiment)."""
    shape = shape_of(m)
    within = subject or m.experiment
    side = {w: sum(o.self_us for o in m.ops if o.where == w) or 1.0 for w in ("CPU", "GPU")}
    out, on = [], On(m.device_id, shape)
    for o in list(m.ops)[:limit]:
        op = f"{o.name} in {within}"
        out.append(
            Op(
                o.name,
                o.where,
                o.calls,
                on("op self time per forward", op, PROFILED, o.self_us, "µs"),
                on("share of the self time", op, PROFILED, o.self_us / side[o.where], "%"),
                on("op total time per forward", op, PROFILED, o.total_us, "µs"),
                on("FLOPs per forward", op, COUNTED, o.flops, "FLOP") if o.flops else None,
            )
        )
    return tuple(out)


def share_bars(
    sweep: Measurement, point: Measurement
) -> tuple[tuple[str, ...], tuple[dict[str, float], ...]]:
    """`shares_by_shape` for a stacked bar: each shape's label, and its steps' median shares
    as the prose states them (medians taken step by step need not sum to one)."""
    found = shares_by_shape(sweep, point)
    return tuple(s.label for s in found), tuple(
        {x: s.shares[x].value for x in STEPS} for s in found
    )
