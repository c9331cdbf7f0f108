# Renderers of the FlashAttention chapter: the tile-grid figure (which tiles of the score
# matrix the loop computes, masks or skips, drawn from the measurement's own shape and
# blocks), formatted tables, and sentences whose numbers come from the measurements.
# Pure: strings out, no torch.
from __future__ import annotations

from attention_docs.analytic.cost import itemsize
from attention_docs.analytic.tiling import (
    DEFAULT_BLOCK,
    DIAGONAL,
    OUTSIDE_RANGES,
    SKIPPED,
    tile_counts,
    tile_grid,
)
from attention_docs.findings.compare import compare
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.timing import Timing
from attention_docs.render import compare as compare_render
from attention_docs.render import words as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.claims import device_note
from attention_docs.render.compare import ratio_text
from attention_docs.render.figures import INK, MUTED, SERIES_COLORS, figure_html, new_figure, to_svg
from attention_docs.render.plots import line_figure, loglog_slope
from attention_docs.render.tables import markdown_table

FA3_NAME = "SDPA flash, FA3"  # as experiments/flash.py names it
TILE_COLORS = {"computed": "#0072B2", DIAGONAL: "#E69F00", SKIPPED: "none"}


def _grid_of(m: Measurement):
    p = m.params
    return tile_grid(p["seq_len"], p["block_q"], p["block_k"], causal=p["causal"])


def tile_grid_svg(
    seq_len: int, block_q: int, block_k: int, *, causal: bool, highlight_row: int | None = None
) -> str:
    """The seq_len × seq_len score matrix as tiles: computed, masked on the diagonal, skipped.

    With `highlight_row`, that query tile's row is outlined and its tiles numbered in the
    order the loop visits them.
    """
    grid = tile_grid(seq_len, block_q, block_k, causal=causal)
    counts = tile_counts(grid)
    with new_figure(6.0, 6.0) as fig:
        ax = fig.add_subplot()
        from matplotlib.patches import Patch, Rectangle

        for row in grid:
            for t in row:
                skipped = t.state == SKIPPED
                ax.add_patch(
                    Rectangle(
                        (t.k0, t.q0),
                        t.cols,
                        t.rows,
                        facecolor=TILE_COLORS[t.state],
                        edgecolor=MUTED if skipped else "white",
                        linestyle=(0, (2, 2)) if skipped else "-",
                        linewidth=0.6,
                        alpha=0.9,
                    )
                )
        if causal:
            ax.plot([0, seq_len], [0, seq_len], color=INK, linewidth=0.8)
        if highlight_row is not None and 0 <= highlight_row < len(grid):
            row = grid[highlight_row]
            ax.add_patch(
                Rectangle(
                    (0, row[0].q0),
                    seq_len,
                    row[0].rows,
                    facecolor="none",
                    edgecolor=SERIES_COLORS[1],
                    linewidth=1.6,
                )
            )
            visited = [t for t in row if t.state != SKIPPED]
            if len(row) <= 16:
                for i, t in enumerate(visited, start=1):
                    ax.text(
                        t.k0 + t.cols / 2,
                        t.q0 + t.rows / 2,
                        str(i),
                        ha="center",
                        va="center",
                        color="white",
                        fontsize=8,
                        fontweight="bold",
                    )
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
        if not causal:
            handles = handles[:1]
        fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False, fontsize=7)
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
    m = sourced.measurement
    p = m.params
    rows = len(_grid_of(m))
    svg = tile_grid_svg(
        p["seq_len"], p["block_q"], p["block_k"], causal=p["causal"], highlight_row=rows // 2
    )
    return figure_html(svg, sourced, "Which tiles the loop computes.")


def online_softmax_table(sourced: Sourced) -> str:
    """One query's running max and sum, tile by tile, as the online softmax updates them."""
    m = sourced.measurement
    rows = []
    for r in m.tables["online_softmax_row"].records():
        grew = r["tile"] == 0 or r["alpha"] < 1.0
        rows.append(
            [
                f"{r['first_key']}–{r['end_key'] - 1}",
                f"{r['tile_max']:.3f}",
                f"**{r['m']:.3f}**" if grew else f"{r['m']:.3f}",
                "— (first tile)" if r["tile"] == 0 else f"{r['alpha']:.4f}",
                f"{r['l']:.4f}",
            ]
        )
    header = ["Keys", "Max in tile", "Running max m", "Rescale α = exp(m_old − m)", "Running sum l"]
    what = (
        f"The online softmax for query {m.facts['online_query']} of the first head, "
        "against every key (no mask)."
    )
    return markdown_table(header, rows) + "\n\n" + caption_html(sourced, what)


