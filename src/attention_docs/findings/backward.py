# Verdicts of the backward-pass chapter, as data: each implementation's two passes as facts
# (from `backward_compare`), the measured backward ÷ forward time ratio beside the counted
# FLOP ratio — does the backward run at the forward's rate per FLOP? — the memory each keeps,
# how saved bytes grow with seq_len, and the training step's forecast for a GPU, checked
# against that GPU's stored entry. No words: render/backward.py says them.
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.analytic import backward as backward_model
from attention_docs.analytic.gpu import FORECAST_SHAPE, naive_steps
from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import COUNTED, PROFILED, UNPROFILED, Fact, On, model_fact
from attention_docs.findings.forecast import Check, check, forecast
from attention_docs.findings.trend import fitted_slope, table_slopes
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape

FORWARD = "forward time, recording autograd"
BACKWARD = "backward time"
RATIO = "backward ÷ forward time"
SAVED = "bytes kept for the backward"
NODE = "autograd node time per step"
SLOPE = "log-log slope of kept bytes against seq_len"
# Implementations whose backward recomputes the probabilities from the log-sum-exp.
FUSED = ("sdpa-flash", "sdpa-efficient", "sdpa-cudnn")
PASSES = ("forward", "backward")

# How the measured time ratio sits against the counted FLOP ratio.
AS_COUNTED = "as counted"  # the counted ratio is inside the measured ratio's range
SLOWER_PER_FLOP = "slower per FLOP"  # the backward takes longer per FLOP than the forward
FASTER_PER_FLOP = "faster per FLOP"


@dataclass(frozen=True)
class Passes:
    """One implementation's forward and backward, measured and counted."""

    implementation: str
    forward: Fact
    backward: Fact
    ratio: Fact  # measured backward ÷ forward, with its range over the rounds
    flop_ratio: Fact  # counted by torch's FLOP counter, or by the analytic model
    verdict: str  # AS_COUNTED, SLOWER_PER_FLOP or FASTER_PER_FLOP
    matmuls: tuple[Fact, Fact]  # matmul ops per call in the profile, forward and backward
    flops: tuple[Fact | None, Fact | None]  # counted FLOPs per pass (None: no formula)
    peak: Fact
    saved: Fact


def shape(m: Measurement) -> Shape:
    return Shape.of(m.params)


def against_count(c: Comparison, counted: float) -> str:
    """Where the counted FLOP ratio sits against the measured time ratio's range."""
    if c.low > counted:
        return SLOWER_PER_FLOP
    if c.high < counted:
        return FASTER_PER_FLOP
    return AS_COUNTED


def _flop_ratio(m: Measurement, r: dict) -> Fact:
    name, metric = r["implementation"], "backward ÷ forward matmul FLOPs"
    if r["forward_flops"] and r["backward_flops"]:
        return On.of(m)(metric, name, COUNTED, r["backward_flops"] / r["forward_flops"], "×")
    value = backward_model.flop_ratio(shape(m), recompute=name in FUSED)
    return model_fact(metric, name, shape(m), value, "×")


def passes(m: Measurement) -> list[Passes]:
    """Every implementation that ran, in the table's order."""
    return [_passes(m, r) for r in m.tables["compare"].records() if r["status"] == "ok"]


def _passes(m: Measurement, r: dict) -> Passes:
    name, c, on = r["implementation"], compare(r["forward"], r["backward"]), On.of(m)
    flop_ratio = _flop_ratio(m, r)

    def counted(metric: str, column: str, unit: str, detail: str = "") -> Fact | None:
        return on(metric, name, COUNTED, r[column], unit, detail=detail)

    return Passes(
        name,
        on(FORWARD, name, UNPROFILED, r["forward"]),
        on(BACKWARD, name, UNPROFILED, r["backward"]),
        on(RATIO, name, UNPROFILED, c),
        flop_ratio,
        against_count(c, flop_ratio.value),
        tuple(counted("matmul ops per pass", f"{p}_matmuls", "", p) for p in PASSES),
        tuple(counted("matmul FLOPs per pass", f"{p}_flops", "FLOP", p) for p in PASSES),
        counted("peak memory, forward + backward", "step_peak_bytes", "B"),
        counted(SAVED, "saved_internal_bytes", "B", "beyond q, k, v and the output"),
    )


def nodes(m: Measurement) -> list[tuple[str, str, float, Fact]]:
    """(implementation, autograd node, calls per step, profiled time per step)."""
    on = On.of(m)
    return [
        (r["implementation"], r["node"], r["calls"],
         on(NODE, f"{r['implementation']}: {r['node']}", PROFILED, r["total_us"], "µs"))
        for r in m.tables["autograd_nodes"].records()
    ]  # fmt: skip


