# What a torch.compile costs against what it buys: the first call's time (a compile) as a
# fact, and the break-even — how many forwards repay the compile (the compile over the time a
# compiled forward saves over an eager one, from forward_times), or never, when the two are
# within noise or the compiled one is slower; the fusion chapter's counted work and peaks as
# facts. And what fusion saves on a GPU, by its data sheet.
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.analytic import fusion as fusion_model
from attention_docs.analytic.gpu import naive_floor_us, naive_kernels, naive_range
from attention_docs.findings.facts import (
    COUNTED,
    PROFILED,
    UNPROFILED,
    Fact,
    On,
    Quantity,
    one_device,
)
from attention_docs.findings.forecast import RANGE_OF_NAIVE, Check, check, forecast, realistic
from attention_docs.findings.forward import FORWARD_TIME, forward_time, versus
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape
from attention_docs.records.steps import ELEMENTWISE

BREAK_EVEN = "forwards to repay the compile"
TIE, SLOWER = "within noise", "slower"
COMPILED_FN = "compiled_attention(dynamic=True)"  # what fusion_kernels compiles
CACHES = {"cold": "cold caches", "warm": "warm caches"}


def first_call(subject: str, device_id: str, shape: Shape, seconds: float, detail: str) -> Fact:
    """One first call of a compiled function (trace, compile, run), timed once: `detail`
    says which ("cold caches", "warm caches", "a new seq_len")."""
    q = Quantity("first-call time", subject, device_id, UNPROFILED, shape, detail)
    return Fact(q, seconds * 1e6, "µs")


def compile_time(m: Measurement, label: str) -> Fact:
    """fusion_kernels' `label` compile ("cold" or "warm"): the first call of COMPILED_FN."""
    r = next(r for r in m.tables["compiles"].records() if r["compile"] == label)
    return first_call(COMPILED_FN, m.device_id, Shape.of(m.params), r["seconds"], CACHES[label])


def recompile_times(m: Measurement) -> list[Fact]:
    """Each call of the recompile experiment, in order: its first-call time at its seq_len."""
    return [
        first_call("compiled_attention(dynamic=False)", m.device_id,
                   Shape.of(m.params, seq_len=r["seq_len"]), r["seconds"], r["call"])
        for r in m.tables["calls"].records()
    ]  # fmt: skip


def import_time(m: Measurement) -> Fact | None:
    """What a new process pays once before any compile, importing Dynamo and Inductor; None
    where it was not timed."""
    seconds = m.facts.get("compiler_import_s")
    us = None if seconds is None else seconds * 1e6
    return On.of(m)("import time", "torch._dynamo and torch._inductor", COUNTED, us, "µs")


def work(m: Measurement, which: str) -> list[tuple[dict, Fact, Fact]]:
    """The work per forward, `which` = "eager" (ops) or "compiled" (kernels): each row of its
    table with its calls (counted) and its time (profiled)."""
    on = On.of(m)
    return [
        (r, on("calls per forward", f"{which}: {r['name']}", COUNTED, r["calls"]),
         on("time per forward", f"{which}: {r['name']}", PROFILED, r["time_us"], "µs"))
        for r in m.tables[f"{which}_work"].records()
    ]  # fmt: skip


@dataclass(frozen=True)
class Peak:
    """One forward's peak memory (counted), and that peak in N×N score matrices."""

    implementation: str
    peak: Fact
    matrices: Fact


def peaks(m: Measurement, backends: Measurement) -> tuple[Peak, ...]:
    """Eager and compiled (fusion_kernels), then SDPA with the backend it picks by itself at
    this shape, pinned (sdpa_backends' row: one fact, one number): one forward's peak each."""
    if Shape.of(backends.params) != Shape.of(m.params):
        raise ValueError("sdpa_backends ran at another shape than fusion_kernels: pass the same")
    chosen = backends.facts["chosen"]
    row = next(r for r in backends.tables["backends"].records() if r["backend"] == chosen)
    found = {r["variant"]: r["peak_bytes"] for r in m.tables["peaks"].records()}
    found[f"SDPA {chosen}"] = row["peak_bytes"]
    matrix, on = m.tables["peaks"].records()[0], On.of(m)
    per_matrix = matrix["peak_bytes"] / matrix["peak_in_matrices"]
    return tuple(
        Peak(name, on("peak memory", name, COUNTED, b, "B"),
             on("peak memory in N×N matrices", name, COUNTED, b / per_matrix, "×"))
        for name, b in found.items()
    )  # fmt: skip


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
    compiled (beside the GPU's stored forward times, if any); the three times each with its
    realistic range (None where no efficiency is on record)."""

    elementwise_kernels: int  # of the naive forward's kernels, the element-wise ones
    naive_kernels: int
    checks: tuple[Check, ...]
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
        checks=tuple(
            check(f, measured.get(f.quantity.subject), r)
            for f, r in zip(floors, [None, None, *ranges], strict=True)
        ),
        sources=tuple(dict.fromkeys(compiled.sources + naive.sources)),
    )


def bytes_saved(gpu: SpecSheet, shape: Shape) -> Fact:
    """The HBM bytes per forward fusing the element-wise steps spares, by the data sheet."""
    saved = fusion_model.bytes_saved(gpu)
    return forecast("HBM bytes saved by fusion", fusion_model.FUSED, gpu, saved, "B", shape=shape)
