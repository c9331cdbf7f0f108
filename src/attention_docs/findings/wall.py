# Verdicts on the quadratic-wall sweeps, as facts: each shape's unprofiled forward time (read
# from forward_times where its grid holds the shape, so one shape has one time on the site),
# peak memory and FLOPs; the seq_len sweep's log-log slopes with their range over the rounds,
# where fixed costs end and where time turns quadratic; each point's largest step beyond the
# noise; how time changes between two shapes; and the wall on a GPU, forecast from its data
# sheet.
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from attention_docs.analytic import gpu as gpus
from attention_docs.analytic.cost import attention_flops
from attention_docs.findings import forecast as fc
from attention_docs.findings import forward as ffwd
from attention_docs.findings import memory as fmemory
from attention_docs.findings import share, trend
from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import (
    COUNTED,
    MODEL,
    MODEL_DEVICE,
    PROFILED,
    UNPROFILED,
    Fact,
    On,
    Quantity,
    model_fact,
)
from attention_docs.findings.sweep import Lead, leads, rows_of
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape
from attention_docs.records.steps import MATMULS, STEPS
from attention_docs.records.timing import Timing

NAIVE = fwd.NAIVE
OVERHEAD = 1.0  # a local slope below this: doubling the work less than doubles the time
SHARE = "share of the five steps"
# What "the wall" means here, as the pages state it: each doubling of seq_len multiplies the
# time by at least 2^QUADRATIC, over the rounds' whole range.
WALL_STEP = model_fact("time per doubling", "the quadratic wall", None, 2**trend.QUADRATIC, "×")


@dataclass(frozen=True)
class Point:
    shape: Shape
    timing: Timing | None  # unprofiled
    time: Fact | None
    peak: Fact | None
    flops: Fact
    steps: Mapping[str, Timing] | None  # profiled, one sample per call; None: not profiled
    status: str


def sweep(m: Measurement, name: str, times: Measurement | None = None) -> list[Point]:
    """The points of one sweep ("seq_len", "tokens", "heads", "head_dim"), in order; `times`
    (forward_times on the same device) gives the time of a shape its grid holds."""
    dtype, causal = m.params["dtype"], m.params["causal"]
    rows = {Shape.of(m.params, **vars(r)): r for r in rows_of(m.tables["points"])}
    members = (Shape(*r[1:], dtype, causal) for r in m.tables["sweeps"].rows if r[0] == name)
    return [_point(m, s, rows[s], times) for s in members]


def _point(m: Measurement, s: Shape, r, times: Measurement | None) -> Point:  # r: rows_of's
    held = ffwd.timing_at(times, NAIVE, s)  # forward_times', where its grid holds the shape
    timing, source = (r.time, m) if held is None else (held, times)
    q = ffwd.forward_quantity(source, NAIVE, s)
    time = None if timing is None else Fact.of_timing(q, timing)
    peak = None if r.peak_bytes is None else fmemory.peak_fact(m, r.peak_bytes, s)
    flops = model_fact("matmul FLOPs", NAIVE, s, attention_flops(*s.dims), "FLOP")
    steps = {step: getattr(r, step) for step in STEPS} if getattr(r, STEPS[0]) is not None else None
    return Point(s, timing, time, peak, flops, steps, r.status.split(" (")[0])


@dataclass(frozen=True)
class Trend:
    """Time along the seq_len sweep: end-to-end slopes (whole sweep, upper half) with their
    ranges; the seq_len up to which every doubling costs less than double (fixed costs), the
    one from which every doubling is at least QUADRATIC, and the steepest doubling above 2
    outside the noise."""

    xs: tuple[int, ...]
    whole: Fact
    upper: Fact
    overhead_until: int | None
    turn: int | None
    steep: Fact | None
    steep_slope: trend.Slope | None


def time_trend(m: Measurement, pts: Sequence[Point]) -> Trend | None:
    ok = [p for p in pts if p.timing is not None]
    if len(ok) < 3:
        return None
    xs, ts = tuple(p.shape.seq_len for p in ok), [p.timing for p in ok]
    fixed = f"{fmemory.without_seq_len(ok[0].shape)}; seq_len"

    def slope_fact(s: trend.Slope) -> Fact:
        detail = f"{fixed} {s.x0:g}–{s.x1:g}"
        q = On(m.device_id).quantity("log-log slope", "forward time vs seq_len", UNPROFILED, detail)
        return Fact(q, s.slope, "", s.low, s.high)

    local = trend.local_slopes(xs, ts)
    flat = next((i for i, s in enumerate(local) if s.high >= OVERHEAD), len(local))
    turn = trend.turning_point(local)
    steep = max((s for s in local if s.low > 2), key=lambda s: s.slope, default=None)
    half = len(ok) // 2
    return Trend(
        xs,
        slope_fact(trend.end_to_end(xs, ts)),
        slope_fact(trend.end_to_end(xs[half:], ts[half:])),
        xs[flat] if flat else None,
        turn if turn != xs[-1] else None,
        slope_fact(steep) if steep else None,
        steep,
    )


def cache_crossing(m: Measurement, s: trend.Slope, pts: Sequence[Point]) -> str | None:
    """Whether the N×N working set (two matrices and the mask) grew past the last-level cache
    across the seq_len doubling `s`: "crossed", "inside", "beyond", or None when the cache is
    unknown.

    On a CPU the size is the one the CPU reports, shared by all its cores and, on a virtual
    machine, with other guests: how much of it one run had is not measured, so a working set
    that stays inside it is "inside, shared" — the cache is not ruled out."""
    llc = m.facts.get("llc_bytes")
    if not llc:
        return None
    sizes = [fmemory.nxn_bytes(p.shape) for p in pts if p.shape.seq_len in (s.x0, s.x1)]
    if sizes[-1] <= llc:
        return "inside, shared" if m.device_id.startswith("cpu-") else "inside"
    return "crossed" if sizes[0] <= llc else "beyond"