def online_softmax_claim(m: Measurement) -> str:
    """When the max grew, and how close the online log-sum-exp is to the whole row's."""
    records = m.tables["online_softmax_row"].records()
    grew = [r for r in records[1:] if r["alpha"] < 1.0]
    smallest = min((r["alpha"] for r in grew), default=None)
    diff = abs(m.facts["online_lse"] - m.facts["whole_row_lse"])
    text = (
        f"For this query the running max grew in {len(grew)} of the {len(records) - 1} tiles "
        f"after the first (bold above)"
    )
    if smallest is not None:
        text += f", and each time α shrank the sum so far, by a factor as small as {smallest:.4f}"
    text += (
        f". It is the query of the first head whose max grows most often; for the median query "
        f"it grows {m.facts['online_growths_median']:g} times, because with random scores the "
        f"largest ones are usually met early. After the last tile, `m + log(l)` = "
        f"{m.facts['online_lse']:.6f}, and the log-sum-exp of the whole row at once is "
        f"{m.facts['whole_row_lse']:.6f}: "
    )
    agree = "equal in float64" if diff == 0 else f"they differ by {diff:.1e}, float64 rounding"
    return text + agree + ". Nothing was approximated."


def tile_summary(m: Measurement) -> str:
    """How many tiles there are, how many the causal mask skips, and what the profile counted."""
    p = m.params
    grid = _grid_of(m)
    c = tile_counts(grid)
    shape = f"{len(grid)}×{len(grid[0])}"
    text = (
        f"With seq_len={p['seq_len']} and {p['block_q']}×{p['block_k']} tiles, the score matrix "
        f"is a {shape} grid of **{c['tiles']} tiles**. "
    )
    if p["causal"]:
        text += (
            f"The causal mask lets the loop skip **{c['skipped']}** of them without computing "
            f"anything, and {c['diagonal']} cross the diagonal and are masked after their scores "
            f"are computed: it computes {c['computed']} tiles, "
            f"{fmt.percent(c['computed'] / c['tiles'])} of the grid. "
        )
    try:
        calls = m.step("tiled.scores").calls
    except KeyError:
        return text
    agree = "as the tile count says" if calls == c["computed"] else "not the tile count"
    return text + f"The profile agrees: `tiled.scores` ran **{calls}** times per forward, {agree}."


def _impl(m: Measurement) -> dict[str, dict]:
    return {r["implementation"]: r for r in m.tables["implementations"].records()}


def _m(source: Sourced | Measurement) -> Measurement:
    return source.measurement if isinstance(source, Sourced) else source


def _forward_cell(times: Sourced | Measurement, m: Measurement, implementation: str) -> str:
    """`implementation`'s forward time at `m`'s shape, from the forward_times entry."""
    t = _m(times)
    if t.device_id != m.device_id:
        return f"— (forward_times was not measured on {m.provenance.device.label})"
    try:
        return compare_render.forward_time(t, implementation, fwd.Shape.of(m.params))
    except fwd.NotMeasuredError:
        return "— (this shape is not in forward_times' grid)"


def _row_timing(r: dict, median: str = "time_us") -> Timing:
    """A table row's median and round range as a Timing (for `compare`)."""
    return Timing(
        median_us=r[median],
        iqr_us=0.0,
        runs=0,
        method="",
        rounds_us=(r["low_us"], r[median], r["high_us"]),
    )


def _ms(us: float) -> str:
    """Microseconds as milliseconds, three significant digits, never in e-notation."""
    ms = us / 1e3
    return f"{ms:.0f}" if ms >= 1000 else f"{ms:.3g}"


def _ms_range(median: float, low: float, high: float) -> str:
    """`9.62 (9.50–9.81)`, in ms: the median and the slowest–fastest round."""
    return f"{_ms(median)} ({_ms(low)}–{_ms(high)})"


def implementations_table(sourced: Sourced, times: Sourced) -> str:
    """Forward time (from forward_times), peak memory and error of naive, tiled and SDPA flash."""
    m = sourced.measurement
    rows = []
    naive = _impl(m).get(fwd.NAIVE)
    for r in m.tables["implementations"].records():
        if r["status"] != "ok":
            rows.append([r["implementation"], r["status"], "—", "—", "—"])
            continue
        less = (
            f"{naive['peak_bytes'] / r['peak_bytes']:.1f}×"
            if naive and naive["peak_bytes"] and r["peak_bytes"]
            else "—"
        )
        rows.append(
            [
                r["implementation"],
                _forward_cell(times, m, r["implementation"]),
                fmt.nbytes(r["peak_bytes"]),
                less,
                f"{r['rel_error']:.1e}",
            ]
        )
    header = [
        "Implementation",
        "Forward time (forward_times: median; slowest–fastest round)",
        "Peak memory",
        "Less memory than naive",
        "Error vs float64",
    ]
    what = "Three ways to compute the same attention; times from the forward_times entry."
    return markdown_table(header, rows, "llrrr") + "\n\n" + caption_html(sourced, what)


