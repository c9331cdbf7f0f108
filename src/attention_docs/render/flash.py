# Renderers of the FlashAttention chapter: the tile-grid figure (which tiles of the score
# matrix the loop computes, masks or skips, drawn from the measurement's own shape and
# blocks), formatted tables, and sentences whose numbers come from the measurements.
# Pure: strings out, no torch.
from __future__ import annotations

from attention_docs.cost import itemsize
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import _format as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.claims import device_note
from attention_docs.render.figures import INK, MUTED, SERIES_COLORS, figure_html, new_figure, to_svg
from attention_docs.render.plots import line_figure, loglog_slope
from attention_docs.render.tables import markdown_table
from attention_docs.tiling import DIAGONAL, SKIPPED, tile_counts, tile_grid

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


def implementations_table(sourced: Sourced) -> str:
    """Time, peak memory and error of naive, tiled and SDPA flash at the measured shape."""
    m = sourced.measurement
    rows = []
    naive = next(iter(_impl(m).values()))
    for r in m.tables["implementations"].records():
        if r["status"] != "ok":
            rows.append([r["implementation"], "—", "—", "—", "—", r["status"]])
            continue
        rows.append(
            [
                r["implementation"],
                fmt.time_us(r["time_us"]),
                fmt.nbytes(r["peak_bytes"]),
                f"{naive['peak_bytes'] / r['peak_bytes']:.1f}×" if r["peak_bytes"] else "—",
                f"{r['rel_error']:.1e}",
                "ok",
            ]
        )
    header = [
        "Implementation",
        "Time / forward",
        "Peak memory",
        "Less memory than naive",
        "Error vs float64",
        "Status",
    ]
    what = "Three ways to compute the same attention."
    return markdown_table(header, rows, "lrrrrl") + "\n\n" + caption_html(sourced, what)


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
    """Peak memory of naive vs tiled vs SDPA, and how each grows with seq_len."""
    impl = list(_impl(m).values())
    naive, tiled = impl[0], impl[1]
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
    sdpa = impl[2] if len(impl) > 2 else None
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
            f"**{slopes['tiled']:.2f}**: its extra memory is a few tiles plus the output, linear "
            "in seq_len at most."
        )
    return text


def traffic_claim(m: Measurement) -> str:
    """The traffic models compared in one sentence."""
    naive, loop, fused = (r["bytes"] for r in m.tables["traffic"].records())
    return (
        f"Run as one eager op per line, the tiled loop moves **{loop / naive:.2f}×** the bytes of "
        f"naive attention: every score tile is still written to memory and read back by the next "
        f"op. The same tiles in one fused kernel move **{fused / naive:.2f}×**: only q, k, v, the "
        "output and the log-sum-exp travel, and k and v once per query tile."
    )


def time_claim(m: Measurement) -> str:
    """The tiled loop's time against naive and SDPA."""
    impl = list(_impl(m).values())
    naive, tiled = impl[0], impl[1]
    if naive["status"] != "ok" or tiled["status"] != "ok":
        return ""
    ratio = tiled["time_us"] / naive["time_us"]
    speed = f"{ratio:.1f}× slower than" if ratio >= 1 else f"{1 / ratio:.1f}× faster than"
    text = (
        f"The tiled loop takes **{fmt.time_us(tiled['time_us'])}** per forward, {speed} naive "
        f"attention ({fmt.time_us(naive['time_us'])})"
    )
    sdpa = impl[2] if len(impl) > 2 else None
    if sdpa and sdpa["status"] == "ok":
        text += (
            f"; SDPA's flash backend, the same algorithm compiled into one kernel, takes "
            f"**{fmt.time_us(sdpa['time_us'])}** ({naive['time_us'] / sdpa['time_us']:.1f}× "
            "faster than naive)."
        )
    else:
        text += "."
    return text


