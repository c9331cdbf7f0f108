# The FlashAttention chapter's facts and verdicts, decided once: what tiling buys at the
# measured shape (peak memory, forward times from forward_times), which block size is fastest
# within the noise, the Triton kernel's numerics and kernel times, and the forecasts for a
# named GPU counted on the tile grid (FlashAttention 2's parallelism, its deferred
# normalisation, causal tile skipping, tiles that fit in one block's shared memory, HBM
# bytes) with the two papers' published figures cited as such. No words: render/flash.py
# says them.
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attention_docs.analytic import cost, gpu
from attention_docs.analytic.cost import attention_flops
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
    MODEL,
    NUMERIC,
    PROFILED,
    PUBLISHED,
    UNPROFILED,
    Fact,
    Quantity,
)
from attention_docs.findings.forecast import RANGE_OF_FLASH, Check, check, forecast
from attention_docs.findings.forecast import realistic as forecast_range
from attention_docs.findings.rank import Ranking, rank
from attention_docs.findings.trend import fitted_slope, table_slopes
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet
from attention_docs.records.published import dataset
from attention_docs.records.shape import Shape

ANALYTIC = "analytic"  # the device of a count that depends on the shape alone
ERROR = "relative error"  # the unit of a relative error (render/words says it)
USEFUL = "4·b·h·d FLOPs per visible (query, key) pair ÷ time"


# --- papers --------------------------------------------------------------------------------


# The papers, and their headline figures as chapter 08 quotes them: cited constants from the
# reference dataset (records/published.toml), never typed here.
FA2_PAPER = dataset().sources["dao2023"]
FA3_PAPER = dataset().sources["shah2024"]


def _cited(key: str) -> Fact:
    c = dataset().constant(key)
    q = Quantity(c.metric, c.subject, f"paper:{c.source.key}", PUBLISHED)
    return Fact(q, c.value, c.unit, c.low, c.high)


FA1_ON_A100 = _cited("fa1-a100-share")
FA2_ON_A100 = _cited("fa2-a100-share")
FA2_SPEEDUP = _cited("fa2-speedup")
FA2_ON_H100 = _cited("fa2-h100-share")
FA3_SPEEDUP = _cited("fa3-speedup")
FA3_FP16 = _cited("fa3-fp16")
FA3_FP16_SHARE = _cited("fa3-fp16-share")
FA3_FP8 = _cited("fa3-fp8")
FA3_FP8_ERROR = _cited("fa3-fp8-error")


# --- what tiling buys at the measured shape ------------------------------------------------


def _shape(m: Measurement) -> Shape:
    return fwd.Shape.of(m.params)


def useful_flops(shape: Shape) -> float:
    """The FLOPs achieved FLOP/s are counted with: the two matmuls over the (query, key)
    pairs the mask leaves visible (analytic.cost.useful_flops)."""
    return cost.useful_flops(*shape.dims, causal=shape.causal, kv_seq_len=shape.kv_len)


@dataclass(frozen=True)
class Implementation:
    """One row of the tiled-vs-naive comparison at the measurement's shape."""

    name: str
    status: str
    forward: Fact | None  # unprofiled, from forward_times (None: not run, or not in the grid)
    versus_naive: ffwd.Versus | None
    peak: Fact | None
    less_memory: Fact | None  # naive's peak ÷ this one's
    error: Fact | None
    achieved: Fact | None  # useful FLOP/s over the unprofiled forward time