def traffic_table(sourced: Sourced) -> str:
    """The three traffic models' bytes, and each relative to naive."""
    m = sourced.measurement
    records = m.tables["traffic"].records()
    naive = records[0]["bytes"]
    rows = [[r["model"], fmt.nbytes(r["bytes"]), f"{r['bytes'] / naive:.2f}×"] for r in records]
    what = "Bytes moved to and from memory, by the cost model (not measured)."
    return (
        markdown_table(["Model", "Bytes", "Relative to naive"], rows)
        + "\n\n"
        + caption_html(sourced, what)
    )


def memory_claim(m: Measurement) -> str:
    """Peak memory of naive vs tiled vs SDPA, how each grows with seq_len, and what is live
    at the peaks where the tiled loop needs more than naive."""
    impl = _impl(m)
    naive, tiled, sdpa = (impl.get(n) for n in (fwd.NAIVE, fwd.TILED, fwd.SDPA_FLASH))
    if not (naive and tiled and naive["peak_bytes"] and tiled["peak_bytes"]):
        return "Naive or tiled attention did not run here; see the notes under the table."
    p = m.params
    score_matrix = p["batch_size"] * p["num_heads"] * p["seq_len"] ** 2 * itemsize(p["dtype"])
    text = (
        f"At seq_len={p['seq_len']}, naive attention's peak is "
        f"**{fmt.nbytes(naive['peak_bytes'])}**, {naive['peak_bytes'] / score_matrix:.1f} times "
        f"the {fmt.nbytes(score_matrix)} of one score matrix: the scores, their masked copy and "
        f"the probabilities overlap in time. The tiled loop peaks at "
        f"**{fmt.nbytes(tiled['peak_bytes'])}** "
        f"({naive['peak_bytes'] / tiled['peak_bytes']:.1f}× less)"
    )
    if sdpa and sdpa["status"] == "ok":
        text += f", and SDPA's flash backend at {fmt.nbytes(sdpa['peak_bytes'])}."
    else:
        text += "."
    table = m.tables["memory_by_seq_len"]
    xs = table.column("seq_len")
    slopes = {
        name: loglog_slope(xs, table.column(col))
        for name, col in (("naive", "naive_peak"), ("tiled", "tiled_peak"))
    }
    if all(s is not None for s in slopes.values()):
        text += (
            f" Over seq_len {xs[0]}–{xs[-1]}, naive's peak grows with slope "
            f"**{slopes['naive']:.2f}** on a log-log plot (quadratic is 2), the tiled loop's with "
            f"**{slopes['tiled']:.2f}**."
        )
    crossing = peak_crossing_claim(m)
    return text + (" " + crossing if crossing else "")


def _live_groups(m: Measurement, implementation: str, seq_len: int) -> list[dict]:
    if "live_at_peak" not in m.tables:
        return []
    return [
        r
        for r in m.tables["live_at_peak"].records()
        if r["implementation"] == implementation and r["seq_len"] == seq_len
    ]


def _live_text(groups: list[dict]) -> str:
    tensors = sum(g["tensors"] for g in groups)
    nbytes = sum(g["bytes"] for g in groups)
    parts = ", ".join(
        f"{g['tensors']} from {'`' + g['phase'] + '`' if g['phase'] != OUTSIDE_RANGES else g['phase']}"
        for g in groups
    )
    return f"{tensors} tensors, {fmt.nbytes(nbytes)} ({parts})"


def peak_crossing_claim(m: Measurement) -> str:
    """Where the tiled loop's peak is above naive's, and what the allocation events show is
    live at both peaks there. Empty when the loop is below naive at every length."""
    rows = m.tables["memory_by_seq_len"].records()
    above = [
        r for r in rows if r["naive_peak"] and r["tiled_peak"] and r["tiled_peak"] > r["naive_peak"]
    ]
    if not above:
        return ""
    lengths = " and ".join(str(r["seq_len"]) for r in above)
    text = f"At the short end it goes the other way: at seq_len {lengths} the tiled loop's peak is above naive's."
    first = above[0]
    n = first["seq_len"]
    naive_live, tiled_live = _live_groups(m, fwd.NAIVE, n), _live_groups(m, fwd.TILED, n)
    if not (naive_live and tiled_live):
        return text
    text += (
        f" At seq_len {n}, the profiler's allocation events, allocations paired with their frees, "
        f"show what is live at each peak: naive attention holds {_live_text(naive_live)}; the "
        f"tiled loop {_live_text(tiled_live)}."
    )
    outside = next((g for g in tiled_live if g["phase"] == OUTSIDE_RANGES), None)
    p = m.params
    if outside:
        upcast = ", and the float32 copies of q, k and v" if p["dtype"] != "float32" else ""
        text += (
            f" The {fmt.nbytes(outside['bytes'])} from outside the four phases is what the loop "
            f"allocates around them — the output and its log-sum-exp, and per query tile the "
            f"scaled query tile and its running statistics{upcast}."
        )
    if p["block_q"] >= n and p["block_k"] >= n:
        text += (
            f" With {p['block_q']}×{p['block_k']} tiles, one tile is the whole {n}×{n} score "
            "matrix: at this length tiling has nothing to save, and the loop's extra tensors "
            "are pure cost."
        )
    else:
        share = min(p["block_q"], n) * min(p["block_k"], n) / (n * n)
        text += (
            f" A {p['block_q']}×{p['block_k']} tile is {fmt.percent(share)} of the {n}×{n} "
            "score matrix here: the loop's fixed tensors weigh more than what the tiles save."
        )
    return text


