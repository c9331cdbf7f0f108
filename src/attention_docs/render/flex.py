# Renderers for the FlexAttention chapter: the finding, what ran under the profiler, causal
# FlexAttention against SDPA, each mask compiled and not, the BlockMask's tiles, time against
# block sparsity and the cost of building a BlockMask. Verdicts and facts come from
# findings/flex.py, numbers from render/words.py. Pure: no torch, no I/O.
from __future__ import annotations

from attention_docs.findings import flex as fflex
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.steps import FLEX_STEPS
from attention_docs.render import claims, words
from attention_docs.render.caption import caption_html
from attention_docs.render.compare import speedup, versus_cell
from attention_docs.render.plots import line_figure
from attention_docs.render.sweep import sweep_figure
from attention_docs.render.tables import Column, captioned_table, column_table, markdown_table
from attention_docs.render.timeline import ranges_settings, timeline_figure


def _headline(m: Measurement, t: Measurement) -> tuple:
    """The causal mask's row, the sparsity sweep, and compiled FlexAttention against SDPA at
    this shape (None where SDPA did not run): what the finding and the box both state."""
    here = next((v for v in fflex.versus_sdpa(t) if v.shape == fflex.shape(m)), None)
    return fflex.masks(m, t)[0], fflex.sparsity(m), here


def finding(fm: Sourced, times: Sourced) -> str:
    """The chapter's opening: compiled FlexAttention against SDPA's causal call, and what the
    unfused fallback costs; the times and their ranges go in its caption."""
    m, t = fm.measurement, times.measurement
    causal, _, here = _headline(m, t)
    kernel = " in one fused kernel" if fflex.fused(m) else ""
    claim = f"Compiled, FlexAttention runs a causal mask{kernel}"
    claim += (
        f", and {speedup(t, here.sdpa, fwd.FLEX, here.shape, with_spread=False)}"
        if here
        else " (SDPA did not run here)"
    )
    detail = []
    if here:
        detail.append(
            f"FlexAttention's time ÷ SDPA's (<code>is_causal=True</code>, {here.sdpa}, from the "
            f"site's forward-time table): {versus_cell(here.versus)}."
        )
    if causal.fallback:
        claim += (
            "; without `torch.compile`, FlexAttention's unfused fallback took "
            f"{words.fact(causal.versus_fallback.fact, with_spread=False)} the compiled time"
        )
        detail.append(
            f"Unfused fallback: {words.fact(causal.fallback)}, "
            f"{versus_cell(causal.versus_fallback)} the compiled time."
        )
    return claims.opening(f"{claim}.", fm, " ".join(detail), times)


def what_to_do(fm: Sourced, times: Sourced) -> str:
    """What FlexAttention's numbers mean for your own masks, each action backed by the page."""
    m, t = fm.measurement, times.measurement
    causal, s, here = _headline(m, t)
    narrow, wide = s.points[0], s.points[-1]
    return claims.what_to_do(
        f"Always call `flex_attention` compiled: the unfused fallback took "
        f"{versus_cell(causal.versus_fallback)} the compiled time here."
        if causal.fallback
        else "",
        f"Give a mask that skips tiles, and the kernel skips them: a sliding window of "
        f"{narrow.window} tokens computed {words.fact(narrow.computed)} of the tiles, and the "
        f"whole sequence ({wide.window} tokens) took {versus_cell(s.narrow_vs_wide)} its time.",
        f"For a plain causal mask, SDPA's `is_causal=True` is the simpler call: "
        f"{speedup(t, here.sdpa, fwd.FLEX, here.shape)}."
        if here
        else "",
    )


def ran(fm: Sourced) -> str:
    """What the compiled call ran on this device, by name, and whether it was fused."""
    m = fm.measurement
    work, machinery = fflex.ran_split(m)
    names = words.series(f"`{n}`" for n in work) or "nothing the profiler named"
    what = "a generated, fused kernel" if fflex.fused(m) else "the unfused fallback's ATen ops"
    if inside := words.series(f"`{n}`" for n in machinery):
        names += f", inside torch.compile's own ranges ({inside})"
    return f"Under the profiler, the compiled call ran {what}: {names}."


