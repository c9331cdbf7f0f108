# Verdicts of the FlexAttention chapter, as data: each mask compiled against its unfused
# fallback and against SDPA given the dense mask; time against block sparsity; the cost of
# building a BlockMask; what ran under the profiler; causal FlexAttention against SDPA with
# `is_causal=True` across the forward grid. Compiled FlexAttention with the plain causal mask
# is `forward_times`' FlexAttention row (one fact, one number). No words: render/flex.py.
from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from attention_docs.findings.facts import COUNTED, NUMERIC, UNPROFILED, Fact, On
from attention_docs.findings.forward import FORWARD_TIME, Versus, forward_time, versus
from attention_docs.findings.sweep import rows_of, sweep_findings
from attention_docs.findings.trend import fitted_slope
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.shape import Shape
from attention_docs.records.sweep import Sweep

BUILD = "BlockMask build time"
FIRST_BUILD = "first call with this mask_mod in the worker process, one sample"
WARM_BUILD = "repeated calls, lower quartile of rounds"
COMPUTED = "share of tiles computed"
ERROR = "relative error against float64"
# A view over flexattention_cost's table (records/sweep.py): its facts are the build times.
BUILD_SWEEP = Sweep(
    table="cost",
    x="seq_len",
    x_unit="tokens",
    lines=("build",),
    metric=BUILD,
    subject="{mask}, seq_len {x}",
    detail=WARM_BUILD,
)
# SDPA's default order for `is_causal=True` without a mask (cuDNN's place varies between
# torch versions and GPUs, so it is not assumed): the first backend that ran is the path a
# reader's unpinned call takes.
SDPA_ORDER = (fwd.SDPA_FLASH, fwd.SDPA_EFFICIENT, fwd.SDPA_MATH)


def shape(m: Measurement) -> Shape:
    return Shape.of({**m.params, "causal": True})


def subject(mask: str, m: Measurement, what: str = fwd.FLEX) -> str:
    """`FlexAttention, sliding_window 256`: the mask names its width, other masks do not."""
    if mask == "causal" and what == fwd.FLEX:
        return fwd.FLEX
    return f"{what}, {mask}" + (f" {m.params['window']}" if mask == "sliding_window" else "")


@dataclass(frozen=True)
class Mask:
    """One mask: its three forwards, how compiled compares, its tiles, build and compile."""

    mask: str
    status: str
    compiled: Fact | None
    fallback: Fact | None
    dense: Fact | None
    versus_fallback: Versus | None
    versus_dense: Versus | None
    skipped: Fact
    partial: int  # tiles computed with the mask_mod applied
    full: int  # tiles computed with no mask work
    first_build: Fact
    compile: Fact | None
    error: Fact | None


def masks(m: Measurement, times: Measurement | None = None) -> list[Mask]:
    """Every mask of flex_masks; the causal mask's compiled time from `times` (forward_times),
    or None without it. A mask that did not compile keeps its tiles and build only."""
    found, on = [], On(m.device_id, shape(m))
    for r in rows_of(m.tables["masks"]):
        name, ok, compiled = r.mask, r.status == "ok", r.compiled
        if name == "causal":
            compiled = fwd.timing(times, fwd.FLEX, shape(m)) if times else None
        compiled, eager, dense = (compiled if ok else None), r.eager, r.sdpa_dense
        compile_us, error = (r.compile_s * 1e6, r.rel_err_vs_float64) if ok else (None, None)
        whats = (fwd.FLEX, "flex_attention unfused fallback", "SDPA + dense mask")
        flex, fallback, with_dense = (subject(name, m, what) for what in whats)
        cache = f"FX cache {r.fx_cache}"
        found.append(
            Mask(
                name,
                r.status,
                on(FORWARD_TIME, flex, UNPROFILED, compiled),
                on(FORWARD_TIME, fallback, UNPROFILED, eager),
                on(FORWARD_TIME, with_dense, UNPROFILED, dense),
                Versus.between(on, flex, fallback, compiled, eager),
                Versus.between(on, flex, with_dense, compiled, dense),
                on("share of tiles skipped", flex, COUNTED, r.skipped_fraction, "%"),
                r.partial_blocks,
                r.full_blocks,
                on(BUILD, flex, UNPROFILED, r.first_build_us, "µs", detail=FIRST_BUILD),
                on("first-call compile time", flex, UNPROFILED, compile_us, "µs", detail=cache),
                on(ERROR, flex, NUMERIC, error, "relative error"),
            )
        )
    return found


@dataclass(frozen=True)
class TileStep:
    """Two neighbouring widths of the window sweep (timed in the same rounds): the tiles
    each computes (partial, full), the wide one's time ÷ the narrow's, and whether that
    follows the tiles — the same tiles within noise, more tiles not faster beyond it."""

    narrow: int
    wide: int
    narrow_tiles: tuple[int, int]
    wide_tiles: tuple[int, int]
    ratio: Versus

    @property
    def same_tiles(self) -> bool:
        return sum(self.narrow_tiles) == sum(self.wide_tiles)

    @property
    def follows(self) -> bool:
        c = self.ratio.comparison
        return c.tie or (not self.same_tiles and c.as_ordered)


@dataclass(frozen=True)
class Width:
    """One timed width of the window sweep: its share of tiles computed, and its time."""

    window: int
    computed: Fact
    time: Fact


@dataclass(frozen=True)
class Sparsity:
    """The window sweep's timed widths; the narrowest window's time against the widest's;
    each pair of neighbours, narrow to wide."""

    points: tuple[Width, ...]
    narrow_vs_wide: Versus | None  # None: no width timed
    steps: tuple[TileStep, ...]