def traffic_claim(m: Measurement) -> str:
    """The traffic models compared in one sentence."""
    naive, loop, fused = (r["bytes"] for r in m.tables["traffic"].records())
    return (
        f"Run as one eager op per line, the tiled loop moves **{loop / naive:.2f}×** the bytes of "
        f"naive attention by the cost model: every score tile is still written to memory and "
        f"read back by the next op. The same tiles in one fused kernel move "
        f"**{fused / naive:.2f}×**: only q, k, v, the output and the log-sum-exp travel, and k "
        "and v once per query tile."
    )


def time_claim(m: Measurement, times: Sourced | Measurement) -> str:
    """The tiled loop's forward time against naive and SDPA, from the forward_times entry."""
    t = _m(times)
    shape = fwd.Shape.of(m.params)
    if t.device_id != m.device_id:
        return (
            f"The forward times of this shape come from the `forward_times` entry, which has "
            f"no measurement on {m.provenance.device.label}."
        )
    try:
        fwd.status(t, fwd.TILED, shape)
    except fwd.NotMeasuredError:
        return f"`forward_times` does not time this shape ({shape.text()})."
    text = (
        f"Without the profiler (the site's one forward-time entry, `forward_times`, "
        f"{t.facts.get('rounds', 3)} interleaved rounds), the tiled loop takes "
        f"**{compare_render.forward_time(t, fwd.TILED, shape)}** per forward and naive attention "
        f"{compare_render.forward_time(t, fwd.NAIVE, shape)}: "
        f"{compare_render.speedup(t, fwd.NAIVE, fwd.TILED, shape)}. SDPA's flash backend, the same "
        f"algorithm compiled into one kernel, takes {compare_render.forward_time(t, fwd.SDPA_FLASH, shape)}: "
        f"{compare_render.speedup(t, fwd.SDPA_FLASH, fwd.NAIVE, shape)}."
    )
    p = m.params
    if (p["block_q"], p["block_k"]) != (DEFAULT_BLOCK, DEFAULT_BLOCK):
        text += (
            f" (`forward_times` runs the loop with its default {DEFAULT_BLOCK}×{DEFAULT_BLOCK} "
            f"tiles; this page's profile used {p['block_q']}×{p['block_k']}.)"
        )
    return text


def profiler_overhead(m: Measurement, times: Sourced | Measurement) -> str:
    """The profiled time of the phases against the unprofiled forward, and why they differ."""
    total = sum(s.time_us for s in m.steps)
    if not total:
        return ""
    ops = m.facts.get("ops_per_forward")
    kernels = m.facts.get("kernels_per_forward")
    text = (
        f"Under the profiler the four phases add up to **{fmt.time_us(total)}** per forward; "
        f"without it, the whole forward takes {_forward_cell(times, m, fwd.TILED)} "
        "(`forward_times`). "
    )
    if m.device_kind == "cuda":
        return text + (
            f"The table's time is GPU time, summed over the **{kernels}** kernels one forward "
            f"launched ({ops} ATen ops recorded on the CPU side): the GPU is busy for that "
            "much of the forward, and the rest is time between kernels."
        )
    return text + (
        f"The profiler records every op with its input shapes and allocations, and one forward "
        f"here is **{ops}** ATen ops (counting ops called by ops): its per-op cost is multiplied "
        "by the loop. Read the table for the shares, and the timer for the time."
    )


def _swept(values: list, name: str) -> str:
    return f"{name} swept {values[0]}–{values[-1]}" if len(values) > 1 else f"{name}={values[0]}"


def memory_figure(sourced: Sourced) -> str:
    """Peak memory against seq_len for the three implementations, log-log with fitted slopes."""
    xs = sourced.measurement.tables["memory_by_seq_len"].column("seq_len")
    return line_figure(
        sourced,
        "memory_by_seq_len",
        x="seq_len",
        ys=("naive_peak", "tiled_peak", "sdpa_flash_peak"),
        labels=("naive", "tiled loop", "SDPA flash"),
        what=f"Peak memory against sequence length ({_swept(xs, 'seq_len')}; the other "
        "parameters as listed).",
        ylabel="peak memory (bytes)",
        logx=True,
        logy=True,
        fit_slope=True,
    )