def implementations(m: Measurement, times: Measurement) -> list[Implementation]:
    """Peak memory and error (this experiment's) beside each forward time (forward_times')."""
    shape, dev = _shape(m), m.device_id
    rows = {r["implementation"]: r for r in m.tables["implementations"].records()}
    naive = rows.get(fwd.NAIVE)
    out = []
    for name, r in rows.items():
        if r["status"] != fwd.OK:
            out.append(Implementation(name, r["status"], None, None, None, None, None, None))
            continue
        forward = versus = achieved = None
        if times.device_id == dev:
            try:
                forward = ffwd.forward_time(times, name, shape)
            except fwd.NotMeasuredError:
                forward = None
            if forward is not None:
                if name != fwd.NAIVE:
                    versus = ffwd.versus(times, name, fwd.NAIVE, shape)
                achieved = Fact(
                    Quantity("achieved FLOP/s", name, dev, UNPROFILED, shape, USEFUL),
                    useful_flops(shape) / (forward.value * 1e-6),
                    "FLOP/s",
                )
        peak = Fact(Quantity("peak memory", name, dev, COUNTED, shape), r["peak_bytes"], "B")
        less = None
        if naive and naive["status"] == fwd.OK and name != fwd.NAIVE and r["peak_bytes"]:
            q = Quantity("peak memory ratio", f"{fwd.NAIVE} vs {name}", dev, COUNTED, shape)
            less = Fact(q, naive["peak_bytes"] / r["peak_bytes"], "×")
        err = Fact(
            Quantity(ERROR, f"{name} vs float64", dev, NUMERIC, shape), r["rel_error"], ERROR
        )
        out.append(Implementation(name, r["status"], forward, versus, peak, less, err, achieved))
    return out


@dataclass(frozen=True)
class Finding:
    """The chapter's finding: what tiling saved in memory, and how fast each way ran."""

    naive: Implementation
    tiled: Implementation
    sdpa: Implementation | None


def finding(m: Measurement, times: Measurement) -> Finding | None:
    """None when naive or the tiled loop did not run here."""
    rows = {r.name: r for r in implementations(m, times)}
    naive, tiled = rows.get(fwd.NAIVE), rows.get(fwd.TILED)
    if naive is None or tiled is None or tiled.less_memory is None:
        return None
    return Finding(naive, tiled, rows.get(fwd.SDPA_FLASH))


@dataclass(frozen=True)
class Traffic:
    model: str  # the table's model label, as the experiment stored it
    bytes: Fact
    relative: Fact  # ÷ naive's bytes
    achieved: Fact | None  # bytes ÷ the matching implementation's unprofiled forward time


def traffic(m: Measurement, times: Measurement) -> list[Traffic]:
    """The three traffic models; the naive and loop models over their implementations'
    unprofiled forward times (no timed implementation moves the fused model's bytes here)."""
    shape, dev = _shape(m), m.device_id
    records = m.tables["traffic"].records()
    naive = records[0]["bytes"]
    timed = (fwd.NAIVE, fwd.TILED, None)
    out = []
    for r, impl in zip(records, timed, strict=True):
        q = Quantity("modelled bytes", r["model"], ANALYTIC, MODEL, shape)
        rel = Quantity("modelled bytes ratio", f"{r['model']} vs naive", ANALYTIC, MODEL, shape)
        achieved = None
        if impl and times.device_id == dev:
            try:
                t = ffwd.forward_time(times, impl, shape)
            except fwd.NotMeasuredError:
                t = None
            if t is not None:
                aq = Quantity("achieved B/s", impl, dev, UNPROFILED, shape, "modelled bytes ÷ time")
                achieved = Fact(aq, r["bytes"] / (t.value * 1e-6), "B/s")
        out.append(
            Traffic(
                r["model"], Fact(q, r["bytes"], "B"), Fact(rel, r["bytes"] / naive, "×"), achieved
            )
        )
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


def online_softmax(m: Measurement) -> list[OnlineTile]:
    """One query's running max and sum, tile by tile (computed in float64 from the inputs)."""
    shape, q = _shape(m), m.facts["online_query"]
    out = []
    for r in m.tables["online_softmax_row"].records():
        keys = f"query {q} of head 0, keys {r['first_key']}–{r['end_key'] - 1}"

        def value(metric: str, v: float, keys: str = keys) -> Fact:
            return Fact(Quantity(metric, keys, m.device_id, NUMERIC, shape), v, "")

        first = r["tile"] == 0
        out.append(
            OnlineTile(
                r["first_key"], r["end_key"] - 1, value("tile max score", r["tile_max"]),
                value("running max", r["m"]), None if first else value("rescale factor", r["alpha"]),
                value("running sum", r["l"]), first or r["alpha"] < 1.0,
            )
        )  # fmt: skip
    return out


