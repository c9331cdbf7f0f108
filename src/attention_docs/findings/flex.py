# Verdicts of the FlexAttention chapter, as data: each mask's compiled kernel against its
# unfused fallback and against SDPA given the dense mask; time against block sparsity; the
# cost of building a BlockMask; what ran under the profiler; and causal FlexAttention against
# SDPA with `is_causal=True` at every shape of the forward grid where both ran. Compiled
# FlexAttention with the plain causal mask is `forward_times`' FlexAttention row (one fact,
# one number). No words: render/flex.py says them.
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import COUNTED, NUMERIC, UNPROFILED, Fact, Quantity, ratio_fact
from attention_docs.findings.forward import forward_time, versus
from attention_docs.findings.sweep import sweep_findings
from attention_docs.findings.trend import fitted_slope
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.shape import Shape
from attention_docs.records.sweep import Sweep
from attention_docs.records.timing import Timing

BUILD = "BlockMask build time"
FIRST_BUILD = "first call with this mask_mod in the worker process, one sample"
WARM_BUILD = "repeated calls, lower quartile of rounds"
# The build-cost sweep, a view over flexattention_cost's table (records/sweep.py): one line,
# create_block_mask, against seq_len; its facts are the build times the chapter states.
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
Ratio = tuple[Fact, Comparison]  # a speed ratio's fact (b ÷ a: above 1, a is faster), and why


def shape(m: Measurement) -> Shape:
    return Shape.of({**m.params, "causal": True})


def subject(mask: str, m: Measurement, what: str = fwd.FLEX) -> str:
    """`FlexAttention, sliding_window 256`: the mask names its width, other masks do not."""
    if mask == "causal" and what == fwd.FLEX:
        return fwd.FLEX
    return f"{what}, {mask}" + (f" {m.params['window']}" if mask == "sliding_window" else "")


def _q(m: Measurement, metric: str, subj: str, clock: str = UNPROFILED, detail="") -> Quantity:
    return Quantity(metric, subj, m.device_id, clock, shape(m), detail)


def _time(m: Measurement, subj: str, t: Timing | None) -> Fact | None:
    return None if t is None else Fact.of_timing(_q(m, "forward time", subj), t)


def _versus(m: Measurement, a: str, b: str, ta: Timing | None, tb: Timing | None) -> Ratio | None:
    if ta is None or tb is None:
        return None
    c = compare(ta, tb)
    return ratio_fact(_q(m, "speed ratio", f"{a} vs {b}"), c), c


@dataclass(frozen=True)
class Mask:
    """One mask: its three forwards, how compiled compares, its tiles, build and compile."""

    mask: str
    status: str
    compiled: Fact | None
    fallback: Fact | None
    dense: Fact | None
    versus_fallback: Ratio | None
    versus_dense: Ratio | None
    skipped: Fact
    partial: int  # tiles computed with the mask_mod applied
    full: int  # tiles computed with no mask work
    first_build: Fact
    compile: Fact | None
    error: Fact | None


def masks(m: Measurement, times: Measurement | None = None) -> list[Mask]:
    """Every mask of flex_masks; the causal mask's compiled time from `times` (forward_times),
    or None without it."""
    found = []
    for r in m.tables["masks"].records():
        name, ok = r["mask"], r["status"] == "ok"
        compiled = r["compiled"]
        if name == "causal":
            compiled = fwd.timing(times, fwd.FLEX, shape(m)) if times else None
        compiled = compiled if ok else None
        whats = (fwd.FLEX, "flex_attention unfused fallback", "SDPA + dense mask")
        flex, fallback, dense = (subject(name, m, what) for what in whats)

        def fact(metric: str, value, unit: str, clock=UNPROFILED, *, detail="", flex=flex):
            return None if value is None else Fact(_q(m, metric, flex, clock, detail), value, unit)

        # A mask that did not compile keeps its tiles and build, but has no compile or error.
        compile_us, error = (r["compile_s"] * 1e6, r["rel_err_vs_float64"]) if ok else (None, None)
        cache = f"FX cache {r['fx_cache']}"
        found.append(
            Mask(
                name,
                r["status"],
                _time(m, flex, compiled),
                _time(m, fallback, r["eager"]),
                _time(m, dense, r["sdpa_dense"]),
                _versus(m, flex, fallback, compiled, r["eager"]),
                _versus(m, flex, dense, compiled, r["sdpa_dense"]),
                fact("share of tiles skipped", r["skipped_fraction"], "%", COUNTED),
                r["partial_blocks"],
                r["full_blocks"],
                fact(BUILD, r["first_build_us"], "µs", detail=FIRST_BUILD),
                fact("first-call compile time", compile_us, "µs", detail=cache),
                fact("relative error against float64", error, "relative error", NUMERIC),
            )
        )
    return found