def timeline(fm: Sourced) -> str:
    """The profiled step: the BlockMask build, then the compiled call."""
    title = "Timeline of one BlockMask build and one compiled FlexAttention call."
    return timeline_figure(fm, ranges_settings(FLEX_STEPS, title))


def versus_sdpa_table(times: Sourced) -> str:
    """Causal FlexAttention and SDPA at every causal grid shape where both ran."""
    rows = [
        [
            "×".join(map(str, v.shape.dims)) + f", {v.shape.dtype}",
            v.flex_time,
            f"{words.fact(v.sdpa_time)} ({v.sdpa})",
            versus_cell(v.versus),
        ]
        for v in fflex.versus_sdpa(times.measurement)
    ]
    header = ["Shape (B×H×N×D, causal)", fwd.FLEX, "SDPA, `is_causal=True` (backend)", "FlexAttention's time ÷ SDPA's"]  # fmt: skip
    what = "Unprofiled forward times from the site's forward-time table, each with its confidence interval."
    return captioned_table(header, rows, "lrrr", times, what)


def mask_table(fm: Sourced, times: Sourced) -> str:
    """Per mask: compiled FlexAttention, its unfused fallback, SDPA with the dense mask."""

    # Medians alone: the table is too wide for every range; the ratios beside them carry it.
    def median(fact) -> str:
        return "—" if fact is None else words.fact(fact, with_spread=False)

    rows = [
        [f"`{x.mask}`", median(x.compiled) if x.status == "ok" else x.status, median(x.fallback), median(x.dense), versus_cell(x.versus_fallback), versus_cell(x.versus_dense)]
        for x in fflex.masks(fm.measurement, times.measurement)
    ]  # fmt: skip
    header = ["Mask", "Compiled", "Unfused fallback", "SDPA + dense mask", "Fallback ÷ compiled", "SDPA + dense ÷ compiled"]  # fmt: skip
    how = "The fallback and SDPA were timed in interleaved rounds, with the compiled kernel of every mask but two whose compiled times come from other runs: the causal mask's is the FlexAttention row of the site's forward-time table, the sliding window's the sparsity sweep's point at that width. Each time is its rounds' lower quartile; a ratio's range pairs the ends of the two times' ranges."
    detail = f"{how} {whole_window_note(fm, times)}"
    table = markdown_table(header, rows, "lrrrrr")
    return f"{table}\n\n{caption_html(fm, 'One forward per mask, unprofiled.', detail=detail)}"


def whole_window_note(fm: Sourced, times: Sourced) -> str:
    """The causal mask's tiles timed twice on this page, by two kernels: both times, and
    what differs between them (nothing measured here separates the causes)."""
    if (found := fflex.whole_window(fm.measurement, times.measurement)) is None:
        return ""
    window, specialised, generic = found
    return (
        f"The sweep's {window}-token window, the whole sequence, computes the causal mask's "
        f"tiles: {words.fact(specialised)} against the causal row's {words.fact(generic)}. "
        "Three things differ, and this page does not separate them: the forward-time table "
        "compiles one shape-generic kernel for its whole grid (<code>dynamic=True</code>), the "
        "sweep one for this shape alone; the sweep's mask_mod also checks the window; and the "
        "two were timed in different processes."
    )


def block_table(fm: Sourced) -> str:
    """Per mask: the BlockMask's tiles, its first build, the first call's compile, the error."""
    m = fm.measurement
    rows = [
        [f"`{x.mask}`", x.skipped, x.partial, x.full, x.first_build, x.compile, x.error]
        for x in fflex.masks(m)
    ]
    tiles = "×".join(map(str, m.facts["block_size"]))
    header = ["Mask", f"Tiles ({tiles}) skipped", "Partial", "Full", "First build (one call)", "First call, compiling", "Error vs float64"]  # fmt: skip
    return captioned_table(header, rows, "lrrrrrr", fm, "BlockMask tiles.")