@dataclass(frozen=True)
class OnlineSummary:
    """What the online softmax table shows: how many tiles after the first raised the running
    max, and how far the online log-sum-exp ends from the whole row's."""

    grew: int
    after_first: int
    lse_gap: float  # |(m + log l) − the whole row's log-sum-exp|

    @property
    def exact(self) -> bool:
        return self.lse_gap == 0


def online_summary(m: Measurement) -> OnlineSummary:
    tiles = online_softmax(m)
    gap = abs(m.facts["online_lse"] - m.facts["whole_row_lse"])
    return OnlineSummary(sum(t.grew for t in tiles[1:]), len(tiles) - 1, gap)


@dataclass(frozen=True)
class MemoryGrowth:
    lengths: list[int]
    naive_slope: float
    tiled_slope: float
    loop_above_naive: list[int]  # lengths where the tiled loop's peak is above naive's


def memory_growth(m: Measurement) -> MemoryGrowth | None:
    """Log-log slopes of the peaks against seq_len; None when a peak is missing."""
    rows = m.tables["memory_by_seq_len"].records()
    if not rows or any(not (r["naive_peak"] and r["tiled_peak"]) for r in rows):
        return None
    xs = [r["seq_len"] for r in rows]
    naive = fitted_slope(xs, [r["naive_peak"] for r in rows])
    tiled = fitted_slope(xs, [r["tiled_peak"] for r in rows])
    if naive is None or tiled is None:
        return None
    above = [r["seq_len"] for r in rows if r["tiled_peak"] > r["naive_peak"]]
    return MemoryGrowth(xs, naive, tiled, above)


@dataclass(frozen=True)
class Phase:
    label: str
    calls: int
    share: Fact  # of the four phases' profiled time: structure, not speed
    flops: Fact
    bytes: Fact


def phases(m: Measurement) -> list[Phase]:
    """The loop's phases under the profiler, with their modelled work at these tiles."""
    shape, p = _shape(m), m.params
    tiles = f"{p['block_q']}×{p['block_k']} tiles"
    found = fshare.shares({s.label: [s.time_us] for s in m.steps}) if m.steps else {}
    out = []
    for s in m.steps:
        sq = Quantity("share of profiled time", s.label, m.device_id, PROFILED, shape, tiles)
        fq = Quantity("modelled FLOPs", s.label, ANALYTIC, MODEL, shape, tiles)
        bq = Quantity("modelled bytes", s.label, ANALYTIC, MODEL, shape, tiles)
        out.append(
            Phase(s.label, s.calls, Fact(sq, found[s.label].fraction, "%"),
                  Fact(fq, s.flops, "FLOP"), Fact(bq, s.bytes, "B"))
        )  # fmt: skip
    return out


# --- the block size ------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    block: int
    tiles: Fact
    scores_share: Fact  # share of the score matrix inside computed tiles
    time: Fact | None
    peak: Fact | None
    fused_bytes: Fact
    working_set: Fact


@dataclass(frozen=True)
class BlockSweep:
    rows: list[Block]
    ranking: Ranking | None  # fastest first, with every block within noise of it
    slowest_vs_fastest: ffwd.Versus | None