@dataclass(frozen=True)
class Sparsity:
    """The window sweep: per width, the share of tiles computed and the time; the narrowest
    window's time against the widest's."""

    points: tuple[tuple[int, Fact, Fact], ...]  # (window, computed share, time)
    narrow_vs_wide: Ratio


def sparsity(m: Measurement) -> Sparsity:
    rows = [r for r in m.tables["sweep"].records() if r["time"] is not None]
    flex = [f"{fwd.FLEX}, sliding_window {r['window']}" for r in rows]
    points = tuple(
        (
            r["window"],
            Fact(
                _q(m, "share of tiles computed", f"sliding_window {r['window']}", COUNTED),
                r["computed_fraction"],
                "%",
            ),
            _time(m, subj, r["time"]),
        )
        for r, subj in zip(rows, flex, strict=True)
    )
    return Sparsity(points, _versus(m, flex[0], flex[-1], rows[0]["time"], rows[-1]["time"]))


@dataclass(frozen=True)
class TileStep:
    """Two neighbouring widths of the window sweep (timed in the same rounds): the tiles
    each computes (partial and full), how the wider one's time compares with the narrower's,
    and whether that follows the tiles — the same tiles within noise, more tiles not faster
    beyond it."""

    narrow: int
    wide: int
    narrow_tiles: tuple[int, int]  # (partial, full)
    wide_tiles: tuple[int, int]
    ratio: Ratio  # the wide width's time ÷ the narrow's

    @property
    def same_tiles(self) -> bool:
        return sum(self.narrow_tiles) == sum(self.wide_tiles)

    @property
    def follows(self) -> bool:
        c = self.ratio[1]
        if self.same_tiles:
            return c.tie
        return c.tie or c.as_ordered  # more tiles: the narrow window is not slower


def tile_steps(m: Measurement) -> tuple[TileStep, ...]:
    """Each pair of neighbouring timed widths, narrow to wide."""
    rows = [r for r in m.tables["sweep"].records() if r["time"] is not None]
    subj = [f"{fwd.FLEX}, sliding_window {r['window']}" for r in rows]
    return tuple(
        TileStep(
            a["window"],
            b["window"],
            (a["partial_blocks"], a["full_blocks"]),
            (b["partial_blocks"], b["full_blocks"]),
            _versus(m, sa, sb, a["time"], b["time"]),
        )
        for a, b, sa, sb in zip(rows, rows[1:], subj, subj[1:], strict=False)
    )


def whole_window(m: Measurement, times: Measurement | None) -> tuple[int, Fact, Fact] | None:
    """The sweep's whole-sequence window computes the causal mask's tiles: (that window, its
    time as the sparsity table states it, forward_times' causal row). No ratio: the two were
    not timed in the same rounds (nor by the same kernel, nor with the same mask_mod:
    render/flex.py says how). None without forward_times, without a sweep or its timed
    whole-sequence point, or when the causal row did not compile."""
    if times is None or "sweep" not in m.tables:
        return None
    point = next((p for p in sparsity(m).points if p[0] >= m.params["seq_len"]), None)
    causal = next((x for x in masks(m, times) if x.mask == "causal"), None)
    if point is None or causal is None or causal.compiled is None:
        return None
    return point[0], point[2], causal.compiled