def _blocks(m: Measurement) -> list[dict]:
    return [r for r in m.tables["blocks"].records() if r["status"] == "ok"]


def _blocks_what(m: Measurement, what: str) -> str:
    blocks = m.tables["blocks"].column("block")
    return f"{what} ({_swept(blocks, 'block_q = block_k')} at seq_len={m.params['seq_len']})."


def block_table(sourced: Sourced) -> str:
    """The block sweep: tiles, time with its spread, peak memory, modelled bytes, working set."""
    m = sourced.measurement
    rows = []
    for r in m.tables["blocks"].records():
        if r["status"] != "ok":
            rows.append([f"{r['block']}×{r['block']}", r["status"], "—", "—", "—", "—"])
            continue
        rows.append(
            [
                f"{r['block']}×{r['block']}",
                f"{r['tiles_computed']} ({fmt.percent(r['scores_computed'])})",
                _ms_range(r["time_us"], r["low_us"], r["high_us"]),
                fmt.nbytes(r["peak_bytes"]),
                fmt.nbytes(r["fused_bytes"]),
                fmt.nbytes(r["tile_working_set"]),
            ]
        )
    header = [
        "Tile",
        "Tiles computed (share of scores)",
        "Time / forward (ms: median; slowest–fastest round)",
        "Peak memory",
        "Fused kernel's bytes (model)",
        "On-chip tile set (model)",
    ]
    what = _blocks_what(m, "The tiled loop at each block size, timed in interleaved rounds")
    return markdown_table(header, rows, "lrrrrr") + "\n\n" + caption_html(sourced, what)


def block_time_figure(sourced: Sourced) -> str:
    """Time per forward against the block size, each point with its slowest–fastest round."""
    m = sourced.measurement
    rows = _blocks(m)
    what = _blocks_what(m, "Time of the tiled loop against the block size; bars: round range")
    with new_figure(7.0, 3.4) as fig:
        ax = fig.add_subplot()
        xs = [r["block"] for r in rows]
        ys = [r["time_us"] / 1e3 for r in rows]
        lows = [(r["time_us"] - r["low_us"]) / 1e3 for r in rows]
        highs = [(r["high_us"] - r["time_us"]) / 1e3 for r in rows]
        ax.errorbar(
            xs,
            ys,
            yerr=[lows, highs],
            marker="o",
            markersize=4,
            capsize=3,
            color=SERIES_COLORS[0],
            linewidth=1.4,
            label="tiled loop, time per forward (median of rounds)",
        )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_xlabel("block_q = block_k")
        ax.set_ylabel("time per forward (ms)")
        ax.grid(color=MUTED, alpha=0.3, linewidth=0.5, which="both")
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(frameon=False, fontsize=8)
        alt = f"{what} " + "; ".join(
            f"{r['block']}: {_ms_range(r['time_us'], r['low_us'], r['high_us'])} ms" for r in rows
        )
        svg = to_svg(fig, alt)
    return figure_html(svg, sourced, what)


def block_bytes_figure(sourced: Sourced) -> str:
    m = sourced.measurement
    return line_figure(
        sourced,
        "blocks",
        x="block",
        ys=("peak_bytes", "fused_bytes", "tile_working_set"),
        labels=(
            "peak memory of the loop (measured)",
            "fused kernel's traffic (model)",
            "on-chip bytes per program (model)",
        ),
        what=_blocks_what(m, "What a larger block buys and costs"),
        xlabel="block_q = block_k",
        ylabel="bytes",
        logx=True,
        logy=True,
    )