def block_sweep(m: Measurement) -> BlockSweep:
    shape, dev = _shape(m), m.device_id
    rows, timings = [], {}
    for r in m.tables["blocks"].records():
        b = r["block"]
        tile = f"tiled (Python loop), {b}×{b} tiles"
        ok = r["status"] == fwd.OK and r["time"] is not None
        if ok:
            timings[b] = r["time"]
        rows.append(
            Block(
                b,
                Fact(Quantity("score tiles computed", tile, ANALYTIC, MODEL, shape), r["tiles_computed"], ""),
                Fact(Quantity("computed share of scores", tile, ANALYTIC, MODEL, shape), r["scores_computed"], "%"),
                Fact.of_timing(Quantity("forward time", tile, dev, UNPROFILED, shape), r["time"]) if ok else None,
                Fact(Quantity("peak memory", tile, dev, COUNTED, shape), r["peak_bytes"], "B") if ok else None,
                Fact(Quantity("modelled bytes", f"fused kernel, {b}×{b} tiles", ANALYTIC, MODEL, shape), r["fused_bytes"], "B"),
                Fact(Quantity("on-chip bytes per program", f"{b}×{b} tiles", ANALYTIC, MODEL, shape), r["tile_working_set"], "B"),
            )
        )  # fmt: skip
    if not timings:
        return BlockSweep(rows, None, None)
    ranking = rank({str(b): t for b, t in timings.items()})
    if len(timings) < 2:
        return BlockSweep(rows, ranking, None)
    fast, slow = (f"{b}×{b} tiles" for b in (ranking.fastest, ranking.order[-1]))
    q = Quantity(ffwd.SPEED, f"tiled (Python loop), {fast} vs {slow}", dev, UNPROFILED, shape)
    c = compare(timings[int(ranking.fastest)], timings[int(ranking.order[-1])])
    return BlockSweep(rows, ranking, ffwd.Versus(q, fast, slow, c))


# --- the Triton kernel ---------------------------------------------------------------------


def interpreter_errors(m: Measurement) -> list[tuple[str, list[Fact | None]]]:
    """Per dtype: the kernel (under the interpreter) against float64, SDPA flash against
    float64, and the kernel against SDPA flash, as relative errors."""
    if "interpreter" not in m.tables:
        return []
    p = m.params
    subjects = (
        f"{fwd.TRITON}, interpreted, vs float64",
        f"{fwd.SDPA_FLASH} vs float64",
        f"{fwd.TRITON}, interpreted, vs {fwd.SDPA_FLASH}",
    )
    out = []
    for r in m.tables["interpreter"].records():
        shape = fwd.Shape.of({**p, "dtype": r["dtype"]})
        values = (r["triton_vs_float64"], r["sdpa_flash_vs_float64"], r["triton_vs_sdpa_flash"])
        out.append(
            (
                r["dtype"],
                [
                    None
                    if v is None
                    else Fact(Quantity(ERROR, s, m.device_id, NUMERIC, shape), v, ERROR)
                    for s, v in zip(subjects, values, strict=True)
                ],
            )
        )
    return out


@dataclass(frozen=True)
class Kernel:
    """One kernel at one length: its kernel time, achieved FLOP/s and share of the measured
    matmul ceiling; `suspect` when the rate is above the ceiling's fastest round."""

    seq_len: int
    name: str
    status: str
    time: Fact | None
    rate: Fact | None
    share: Fact | None
    suspect: bool


def kernels(m: Measurement, ceilings: Measurement | None) -> list[Kernel]:
    """Kernel rows of a GPU `flash_triton_vs_sdpa` entry, judged against the matmul ceiling
    of its dtype measured on the same device (none from another device)."""
    key = f"peak_flops_{m.params['dtype']}"
    ceiling = None
    if ceilings is not None and ceilings.device_id == m.device_id and key in ceilings.facts:
        ceiling = ffwd.ceiling(ceilings, key)
    out = []
    for r in m.tables.get("kernels", None).records() if "kernels" in m.tables else []:
        shape = fwd.Shape.of({**m.params, "seq_len": r["seq_len"]})
        t = r["time"]
        if r["status"] != fwd.OK or t is None:
            out.append(
                Kernel(r["seq_len"], r["implementation"], r["status"], None, None, None, False)
            )
            continue
        time = Fact.of_timing(
            Quantity("kernel time", r["implementation"], m.device_id, KERNEL, shape, "L2 flushed"),
            t,
        )
        value = r["flops"] / (t.time_us * 1e-6)
        rate = Fact(
            Quantity("achieved FLOP/s", r["implementation"], m.device_id, KERNEL, shape, USEFUL),
            value,
            "FLOP/s",
        )
        fastest = (
            ceiling.high
            if ceiling and ceiling.high is not None
            else (ceiling.value if ceiling else None)
        )
        suspect = fastest is not None and value > fastest
        share = None
        if ceiling and not suspect:
            sq = Quantity(
                "share of the matmul ceiling", r["implementation"], m.device_id, KERNEL, shape
            )
            share = Fact(sq, value / ceiling.value, "%")
        out.append(
            Kernel(r["seq_len"], r["implementation"], r["status"], time, rate, share, suspect)
        )
    return out


