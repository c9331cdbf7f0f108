# Renderers of the FlashAttention chapter: the tile-grid figure (which tiles of the score
# matrix the loop computes, masks or skips, drawn from the measurement's own shape and
# blocks), the tables and sentences of findings/flash.py, and the GPU forecast box. Pure:
# strings out, no torch; every number a fact, every verdict decided in findings/.
from __future__ import annotations

from collections.abc import Sequence

from attention_docs.analytic import gpu
from attention_docs.analytic.tiling import DIAGONAL, SKIPPED, tile_counts, tile_grid
from attention_docs.findings import flash as fflash
from attention_docs.findings.model_check import FUSED_FA2
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.published import dataset
from attention_docs.render import claims, words
from attention_docs.render import compare as cmp
from attention_docs.render.claims import device_note
from attention_docs.render.figures import INK, MUTED, SERIES_COLORS, figure_html, new_figure, to_svg
from attention_docs.render.forecast import forecast_box
from attention_docs.render.plots import line_figure
from attention_docs.render.sweep import LEAD, sweep_claim, sweep_figure
from attention_docs.render.tables import (
    Column,
    captioned_table,
    column_table,
    markdown_table,
    measurement_of,
)

TILE_COLORS = {"computed": "#0072B2", DIAGONAL: "#E69F00", SKIPPED: "none"}
fact = words.fact


def cite(key: str) -> str:
    """A link to the reference dataset's source `key`: `[Dao, 2023](https://…)`."""
    paper = dataset().sources[key]
    return f"[{paper.authors}, {paper.year}]({paper.url})"


def cited(key: str) -> str:
    return fact(fflash.cited(key))


# --- the finding ---------------------------------------------------------------------------


def finding(flash: Sourced, times: Sourced) -> str:
    """The chapter's opening: what tiling did to the forward's peak memory; the forward
    times, tiled and fused against naive, go in its caption."""
    m, t = flash.measurement, times.measurement
    f = fflash.finding(m, t)
    if f is None:
        return claims.opening(
            "Naive attention or the tiled loop did not run on this device.", flash
        )
    shape, tiled, sdpa = fwd.Shape.of(m.params), f[fwd.TILED], f.get(fwd.SDPA_FLASH)
    detail = f"Naive attention's peak is {fact(tiled.less_memory)} the tiled loop's."
    if tiled.forward and sdpa and sdpa.forward:
        detail += (
            f" Forward time, unprofiled: as one eager PyTorch op per line, "
            f"{cmp.speedup(t, fwd.TILED, fwd.NAIVE, shape)}; fused into one kernel (SDPA's "
            f"flash backend), {cmp.speedup(t, fwd.SDPA_FLASH, fwd.NAIVE, shape)}."
        )
    where = "GPU" if m.device_kind == "cuda" else "CPU"
    return claims.opening(
        f"On this {where}, computing attention one tile at a time cut the forward's peak "
        f"memory from {fact(f[fwd.NAIVE].peak, with_spread=False)} to "
        f"{fact(tiled.peak, with_spread=False)}.",
        flash,
        detail,
        times,
    )


def what_to_do(flash: Sourced, times: Sourced) -> str:
    """What tiling's numbers mean for your own attention, each action backed by the page."""
    m, t = flash.measurement, times.measurement
    f = fflash.finding(m, t)
    if f is None:
        return ""
    shape, tiled, sdpa = fwd.Shape.of(m.params), f[fwd.TILED], f.get(fwd.SDPA_FLASH)
    return claims.what_to_do(
        f"Tile attention to cut its memory: one tile at a time, the peak fell from "
        f"{fact(f[fwd.NAIVE].peak)} to {fact(tiled.peak)} here.",
        f"Fuse the tiles into one kernel. As a Python loop of eager ops, "
        f"{cmp.speedup(t, fwd.TILED, fwd.NAIVE, shape)}; fused in SDPA's flash backend, "
        f"{cmp.speedup(t, fwd.SDPA_FLASH, fwd.NAIVE, shape)}."
        if tiled.forward and sdpa and sdpa.forward
        else "",
        "Write your own kernel only for what SDPA and FlexAttention cannot express: the "
        "Triton kernel above, checked against SDPA, is a starting point.",
    )


# --- the online softmax and the tile grid --------------------------------------------------