def block_claim(m: Measurement) -> str:
    """How time, work, peak memory and the fused traffic change with the block size; a
    difference inside the rounds' range is called a tie."""
    rows = _blocks(m)
    if len(rows) < 2:
        return ""
    a, b = rows[0], rows[-1]
    best = min(rows, key=lambda r: r["time_us"])
    ta, tbest, tb = _row_timing(a), _row_timing(best), _row_timing(b)
    text = (
        f"From {a['block']}×{a['block']} to {b['block']}×{b['block']} tiles, the loop computes "
        f"{a['tiles_computed']} → {b['tiles_computed']} tiles. "
    )
    if best is a:
        c = compare(ta, tb)
        text += (
            f"Its time is lowest with the smallest tiles, {fmt.time_us(a['time_us'])}; at "
            f"{b['block']}×{b['block']} it is {ratio_text(c)} that."
        )
    else:
        fall = compare(tbest, ta)
        if fall.tie:
            text += (
                f"Its time does not change beyond the noise: {fmt.time_us(a['time_us'])} at "
                f"{a['block']}×{a['block']}, {fmt.time_us(best['time_us'])} at "
                f"{best['block']}×{best['block']} ({ratio_text(fall)})."
            )
        else:
            text += (
                f"Its time falls from **{fmt.time_us(a['time_us'])}** to "
                f"**{fmt.time_us(best['time_us'])}** at {best['block']}×{best['block']}, "
                f"{ratio_text(fall)} less, while the tile count falls "
                f"{a['tiles_computed'] / best['tiles_computed']:.3g}×."
            )
        after = [r for r in rows if r["block"] > best["block"]]
        ties = [r for r in after if compare(tbest, _row_timing(r)).tie]
        slower = [r for r in after if not compare(tbest, _row_timing(r)).tie]
        if ties:
            text += (
                " "
                + ", ".join(f"{r['block']}×{r['block']}" for r in ties)
                + f" {'is' if len(ties) == 1 else 'are'} within noise of that best time "
                "(their round ranges overlap)."
            )
        if slower:
            last = slower[-1]
            text += (
                f" At {last['block']}×{last['block']} it is slower again: "
                f"{fmt.time_us(last['time_us'])}, {ratio_text(compare(tbest, _row_timing(last)))} "
                "the best."
            )
    if m.params["causal"] and b["scores_computed"] > a["scores_computed"]:
        text += (
            f" Larger tiles skip less of the masked triangle: {b['block']}×{b['block']} tiles "
            f"compute {fmt.percent(b['scores_computed'])} of the scores, "
            f"{a['block']}×{a['block']} tiles {fmt.percent(a['scores_computed'])}."
        )
    return text + (
        f" Peak memory goes from {fmt.nbytes(a['peak_bytes'])} to "
        f"{fmt.nbytes(b['peak_bytes'])}. For a fused kernel the same step cuts the modelled "
        f"traffic {a['fused_bytes'] / b['fused_bytes']:.1f}× (k and v are re-read once per "
        f"query tile) but grows each program's on-chip set from "
        f"{fmt.nbytes(a['tile_working_set'])} to {fmt.nbytes(b['tile_working_set'])}, and that "
        "must fit in one streaming multiprocessor's registers and shared memory."
    )


# The Triton comparison. Kernel times are the experiment's; the matmul ceiling is
# machine_ceilings' (the number chapter 03 states), and only from the same device.


def _kernel_rows(m: Measurement) -> list[dict]:
    return m.tables["kernels"].records()


def _kernel_names(m: Measurement) -> list[str]:
    names = []
    for r in _kernel_rows(m):
        if r["implementation"] not in names:
            names.append(r["implementation"])
    return names


def _kernel(m: Measurement, n: int, name: str) -> dict | None:
    return next(
        (r for r in _kernel_rows(m) if r["seq_len"] == n and r["implementation"] == name), None
    )


def _ok_timing(r: dict | None) -> Timing | None:
    if r is None or r["status"] != "ok" or r["median_us"] is None:
        return None
    return _row_timing(r, "median_us")


def matmul_ceiling_key(m: Measurement) -> str:
    return f"peak_flops_{m.params['dtype']}"


def _ceiling(m: Measurement, ceilings: Sourced | Measurement | None) -> tuple[float, float] | None:
    """The measured matmul ceiling of `m`'s dtype on `m`'s device: (median, fastest round)."""
    if ceilings is None:
        return None
    c = _m(ceilings)
    key = matmul_ceiling_key(m)
    if c.device_id != m.device_id or key not in c.facts:
        return None
    return c.facts[key], c.facts.get(f"{key}_high", c.facts[key])


def _tflops(rate: float) -> str:
    """FLOP/s in TFLOP/s: `512`, `47.3`."""
    v = rate / 1e12
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def flop_rate_text(rate: float, ceiling: tuple[float, float] | None) -> str:
    """`512 TFLOP/s (73% of the matmul ceiling)`, or a refusal when the rate is above the
    ceiling's fastest round: such a measurement is suspect (a wrong FLOP count, a kernel that
    skipped work, a timer that missed it), not a kernel beating the ceiling."""
    text = f"{_tflops(rate)} TFLOP/s"
    if ceiling is None:
        return text
    median, fastest = ceiling
    if rate > fastest:
        return f"suspect: {text} is above the measured matmul ceiling"
    return f"{text} ({100 * rate / median:.0f}% of the matmul ceiling)"


def _rate(r: dict) -> float:
    return r["flops"] / (r["median_us"] * 1e-6)


def kernel_table(sourced: Sourced) -> str:
    """Kernel time of each implementation per seq_len, with the rounds' range."""
    m = sourced.measurement
    names = _kernel_names(m)[:5]
    lengths = sorted({r["seq_len"] for r in _kernel_rows(m)})
    rows = []
    for n in lengths:
        cells = [str(n)]
        for name in names:
            r = _kernel(m, n, name)
            if r is None:
                cells.append("—")
            elif _ok_timing(r) is None:
                cells.append(r["status"])
            else:
                cells.append(_ms_range(r["median_us"], r["low_us"], r["high_us"]))
        rows.append(cells)
    header = ["seq_len", *(f"{n} (ms)" for n in names)]
    what = "Kernel time: median over rounds (slowest–fastest round), L2 flushed before each call."
    return markdown_table(header, rows, "r" * len(header)) + "\n\n" + caption_html(sourced, what)


