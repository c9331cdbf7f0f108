# Verdicts on the quadratic-wall sweeps, as facts: each shape's unprofiled forward time (read
# from forward_times where its grid holds the shape, so one shape has one time on the site),
# peak memory and FLOPs; a sweep's log-log slopes with their range over the rounds, where
# fixed costs end and where time turns quadratic; each point's largest step beyond the noise;
# how time changes between two shapes; and the wall on a GPU, forecast from its data sheet.
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from attention_docs.analytic import gpu as gpus
from attention_docs.analytic.cost import attention_flops
from attention_docs.analytic.memory import naive_peak
from attention_docs.findings import facts, share, trend
from attention_docs.findings import forward as ffwd
from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import COUNTED, MODEL, PROFILED, UNPROFILED, Fact, Quantity
from attention_docs.findings.forecast import (
    RANGE_OF_FLASH,
    RANGE_OF_NAIVE,
    Check,
    check,
    forecast,
    realistic,
)
from attention_docs.findings.memory import ABOVE, ANALYTIC, PEAK, peak_fact
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape
from attention_docs.records.steps import MATMULS, STEPS
from attention_docs.records.timing import Timing

NAIVE = fwd.NAIVE
OVERHEAD = 1.0  # a local slope below this: doubling the work less than doubles the time
QUADRATIC = trend.QUADRATIC
SWEEP_NAMES = ("seq_len", "tokens", "heads", "head_dim")
# What "the wall" means here, as the pages state it: each doubling of seq_len multiplies the
# time by at least 2^QUADRATIC, over the rounds' whole range.
WALL_STEP = Fact(
    Quantity("time per doubling", "the quadratic wall", "analytic", MODEL), 2**QUADRATIC, "×"
)


@dataclass(frozen=True)
class Point:
    shape: Shape
    timing: Timing | None  # unprofiled
    time: Fact | None
    peak: Fact | None
    flops: Fact
    steps: Mapping[str, Timing] | None  # profiled, one sample per call; None: not profiled
    status: str


def flops(s: Shape) -> Fact:
    q = Quantity("matmul FLOPs", NAIVE, ANALYTIC, MODEL, s)
    return Fact(q, attention_flops(*s.dims), "FLOP")


def _grid_timing(times: Measurement | None, s: Shape, impl: str = NAIVE) -> Timing | None:
    """`impl`'s time at `s` in a forward_times entry; None without a row there."""
    if times is None:
        return None
    try:
        return fwd.timing(times, impl, s)
    except fwd.NotMeasuredError:
        return None


def _measured(times: Measurement | None, impl: str, s: Shape) -> Fact | None:
    t = _grid_timing(times, s, impl)
    return None if t is None else Fact.of_timing(ffwd.forward_quantity(times, impl, s), t)


def points(m: Measurement, times: Measurement | None = None) -> dict[Shape, Point]:
    """Every shape of a `wall` measurement; `times` (forward_times on the same device) gives
    the time of a shape its grid holds."""
    out = {}
    for r in m.tables["points"].records():
        s = Shape.of(r, dtype=m.params["dtype"], causal=m.params["causal"])
        source = times if _grid_timing(times, s) is not None else m
        timing = _grid_timing(times, s) or r["time"]
        time = (
            None
            if timing is None
            else Fact.of_timing(ffwd.forward_quantity(source, NAIVE, s), timing)
        )
        peak = None if r["peak_bytes"] is None else peak_fact(m, r["peak_bytes"], s)
        steps = {label: r[label] for label in STEPS} if r.get(STEPS[0]) is not None else None
        out[s] = Point(s, timing, time, peak, flops(s), steps, r["status"].split(" (")[0])
    return out


def sweep(m: Measurement, name: str, times: Measurement | None = None) -> list[Point]:
    """The points of one sweep ("seq_len", "tokens", "heads", "head_dim"), in order."""
    found = points(m, times)
    p = m.params
    return [
        found[Shape(*r[1:], p["dtype"], p["causal"])]
        for r in m.tables["sweeps"].rows
        if r[0] == name
    ]


def _fixed(shapes: Sequence[Shape], x: str) -> str:
    """A sweep's fixed dimensions, for fact ids: `b1 h2 d64 float32 causal; seq_len`."""
    key = shapes[0].key().split()
    letter = {"seq_len": "n", "head_dim": "d", "batch_size": "b", "num_heads": "h"}[x]
    return " ".join(k for k in key if not k.startswith(letter) or not k[1:].isdigit()) + f"; {x}"


def slope_fact(m: Measurement, subject: str, fixed: str, s: trend.Slope) -> Fact:
    q = Quantity(
        "log-log slope", subject, m.device_id, UNPROFILED, None, f"{fixed} {s.x0:g}–{s.x1:g}"
    )
    return Fact(q, s.slope, "", s.low, s.high)