@dataclass(frozen=True)
class BuildCost:
    """create_block_mask along seq_len: each build's time, and the growth where it shows."""

    points: tuple[tuple[int, Fact, Fact, Fact], ...]  # (seq_len, time, peak, BlockMask bytes)
    slope: Fact | None  # log-log, over the last three lengths


def build_cost(m: Measurement) -> BuildCost:
    builds = {p.x: p.facts["build"] for p in sweep_findings(m, spec=BUILD_SWEEP).points}
    rows = [r for r in m.tables["cost"].records() if builds.get(r["seq_len"]) is not None]
    mask = m.params["mask"]

    def counted(metric: str, r: dict, column: str) -> Fact:
        q = Quantity(metric, f"{mask}, seq_len {r['seq_len']}", m.device_id, COUNTED)
        return Fact(q, r[column], "B")

    points = tuple(
        (
            r["seq_len"],
            builds[r["seq_len"]],
            counted("peak memory while building a BlockMask", r, "peak_bytes"),
            counted("BlockMask bytes", r, "block_mask_bytes"),
        )
        for r in rows
    )
    fitted = rows[-3:]
    slope = fitted_slope([r["seq_len"] for r in fitted], [r["build"].time_us for r in fitted])
    span = f"seq_len {fitted[0]['seq_len']}–{fitted[-1]['seq_len']}"
    q = Quantity("log-log slope of BlockMask build time", mask, m.device_id, UNPROFILED, None, span)
    return BuildCost(points, None if slope is None else Fact(q, slope, ""))


@dataclass(frozen=True)
class VersusSdpa:
    """Causal FlexAttention against `sdpa`, the backend an unpinned SDPA call takes (the
    first of SDPA_ORDER that ran); `versus`: FlexAttention's time ÷ SDPA's (above 1: SDPA
    is faster)."""

    shape: Shape
    sdpa: str
    flex_time: Fact
    sdpa_time: Fact
    versus: Ratio


def versus_sdpa(times: Measurement) -> list[VersusSdpa]:
    """Causal FlexAttention against SDPA at every causal shape of the forward grid where
    both ran on this device."""
    ran = [(r["implementation"], Shape.of(r)) for r in fwd.rows(times) if r["status"] == fwd.OK]
    found = []
    for s in dict.fromkeys(s for name, s in ran if name == fwd.FLEX and s.causal):
        sdpa = next((b for b in SDPA_ORDER if (b, s) in ran), None)
        if sdpa is not None:
            v = versus(times, sdpa, fwd.FLEX, s)
            flex_time, sdpa_time = (forward_time(times, x, s) for x in (fwd.FLEX, sdpa))
            ratio = (ratio_fact(v.quantity, v.comparison), v.comparison)
            found.append(VersusSdpa(s, sdpa, flex_time, sdpa_time, ratio))
    return found


# The ops of an unfused attention: the fallback materialises the scores and runs softmax.
UNFUSED_OPS = ("aten::bmm", "aten::matmul", "aten::_softmax", "aten::softmax")


def fused(m: Measurement) -> bool:
    """Whether the profiled compiled call ran a generated kernel (no unfused matmul/softmax)."""
    return not any(name in UNFUSED_OPS for name in m.facts["compiled_ran"])


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


def ran_split(m: Measurement) -> tuple[list[str], list[str]]:
    """What the profiled compiled call ran: (its ops and kernels, torch.compile's own
    ranges around them), each by name in the profile's order."""
    work, machinery = [], []
    for name in m.facts["compiled_ran"]:
        (machinery if name.startswith(COMPILE_MACHINERY) else work).append(name)
    return work, machinery
