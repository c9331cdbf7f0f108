# The FlashAttention chapter's facts and verdicts: what tiling buys at the measured shape
# (peak memory beside forward_times' times), which block size is fastest within the noise,
# the Triton kernel's numerics and kernel times, and forecasts for a named GPU counted on the
# tile grid (FlashAttention 2's parallelism and deferred normalisation, causal tile skipping,
# tiles that fit one block, HBM bytes), with the papers' figures cited as such. No words:
# render/flash.py says them.
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attention_docs.analytic import cost, gpu
from attention_docs.analytic.tiling import (
    REGISTERS_PER_BLOCK,
    TileFit,
    fused_traffic,
    output_rescale_flops,
    programs,
    tile_counts,
    tile_fits,
    tile_grid,
)
from attention_docs.findings import forward as ffwd
from attention_docs.findings import share as fshare
from attention_docs.findings.compare import compare
from attention_docs.findings.facts import (
    COUNTED,
    KERNEL,
    NUMERIC,
    PROFILED,
    PUBLISHED,
    UNPROFILED,
    Fact,
    On,
    Quantity,
    model_fact,
)
from attention_docs.findings.forecast import RANGE_OF_FLASH, Check, check, forecast, measured_on
from attention_docs.findings.forecast import realistic as forecast_range
from attention_docs.findings.rank import Ranking
from attention_docs.findings.sweep import CLEAR, TIE, rows_of, sweep_findings
from attention_docs.findings.trend import table_slopes
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.published import dataset
from attention_docs.records.shape import Shape
from attention_docs.records.sweep import Sweep

ERROR = "relative error"  # the unit of a relative error (render/words says it)
USEFUL = "4·b·h·d FLOPs per visible (query, key) pair ÷ time"


def _same_device(times: Measurement, m: Measurement) -> Measurement | None:
    """`times` where it was measured on `m`'s device: another device's times are not set
    beside `m`'s memory and bytes."""
    return times if times.device_id == m.device_id else None


def cited(key: str) -> Fact:
    """A paper's figure as chapter 08 quotes it: a constant of the reference dataset
    (records/published.toml), never typed here."""
    c = dataset().constant(key)
    q = Quantity(c.metric, c.subject, f"paper:{c.source.key}", PUBLISHED)
    return Fact(q, c.value, c.unit, c.low, c.high)


# --- what tiling buys at the measured shape ------------------------------------------------


def useful_flops(shape: Shape) -> float:
    """The FLOPs achieved FLOP/s are counted with: the two matmuls over the (query, key)
    pairs the mask leaves visible (analytic.cost.useful_flops)."""
    return cost.useful_flops(*shape.dims, causal=shape.causal, kv_seq_len=shape.kv_len)


@dataclass(frozen=True)
class Implementation:
    """One row of the tiled-vs-naive comparison at the measurement's shape."""

    name: str
    status: str
    forward: Fact | None = None  # unprofiled, from forward_times (None: not run, not in grid)
    versus_naive: ffwd.Versus | None = None
    achieved: Fact | None = None  # useful FLOP/s over the unprofiled forward time
    peak: Fact | None = None
    less_memory: Fact | None = None  # naive's peak ÷ this one's
    error: Fact | None = None


def implementations(m: Measurement, times: Measurement) -> list[Implementation]:
    """Peak memory and error (this experiment's) beside each forward time (forward_times')."""
    on, here = On.of(m), _same_device(times, m)
    rows = {r.implementation: r for r in rows_of(m.tables["implementations"])}
    naive = rows.get(fwd.NAIVE)
    naive_peak = naive.peak_bytes if naive and naive.status == fwd.OK else None
    out = []
    for name, r in rows.items():
        if r.status != fwd.OK:
            out.append(Implementation(name, r.status))
            continue
        forward = ffwd.time_at(here, name, on.shape)
        versus = achieved = less = None
        if forward is not None:
            if name != fwd.NAIVE:
                versus = ffwd.versus(times, name, fwd.NAIVE, on.shape)
            flops = useful_flops(on.shape) / (forward.value * 1e-6)
            achieved = on("achieved FLOP/s", name, UNPROFILED, flops, "FLOP/s", detail=USEFUL)
        if naive_peak is not None and name != fwd.NAIVE and r.peak_bytes:
            ratio = naive_peak / r.peak_bytes
            less = on("peak memory ratio", f"{fwd.NAIVE} vs {name}", COUNTED, ratio, "×")
        peak = on("peak memory", name, COUNTED, r.peak_bytes, "B")
        err = on(ERROR, f"{name} vs float64", NUMERIC, r.rel_error, ERROR)
        out.append(Implementation(name, r.status, forward, versus, achieved, peak, less, err))
    return out