def leaders(m: Measurement, pts: Sequence[Point], x: str) -> tuple[Lead, ...]:
    """Runs of consecutive profiled points with the same largest step, with its share at each;
    where no step clears the others beyond the noise, the contenders lead together."""

    def largest(p: Point) -> tuple[int, tuple[str, ...], Fact]:
        found = share.shares({label: list(p.steps[label].rounds_us) for label in STEPS})
        top = share.largest(found)
        steps = (top.part,) if top.clear else (top.part, *top.rivals)
        lead = On(m.device_id, p.shape)(SHARE, top.part, PROFILED, found[top.part])
        return getattr(p.shape, x), steps, lead

    return leads(largest(p) for p in pts if p.steps)


def matmul_share(m: Measurement, p: Point) -> Fact:
    """The two matmuls' share of the five profiled steps, with its range over the calls."""
    found = share.joint_share({s: p.steps[s].rounds_us for s in STEPS}, MATMULS)
    return On(m.device_id, p.shape)(SHARE, "the two matmuls", PROFILED, found)


def change(m: Measurement, a: Point, b: Point) -> tuple[str, Comparison, bool]:
    """How time changes from `a` to `b`: (fact id, comparison of the faster with the slower,
    whether time at `b` is at least time at `a` by their medians)."""
    fast, slow = sorted((a, b), key=lambda p: p.timing.time_us)
    detail = f"{a.shape.key()} → {b.shape.key()}"
    q = On(m.device_id).quantity("time ratio", NAIVE, UNPROFILED, detail)
    return q.id, compare(fast.timing, slow.timing), b.timing.time_us >= a.timing.time_us


def ratio(m: Measurement, a: Point, b: Point, field: str) -> Fact:
    """b's `field` ("peak" counted, "flops" the model's) over a's, as a fact."""
    clock, device_id = (MODEL, MODEL_DEVICE) if field == "flops" else (COUNTED, m.device_id)
    metric = "FLOPs ratio" if field == "flops" else "peak memory ratio"
    q = Quantity(metric, NAIVE, device_id, clock, None, f"{a.shape.key()} → {b.shape.key()}")
    return Fact(q, getattr(b, field).value / getattr(a, field).value, "×")


def step_shares(m: Measurement, name: str, x: str) -> tuple[tuple, list[dict[str, float]]]:
    """Each profiled shape of a sweep: its x, and each step's median share over the profiled
    forwards (the share the prose states; the five medians need not sum to one)."""
    pts = [p for p in sweep(m, name) if p.steps]
    found = [share.shares({s: list(p.steps[s].rounds_us) for s in STEPS}) for p in pts]
    return tuple(getattr(p.shape, x) for p in pts), [
        {s: f[s].fraction for s in STEPS} for f in found
    ]


# --- the wall on a GPU --------------------------------------------------------------------

FORECAST_SEQ_LENS = (1024, 2048, 4096, 8192, 16384, 32768, 65536)


@dataclass(frozen=True)
class GpuPoint:
    seq_len: int
    naive: fc.Check | None  # None: the naive forward does not fit in the GPU's memory
    fused: fc.Check
    kernels: int  # kernels the naive code launches (its recorded ops)


# Each forecast line's floor (µs) and realistic range at a shape, and what its range is of.
LINES = {
    NAIVE: (gpus.naive_floor_us, gpus.naive_range, fc.RANGE_OF_NAIVE),
    fwd.SDPA_FLASH: (
        lambda gpu, s: gpus.flash_forward(gpu, s).floor_us,
        gpus.flash_range,
        fc.RANGE_OF_FLASH,
    ),
}


def _time(gpu: SpecSheet, stored: Measurement | None, s: Shape, impl: str):
    """`impl`'s forward-time floor at `s` checked against `stored`, with its realistic range
    at the forecast shape (elsewhere the floor alone: the wall is the floors' curve)."""
    floor, realistic, detail = LINES[impl]
    f = fc.forecast("forward time", impl, gpu, floor(gpu, s), "µs", shape=s)
    r = None
    if s == gpus.FORECAST_SHAPE:
        r = fc.realistic("forward time", impl, gpu, realistic(gpu, s), "µs", shape=s, detail=detail)
    return fc.check(f, ffwd.time_at(stored, impl, s), r)


def forecasts(gpu: SpecSheet, stored: Measurement | None = None) -> tuple[Fact, list[GpuPoint]]:
    """Naive attention's floor (the kernels its recorded ops launch, each through HBM) and a
    fused kernel's, with each one's realistic range, at the forecast shape's batch, heads,
    head_dim and dtype across seq_len; checked against a stored forward_times of that GPU
    (naive and SDPA flash) where its grid holds the shape. Also the longest seq_len whose
    naive forward fits in the GPU's memory."""
    longest, out = fmemory.longest_forecast(gpu), []
    for n in FORECAST_SEQ_LENS:
        s = replace(gpus.FORECAST_SHAPE, seq_len=n)
        naive = _time(gpu, stored, s, NAIVE) if n <= longest.value else None
        kernels = len(gpus.naive_kernels(gpu, s))
        out.append(GpuPoint(n, naive, _time(gpu, stored, s, fwd.SDPA_FLASH), kernels))
    return longest, out