def _tiles(r) -> tuple[int, int]:
    return r.partial_blocks, r.full_blocks


def sparsity(m: Measurement) -> Sparsity:
    rows = [r for r in rows_of(m.tables["sweep"]) if r.time is not None]
    on = On(m.device_id, shape(m))
    subj = [f"{fwd.FLEX}, sliding_window {r.window}" for r in rows]
    points = tuple(
        Width(
            r.window,
            on(COMPUTED, f"sliding_window {r.window}", COUNTED, r.computed_fraction, "%"),
            on(FORWARD_TIME, s, UNPROFILED, r.time),
        )
        for r, s in zip(rows, subj, strict=True)
    )
    steps = tuple(
        TileStep(
            a.window, b.window, _tiles(a), _tiles(b), Versus.between(on, sa, sb, a.time, b.time)
        )
        for (a, sa), (b, sb) in pairwise(zip(rows, subj, strict=True))
    )
    ends = Versus.between(on, subj[0], subj[-1], rows[0].time, rows[-1].time) if rows else None
    return Sparsity(points, ends, steps)


def whole_window(m: Measurement, times: Measurement | None) -> tuple[int, Fact, Fact] | None:
    """The sweep's whole-sequence window computes the causal mask's tiles: (that window, its
    time as the sparsity table states it, forward_times' causal row). No ratio: the two were
    not timed in the same rounds, by the same kernel or with the same mask_mod. None
    without either time."""
    if times is None or "sweep" not in m.tables:
        return None
    point = next((p for p in sparsity(m).points if p.window >= m.params["seq_len"]), None)
    causal = next((x for x in masks(m, times) if x.mask == "causal"), None)
    if point is None or causal is None or causal.compiled is None:
        return None
    return point.window, point.time, causal.compiled


@dataclass(frozen=True)
class Build:
    """One seq_len: the build's time, the peak memory while building, the BlockMask's size."""

    seq_len: int
    time: Fact
    peak: Fact
    mask_bytes: Fact


@dataclass(frozen=True)
class BuildCost:
    """create_block_mask along seq_len: each build, and the growth where it shows."""

    points: tuple[Build, ...]
    slope: Fact | None  # log-log, over the last three lengths


def build_cost(m: Measurement) -> BuildCost:
    builds = {p.x: p.facts["build"] for p in sweep_findings(m, spec=BUILD_SWEEP).points}
    rows = [r for r in rows_of(m.tables["cost"]) if builds.get(r.seq_len) is not None]
    mask, on = m.params["mask"], On(m.device_id)

    def counted(metric: str, r, value: float) -> Fact:
        return on(metric, f"{mask}, seq_len {r.seq_len}", COUNTED, value, "B")

    points = tuple(
        Build(r.seq_len, builds[r.seq_len],
              counted("peak memory while building a BlockMask", r, r.peak_bytes),
              counted("BlockMask bytes", r, r.block_mask_bytes))
        for r in rows
    )  # fmt: skip
    fitted = rows[-3:]
    slope = fitted_slope([r.seq_len for r in fitted], [r.build.time_us for r in fitted])
    span = f"seq_len {fitted[0].seq_len}–{fitted[-1].seq_len}"
    metric = "log-log slope of BlockMask build time"
    return BuildCost(points, on(metric, mask, UNPROFILED, slope, detail=span))


@dataclass(frozen=True)
class VersusSdpa:
    """Causal FlexAttention against `sdpa`, the backend an unpinned SDPA call takes (the
    first of SDPA_ORDER that ran); `versus`: FlexAttention's time ÷ SDPA's."""

    shape: Shape
    sdpa: str
    flex_time: Fact
    sdpa_time: Fact
    versus: Versus


def versus_sdpa(times: Measurement) -> list[VersusSdpa]:
    """At every causal shape of the forward grid where both ran on this device."""
    ran = [(r["implementation"], Shape.of(r)) for r in fwd.rows(times) if r["status"] == fwd.OK]
    found = []
    for s in dict.fromkeys(s for name, s in ran if name == fwd.FLEX and s.causal):
        if (sdpa := next((b for b in SDPA_ORDER if (b, s) in ran), None)) is not None:
            v = versus(times, sdpa, fwd.FLEX, s)
            found.append(VersusSdpa(s, sdpa, forward_time(times, fwd.FLEX, s),
                                    forward_time(times, sdpa, s), v))  # fmt: skip
    return found


# The ops of an unfused attention: the fallback materialises the scores and runs softmax.
UNFUSED_OPS = ("aten::bmm", "aten::matmul", "aten::_softmax", "aten::softmax")
# The ranges torch.compile's own machinery records around a compiled call (guard checks,
# the AOT wrapper): not work of the attention.
COMPILE_MACHINERY = (
    "AOTDispatcher",
    "Pregraph bytecode",
    "Torch-Compiled Region",
    "TorchDynamo",
    "CompiledFunction",
    "## Call CompiledFxGraph",
)


def fused(m: Measurement) -> bool:
    """Whether the profiled compiled call ran a generated kernel (no unfused matmul/softmax)."""
    return not any(name in UNFUSED_OPS for name in m.facts["compiled_ran"])


def ran_split(m: Measurement) -> tuple[list[str], list[str]]:
    """What the profiled compiled call ran: (its ops and kernels, torch.compile's ranges
    around them), each by name in the profile's order."""
    work, machinery = [], []
    for name in m.facts["compiled_ran"]:
        (machinery if name.startswith(COMPILE_MACHINERY) else work).append(name)
    return work, machinery