def finding(m: Measurement, times: Measurement) -> dict[str, Implementation] | None:
    """Each implementation by name; None when naive or the tiled loop did not run here (the
    loop's memory ratio exists only where naive ran too)."""
    rows = {r.name: r for r in implementations(m, times)}
    return rows if fwd.TILED in rows and rows[fwd.TILED].less_memory is not None else None


def traffic(m: Measurement, times: Measurement) -> list[tuple[str, Fact, Fact, Fact | None]]:
    """The three traffic models: each one's label, bytes, bytes ÷ naive's, and bytes over the
    matching implementation's unprofiled forward time (the naive and loop models; no timed
    implementation moves the fused model's bytes here)."""
    on, here = On.of(m), _same_device(times, m)
    records = rows_of(m.tables["traffic"])
    out = []
    for r, impl in zip(records, (fwd.NAIVE, fwd.TILED, None), strict=True):
        model, moved = r.model, r.bytes
        t = ffwd.time_at(here, impl, on.shape) if impl else None
        rate = None
        if t is not None:
            rate = on("achieved B/s", impl, UNPROFILED, moved / (t.value * 1e-6), "B/s",
                      detail="modelled bytes ÷ time")  # fmt: skip
        ratio = moved / records[0].bytes
        out.append((
            model,
            model_fact("modelled bytes", model, on.shape, moved, "B"),
            model_fact("modelled bytes ratio", f"{model} vs naive", on.shape, ratio, "×"),
            rate,
        ))  # fmt: skip
    return out


@dataclass(frozen=True)
class OnlineTile:
    first_key: int
    last_key: int
    tile_max: Fact
    m: Fact
    alpha: Fact | None  # None for the first tile: nothing was summed yet
    total: Fact  # the running sum l
    grew: bool  # the running max rose at this tile (the first tile sets it)


@dataclass(frozen=True)
class Online:
    """One query's running max and sum, tile by tile (computed in float64 from the inputs);
    how many tiles after the first raised the max; how far the online log-sum-exp ends from
    the whole row's."""

    tiles: list[OnlineTile]
    grew: int
    lse_gap: float  # |(m + log l) − the whole row's log-sum-exp|
    exact: bool  # no gap at all


def online_softmax(m: Measurement) -> Online:
    on, q = On.of(m), m.facts["online_query"]
    tiles = []
    for r in rows_of(m.tables["online_softmax_row"]):
        keys = f"query {q} of head 0, keys {r.first_key}–{r.end_key - 1}"
        first = r.tile == 0
        tiles.append(
            OnlineTile(
                r.first_key,
                r.end_key - 1,
                on("tile max score", keys, NUMERIC, r.tile_max, ""),
                on("running max", keys, NUMERIC, r.m, ""),
                None if first else on("rescale factor", keys, NUMERIC, r.alpha, ""),
                on("running sum", keys, NUMERIC, r.l, ""),
                first or r.alpha < 1.0,
            )
        )
    gap = abs(m.facts["online_lse"] - m.facts["whole_row_lse"])
    return Online(tiles, sum(t.grew for t in tiles[1:]), gap, gap == 0)


MEMORY_LINES = ("naive_peak", "tiled_peak", "sdpa_flash_peak")


def memory_slopes(m: Measurement) -> dict[str, float | None]:
    """The fitted log-log slope of each implementation's peak memory against seq_len."""
    return table_slopes(m.tables["memory_by_seq_len"], "seq_len", MEMORY_LINES)


@dataclass(frozen=True)
class MemoryGrowth:
    lengths: list[int]
    naive_slope: float
    tiled_slope: float
    loop_above_naive: list[int]  # lengths where the tiled loop's peak is above naive's


def memory_growth(m: Measurement) -> MemoryGrowth | None:
    """Log-log slopes of the peaks against seq_len; None when a peak is missing."""
    rows = rows_of(m.tables["memory_by_seq_len"])
    slopes = memory_slopes(m)
    naive, tiled = slopes["naive_peak"], slopes["tiled_peak"]
    if naive is None or tiled is None or not all(r.naive_peak and r.tiled_peak for r in rows):
        return None
    above = [r.seq_len for r in rows if r.tiled_peak > r.naive_peak]
    return MemoryGrowth([r.seq_len for r in rows], naive, tiled, above)