def online_softmax_table(sourced: Sourced) -> str:
    """One query's running max and sum, tile by tile, as the online softmax updates them."""
    m = sourced.measurement
    rows = [
        [f"{t.first_key}–{t.last_key}", t.tile_max, fact(t.m, emphasis=t.grew),
         "— (first tile)" if t.alpha is None else t.alpha, t.total]
        for t in fflash.online_softmax(m).tiles
    ]  # fmt: skip
    header = "Keys | Max in tile | Running max m | Rescale α = exp(m_old − m) | Running sum l"
    what = f"The online softmax for query {m.facts['online_query']} of the first head (no mask)."
    return captioned_table(header, rows, "lrrrr", sourced, what)


def online_softmax_claim(m: Measurement) -> str:
    """How often the max grew, and the online log-sum-exp against the whole row's."""
    s = fflash.online_softmax(m)
    agree = "equal in float64" if s.exact else f"{words.relative_error(s.lse_gap)} apart"
    return (
        f"The running max grew in {s.grew} of the {len(s.tiles) - 1} tiles after the first "
        f"(bold); for the median query, in {words.number(m.facts['online_growths_median'])}. "
        f"After the last tile `m + log(l)` = {words.number(m.facts['online_lse'])} and the whole "
        f"row's log-sum-exp = {words.number(m.facts['whole_row_lse'])}: {agree}. "
        "Nothing was approximated."
    )


def tile_grid_svg(
    seq_len: int, block_q: int, block_k: int, *, causal: bool, highlight_row: int | None = None
) -> str:
    """The seq_len × seq_len score matrix as tiles: computed, masked on the diagonal, skipped.

    With `highlight_row`, that query tile's row is outlined and its tiles numbered in the
    order the loop visits them.
    """
    from matplotlib.patches import Patch, Rectangle

    grid = tile_grid(seq_len, block_q, block_k, causal=causal)
    counts = tile_counts(grid)
    with new_figure(6.0, 6.0) as fig:
        ax = fig.add_subplot()
        for t in (t for row in grid for t in row):
            skipped = t.state == SKIPPED
            ax.add_patch(
                Rectangle(
                    (t.k0, t.q0), t.cols, t.rows, facecolor=TILE_COLORS[t.state],
                    edgecolor=MUTED if skipped else "white",
                    linestyle=(0, (2, 2)) if skipped else "-", linewidth=0.6, alpha=0.9,
                )
            )  # fmt: skip
        if causal:
            ax.plot([0, seq_len], [0, seq_len], color=INK, linewidth=0.8)
        if highlight_row is not None and 0 <= highlight_row < len(grid):
            row = grid[highlight_row]
            ax.add_patch(
                Rectangle((0, row[0].q0), seq_len, row[0].rows, facecolor="none",
                          edgecolor=SERIES_COLORS[1], linewidth=1.6)
            )  # fmt: skip
            visited = [t for t in row if t.state != SKIPPED]
            for i, t in enumerate(visited if len(row) <= 16 else [], start=1):
                ax.text(t.k0 + t.cols / 2, t.q0 + t.rows / 2, str(i), ha="center", va="center",
                        color="white", fontsize=8, fontweight="bold")  # fmt: skip
        ax.set_xlim(0, seq_len)
        ax.set_ylim(seq_len, 0)  # query 0 at the top, as the matrix is written
        ax.set_aspect("equal")
        ax.set_xlabel("key position (columns of the score matrix)")
        ax.set_ylabel("query position (rows)")
        ax.xaxis.set_label_position("top")
        ax.xaxis.tick_top()
        ax.spines[["bottom", "right"]].set_visible(False)
        handles = [
            Patch(facecolor=TILE_COLORS["computed"], label=f"computed ({counts['computed'] - counts['diagonal']})"),
            Patch(facecolor=TILE_COLORS[DIAGONAL], label=f"computed, then masked ({counts['diagonal']})"),
            Patch(facecolor="none", edgecolor=MUTED, linestyle="--", label=f"skipped ({counts['skipped']})"),
        ]  # fmt: skip
        fig.legend(handles=handles if causal else handles[:1], loc="outside lower center",
                   ncols=3, frameon=False, fontsize=7)  # fmt: skip
        alt = (
            f"The {seq_len}×{seq_len} score matrix cut into {block_q}×{block_k} tiles: "
            f"{counts['tiles']} tiles, {counts['computed']} computed"
            + (
                f" ({counts['diagonal']} of them masked on the diagonal), "
                f"{counts['skipped']} skipped above the causal diagonal."
                if causal
                else ", none skipped (no mask)."
            )
        )
        return to_svg(fig, alt)