def kernel_rate_table(sourced: Sourced, ceilings: Sourced | None) -> str:
    """Achieved FLOP rates of Triton and SDPA flash against the matmul ceiling, and their
    time ratio with its range (a tie when the rounds overlap)."""
    m = sourced.measurement
    ceiling = _ceiling(m, ceilings)
    rows = []
    for n in sorted({r["seq_len"] for r in _kernel_rows(m)}):
        tri, sdpa = _kernel(m, n, fwd.TRITON), _kernel(m, n, fwd.SDPA_FLASH)
        cells = [str(n)]
        for r in (tri, sdpa):
            cells.append(flop_rate_text(_rate(r), ceiling) if _ok_timing(r) else "—")
        t_tri, t_sdpa = _ok_timing(tri), _ok_timing(sdpa)
        cells.append(ratio_text(compare(t_sdpa, t_tri)) if t_tri and t_sdpa else "—")
        rows.append(cells)
    header = ["seq_len", "Triton", "SDPA flash", "Triton time ÷ SDPA flash time"]
    what = "Achieved FLOP rate (median time) against the matmul ceiling of machine_ceilings."
    return markdown_table(header, rows, "rrrr") + "\n\n" + caption_html(sourced, what)


def _precision_text(m: Measurement) -> str:
    precision = m.facts.get("input_precision")
    if precision is None:
        return (
            f"{m.params['dtype']} inputs go to the tensor cores as they are, with float32 "
            "accumulation"
        )
    return f'float32 inputs with `input_precision="{precision}"`' + (
        " (exact float32 products, no tensor cores)" if precision == "ieee" else ""
    )


def kernel_claim(m: Measurement, ceilings: Sourced | Measurement | None) -> str:
    """Triton against SDPA flash at the longest length: rates, the ceiling, the ratio."""
    ceiling = _ceiling(m, ceilings)
    lengths = sorted({r["seq_len"] for r in _kernel_rows(m) if _ok_timing(r)})
    usable = [n for n in lengths if _ok_timing(_kernel(m, n, fwd.TRITON))]
    if not usable:
        return "The Triton kernel did not run at any length; see the notes."
    n = usable[-1]
    tri, sdpa = _kernel(m, n, fwd.TRITON), _kernel(m, n, fwd.SDPA_FLASH)
    suspect = [
        r["implementation"]
        for r in _kernel_rows(m)
        if _ok_timing(r) and ceiling and _rate(r) > ceiling[1]
    ]
    text = (
        f"The kernel ran with {_precision_text(m)} ({m.facts.get('kernel_config', '')}). "
        f"At seq_len={n} it reaches {flop_rate_text(_rate(tri), ceiling)}"
    )
    if _ok_timing(sdpa):
        text += f"; SDPA's flash backend {flop_rate_text(_rate(sdpa), ceiling)}"
        c = compare(_ok_timing(sdpa), _ok_timing(tri))
        if c.tie:
            text += ", and the two kernel times are within noise of each other"
        elif c.ratio > 1:
            text += f". Triton takes {ratio_text(c)} SDPA flash's time"
        else:
            inverse = compare(_ok_timing(tri), _ok_timing(sdpa))
            text += f". SDPA flash takes {ratio_text(inverse)} Triton's time"
    text += "."
    if ceiling is None:
        text += (
            " No matmul ceiling of this dtype was measured on this device (`machine_ceilings`), "
            "so no share of it is stated."
        )
    else:
        text += (
            f" The ceiling is the {m.params['dtype']} matmul rate `machine_ceilings` measured, "
            f"{compare_render.ceiling(ceilings, matmul_ceiling_key(m))}, the number "
            "chapter 03 states."
        )
    if suspect:
        text += (
            f" **Suspect measurement:** {', '.join(sorted(set(suspect)))} reached a rate above "
            "that ceiling at some length. No kernel outruns the matmul it is built from: the "
            "FLOP count, the timer or the kernel's work is wrong there, and no share of the "
            "ceiling is claimed for it."
        )
    err = m.facts.get("triton_rel_error")
    if err is not None:
        text += (
            f" The kernel's output differs from a float64 reference by {err:.1e} (relative norm)."
        )
    return text


def fa3_note(m: Measurement) -> str:
    """What torch's flash-implementation switch offered, and whether FA3 was measured."""
    offered = m.facts.get("flash_impls_offered")
    status = m.facts.get("fa3_status")
    if status is None:
        return ""
    listed = ", ".join(offered) if offered else "none"
    if status == fwd.OK:
        return (
            f"torch's flash-implementation switch offered {listed}; the `{FA3_NAME}` column is "
            "SDPA's flash backend with FlashAttention-3 switched on "
            '(`activate_flash_attention_impl("FA3")`).'
        )
    return f"torch's flash-implementation switch offered {listed}; FlashAttention-3 was not measured: {status}."