@dataclass(frozen=True)
class Schedule:
    counts: dict[str, int]  # the tile grid at the measurement's shape and blocks
    calls: int | None  # tiles of scores the profile saw computed (None: no profile)
    as_scheduled: bool


def schedule(m: Measurement) -> Schedule:
    p = m.params
    c = tile_counts(tile_grid(p["seq_len"], p["block_q"], p["block_k"], causal=p["causal"]))
    calls = next((s.calls for s in m.steps if s.label == "tiled.scores"), None)
    return Schedule(c, calls, calls == c["computed"])


def phases(m: Measurement) -> list[tuple[str, int, Fact, Fact, Fact]]:
    """The loop's phases under the profiler: label, calls, share of the four's profiled time
    (structure, not speed), and the phase's modelled FLOPs and bytes at these tiles."""
    on, p = On.of(m), m.params
    tiles = f"{p['block_q']}×{p['block_k']} tiles"
    found = fshare.shares({s.label: [s.time_us] for s in m.steps}) if m.steps else {}
    return [
        (
            s.label,
            s.calls,
            on("share of profiled time", s.label, PROFILED, found[s.label].fraction, "%",
               detail=tiles),
            model_fact("modelled FLOPs", s.label, on.shape, s.flops, "FLOP", detail=tiles),
            model_fact("modelled bytes", s.label, on.shape, s.bytes, "B", detail=tiles),
        )
        for s in m.steps
    ]  # fmt: skip


# --- the block size ------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """One block size: CLEAR or TIE where it leads the ranking, else ""; the score tiles
    computed and their share of the score matrix; the time and peak (None: not timed); the
    fused kernel's modelled bytes and on-chip bytes per program at that tile."""

    size: int
    lead: str
    tiles: Fact
    share: Fact
    time: Fact | None
    peak: Fact | None
    fused_bytes: Fact
    on_chip: Fact


@dataclass(frozen=True)
class BlockSweep:
    rows: list[Block]
    ranking: Ranking | None  # fastest first (blocks as str), with every block within its noise
    slowest_vs_fastest: ffwd.Versus | None


# The block sweep's times, a one-line view over flash_block_sweep's table (records/sweep.py):
# the tiled loop's forward time at each block size, ranked across the sizes with ties.
BLOCKS = Sweep(
    table="blocks",
    x="block",
    lines=("time",),
    metric="forward time",
    shape=True,
    subject="tiled (Python loop), {x}×{x} tiles",
)


def block_sweep(m: Measurement) -> BlockSweep:
    on = On.of(m)
    found = sweep_findings(m, spec=BLOCKS)
    times = {p.x: p.facts["time"] for p in found.points}
    r = found.across
    lead = (CLEAR if r.clear else TIE) if r else ""

    def block(row) -> Block:
        b, loop = row.block, BLOCKS.subject_of("time", row.block)
        tiles, time = f"{b}×{b} tiles", times.get(b)
        return Block(
            b,
            lead if r and str(b) in r.leaders else "",
            model_fact("score tiles computed", loop, on.shape, row.tiles_computed, ""),
            model_fact("computed share of scores", loop, on.shape, row.scores_computed, "%"),
            time,
            None if time is None else on("peak memory", loop, COUNTED, row.peak_bytes, "B"),
            model_fact("modelled bytes", f"fused kernel, {tiles}", on.shape, row.fused_bytes, "B"),
            model_fact("on-chip bytes per program", tiles, on.shape, row.tile_working_set, "B"),
        )

    rows = [block(row) for row in rows_of(m.tables["blocks"])]
    if r is None or len(r.order) < 2:
        return BlockSweep(rows, r, None)
    fast, slow = (f"{b}×{b} tiles" for b in (r.fastest, r.order[-1]))
    q = on.quantity(ffwd.SPEED, f"tiled (Python loop), {fast} vs {slow}", UNPROFILED)
    return BlockSweep(rows, r, ffwd.Versus.of(q, fast, slow, r.against_fastest[r.order[-1]]))


# --- the Triton kernel ---------------------------------------------------------------------