def profiler_overhead(m: Measurement) -> str:
    """The profiled time of the phases against the unprofiled forward, and why they differ."""
    total = sum(s.time_us for s in m.steps)
    if m.timing is None or not total:
        return ""
    ops = m.facts.get("ops_per_forward")
    kernels = m.facts.get("kernels_per_forward")
    text = (
        f"Under the profiler the four phases add up to **{fmt.time_us(total)}** per forward; "
        f"without it, the whole forward takes **{fmt.time_us(m.timing.median_us)}**. "
    )
    if m.device_kind == "cuda":
        return text + (
            f"The table's time is GPU time, summed over the **{kernels}** kernels one forward "
            f"launched ({ops} ATen ops recorded on the CPU side): the GPU is busy for a fraction "
            "of the forward and waits for launches the rest of it."
        )
    return text + (
        f"The profiler records every op with its input shapes and allocations, and one forward "
        f"here is **{ops}** ATen ops (counting ops called by ops): its per-op cost is multiplied "
        "by the loop. Read the table for the shares, and the timer for the time."
    )


def memory_figure(sourced: Sourced) -> str:
    """Peak memory against seq_len for the three implementations, log-log with fitted slopes."""
    return line_figure(
        sourced,
        "memory_by_seq_len",
        x="seq_len",
        ys=("naive_peak", "tiled_peak", "sdpa_flash_peak"),
        labels=("naive", "tiled loop", "SDPA flash"),
        what="Peak memory against sequence length.",
        ylabel="peak memory (bytes)",
        logx=True,
        logy=True,
        fit_slope=True,
    )


def block_table(sourced: Sourced) -> str:
    """The block sweep: tiles, time, peak memory, modelled bytes and on-chip working set."""
    m = sourced.measurement
    rows = [
        [
            f"{r['block']}×{r['block']}",
            str(r["tiles_computed"]) if r["tiles_computed"] is not None else "—",
            fmt.percent(r["scores_computed"]) if r["scores_computed"] is not None else "—",
            fmt.time_us(r["time_us"]) if r["time_us"] is not None else r["status"],
            fmt.nbytes(r["peak_bytes"]),
            fmt.nbytes(r["loop_bytes"]),
            fmt.nbytes(r["fused_bytes"]),
            fmt.nbytes(r["tile_working_set"]),
        ]
        for r in m.tables["blocks"].records()
    ]
    header = [
        "Tile",
        "Tiles computed",
        "Scores computed",
        "Time / forward",
        "Peak memory",
        "Bytes: eager loop (model)",
        "Bytes: fused kernel (model)",
        "On-chip tile set (model)",
    ]
    return (
        markdown_table(header, rows)
        + "\n\n"
        + caption_html(sourced, "The tiled loop at each block size.")
    )


def block_time_figure(sourced: Sourced) -> str:
    return line_figure(
        sourced,
        "blocks",
        x="block",
        ys=("time_us",),
        labels=("tiled loop, time per forward",),
        what="Time of the tiled loop against the block size.",
        xlabel="block_q = block_k",
        ylabel="time per forward (µs)",
        logx=True,
        logy=True,
    )


def block_bytes_figure(sourced: Sourced) -> str:
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
        what="What a larger block buys and costs.",
        xlabel="block_q = block_k",
        ylabel="bytes",
        logx=True,
        logy=True,
    )


def block_claim(m: Measurement) -> str:
    """How time, work, peak memory and the fused traffic change with the block size."""
    rows = [r for r in m.tables["blocks"].records() if r["status"] == "ok"]
    if len(rows) < 2:
        return ""
    a, b = rows[0], rows[-1]
    best = min(rows, key=lambda r: r["time_us"])
    text = (
        f"From {a['block']}×{a['block']} to {b['block']}×{b['block']} tiles, the loop runs "
        f"{a['tiles_computed']} → {b['tiles_computed']} tiles, and its time falls from "
        f"**{fmt.time_us(a['time_us'])}** to **{fmt.time_us(best['time_us'])}** at "
        f"{best['block']}×{best['block']}: fewer tiles, fewer ops, less per-op overhead."
    )
    if best is not b:
        text += f" It rises again to {fmt.time_us(b['time_us'])} at {b['block']}×{b['block']}"
        if m.params["causal"] and b["scores_computed"] > a["scores_computed"]:
            text += (
                f", in part because large tiles skip less of the masked triangle: they compute "
                f"{fmt.percent(b['scores_computed'])} of the scores, against "
                f"{fmt.percent(a['scores_computed'])} with {a['block']}×{a['block']} tiles"
            )
        text += "."
    return text + (
        f" Peak memory rises from {fmt.nbytes(a['peak_bytes'])} to "
        f"{fmt.nbytes(b['peak_bytes'])}. For a fused kernel the same step cuts the modelled "
        f"traffic {a['fused_bytes'] / b['fused_bytes']:.1f}× (k and v are re-read once per "
        f"query tile) but grows each program's on-chip set from "
        f"{fmt.nbytes(a['tile_working_set'])} to {fmt.nbytes(b['tile_working_set'])}, and that "
        "must fit in one streaming multiprocessor's registers and shared memory."
    )