@dataclass(frozen=True)
class Trend:
    """Time along a sweep: end-to-end slopes (whole sweep, upper half) with their ranges; the
    x up to which every doubling costs less than double (fixed costs), the x from which
    every doubling is at least QUADRATIC, and the steepest doubling above 2 outside the noise."""

    xs: tuple[float, ...]
    whole: Fact
    upper: Fact
    overhead_until: float | None
    turn: float | None
    steep: Fact | None
    steep_slope: trend.Slope | None


def time_trend(m: Measurement, pts: Sequence[Point], x: str) -> Trend | None:
    ok = [p for p in pts if p.timing is not None]
    if len(ok) < 3:
        return None
    xs = tuple(getattr(p.shape, x) for p in ok)
    ts = [p.timing for p in ok]
    fixed, subject = _fixed([p.shape for p in ok], x), f"forward time vs {x}"
    local = trend.local_slopes(xs, ts)
    flat = 0
    while flat < len(local) and local[flat].high < OVERHEAD:
        flat += 1
    turn = trend.turning_point(local)
    steep = max((s for s in local if s.low > 2), key=lambda s: s.slope, default=None)
    half = len(ok) // 2
    return Trend(
        xs,
        slope_fact(m, subject, fixed, trend.end_to_end(xs, ts)),
        slope_fact(m, subject, fixed, trend.end_to_end(xs[half:], ts[half:])),
        xs[flat] if flat else None,
        turn if turn != xs[-1] else None,
        slope_fact(m, subject, fixed, steep) if steep else None,
        steep,
    )


def cache_crossing(m: Measurement, s: trend.Slope, pts: Sequence[Point], x: str) -> str | None:
    """Whether the N×N working set (two matrices and the mask) grew past the last-level cache
    across the doubling `s`: "crossed", "inside", "beyond", or None when the cache is unknown.

    On a CPU the size is the one the CPU reports, shared by all its cores and, on a virtual
    machine, with other guests: how much of it one run had is not measured, so a working set
    that stays inside it is "inside, shared" — the cache is not ruled out."""
    llc = m.facts.get("llc_bytes")
    if not llc:
        return None
    sizes = []
    for p in pts:
        if getattr(p.shape, x) in (s.x0, s.x1):
            model = naive_peak(*p.shape.dims, p.shape.dtype, causal=p.shape.causal)
            sizes.append(model.matrices * model.matrix_bytes + model.mask_bytes)
    before, after = sizes[0], sizes[-1]
    if after <= llc:
        return "inside, shared" if m.device_id.startswith("cpu-") else "inside"
    return "crossed" if before <= llc else "beyond"


def llc_fact(m: Measurement) -> Fact | None:
    return facts.llc_fact(m.facts, m.device_id)


@dataclass(frozen=True)
class Leader:
    """A run of consecutive points with the same largest step (None: no step clears the
    others beyond the noise; `tied` then names the contenders)."""

    xs: tuple[float, ...]
    step: str | None
    tied: tuple[str, ...]
    shares: tuple[Fact, ...]  # the leader's share at each point


def _shares(m: Measurement, p: Point) -> dict[str, share.Share]:
    return share.shares({label: list(p.steps[label].rounds_us) for label in STEPS})


def share_fact(m: Measurement, p: Point, part: str, found: share.Share) -> Fact:
    q = Quantity("share of the five steps", part, m.device_id, PROFILED, p.shape)
    return Fact(q, found.fraction, "%", found.low, found.high)


def leaders(m: Measurement, pts: Sequence[Point], x: str) -> list[Leader]:
    out: list[Leader] = []
    for p in pts:
        if not p.steps:
            continue
        found = _shares(m, p)
        top = share.largest(found)
        step = top.part if top.clear else None
        fact = share_fact(m, p, top.part, found[top.part])
        tied = () if top.clear else (top.part, *top.rivals)
        if out and out[-1].step == step and (step or out[-1].tied == tied):
            last = out[-1]
            out[-1] = Leader((*last.xs, getattr(p.shape, x)), step, tied, (*last.shares, fact))
        else:
            out.append(Leader((getattr(p.shape, x),), step, tied, (fact,)))
    return out


def matmul_share(m: Measurement, p: Point) -> Fact:
    """The two matmuls' share of the five profiled steps, with its range over the calls."""
    n = len(p.steps[STEPS[0]].rounds_us)
    both = [sum(p.steps[s].rounds_us[i] for s in MATMULS) for i in range(n)]
    rest = [sum(p.steps[s].rounds_us[i] for s in STEPS if s not in MATMULS) for i in range(n)]
    found = share.shares({"matmuls": both, "element-wise": rest})["matmuls"]
    return share_fact(m, p, "the two matmuls", found)