def interpreter_errors(m: Measurement) -> list[tuple[str, Fact | None, Fact | None, Fact | None]]:
    """Per dtype: the kernel (under the interpreter) against float64, SDPA flash against
    float64, and the kernel against SDPA flash, as relative errors."""
    subjects = {
        "triton_vs_float64": f"{fwd.TRITON}, interpreted, vs float64",
        "sdpa_flash_vs_float64": f"{fwd.SDPA_FLASH} vs float64",
        "triton_vs_sdpa_flash": f"{fwd.TRITON}, interpreted, vs {fwd.SDPA_FLASH}",
    }
    out = []
    for r in m.tables["interpreter"].records() if "interpreter" in m.tables else []:
        on = On.of(m, dtype=r["dtype"])
        errors = (None if r[c] is None else on(ERROR, s, NUMERIC, r[c], ERROR)
                  for c, s in subjects.items())  # fmt: skip
        out.append((r["dtype"], *errors))
    return out


# The GPU kernel sweep, a view over flash_triton_vs_sdpa's long table (records/sweep.py):
# every kernel the device ran (this site's Triton kernel and SDPA's backends), against
# seq_len, on the kernel clock; its facts are the kernel times the chapter states.
KERNELS = Sweep(
    table="kernels",
    x="seq_len",
    x_unit="tokens",
    lines=(),
    metric="kernel time",
    clock=KERNEL,
    line="implementation",
    shape_from=(("seq_len", "seq_len"),),
    detail="L2 flushed",
)


@dataclass(frozen=True)
class KernelsAt:
    """The kernels at one length: each one's kernel time (its status where it did not run),
    the Triton kernel's achieved FLOP/s and share of the measured matmul ceiling, and its
    time against SDPA flash's (ratio: Triton's ÷ SDPA's)."""

    seq_len: int
    times: dict[str, Fact | str]
    rate: Fact | None = None
    share: Fact | None = None  # None where suspect
    suspect: bool = False
    versus_sdpa: ffwd.Versus | None = None


@dataclass(frozen=True)
class Kernels:
    rows: list[KernelsAt]  # by seq_len
    names: tuple[str, ...]  # every kernel the entry holds
    suspects: tuple[str, ...]  # kernels whose rate somewhere is above the ceiling, by name
    error: Fact | None  # the Triton kernel's against float64, at the shortest length


def kernels(m: Measurement, ceilings: Measurement | None) -> Kernels:
    """A GPU `flash_triton_vs_sdpa` entry's kernels, judged against the matmul ceiling of its
    dtype measured on the same device (none from another device). A rate above the ceiling's
    fastest round is suspect and claims no share: no attention kernel outruns the matmul it
    is built from."""
    if "kernels" not in m.tables:
        return Kernels([], (), (), None)
    key = f"peak_flops_{m.params['dtype']}"
    ceiling = None
    if ceilings is not None and ceilings.device_id == m.device_id and key in ceilings.facts:
        ceiling = ffwd.ceiling(ceilings, key)
    top = None if ceiling is None else ceiling.value if ceiling.high is None else ceiling.high
    rows, suspects = [], set()
    for p in sweep_findings(m, spec=KERNELS).points:
        on, t = On.of(m, seq_len=p.x), p.timings
        rates = {n: p.rows[n]["flops"] / (f.value * 1e-6) for n, f in p.facts.items() if f}
        above = {n for n, value in rates.items() if top is not None and value > top}
        suspects |= above
        rate = share = versus = None
        if fwd.TRITON in rates:
            value = rates[fwd.TRITON]
            rate = on("achieved FLOP/s", fwd.TRITON, KERNEL, value, "FLOP/s", detail=USEFUL)
            if ceiling and fwd.TRITON not in above:
                share = on("share of the matmul ceiling", fwd.TRITON, KERNEL,
                           value / ceiling.value, "%")  # fmt: skip
        if fwd.TRITON in t and fwd.SDPA_FLASH in t:
            q = on.quantity("kernel time ratio", f"{fwd.SDPA_FLASH} vs {fwd.TRITON}", KERNEL)
            c = compare(t[fwd.SDPA_FLASH], t[fwd.TRITON])
            versus = ffwd.Versus.of(q, fwd.SDPA_FLASH, fwd.TRITON, c)
        times = {n: p.facts[n] or r["status"] for n, r in p.rows.items()}
        rows.append(KernelsAt(p.x, times, rate, share, fwd.TRITON in above, versus))
    names = tuple(dict.fromkeys(n for r in rows for n in r.times))
    err = m.facts.get("triton_rel_error")
    if err is not None:
        on = On.of(m, seq_len=min(m.tables["kernels"].column("seq_len")))
        err = on(ERROR, f"{fwd.TRITON} vs float64", NUMERIC, err, ERROR)
    return Kernels(rows, names, tuple(sorted(suspects)), err)