@dataclass(frozen=True)
class Growth:
    """How the bytes an implementation keeps grow along backward_saved_tensors' sweep."""

    implementation: str
    slope: Fact
    longest: Fact  # kept bytes at the longest seq_len


def growth(m: Measurement) -> list[Growth]:
    table = m.tables["saved"]
    rows = [r for r in table.records() if r["status"] == "ok"]
    xs = [r["seq_len"] for r in rows]
    last, span = On.of(m, seq_len=xs[-1]), f"seq_len {xs[0]}–{xs[-1]}"
    return [
        Growth(
            name,
            last(SLOPE, name, COUNTED, fitted_slope(xs, [r[name] for r in rows]), detail=span),
            last(SAVED, name, COUNTED, rows[-1][name], "B", detail="output included"),
        )
        for name in (c for c in table.columns if c not in ("seq_len", "status"))
    ]


def saved_detail(m: Measurement) -> list[tuple[str, str, str, str, Fact]]:
    """(implementation, tensor shape, dtype, role, bytes) per storage kept, smallest seq_len."""
    at, found = On.of(m, seq_len=m.facts["detail_seq_len"]), []
    for r in m.tables["detail"].records():
        name, what = r["implementation"], f"{r['shape']} {r['dtype']} {r['role']}"
        kept = at("bytes of a kept tensor", f"{name}: {what}", COUNTED, r["bytes"], "B")
        found.append((name, r["shape"], r["dtype"], r["role"], kept))
    return found


# The rows of the training-step forecast: (metric, subject, TrainingForecast field, unit).
FORECAST_ROWS = (
    (FORWARD, "naive", "naive_forward_us", "µs"),
    (BACKWARD, "naive", "naive_backward_us", "µs"),
    (FORWARD, "sdpa-flash", "flash_forward_us", "µs"),
    (BACKWARD, "sdpa-flash", "flash_backward_us", "µs"),
    (RATIO, "naive", "naive_ratio", "×"),
    (RATIO, "sdpa-flash", "flash_ratio", "×"),
    ("recomputed q·kᵀ at the matmul peak", "sdpa-flash", "recompute_us", "µs"),
    ("probabilities written and read back, at HBM bandwidth", "naive", "probs_us", "µs"),
)


def training_checks(gpu: SpecSheet, entries: list[Measurement]) -> list[Check]:
    """The training step's floors on `gpu` at the forecast shape, each beside the stored
    measurement of that GPU at that shape when there is one (FORECAST_ROWS' order)."""
    t = backward_model.training(gpu, FORECAST_SHAPE)
    here = [m for m in entries if m.device_id == f"cuda-{gpu.slug}" and shape(m) == FORECAST_SHAPE]
    measured = {
        (metric, p.implementation): fact
        for p in (passes(here[0]) if here else ())
        for metric, fact in ((FORWARD, p.forward), (BACKWARD, p.backward), (RATIO, p.ratio))
    }
    return [
        check(
            forecast(metric, subject, gpu, getattr(t, field), unit, shape=FORECAST_SHAPE),
            measured.get((metric, subject)),
        )
        for metric, subject, field, unit in FORECAST_ROWS
    ]


def trade(gpu: SpecSheet) -> tuple[Fact, Fact]:
    """FlashAttention's trade on `gpu` at the forecast shape: the FLOPs it recomputes and the
    HBM bytes naive attention moves to keep the probabilities instead."""
    t, s = backward_model.training(gpu, FORECAST_SHAPE), FORECAST_SHAPE
    return (
        forecast("recomputed FLOPs", "sdpa-flash", gpu, t.recompute_flops, "FLOP", shape=s),
        forecast(
            "probability bytes written and read back", "naive", gpu, t.probs_bytes, "B", shape=s
        ),
    )


def limits(gpu: SpecSheet) -> tuple[str, str]:
    """Which ceiling sets the floors at the forecast shape ("memory" or "compute"): the one
    behind most of naive attention's floor time (both passes), and FlashAttention's backward's."""
    kernels = (*naive_steps(gpu, FORECAST_SHAPE), *backward_model.naive_backward(gpu))
    by_limit = {
        limit: sum(k.floor_us for k in kernels if k.limit == limit)
        for limit in ("memory", "compute")
    }
    return max(by_limit, key=by_limit.get), backward_model.flash_backward(gpu).limit


def saved_slopes(m: Measurement) -> dict[str, float | None]:
    """The fitted log-log slope of each implementation's kept bytes against seq_len (every
    row of the table, as the figure draws it), in growth's order."""
    names = [g.implementation for g in growth(m)]
    return table_slopes(m.tables["saved"], "seq_len", names)