def triton_section(sourced: Sourced, ceilings: Sourced | None = None) -> str:
    """On a GPU measurement: the kernel tables and a claim. On a CPU one: what is missing, and
    what the interpreter check found."""
    m = sourced.measurement
    f = m.facts
    if m.device_kind != "cuda" or "kernels" not in m.tables:
        lines = [*(f"{n[0].upper()}{n[1:]}." for n in m.notes)]
        if f.get("interpreter_check") == "ok":
            lines.append(
                f"The build still checked the kernel: under Triton's interpreter "
                f"(`TRITON_INTERPRET=1`, which runs the kernel's tile programs on the CPU with "
                f"NumPy) at shape {f['interpreter_shape']} (batch_size×num_heads×seq_len×"
                f"head_dim), its output differs from a float64 reference by "
                f"**{f['interpreter_rel_error_float32']:.1e}** in float32 (input precision "
                f"`{f.get('interpreter_input_precision', 'ieee')}`: exact float32 products) and "
                f"**{f['interpreter_rel_error_bfloat16']:.1e}** in bfloat16 (relative norm)."
            )
        elif "interpreter_check" in f:
            lines.append(f"The interpreter check was {f['interpreter_check']}.")
        return device_note(m, cpu="\n\n".join(lines), cuda="\n\n".join(lines))
    parts = [
        kernel_table(sourced),
        kernel_rate_table(sourced, ceilings),
        kernel_claim(m, ceilings),
    ]
    note = fa3_note(m)
    if note:
        parts.append(note)
    return "\n\n".join(parts)


def kernel_figure(sourced: Sourced, ceilings: Sourced | None = None) -> str:
    """Achieved TFLOP/s per implementation against seq_len, with the measured matmul ceiling;
    a rate above the ceiling is drawn as a cross and called suspect."""
    m = sourced.measurement
    ceiling = _ceiling(m, ceilings)
    what = "Achieved TFLOP/s against sequence length (median kernel time)."
    alt_parts = []
    with new_figure(7.0, 3.6) as fig:
        ax = fig.add_subplot()
        for i, name in enumerate(_kernel_names(m)):
            color = SERIES_COLORS[i % len(SERIES_COLORS)]
            rows = [r for r in _kernel_rows(m) if r["implementation"] == name and _ok_timing(r)]
            good = [r for r in rows if not (ceiling and _rate(r) > ceiling[1])]
            bad = [r for r in rows if ceiling and _rate(r) > ceiling[1]]
            if good:
                ax.plot(
                    [r["seq_len"] for r in good],
                    [_rate(r) / 1e12 for r in good],
                    marker="o",
                    markersize=3.5,
                    linewidth=1.4,
                    color=color,
                    label=name,
                )
            if bad:
                ax.plot(
                    [r["seq_len"] for r in bad],
                    [_rate(r) / 1e12 for r in bad],
                    "x",
                    markersize=8,
                    color=color,
                    label=f"{name}: suspect (above the ceiling)",
                )
            alt_parts.append(
                f"{name}: "
                + ", ".join(f"{r['seq_len']}→{_rate(r) / 1e12:.3g}" for r in rows)
                + (" (suspect points above the ceiling)" if bad else "")
            )
        if ceiling:
            ax.axhline(ceiling[0] / 1e12, color=INK, linestyle="--", linewidth=1)
            ax.text(
                0.01,
                ceiling[0] / 1e12,
                f"{m.params['dtype']} matmul ceiling (machine_ceilings)",
                transform=ax.get_yaxis_transform(),
                va="bottom",
                fontsize=8,
                color=INK,
            )
            alt_parts.append(f"matmul ceiling {ceiling[0] / 1e12:.3g} TFLOP/s")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("seq_len")
        ax.set_ylabel("achieved TFLOP/s")
        ax.set_ylim(bottom=0)
        ax.grid(color=MUTED, alpha=0.3, linewidth=0.5, which="both")
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(frameon=False, fontsize=8)
        svg = to_svg(fig, f"{what} {'; '.join(alt_parts)}")
    return figure_html(svg, sourced, what)


def kernel_figure_or_note(sourced: Sourced, ceilings: Sourced | None = None) -> str:
    """The TFLOP/s figure of a GPU measurement; on a CPU one, a line saying where it would be."""
    m = sourced.measurement
    if "kernels" in m.tables and m.tables["kernels"].rows:
        return kernel_figure(sourced, ceilings)
    return (
        '<p class="ad-caption">The TFLOP/s figure (the Triton kernel and SDPA\'s fused backends '
        "against seq_len, under the measured matmul ceiling) appears here when the store holds "
        "a GPU measurement of <code>flash_triton_vs_sdpa</code>; this build has none.</p>"
    )