def kernel_error(m: Measurement) -> Fact | None:
    """The GPU kernel's relative error against float64, at the sweep's shortest length."""
    err = m.facts.get("triton_rel_error")
    if err is None or "kernels" not in m.tables:
        return None
    first = min(r["seq_len"] for r in m.tables["kernels"].records())
    shape = fwd.Shape.of({**m.params, "seq_len": first})
    return Fact(
        Quantity(ERROR, f"{fwd.TRITON} vs float64", m.device_id, NUMERIC, shape), err, ERROR
    )


def triton_vs_sdpa(m: Measurement, seq_len: int) -> ffwd.Versus | None:
    """The Triton kernel against SDPA flash at one length (ratio: Triton's time ÷ SDPA's)."""
    found = {
        r["implementation"]: r["time"]
        for r in (m.tables["kernels"].records() if "kernels" in m.tables else [])
        if r["seq_len"] == seq_len and r["status"] == fwd.OK and r["time"] is not None
    }
    if fwd.TRITON not in found or fwd.SDPA_FLASH not in found:
        return None
    shape = fwd.Shape.of({**m.params, "seq_len": seq_len})
    q = Quantity(
        "kernel time ratio", f"{fwd.SDPA_FLASH} vs {fwd.TRITON}", m.device_id, KERNEL, shape
    )
    return ffwd.Versus(
        q, fwd.SDPA_FLASH, fwd.TRITON, compare(found[fwd.SDPA_FLASH], found[fwd.TRITON])
    )


# --- forecasts for a named GPU, counted on the tile grid -----------------------------------


@dataclass(frozen=True)
class Generations:
    """FlashAttention 1's and 2's schedules at one shape on one GPU, as (FA1, FA2) pairs."""

    gpu: SpecSheet
    shape: Shape
    block_q: int
    block_k: int
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


def generations(
    gpu_sheet: SpecSheet | None = None,
    shape: Shape = gpu.FORECAST_SHAPE,
    *,
    block_q: int = gpu.FLASH_BLOCK_Q,
    block_k: int = gpu.FLASH_BLOCK_K,
) -> Generations:
    g = gpu_sheet or gpu.sheet()
    if g.sm_count is None:
        raise ValueError(f"the data sheet of the {g.label} records no SM count")
    tiles = f"{block_q}×{block_k} tiles"
    versions = (f"FlashAttention, {tiles}", f"FlashAttention-2, {tiles}")

    def counted(metric: str, subject: str, value: float, unit: str) -> Fact:
        return Fact(Quantity(metric, subject, ANALYTIC, MODEL, shape), value, unit)

    progs = (programs(*shape.dims[:3]), programs(*shape.dims[:3], block_q))
    rescale = output_rescale_flops(
        *shape.dims, causal=shape.causal, block_q=block_q, block_k=block_k, kv_seq_len=shape.kv_len
    )
    grid = tile_grid(shape.seq_len, block_q, block_k, causal=shape.causal, kv_seq_len=shape.kv_len)
    counts = tile_counts(grid)
    flash = gpu.flash_forward(g, shape, block_q=block_q, block_k=block_k)
    full = attention_flops(*shape.dims, kv_seq_len=shape.kv_len)
    rescale_us = [f / gpu.vector_peak(g) * 1e6 for f in (rescale.fa1, rescale.fa2)]
    return Generations(
        g,
        shape,
        block_q,
        block_k,
        forecast("streaming multiprocessors", g.label, g, g.sm_count, "SMs"),
        forecast("FP32 peak", g.label, g, gpu.vector_peak(g), "FLOP/s"),
        tuple(counted("programs", v, p, "programs") for v, p in zip(versions, progs, strict=True)),
        tuple(
            forecast("programs per SM", v, g, p / g.sm_count, "", shape=shape)
            for v, p in zip(versions, progs, strict=True)
        ),
        (
            counted("output rescaling FLOPs", versions[0], rescale.fa1, "FLOP"),
            counted("output rescaling FLOPs", versions[1], rescale.fa2, "FLOP"),
        ),
        tuple(
            forecast("output rescaling time", v, g, us, "µs", shape=shape)
            for v, us in zip(versions, rescale_us, strict=True)
        ),
        forecast("matmul time", f"FlashAttention, {tiles}", g, flash.compute_us, "µs", shape=shape),
        tuple(
            forecast(
                "output rescaling time ratio",
                f"{v} vs matmuls",
                g,
                us / flash.compute_us,
                "%",
                shape=shape,
            )
            for v, us in zip(versions, rescale_us, strict=True)
        ),
        counted("score tiles", tiles, counts["tiles"], "tiles"),
        counted("score tiles skipped", tiles, counts["skipped"], "tiles"),
        counted("matmul FLOPs skipped", tiles, full - flash.flops, "FLOP"),
    )