def triton_section(sourced: Sourced) -> str:
    """On a GPU measurement: the kernel table and a claim. On a CPU one: what is missing, and
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
                f"**{f['interpreter_rel_error_float32']:.1e}** in float32 and "
                f"**{f['interpreter_rel_error_bfloat16']:.1e}** in bfloat16 (relative norm)."
            )
        elif "interpreter_check" in f:
            lines.append(f"The interpreter check was {f['interpreter_check']}.")
        return device_note(m, cpu="\n\n".join(lines), cuda="\n\n".join(lines))
    return kernel_table(sourced) + "\n\n" + kernel_claim(m)


def kernel_table(sourced: Sourced) -> str:
    m = sourced.measurement
    rows = []
    for r in m.tables["kernels"].records():
        rows.append(
            [
                str(r["seq_len"]),
                fmt.count(r["flops"]),
                fmt.time_us(r["triton_us"]) if r["triton_us"] else r["status"],
                fmt.time_us(r["sdpa_flash_us"]) if r["sdpa_flash_us"] else "—",
                f"{r['triton_tflops']:.0f}" if r["triton_tflops"] else "—",
                f"{r['sdpa_flash_tflops']:.0f}" if r["sdpa_flash_tflops"] else "—",
                f"{r['triton_pct_of_matmul']:.0f}%" if r["triton_pct_of_matmul"] else "—",
                f"{r['sdpa_flash_pct_of_matmul']:.0f}%" if r["sdpa_flash_pct_of_matmul"] else "—",
            ]
        )
    header = [
        "seq_len",
        "FLOPs",
        "Triton",
        "SDPA flash",
        "Triton TFLOP/s",
        "SDPA TFLOP/s",
        "Triton, % of matmul",
        "SDPA, % of matmul",
    ]
    return markdown_table(header, rows) + "\n\n" + caption_html(sourced, "Triton vs SDPA flash.")


def kernel_figure(sourced: Sourced) -> str:
    return line_figure(
        sourced,
        "kernels",
        x="seq_len",
        ys=("triton_tflops", "sdpa_flash_tflops", "matmul_tflops"),
        labels=("Triton kernel", "SDPA flash backend", "bf16 matmul (ceiling)"),
        what="Achieved TFLOP/s against sequence length.",
        ylabel="TFLOP/s",
        logx=True,
    )


def kernel_claim(m: Measurement) -> str:
    rows = [r for r in m.tables["kernels"].records() if r["triton_tflops"]]
    if not rows:
        return ""
    r = rows[-1]
    text = (
        f"At seq_len={r['seq_len']} the Triton kernel reaches **{r['triton_tflops']:.0f} TFLOP/s**, "
        f"{r['triton_pct_of_matmul']:.0f}% of the {r['matmul_tflops']:.0f} TFLOP/s a large bf16 "
        f"matmul reached on the same GPU"
    )
    if r["sdpa_flash_tflops"]:
        text += (
            f"; SDPA's flash backend reaches **{r['sdpa_flash_tflops']:.0f} TFLOP/s** "
            f"({r['sdpa_flash_pct_of_matmul']:.0f}%)."
        )
    else:
        text += "."
    err = m.facts.get("triton_rel_error")
    if err is not None:
        text += f" Its output differs from a float64 reference by {err:.1e} (relative norm)."
    return text


def kernel_figure_or_note(sourced: Sourced) -> str:
    """The TFLOP/s figure of a GPU measurement; on a CPU one, a line saying where it would be."""
    m = sourced.measurement
    if "kernels" in m.tables and m.tables["kernels"].rows:
        return kernel_figure(sourced)
    return (
        '<p class="ad-caption">The TFLOP/s figure (Triton kernel, SDPA flash backend and the '
        "measured bf16 matmul ceiling against seq_len) appears here when the store holds a GPU "
        "measurement of <code>flash_triton_vs_sdpa</code>; this build has none.</p>"
    )