# --- forecasts for a named GPU, counted on the tile grid -----------------------------------
# All for analytic.gpu's forecast GPU (gpu.sheet()) at its FORECAST_SHAPE, on the fused
# kernel's FLASH_BLOCK_Q × FLASH_BLOCK_K tiles.


@dataclass(frozen=True)
class Generations:
    """FlashAttention 1's and 2's schedules, as (FA1, FA2) pairs."""

    sms: Fact
    fp32_peak: Fact
    programs: tuple[Fact, Fact]
    per_sm: tuple[Fact, Fact]
    rescale_flops: tuple[Fact, Fact]
    rescale_us: tuple[Fact, Fact]  # on the FP32 units, at the data sheet's peak
    matmul_us: Fact  # the two matmuls over the computed tiles, at the tensor-core peak
    rescale_share: tuple[Fact, Fact]  # rescaling floor ÷ matmul floor
    tiles: Fact
    skipped: Fact
    skipped_flops: Fact  # the matmul FLOPs the skipped tiles would have cost


def generations() -> Generations:
    g, shape = gpu.sheet(), gpu.FORECAST_SHAPE
    block_q, block_k = gpu.FLASH_BLOCK_Q, gpu.FLASH_BLOCK_K
    if g.sm_count is None:
        raise ValueError(f"the data sheet of the {g.label} records no SM count")
    tiles = f"{block_q}×{block_k} tiles"
    versions = (f"FlashAttention, {tiles}", f"FlashAttention-2, {tiles}")
    mask = {"causal": shape.causal, "kv_seq_len": shape.kv_len}

    def spec(metric: str, subject: str, value: float, unit: str) -> Fact:
        return forecast(metric, subject, g, value, unit, shape=shape)

    def model(metric: str, subject: str, value: float, unit: str) -> Fact:
        return model_fact(metric, subject, shape, value, unit)

    def pair(of, metric: str, values, unit: str, vs: str = "") -> tuple[Fact, Fact]:
        return tuple(of(metric, v + vs, x, unit) for v, x in zip(versions, values, strict=True))

    progs = (programs(*shape.dims[:3]), programs(*shape.dims[:3], block_q))
    rescale = output_rescale_flops(*shape.dims, block_q=block_q, block_k=block_k, **mask)
    counts = tile_counts(tile_grid(shape.seq_len, block_q, block_k, **mask))
    flash = gpu.flash_forward(g, shape, block_q=block_q, block_k=block_k)
    rescale_us = [f / gpu.vector_peak(g) * 1e6 for f in (rescale.fa1, rescale.fa2)]
    skipped = cost.attention_flops(*shape.dims, kv_seq_len=shape.kv_len) - flash.flops
    return Generations(
        forecast("streaming multiprocessors", g.label, g, g.sm_count, "SMs"),
        forecast("FP32 peak", g.label, g, gpu.vector_peak(g), "FLOP/s"),
        pair(model, "programs", progs, "programs"),
        pair(spec, "programs per SM", [p / g.sm_count for p in progs], ""),
        pair(model, "output rescaling FLOPs", (rescale.fa1, rescale.fa2), "FLOP"),
        pair(spec, "output rescaling time", rescale_us, "µs"),
        spec("matmul time", versions[0], flash.compute_us, "µs"),
        pair(spec, "output rescaling time ratio", [us / flash.compute_us for us in rescale_us],
             "%", " vs matmuls"),
        model("score tiles", tiles, counts["tiles"], "tiles"),
        model("score tiles skipped", tiles, counts["skipped"], "tiles"),
        model("matmul FLOPs skipped", tiles, skipped, "FLOP"),
    )  # fmt: skip


@dataclass(frozen=True)
class Tiles:
    capacity: Fact  # the most shared memory one thread block may use
    register_capacity: Fact  # the most register bytes one thread block may hold
    # Per tile size: its fit; the q, k and v tiles' bytes in shared memory; the score tile's,
    # accumulator's, running max's and sum's in registers; the bytes a fused forward moves
    # with these tiles (k, v once per query tile); naive's bytes ÷ those.
    rows: list[tuple[TileFit, Fact, Fact, Fact, Fact]]


def _fused(shape: Shape, block_q: int, block_k: int) -> float:
    """The bytes a fused forward moves at `shape` (k and v once per query tile)."""
    return fused_traffic(
        *shape.dims, shape.dtype, causal=shape.causal, block_q=block_q, block_k=block_k,
        kv_seq_len=shape.kv_len,
    )  # fmt: skip