@dataclass(frozen=True)
class TileRow:
    fit: TileFit
    shared: Fact  # q, k and v tiles, in shared memory
    registers: Fact  # score tile, accumulator, running max and sum, in registers
    traffic: Fact  # bytes a fused forward moves with these tiles (k, v once per query tile)
    fewer: Fact  # naive's bytes ÷ these


@dataclass(frozen=True)
class Tiles:
    gpu: SpecSheet
    shape: Shape
    capacity: Fact  # the most shared memory one thread block may use
    register_capacity: Fact  # the most register bytes one thread block may hold
    rows: list[TileRow]


def tiles(gpu_sheet: SpecSheet | None = None, shape: Shape = gpu.FORECAST_SHAPE) -> Tiles:
    """Which tile sizes fit one block on `gpu` — q, k, v tiles in its shared memory, the
    score tile and accumulator in its registers, as FlashAttention 2 and 3 keep them — and
    the bytes each moves."""
    g = gpu_sheet or gpu.sheet()
    if g.shared_memory_per_block_kb is None:
        raise ValueError(f"the data sheet of the {g.label} records no shared memory per block")
    capacity = g.shared_memory_per_block_kb * 1024
    naive = naive_bytes(g, shape).value
    rows = []
    for fit in tile_fits(capacity, shape.head_dim, shape.dtype):
        subject = f"fused forward, {fit.block_q}×{fit.block_k} tiles"
        moved = fused_traffic(
            *shape.dims, shape.dtype, causal=shape.causal, block_q=fit.block_q,
            block_k=fit.block_k, kv_seq_len=shape.kv_len,
        )  # fmt: skip
        rows.append(
            TileRow(
                fit,
                Fact(Quantity("shared-memory bytes per program", f"{fit.block_q}×{fit.block_k} tiles", ANALYTIC, MODEL, shape), fit.shared, "B"),
                Fact(Quantity("register bytes per program", f"{fit.block_q}×{fit.block_k} tiles", ANALYTIC, MODEL, shape), fit.registers, "B"),
                Fact(Quantity("modelled bytes", subject, ANALYTIC, MODEL, shape, "k, v once per query tile"), moved, "B"),
                Fact(Quantity("modelled bytes ratio", f"naive vs {subject}", ANALYTIC, MODEL, shape), naive / moved, "×"),
            )
        )  # fmt: skip
    cap = forecast("shared memory per block", g.label, g, capacity, "B")
    regs = forecast("register bytes per block", g.label, g, 4 * REGISTERS_PER_BLOCK, "B")
    return Tiles(g, shape, cap, regs, rows)


