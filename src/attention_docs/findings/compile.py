# What a torch.compile costs against what it buys: the first call's time (a compile) as a
# fact, and the break-even — how many forwards repay the compile (the compile over the time a
# compiled forward saves over an eager one, from forward_times), or never, when the two are
# within noise or the compiled one is slower. And what fusion saves on a GPU, by its data sheet.
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

BREAK_EVEN = "forwards to repay the compile"
TIE, SLOWER = "within noise", "slower"


def first_call(subject: str, device_id: str, shape: Shape, seconds: float, detail: str) -> Fact:
    """One first call of a compiled function (trace, compile, run), timed once: `detail`
    says which ("cold caches", "warm caches", "a new seq_len")."""
    q = Quantity("first-call time", subject, device_id, UNPROFILED, shape, detail)
    return Fact(q, seconds * 1e6, "µs")


@dataclass(frozen=True)
class BreakEven:
    """Forwards that repay a compile, or `never` (TIE or SLOWER) with `forwards` None."""

    forwards: Fact | None
    never: str | None


def break_even(compile: Fact, times: Measurement, fast: str, slow: str, shape: Shape) -> BreakEven:
    """How many forwards of `fast` (compiled) instead of `slow` (eager) repay `compile`: its
    time over the saving per forward (unprofiled), the range from the largest and the
    smallest saving the rounds allow."""
    one_device(
        "a break-even (its compile and forward times)", compile.quantity.device_id, times.device_id
    )
    v = versus(times, fast, slow, shape)
    if v is None or v.comparison.tie or v.comparison.ratio < 1:
        return BreakEven(None, TIE if v is None or v.comparison.tie else SLOWER)
    a, b = fwd.timing(times, fast, shape), fwd.timing(times, slow, shape)
    saved = (b.time_us - a.time_us, b.high_us - a.low_us, b.low_us - a.high_us)
    n, low, high = (compile.value / s for s in saved)
    q = Quantity(BREAK_EVEN, fast, times.device_id, UNPROFILED, shape, compile.quantity.detail)
    return BreakEven(Fact(q, n, "forwards", low, high), None)


SAVED_BY_FUSION = "time saved by fusion"
RANGE_OF_COMPILED = "realistic range: compiled_floor_us over cited efficiencies"


@dataclass(frozen=True)
class FusionForecast:
    """What fusing the element-wise steps saves on a GPU by its data sheet, as checks: their
    HBM bytes eager and fused, the floor time that saves, the forward's floor eager and
    compiled (beside the GPU's stored forward times, if any); then the realistic ranges of
    that saving and of the two forwards (None where no efficiency is on record)."""

    elementwise_kernels: int  # of the naive forward's kernels, the element-wise ones
    naive_kernels: int
    checks: tuple[Check | None, ...]  # the five floors, then the three ranges
    sources: tuple[str, ...]  # the efficiencies on record the ranges divide by


def fusion_forecast(gpu: SpecSheet, shape: Shape, there: Measurement | None) -> FusionForecast:
    """The fusion forecast at `shape` on `gpu`; `there`: the GPU's stored forward_times."""
    eager = fusion_model.eager_elementwise(gpu, shape)
    fused = fusion_model.fused_elementwise(gpu, shape)
    naive, compiled = naive_range(gpu, shape), fusion_model.compiled_range(gpu, shape)
    kernels, what = naive_kernels(gpu, shape), "scale + mask + softmax"
    floors = [
        forecast(metric, subject, gpu, value, unit, shape=shape)
        for metric, subject, value, unit in (
            ("HBM bytes", f"{what}, eager", sum(k.bytes for k in eager), "B"),
            ("HBM bytes", f"{what}, fused", fused.bytes, "B"),
            (SAVED_BY_FUSION, what, sum(k.floor_us for k in eager) - fused.floor_us, "µs"),
            (FORWARD_TIME, fwd.NAIVE, naive_floor_us(gpu, shape), "µs"),
            (FORWARD_TIME, fwd.COMPILED, fusion_model.compiled_floor_us(gpu, shape), "µs"),
        )
    ]
    ranges = [
        realistic(metric, subject, gpu, r, "µs", shape=shape, detail=detail)
        for metric, subject, r, detail in (
            (SAVED_BY_FUSION, what, fusion_model.time_saved_range(gpu, shape), ""),
            (FORWARD_TIME, fwd.NAIVE, naive, RANGE_OF_NAIVE),
            (FORWARD_TIME, fwd.COMPILED, compiled, RANGE_OF_COMPILED),
        )
    ]
    measured = {n: forward_time(there, n, shape) for n in (fwd.NAIVE, fwd.COMPILED) if there}
    return FusionForecast(
        elementwise_kernels=sum(1 for k in kernels if k.label in ELEMENTWISE),
        naive_kernels=len(kernels),
        checks=(
            *(check(f, measured.get(f.quantity.subject)) for f in floors),
            *(None if r is None else check(r, None) for r in ranges),
        ),
        sources=tuple(dict.fromkeys(compiled.sources + naive.sources)),
    )


def bytes_saved(gpu: SpecSheet, shape: Shape) -> Fact:
    """The HBM bytes per forward fusing the element-wise steps spares, by the data sheet."""
    saved = fusion_model.bytes_saved(gpu)
    return forecast("HBM bytes saved by fusion", fusion_model.FUSED, gpu, saved, "B", shape=shape)
