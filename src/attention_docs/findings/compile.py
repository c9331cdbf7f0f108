# What a torch.compile costs against what it buys: the first call's time (a compile) as a
# fact, the time one compiled forward saves over an eager one (from forward_times, with the
# range its rounds allow), and the break-even — how many forwards repay the compile, or
# never, when the two forwards are within noise or the compiled one is slower. Decided here
# once; render/ says it.
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.analytic import fusion as fusion_model
from attention_docs.analytic.gpu import naive_floor_us, naive_kernels, naive_range
from attention_docs.findings.facts import UNPROFILED, Fact, Quantity, one_device
from attention_docs.findings.forecast import RANGE_OF_NAIVE, Check, check, forecast, realistic
from attention_docs.findings.forward import FORWARD_TIME, forward_time, versus
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape
from attention_docs.records.steps import ELEMENTWISE

FIRST_CALL = "first-call time"
SAVED = "time saved per forward"
BREAK_EVEN = "forwards to repay the compile"
TIE, SLOWER = "within noise", "slower"


def first_call(subject: str, device: str, shape: Shape, seconds: float, detail: str) -> Fact:
    """One first call of a compiled function (trace, compile, run), timed once: `detail`
    says which ("cold caches", "warm caches", "a new seq_len")."""
    q = Quantity(FIRST_CALL, subject, device, UNPROFILED, shape, detail)
    return Fact(q, seconds * 1e6, "µs")


def time_saved(times: Measurement, fast: str, slow: str, shape: Shape) -> Fact | None:
    """What one forward of `fast` saves over one of `slow` (forward_times, unprofiled), with
    the range its rounds allow; None when either did not run, the two are within noise, or
    `fast` is the slower."""
    v = versus(times, fast, slow, shape)
    if v is None or v.comparison.tie or v.comparison.ratio < 1:
        return None
    a, b = fwd.timing(times, fast, shape), fwd.timing(times, slow, shape)
    q = Quantity(SAVED, v.quantity.subject, times.device_id, UNPROFILED, shape)
    return Fact(q, b.time_us - a.time_us, "µs", b.low_us - a.high_us, b.high_us - a.low_us)


@dataclass(frozen=True)
class BreakEven:
    """Forwards that repay a compile, or `never` (TIE or SLOWER) with `forwards` None."""

    compile: Fact
    forwards: Fact | None
    never: str | None


def break_even(compile: Fact, times: Measurement, fast: str, slow: str, shape: Shape) -> BreakEven:
    """How many forwards of `fast` (compiled) instead of `slow` (eager) repay `compile`: its
    time over the saving per forward, the range from the largest and the smallest saving the
    rounds allow."""
    one_device(
        "a break-even (its compile and forward times)", compile.quantity.device, times.device_id
    )
    saved = time_saved(times, fast, slow, shape)
    if saved is None:
        v = versus(times, fast, slow, shape)
        return BreakEven(compile, None, TIE if v is None or v.comparison.tie else SLOWER)
    detail = compile.quantity.detail
    q = Quantity(BREAK_EVEN, fast, times.device_id, UNPROFILED, shape, detail)
    n = compile.value / saved.value
    low, high = compile.value / saved.high, compile.value / saved.low
    return BreakEven(compile, Fact(q, n, "forwards", low, high), None)


ELEMENTWISE_SUBJECT = "scale + mask + softmax"


@dataclass(frozen=True)
class FusionForecast:
    """What fusing the element-wise steps saves on a GPU by its data sheet: their HBM bytes
    eager and fused, the floor time that saves, the forward's floor eager and compiled
    (checked against the GPU's stored forward times, if any), and the realistic ranges."""

    elementwise_kernels: int  # of the naive forward's kernels, the element-wise ones
    naive_kernels: int
    eager_bytes: Check
    fused_bytes: Check
    time_saved: Check
    naive_floor: Check
    compiled_floor: Check
    time_saved_range: Check | None
    naive_range: Check | None
    compiled_range: Check | None
    sources: tuple[str, ...]  # the efficiencies on record the ranges divide by


def fusion_forecast(gpu: SpecSheet, shape: Shape, there: Measurement | None) -> FusionForecast:
    """The fusion forecast at `shape` on `gpu`; `there`: the GPU's stored forward_times."""
    eager, fused = (
        fusion_model.eager_elementwise(gpu, shape),
        fusion_model.fused_elementwise(gpu, shape),
    )
    kernels = naive_kernels(gpu, shape)
    what = ELEMENTWISE_SUBJECT

    def spec(metric, subject, value, unit):
        return forecast(metric, subject, gpu, value, unit, shape=shape)

    def measured(name):
        return forward_time(there, name, shape) if there else None

    def ranged(r):
        return check(r, None) if r is not None else None

    naive = spec(FORWARD_TIME, fwd.NAIVE, naive_floor_us(gpu, shape), "µs")
    compiled = spec(FORWARD_TIME, fwd.COMPILED, fusion_model.compiled_floor_us(gpu, shape), "µs")
    saved_us = sum(k.floor_us for k in eager) - fused.floor_us
    compiled_detail = "realistic range: compiled_floor_us over cited efficiencies"
    return FusionForecast(
        elementwise_kernels=sum(1 for k in kernels if k.label in ELEMENTWISE),
        naive_kernels=len(kernels),
        eager_bytes=check(spec("HBM bytes", f"{what}, eager", sum(k.bytes for k in eager), "B"), None),
        fused_bytes=check(spec("HBM bytes", f"{what}, fused", fused.bytes, "B"), None),
        time_saved=check(spec("time saved by fusion", what, saved_us, "µs"), None),
        naive_floor=check(naive, measured(fwd.NAIVE)),
        compiled_floor=check(compiled, measured(fwd.COMPILED)),
        time_saved_range=ranged(realistic("time saved by fusion", what, gpu, fusion_model.time_saved_range(gpu, shape), "µs", shape=shape)),
        naive_range=ranged(realistic(FORWARD_TIME, fwd.NAIVE, gpu, naive_range(gpu, shape), "µs", shape=shape, detail=RANGE_OF_NAIVE)),
        compiled_range=ranged(realistic(FORWARD_TIME, fwd.COMPILED, gpu, fusion_model.compiled_range(gpu, shape), "µs", shape=shape, detail=compiled_detail)),
        sources=tuple(dict.fromkeys(fusion_model.compiled_range(gpu, shape).sources + naive_range(gpu, shape).sources)),
    )  # fmt: skip


def bytes_saved(gpu: SpecSheet, shape: Shape) -> Fact:
    """The HBM bytes per forward fusing the element-wise steps spares, by the data sheet."""
    return forecast("HBM bytes saved by fusion", fusion_model.FUSED, gpu, fusion_model.bytes_saved(gpu), "B", shape=shape)  # fmt: skip