def tiles() -> Tiles:
    """Which tile sizes fit one block — q, k, v tiles in its shared memory, the score tile
    and accumulator in its registers, as FlashAttention 2 and 3 keep them — and the bytes
    each moves."""
    g, shape = gpu.sheet(), gpu.FORECAST_SHAPE
    if g.shared_memory_per_block_kb is None:
        raise ValueError(f"the data sheet of the {g.label} records no shared memory per block")
    capacity = g.shared_memory_per_block_kb * 1024
    naive = naive_bytes().value
    rows = []
    for fit in tile_fits(capacity, shape.head_dim, shape.dtype):
        tile = f"{fit.block_q}×{fit.block_k} tiles"
        subject, moved = f"fused forward, {tile}", _fused(shape, fit.block_q, fit.block_k)
        rows.append((
            fit,
            model_fact("shared-memory bytes per program", tile, shape, fit.shared, "B"),
            model_fact("register bytes per program", tile, shape, fit.registers, "B"),
            model_fact("modelled bytes", subject, shape, moved, "B",
                       detail="k, v once per query tile"),
            model_fact("modelled bytes ratio", f"naive vs {subject}", shape, naive / moved, "×"),
        ))  # fmt: skip
    cap = forecast("shared memory per block", g.label, g, capacity, "B")
    regs = forecast("register bytes per block", g.label, g, 4 * REGISTERS_PER_BLOCK, "B")
    return Tiles(cap, regs, rows)


def naive_bytes() -> Fact:
    """Naive attention's five kernels' HBM bytes (each step through memory)."""
    g, shape = gpu.sheet(), gpu.FORECAST_SHAPE
    total = sum(k.bytes for k in gpu.naive_steps(g, shape))
    return forecast("HBM bytes", fwd.NAIVE, g, total, "B", shape=shape)


@dataclass(frozen=True)
class GpuForecast:
    """The forecast box: HBM bytes naive vs fused, and the fused forward's time, each with
    the measurement of the same quantity on that GPU when the store holds one."""

    l2_serves_rereads: bool
    naive_bytes: Check
    flash_bytes: Check
    fewer_bytes: Check  # assumes every K/V re-read hits L2 where `l2_serves_rereads`
    fewer_bytes_from_hbm: Check  # every K/V re-read from HBM: before any L2 reuse
    floor: Check  # SDPA flash's forward: the roofline floor, over cited efficiencies its range
    triton_floor: Check


def gpu_forecast(times_by_device: Sequence[Measurement]) -> GpuForecast:
    """Checked against the forecast GPU's forward_times entry among `times_by_device` (every
    device's, as `measure_each_device` returns them) when present."""
    g, shape = gpu.sheet(), gpu.FORECAST_SHAPE
    flash = gpu.flash_forward(g, shape)
    naive = naive_bytes()
    l2 = gpu.l2_serves_rereads(g, shape)
    measured = measured_on(times_by_device, g)

    def spec(metric: str, name: str, value: float, unit: str, detail: str = "") -> Fact:
        return forecast(metric, name, g, value, unit, shape=shape, detail=detail)

    def fewer(moved: float, detail: str) -> Check:
        subject = f"{fwd.NAIVE} vs FlashAttention"
        return check(spec("HBM bytes ratio", subject, naive.value / moved, "×", detail), None)

    def floor(name: str, realistic: Fact | None = None) -> Check:
        time = spec(ffwd.FORWARD_TIME, name, flash.floor_us, "µs")
        return check(time, ffwd.time_at(measured, name, shape), realistic)

    tiled = _fused(shape, gpu.FLASH_BLOCK_Q, gpu.FLASH_BLOCK_K)
    return GpuForecast(
        l2,
        check(naive, None),
        check(spec("HBM bytes", "FlashAttention forward", flash.bytes, "B"), None),
        fewer(flash.bytes, "every K/V re-read served by L2" if l2 else ""),
        fewer(tiled, "every K/V re-read from HBM"),
        floor(fwd.SDPA_FLASH, forecast_range(ffwd.FORWARD_TIME, fwd.SDPA_FLASH, g,
                                             gpu.flash_range(g, shape), "µs", shape=shape,
                                             detail=RANGE_OF_FLASH)),
        floor(fwd.TRITON),
    )  # fmt: skip
