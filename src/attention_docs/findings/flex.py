# Verdicts of the FlexAttention chapter, as data: each mask's compiled kernel against its
# unfused fallback and against SDPA given the dense mask; time against block sparsity; the
# cost of building a BlockMask; what ran under the profiler; and causal FlexAttention against
# SDPA with `is_causal=True` at every shape of the forward grid where both ran. Compiled
# FlexAttention with the plain causal mask is `forward_times`' FlexAttention row (one fact,
# one number). No words: render/flex.py says them.
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import COUNTED, NUMERIC, UNPROFILED, Fact, Quantity
from attention_docs.findings.forward import forward_time, versus
from attention_docs.findings.trend import fitted_slope
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.shape import Shape
from attention_docs.records.timing import Timing

FORWARD = "forward time"
BUILD = "BlockMask build time"
FIRST_BUILD = "first call with this mask_mod in the worker process, one sample"
WARM_BUILD = "repeated calls, median over rounds"
COMPILE = "first-call compile time"
SKIPPED = "share of tiles skipped"
ERROR = "relative error against float64"
SPEED = "speed ratio"
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


def _time(m: Measurement, subj: str, t: Timing | None) -> Fact | None:
    return (
        None
        if t is None
        else Fact.of_timing(Quantity(FORWARD, subj, m.device_id, UNPROFILED, shape(m)), t)
    )


def _versus(
    m: Measurement, a: str, b: str, ta: Timing | None, tb: Timing | None
) -> tuple[Fact, Comparison] | None:
    """`a` against `b` (ratio b ÷ a: above 1, a is faster), as a fact with its comparison."""
    if ta is None or tb is None:
        return None
    c = compare(ta, tb)
    q = Quantity(SPEED, f"{a} vs {b}", m.device_id, UNPROFILED, shape(m))
    return Fact(q, c.ratio, "×", c.low, c.high), c


@dataclass(frozen=True)
class Mask:
    """One mask: its three forwards, how compiled compares, its tiles, build and compile."""

    mask: str
    status: str
    compiled: Fact | None
    fallback: Fact | None
    dense: Fact | None
    versus_fallback: tuple[Fact, Comparison] | None
    versus_dense: tuple[Fact, Comparison] | None
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
        compiled_t = r["compiled"]
        if name == "causal":
            compiled_t = fwd.timing(times, fwd.FLEX, shape(m)) if times else None
        compiled_t = compiled_t if ok else None
        flex, fallback, dense = (
            subject(name, m),
            subject(name, m, "flex_attention unfused fallback"),
            subject(name, m, "SDPA + dense mask"),
        )

        def q(metric: str, clock: str, detail: str = "", name: str = name) -> Quantity:
            return Quantity(metric, subject(name, m), m.device_id, clock, shape(m), detail)

        found.append(
            Mask(
                name,
                r["status"],
                _time(m, flex, compiled_t),
                _time(m, fallback, r["eager"]),
                _time(m, dense, r["sdpa_dense"]),
                _versus(m, flex, fallback, compiled_t, r["eager"]),
                _versus(m, flex, dense, compiled_t, r["sdpa_dense"]),
                Fact(q(SKIPPED, COUNTED), r["skipped_fraction"], "%"),
                r["partial_blocks"],
                r["full_blocks"],
                Fact(q(BUILD, UNPROFILED, FIRST_BUILD), r["first_build_us"], "µs"),
                Fact(
                    q(COMPILE, UNPROFILED, f"FX cache {r['fx_cache']}"), r["compile_s"] * 1e6, "µs"
                )
                if ok
                else None,
                Fact(q(ERROR, NUMERIC), r["rel_err_vs_float64"], "relative error") if ok else None,
            )
        )
    return found


@dataclass(frozen=True)
class Sparsity:
    """The window sweep: per width, the share of tiles computed and the time; the narrowest
    window against the widest (ratio of times, and of tiles computed)."""

    points: tuple[tuple[int, Fact, Fact], ...]  # (window, computed share, time)
    narrow_vs_wide: tuple[Fact, Comparison]
    tiles: float  # widest window's tiles computed ÷ narrowest's


def sparsity(m: Measurement) -> Sparsity:
    rows = [r for r in m.tables["sweep"].records() if r["time"] is not None]
    points = tuple(
        (
            r["window"],
            Fact(
                Quantity(
                    "share of tiles computed",
                    f"sliding_window {r['window']}",
                    m.device_id,
                    COUNTED,
                    shape(m),
                ),
                r["computed_fraction"],
                "%",
            ),
            _time(m, f"{fwd.FLEX}, sliding_window {r['window']}", r["time"]),
        )
        for r in rows
    )
    narrow, wide = rows[0], rows[-1]
    a, b = (f"{fwd.FLEX}, sliding_window {r['window']}" for r in (narrow, wide))
    return Sparsity(
        points,
        _versus(m, a, b, narrow["time"], wide["time"]),
        wide["computed_fraction"] / narrow["computed_fraction"],
    )