def tile_grid_figure(sourced: Sourced) -> str:
    """The tile grid of a `flash_tiled_vs_naive` measurement, at its own shape and blocks."""
    p = sourced.measurement.params
    rows = -(-p["seq_len"] // p["block_q"])
    svg = tile_grid_svg(
        p["seq_len"], p["block_q"], p["block_k"], causal=p["causal"], highlight_row=rows // 2
    )
    return figure_html(svg, sourced, "Which tiles the loop computes.")


def tile_summary(m: Measurement) -> str:
    """The grid's tiles, those the mask skips, and the profile's count of computed tiles."""
    p, s = m.params, fflash.schedule(m)
    c = s.counts
    text = f"With {p['block_q']}×{p['block_k']} tiles the score matrix is **{c['tiles']} tiles**"
    if p["causal"]:
        text += (
            f"; the loop skips **{c['skipped']}** of them outright and masks the {c['diagonal']} "
            f"that cross the diagonal after computing them"
        )
    if s.calls is None:
        return text + "."
    agree = "as the grid says" if s.as_scheduled else f"not the grid's {c['computed']}"
    return text + f". The profile counted `tiled.scores` **{s.calls}** times per forward, {agree}."


# --- what tiling buys ----------------------------------------------------------------------


def implementations_table(sourced: Sourced, times: Sourced) -> str:
    """Forward time (forward_times), achieved FLOP/s, peak memory and error of each way."""
    rows = [
        [r.name, r.forward or "— (not in forward_times' grid)", cmp.versus_cell(r.versus_naive),
         r.achieved, r.peak, r.less_memory, r.error]
        if r.status == fwd.OK
        else [r.name, r.status, "—", "—", "—", "—", "—"]
        for r in fflash.implementations(sourced.measurement, measurement_of(times))
    ]  # fmt: skip
    header = (
        "Implementation | Forward time (unprofiled) | Naive's ÷ this | Achieved FLOP/s | "
        "Peak memory | Naive's ÷ this | Error vs float64"
    )
    what = (
        "Three ways to compute the same attention: forward times from forward_times "
        "(unprofiled, range over rounds); achieved FLOP/s = 4·b·h·d per (query, key) pair the "
        "mask leaves visible ÷ that time; peak memory from the allocator; relative error against float64."
    )
    return captioned_table(header, rows, "lrrrrrr", sourced, what)


def memory_figure(sourced: Sourced) -> str:
    """Peak memory against seq_len for the three implementations, log-log with fitted slopes."""
    xs = sourced.measurement.tables["memory_by_seq_len"].column("seq_len")
    return line_figure(
        sourced,
        "memory_by_seq_len",
        x="seq_len",
        ys=fflash.MEMORY_LINES,
        labels=("naive", "tiled loop", "SDPA flash"),
        what=f"Peak memory against sequence length (seq_len swept {xs[0]}–{xs[-1]}; the other "
        "parameters as listed).",
        ylabel="peak memory",
        logx=True,
        logy=True,
        slopes=fflash.memory_slopes(sourced.measurement),
    )


def memory_claim(m: Measurement) -> str:
    """How each peak grows with seq_len, and where the loop's is above naive's."""
    g = fflash.memory_growth(m)
    if g is None:
        return "Naive or tiled attention did not run at every length; see the notes."
    text = (
        f"Over seq_len {g.lengths[0]}–{g.lengths[-1]} naive attention's peak grows with log-log "
        f"slope **{words.number(g.naive_slope)}** (quadratic is 2), the tiled loop's with "
        f"**{words.number(g.tiled_slope)}**: it holds one tile of scores at a time."
    )
    if g.loop_above_naive:
        lengths = words.series(str(n) for n in g.loop_above_naive)
        text += (
            f" At seq_len {lengths}, where the score matrix it avoids is small, the loop's "
            "peak is above naive's."
        )
    return text


def phase_table(sourced: Sourced) -> str:
    """The loop's four phases under the profiler: calls and shares (structure, not speed)."""
    rows = [(f"`{label}`", *rest) for label, *rest in fflash.phases(sourced.measurement)]
    header = "Phase | Calls / forward | Share of profiled time | FLOPs (model) | Bytes (model)"
    what = "The tiled loop's phases, profiled: shares of the four, with each phase's modelled work."
    return captioned_table(header, rows, "lrrrr", sourced, what)


def traffic_table(sourced: Sourced, times: Sourced) -> str:
    """The three traffic models' bytes, relative to naive, over unprofiled forward times."""
    rows = fflash.traffic(sourced.measurement, measurement_of(times))
    header = "Model | Bytes (model) | Relative to naive | Achieved B/s (÷ unprofiled time)"
    what = "Bytes moved to and from memory, by the cost model (not measured)."
    return captioned_table(header, rows, "lrrr", sourced, what)


# --- the block size ------------------------------------------------------------------------


BLOCK_COLUMNS = (
    Column("Tile", lambda b: f"{b.size}×{b.size}{LEAD[b.lead]}", "l"),
    Column("Tiles computed (share of scores)", lambda b: f"{fact(b.tiles)} ({fact(b.share)})"),
    Column("Time / forward (unprofiled; range over rounds)", lambda b: b.time),
    Column("Peak memory", lambda b: b.peak),
    Column("Fused kernel's bytes (model)", lambda b: b.fused_bytes),
    Column("On-chip bytes per program (model)", lambda b: b.on_chip),
)


def block_table(sourced: Sourced) -> str:
    """The block sweep: tiles, time with its interval, peak memory, modelled bytes."""
    m = sourced.measurement
    rows = fflash.block_sweep(m).rows
    what = (
        f"The tiled loop at block_q = block_k = {rows[0].size}–{rows[-1].size}, seq_len="
        f"{m.params['seq_len']}, timed in interleaved rounds."
    )
    return column_table(BLOCK_COLUMNS, rows, sourced, what)


def block_claim(m: Measurement) -> str:
    """Which tile is fastest, which are within its noise, how much slower the slowest is."""
    found = fflash.block_sweep(m)
    r = found.ranking
    if r is None or found.slowest_vs_fastest is None:
        return ""

    def tile(b: str) -> str:
        return f"{b}×{b}"

    # "Fastest" only of a clear leader (findings/rank): a leader within noise of others ties.
    if r.clear:
        text = f"The loop is fastest with {tile(r.fastest)} tiles"
    else:
        others = [tile(b) for b in r.leaders[1:]]
        text = (
            f"The loop's lowest time is with {tile(r.fastest)} tiles, and "
            f"{words.series(others)} {'is' if len(others) == 1 else 'are'} within noise of it "
            "(tied for fastest)"
        )
    return text + (
        f"; {tile(r.order[-1])} tiles take {cmp.versus_cell(found.slowest_vs_fastest)} its time. "
        "Fewer tiles mean fewer eager ops to dispatch, larger ones more work per op."
    )  # fmt: skip


# --- FlashAttention 2 and 3, forecast ------------------------------------------------------


def _counted_table(header: str, rows: Sequence[Sequence], align: str, caption: str) -> str:
    """A table of counts and forecasts, no measurement behind it: the caption says whence."""
    cells = [[c if isinstance(c, str) else fact(c) for c in r] for r in rows]
    table = markdown_table(header.split(" | "), cells, align)
    return f'{table}\n\n<p class="ad-caption"><strong>{caption}</strong></p>'


def generations_table() -> str:
    """FlashAttention 1 against 2 at the forecast shape on the forecast GPU, counted."""
    g, sheet = fflash.generations(), gpu.sheet()
    rows = [
        ["Programs (thread blocks) per launch", *g.programs],
        [f"Programs per SM ({fact(g.sms)})", *g.per_sm],
        ["Output rescaling outside the matmuls", *g.rescale_flops],
        [f"… its floor on the FP32 units ({fact(g.fp32_peak)})", *g.rescale_us],
    ]
    header = (
        "At the forecast shape | FlashAttention (one program per head) | "
        "FlashAttention-2 (one per query tile)"
    )
    caption = (
        f"Counted on the {gpu.FLASH_BLOCK_Q}×{gpu.FLASH_BLOCK_K} tile grid at "
        f"{gpu.FORECAST_SHAPE.text()}; times are floors from the {sheet.label} data sheet "
        f"({sheet.source}), not measurements."
    )
    return _counted_table(header, rows, "lrr", caption)


def causal_claim() -> str:
    g = fflash.generations()
    return (
        f"At that shape the causal mask lets every program skip the key tiles past its diagonal: "
        f"{fact(g.skipped)} of the grid's {fact(g.tiles)}, {fact(g.skipped_flops)} of matmul "
        f"work never done. The rest takes at least {fact(g.matmul_us)} on the tensor cores; "
        f"rescaling the output at every tile would add {fact(g.rescale_share[0])} of that on "
        f"the FP32 units, deferring the normalisation {fact(g.rescale_share[1])}."
    )


def fa2_papers() -> str:
    """What the FlashAttention 2 paper reports, cited as published."""
    return (
        f"The FlashAttention 2 paper ({cite('dao2023')}) reports {cited('fa2-a100-share')} of "
        f"an A100's peak FLOP/s against FlashAttention's {cited('fa1-a100-share')}, about "
        f"{cited('fa2-speedup')} faster (its figures, not measured here). It changed three "
        "things that this chapter's loop already does:"
    )


def fa3_papers() -> str:
    """What the FlashAttention 3 paper reports, cited as published."""
    return (
        f"The FlashAttention 3 paper ({cite('shah2024')}) reports, on an H100, "
        f"{cited('fa3-speedup')} FlashAttention 2's speed in FP16: up to {cited('fa3-fp16')} "
        f"({cited('fa3-fp16-share')} of peak), where FlashAttention 2 reaches "
        f"{cited('fa2-h100-share')}. In FP8 it reports close to {cited('fa3-fp8')}, with "
        f"{cited('fa3-fp8-error')} lower error than a baseline FP8 attention. These are the "
        "paper's figures, not measured here."
    )


def tiles_table() -> str:
    """Tile sizes against one block's shared memory and registers on the forecast GPU, with
    the bytes each moves."""
    t, sheet = fflash.tiles(), gpu.sheet()
    rows = [
        [f"{fit.block_q}×{fit.block_k}", shared, registers, "yes" if fit.fits else "no", *moved]
        for fit, shared, registers, *moved in t.rows
    ]
    header = (
        "Tile | Shared memory: q, k, v tiles (model) | Registers: scores, accumulator, float32 "
        f"(model) | Fits {fact(t.capacity)} and {fact(t.register_capacity)}? | Bytes moved (k, "
        "v once per query tile) | Naive's bytes ÷ these"
    )
    cc = sheet.capability or "??"
    caption = (
        f"Forecast for the {sheet.label} at {gpu.FORECAST_SHAPE.text()}: shared memory per "
        f"block, {sheet.shared_memory_per_block_kb} KiB, and 64 K 32-bit registers per block, "
        f"from the CUDA C++ Programming Guide (compute capability {cc[0]}.{cc[1:]}); one K/V "
        "stage (a pipelined kernel holds two or more); bytes by the traffic model, before any "
        "L2 reuse."
    )
    return _counted_table(header, rows, "lrrlrr", caption)


def gpu_forecast_box(times_by_device: Sequence[Sourced]) -> str:
    """The forecast box: HBM bytes and the fused forward's floor, measured beside when stored."""
    b = fflash.gpu_forecast([s.measurement for s in times_by_device])
    sheet, shape = gpu.sheet(), gpu.FORECAST_SHAPE
    kernels = len(gpu.naive_kernels(sheet, shape))
    rows = [
        (f"Naive attention: HBM bytes ({kernels} kernels, as the code records them)", b.naive_bytes),
        ("FlashAttention: HBM bytes (one kernel)", b.flash_bytes),
        ("Naive's bytes ÷ FlashAttention's, every K/V re-read from HBM", b.fewer_bytes_from_hbm),
        ("… if every K/V re-read hits L2 (assumed, not measured)", b.fewer_bytes),
        (f"{fwd.SDPA_FLASH} forward: roofline floor", b.floor),
        (f"{fwd.TRITON} forward: roofline floor", b.triton_floor),
    ]  # fmt: skip
    l2 = (
        "K and V re-reads of tiles in flight fit in L2: HBM sees each input once"
        if b.l2_serves_rereads
        else "K and V are re-read from HBM once per query tile"
    )
    return forecast_box(
        sheet,
        rows,
        shape=shape,
        lead="Tiling keeps the N×N scores on chip: what that saves on the GPU this site "
        "forecasts for.",
        model=f"Tiles of {gpu.FLASH_BLOCK_Q}×{gpu.FLASH_BLOCK_K}; {l2}.",
        floors=True,
        sources=gpu.flash_range(sheet, shape).sources,
        kinds=(FUSED_FA2,),
    )


# --- the Triton kernel ---------------------------------------------------------------------


def interpreter_table(sourced: Sourced) -> str:
    """The kernel under Triton's interpreter against SDPA flash and float64."""
    m = sourced.measurement
    found = fflash.interpreter_errors(m)
    if not found:
        status = m.facts.get("interpreter_check", "not run")
        return device_note(m, cpu=f"The interpreter check was {status}.", cuda="")
    header = (
        "Inputs | Triton (interpreted) vs float64 | SDPA flash vs float64 | Triton vs SDPA flash"
    )
    what = (
        "Relative error ‖out − ref‖ / ‖ref‖ of the Triton kernel run by Triton's interpreter "
        "(TRITON_INTERPRET=1) on this CPU, float32 products exact (input precision ieee)."
    )
    return captioned_table(header, found, "lrrr", sourced, what)


def kernel_table(sourced: Sourced, ceilings: Sourced | None) -> str:
    """A GPU entry's kernel times per seq_len, the Triton kernel's achieved FLOP/s and share
    of the measured matmul ceiling, and its time against SDPA flash."""
    found = fflash.kernels(sourced.measurement, measurement_of(ceilings))
    rows = []
    for k in found.rows:
        rate = "—" if k.rate is None else fact(k.rate) + (
            " (suspect: above the measured matmul ceiling)" if k.suspect
            else f" ({fact(k.share)} of the matmul ceiling)" if k.share else ""
        )  # fmt: skip
        times = [k.times.get(x, "—") for x in found.names]
        rows.append([str(k.seq_len), *times, rate, cmp.versus_cell(k.versus_sdpa)])
    header = ["seq_len", *(f"{x} (kernel time)" for x in found.names), "Triton achieved FLOP/s",
              "Triton's time ÷ SDPA flash's"]  # fmt: skip
    what = "Kernel times (L2 flushed before each call; range over rounds)." + (
        f" Suspect: {', '.join(found.suspects)} ran above the measured matmul ceiling; no share "
        "is claimed for it." if found.suspects else ""
    )  # fmt: skip
    return captioned_table(header, rows, "r" * len(header), sourced, what)


def triton_section(sourced: Sourced, ceilings: Sourced | None = None) -> str:
    """On a GPU entry: the kernel table and what FA3 torch offered. On a CPU one: the
    interpreter's numerics table."""
    m = sourced.measurement
    if m.device_kind != "cuda" or "kernels" not in m.tables:
        return interpreter_table(sourced)
    parts = [
        kernel_table(sourced, ceilings),
        sweep_figure(
            sourced,
            "Each kernel's time against sequence length (L2 flushed before each call).",
            spec=fflash.KERNELS,
            ylabel="kernel time",
        ),
        # the table states Triton against SDPA flash at every length already
        sweep_claim(sourced, spec=fflash.KERNELS, versus=False),
    ]
    err = fflash.kernels(m, measurement_of(ceilings)).error
    if err is not None:
        parts.append(
            f"The kernel ({m.facts.get('kernel_config', '')}) differs from a float64 reference "
            f"by {fact(err)} (relative error)."
        )
    status = m.facts.get("fa3_status")
    if status is not None:
        offered = ", ".join(m.facts.get("flash_impls_offered") or []) or "none"
        parts.append(
            f"torch's flash-implementation switch offered {offered}; "
            + ("the `SDPA flash, FA3` column is SDPA with FlashAttention-3 switched on."
               if status == fwd.OK else f"FlashAttention-3 was not measured: {status}.")
        )  # fmt: skip
    return "\n\n".join(parts)