def change(m: Measurement, a: Point, b: Point) -> tuple[str, Comparison]:
    """How time changes from `a` to `b`: (fact id, comparison of the faster with the slower)."""
    fast, slow = sorted((a, b), key=lambda p: p.timing.time_us)
    q = Quantity(
        "time ratio", NAIVE, m.device_id, UNPROFILED, None, f"{a.shape.key()} → {b.shape.key()}"
    )
    return q.id, compare(fast.timing, slow.timing)


def rises(a: Point, b: Point) -> bool:
    """Whether time at `b` is at least time at `a` (by their medians): a change's direction."""
    return b.timing.time_us >= a.timing.time_us


def ratio(m: Measurement, metric: str, a: Point, b: Point, field: str) -> Fact:
    """b's `field` ("peak" counted, "flops" the model's) over a's, as a fact."""
    clock, device = (MODEL, ANALYTIC) if field == "flops" else (COUNTED, m.device_id)
    q = Quantity(metric, NAIVE, device, clock, None, f"{a.shape.key()} → {b.shape.key()}")
    return Fact(q, getattr(b, field).value / getattr(a, field).value, "×")


# --- the wall on a GPU --------------------------------------------------------------------

FORECAST_SEQ_LENS = (1024, 2048, 4096, 8192, 16384, 32768, 65536)
# The forecast shape without its seq_len, for fact ids and sentences: `b4 h16 d128 bfloat16 causal`.
FORECAST_BASE = gpus.FORECAST_SHAPE.key().replace(f" n{gpus.FORECAST_SHAPE.seq_len} ", " ")


@dataclass(frozen=True)
class GpuPoint:
    seq_len: int
    naive: Check | None  # None: the naive forward does not fit in the GPU's memory
    fused: Check
    naive_range: Fact | None = None  # the floor over cited efficiencies (analytic.gpu)
    fused_range: Fact | None = None
    kernels: int = 0  # kernels the naive code launches (its recorded ops)


def forecasts(gpu: SpecSheet, stored: Measurement | None = None) -> tuple[Fact, list[GpuPoint]]:
    """Naive attention's floor (the kernels its recorded ops launch, each through HBM) and a
    fused kernel's, with each one's realistic range, at the
    forecast shape's batch, heads, head_dim and dtype across seq_len; checked against a stored
    forward_times of that GPU (naive and SDPA flash) where its grid holds the shape. Also the
    longest seq_len whose naive forward fits in the GPU's memory."""
    base = gpus.FORECAST_SHAPE
    longest = gpus.longest_naive_seq_len(gpu, base)
    out = []
    for n in FORECAST_SEQ_LENS:
        s = Shape(base.batch_size, base.num_heads, n, base.head_dim, base.dtype, base.causal)

        naive = naive_range = None
        if n <= longest:
            f = forecast("forward time", NAIVE, gpu, gpus.naive_floor_us(gpu, s), "µs", shape=s)
            naive = check(f, _measured(stored, NAIVE, s))
            naive_range = realistic("forward time", NAIVE, gpu, gpus.naive_range(gpu, s), "µs", shape=s, detail=RANGE_OF_NAIVE)  # fmt: skip
        f = forecast(
            "forward time", fwd.SDPA_FLASH, gpu, gpus.flash_forward(gpu, s).floor_us, "µs", shape=s
        )
        fused_range = realistic("forward time", fwd.SDPA_FLASH, gpu, gpus.flash_range(gpu, s), "µs", shape=s, detail=RANGE_OF_FLASH)  # fmt: skip
        out.append(
            GpuPoint(
                n,
                naive,
                check(f, _measured(stored, fwd.SDPA_FLASH, s)),
                naive_range,
                fused_range,
                len(gpus.naive_kernels(gpu, s)),
            )
        )
    detail = f"{FORECAST_BASE}; all memory"
    q = forecast("longest seq_len that fits", NAIVE, gpu, longest, "tokens", detail=detail)
    return q, out


__all__ = ["ABOVE", "PEAK", "Point", "Trend", "forecasts", "points", "sweep", "time_trend"]


@dataclass(frozen=True)
class StepShares:
    """Each step's share of the five per x, for a stacked bar: `xs[i]`'s are `shares[i]`."""

    xs: tuple
    shares: tuple[dict[str, float], ...]
    x_unit: str | None


def step_shares(m: Measurement, table: str, x: str) -> StepShares:
    """Per row, each step's fraction of the five steps' sum: of a table of step times, or
    (`table` a sweep's name) of the sweep's profiled shapes' medians."""
    if table in SWEEP_NAMES and "points" in m.tables:
        pts = [p for p in sweep(m, table) if p.steps]
        xs = tuple(getattr(p.shape, x) for p in pts)
        rows = [{s: p.steps[s].time_us for s in STEPS} for p in pts]
        unit = None
    else:
        t = m.tables[table]
        xs, rows, unit = tuple(t.column(x)), t.records(), t.units.get(x)
    return StepShares(xs, tuple(share.row_shares(rows, STEPS)), unit)