def fallback_warning(m: Measurement) -> str:
    """The warning flex_attention gave when called without torch.compile, as a quote."""
    text = m.facts.get("fallback_warning")
    if not text:
        return "*flex_attention warns once per process; this run recorded no warning.*"
    body = "\n".join(f"    {line}" if line.strip() else "" for line in text.strip().splitlines())
    return f'!!! warning "What flex_attention said, called without torch.compile"\n\n{body}\n'


def sparsity_figure(fm: Sourced) -> str:
    """Time per forward against the window, with the time proportional to the tiles."""
    return line_figure(
        fm, "sweep", x="window", ys=("time", "proportional_us"), logx=True,
        labels=("measured", "proportional to the tiles computed"),
        what="Sliding-window FlexAttention: time against the window's width.",
        xlabel="window (tokens)", ylabel="time per forward",
    )  # fmt: skip


def _tiles(tiles: tuple[int, int]) -> str:
    partial, full = tiles
    return f"{words.plural(partial + full, 'tile')} ({partial:,} partial, {full:,} full)"


def sparsity_claim(fm: Sourced) -> str:
    """Whether the time followed the tiles from one width to the next, and where it did not."""
    m = fm.measurement
    if not (steps := fflex.sparsity(m).steps):
        return ""
    if not (off := [s for s in steps if not s.follows]):
        return (
            "Timed in the same rounds, the widths' times follow their tiles: no wider window "
            "is faster beyond the noise, and widths that compute the same tiles are within "
            "noise of each other."
        )
    said = []
    for s in off:
        narrow, wide = f"the {s.narrow:,}-token window", f"the {s.wide:,}-token one"
        tiles = (
            f"windows of {s.narrow:,} and {s.wide:,} tokens compute the same"
            if s.same_tiles
            else f"the {s.wide:,}-token window computes {_tiles(s.wide_tiles)} against"
        )
        pair = words.fact_span(s.ratio.quantity.id, words.speed(s.ratio.comparison, narrow, wide))
        said.append(f"{tiles} {_tiles(s.narrow_tiles)}, yet {pair}")
    return (
        f"Timed in the same rounds, the time does not follow the tiles here: {'; '.join(said)}. "
        "So the BlockMask's tiles do not set the time on their own. What else does (how this "
        "device's kernel walks a tile, what a partial tile costs) is not measured on this page."
    )


SPARSITY_COLUMNS = (
    Column("Window (tokens)", lambda w: w.window),
    Column("Tiles computed", lambda w: w.computed),
    Column("Compiled FlexAttention (unprofiled)", lambda w: w.time),
)
BUILD_COLUMNS = (
    Column("seq_len", lambda b: b.seq_len),
    Column("Build (unprofiled, warm)", lambda b: b.time),
    Column("Peak memory while building", lambda b: b.peak),
    Column("BlockMask size", lambda b: b.mask_bytes),
)


def sparsity_table(fm: Sourced) -> str:
    points = fflex.sparsity(fm.measurement).points
    return column_table(SPARSITY_COLUMNS, points, fm, "Time against sparsity.")


def cost_figure(fc: Sourced) -> str:
    """create_block_mask time against seq_len, log-log, its range over the rounds as a band."""
    return sweep_figure(
        fc, "Time to build a BlockMask against seq_len.", spec=fflex.BUILD_SWEEP,
        names={"build": "create_block_mask"}, ylabel="time to build",
    )  # fmt: skip


def cost_table(fc: Sourced) -> str:
    """Per seq_len: build time, peak memory while building, the BlockMask's size; the growth."""
    found = fflex.build_cost(fc.measurement)
    what = "create_block_mask, called repeatedly: its time and confidence interval over the rounds."
    table = column_table(BUILD_COLUMNS, found.points, fc, what)
    if found.slope is not None:
        table += f"\n\nOver {found.slope.quantity.detail} the build time grows with log-log slope {words.fact(found.slope)} (2 is quadratic: the mask_mod is evaluated on every query/key pair)."
    return table