@dataclass(frozen=True)
class WholeWindow:
    """The sweep's whole-sequence window computes the causal mask's tiles: its time beside
    the causal row's (forward_times'). Three things differ, and nothing here separates
    them: forward_times compiles one shape-generic kernel for its grid (`dynamic=True`),
    the sweep one for this shape alone; the sweep's mask_mod also checks the window; the
    two were timed in different processes."""

    window: int
    specialised: Fact  # the sweep's point: the same Fact as its row of the sparsity table
    generic: Fact  # forward_times' causal FlexAttention: the mask table's causal row
    # No ratio: the two were not timed in the same rounds.


def whole_window(m: Measurement, times: Measurement | None) -> WholeWindow | None:
    """None without forward_times, without a sweep or its timed whole-sequence point, or
    when the causal row did not compile."""
    if times is None or "sweep" not in m.tables:
        return None
    seq_len = m.params["seq_len"]
    point = next((p for p in sparsity(m).points if p[0] >= seq_len), None)
    causal = next((x for x in masks(m, times) if x.mask == "causal"), None)
    if point is None or causal is None or causal.compiled is None:
        return None
    return WholeWindow(point[0], point[2], causal.compiled)


@dataclass(frozen=True)
class BuildCost:
    """create_block_mask along seq_len: each build's time, and the growth where it shows."""

    points: tuple[tuple[int, Fact, Fact, Fact], ...]  # (seq_len, time, peak, BlockMask bytes)
    slope: Fact | None  # log-log, over the last three lengths


def build_cost(m: Measurement) -> BuildCost:
    rows = [r for r in m.tables["cost"].records() if r["build"] is not None]
    mask = m.params["mask"]

    def q(metric: str, n: int, clock: str, detail: str = "") -> Quantity:
        return Quantity(metric, f"{mask}, seq_len {n}", m.device_id, clock, None, detail)

    points = tuple(
        (
            r["seq_len"],
            Fact.of_timing(q(BUILD, r["seq_len"], UNPROFILED, WARM_BUILD), r["build"]),
            Fact(
                q("peak memory while building a BlockMask", r["seq_len"], COUNTED),
                r["peak_bytes"],
                "B",
            ),
            Fact(q("BlockMask bytes", r["seq_len"], COUNTED), r["block_mask_bytes"], "B"),
        )
        for r in rows
    )
    fitted = rows[-3:]
    slope = fitted_slope([r["seq_len"] for r in fitted], [r["build"].time_us for r in fitted])
    span = f"seq_len {fitted[0]['seq_len']}–{fitted[-1]['seq_len']}"
    q_slope = Quantity(
        "log-log slope of BlockMask build time", mask, m.device_id, UNPROFILED, None, span
    )
    return BuildCost(points, None if slope is None else Fact(q_slope, slope, ""))


@dataclass(frozen=True)
class VersusSdpa:
    shape: Shape
    sdpa: str  # the SDPA backend an unpinned call would take: the first of SDPA_ORDER that ran
    flex_time: Fact
    sdpa_time: Fact
    versus: Fact  # FlexAttention's time ÷ SDPA's (above 1: SDPA is faster)
    comparison: Comparison


def _ran(times: Measurement, implementation: str, s: Shape) -> bool:
    try:
        return fwd.timing(times, implementation, s) is not None
    except fwd.NotMeasuredError:
        return False


def versus_sdpa(times: Measurement) -> list[VersusSdpa]:
    """Causal FlexAttention against SDPA at every causal shape of the forward grid where
    both ran on this device."""
    found = []
    shapes = dict.fromkeys(Shape.of(r) for r in fwd.rows(times) if r["implementation"] == fwd.FLEX)
    for s in (s for s in shapes if s.causal):
        ran = [b for b in SDPA_ORDER if _ran(times, b, s)]
        v = versus(times, ran[0], fwd.FLEX, s) if ran else None
        if v is not None:
            c = v.comparison
            found.append(
                VersusSdpa(
                    s,
                    ran[0],
                    forward_time(times, fwd.FLEX, s),
                    forward_time(times, ran[0], s),
                    Fact(v.quantity, c.ratio, "×", c.low, c.high),
                    c,
                )
            )
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