def naive_bytes(g: SpecSheet, shape: Shape = gpu.FORECAST_SHAPE) -> Fact:
    """Naive attention's five kernels' HBM bytes (each step through memory)."""
    total = sum(k.bytes for k in gpu.naive_steps(g, shape))
    return forecast("HBM bytes", fwd.NAIVE, g, total, "B", shape=shape)


@dataclass(frozen=True)
class GpuForecast:
    """The forecast box: HBM bytes naive vs fused, and the fused forward's time, each with
    the measurement of the same quantity on that GPU when the store holds one."""

    gpu: SpecSheet
    shape: Shape
    block_q: int
    block_k: int
    l2_serves_rereads: bool
    naive_bytes: Check
    flash_bytes: Check
    fewer_bytes: Check  # assumes every K/V re-read hits L2 where `l2_serves_rereads`
    fewer_bytes_from_hbm: Check  # every K/V re-read from HBM: before any L2 reuse
    floor: Check  # SDPA flash's forward: the roofline floor
    realistic: Fact  # SDPA flash's forward: the floor over the cited compute efficiencies
    triton_floor: Check


def _measured_on(entries: Sequence[Measurement], g: SpecSheet) -> Measurement | None:
    return next((e for e in entries if e.device_id == f"cuda-{g.slug}"), None)


def gpu_forecast(
    times_by_device: Sequence[Measurement],
    gpu_sheet: SpecSheet | None = None,
    shape: Shape = gpu.FORECAST_SHAPE,
) -> GpuForecast:
    """Forecasts for `gpu` at `shape`, checked against that GPU's forward_times entry among
    `times_by_device` (every device's, as `measure_each_device` returns them) when present."""
    g = gpu_sheet or gpu.sheet()
    flash = gpu.flash_forward(g, shape)
    naive = naive_bytes(g, shape)
    fused = forecast("HBM bytes", "FlashAttention forward", g, flash.bytes, "B", shape=shape)
    l2 = gpu.l2_serves_rereads(g, shape)
    assumed = "every K/V re-read served by L2" if l2 else ""
    fewer = forecast("HBM bytes ratio", f"{fwd.NAIVE} vs FlashAttention", g, naive.value / flash.bytes, "×", shape=shape, detail=assumed)  # fmt: skip
    tiled = fused_traffic(*shape.dims, shape.dtype, causal=shape.causal, block_q=gpu.FLASH_BLOCK_Q,
                          block_k=gpu.FLASH_BLOCK_K, kv_seq_len=shape.kv_len)  # fmt: skip
    from_hbm = forecast("HBM bytes ratio", f"{fwd.NAIVE} vs FlashAttention", g, naive.value / tiled, "×", shape=shape, detail="every K/V re-read from HBM")  # fmt: skip
    realistic = forecast_range(ffwd.FORWARD_TIME, fwd.SDPA_FLASH, g, gpu.flash_range(g, shape), "µs", shape=shape, detail=RANGE_OF_FLASH)  # fmt: skip
    measured = _measured_on(times_by_device, g)

    def timed(name: str) -> Fact | None:
        if measured is None:
            return None
        try:
            return ffwd.forward_time(measured, name, shape)
        except fwd.NotMeasuredError:
            return None

    def floor(name: str, share: float = 1.0, detail: str = "") -> Check:
        f = forecast(
            ffwd.FORWARD_TIME, name, g, flash.floor_us / share, "µs", shape=shape, detail=detail
        )
        return check(f, timed(name))

    return GpuForecast(
        g,
        shape,
        gpu.FLASH_BLOCK_Q,
        gpu.FLASH_BLOCK_K,
        l2,
        check(naive, None),
        check(fused, None),
        check(fewer, None),
        check(from_hbm, None),
        floor(fwd.SDPA_FLASH),
        realistic,
        floor(fwd.TRITON),
    )


MEMORY_LINES = ("naive_peak", "tiled_peak", "sdpa_flash_peak")


def memory_slopes(m: Measurement) -> dict[str, float | None]:
    """The fitted log-log slope of each implementation's peak memory against seq_len."""
    return table_slopes(m.tables["memory_by_seq_len"], "seq_len", MEMORY_LINES)
