# The "which attention wins where" map: for each (seq_len, head_dim) cell, causal and not,
# the fastest implementation and its margin over the runner-up. Pure: no torch.
from __future__ import annotations

from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import _format as fmt
from attention_docs.render.figures import INK, SERIES_COLORS, figure_html, new_figure, to_svg


def _color_of(names: list[str]) -> dict[str, str]:
    return {name: SERIES_COLORS[i % len(SERIES_COLORS)] for i, name in enumerate(names)}


def winners_figure(sourced: Sourced) -> str:
    """Two panels (causal, not causal); each cell names the winner and its margin."""
    m = sourced.measurement
    table = m.tables["winners"]
    records = table.records()
    seq_lens = sorted({r["seq_len"] for r in records})
    head_dims = sorted({r["head_dim"] for r in records})
    names = list(m.facts.get("implementations", [])) or sorted({r["fastest"] for r in records})
    colors = _color_of(names)
    alt = []
    with new_figure(7.5, 1.2 + 0.55 * len(seq_lens)) as fig:
        axes = fig.subplots(1, 2, sharey=True)
        for ax, causal in zip(axes, (True, False), strict=True):
            for r in (r for r in records if r["causal"] == causal):
                y, x = seq_lens.index(r["seq_len"]), head_dims.index(r["head_dim"])
                ax.add_patch(_rect(x, y, colors.get(r["fastest"], "#999999")))
                margin = f"{r['margin']:.2f}×" if r["margin"] else "only one ran"
                ax.text(
                    x,
                    y,
                    f"{r['fastest']}\n{margin}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white",
                )
                alt.append(
                    f"{'causal' if causal else 'not causal'} seq_len={r['seq_len']} head_dim={r['head_dim']}: {r['fastest']} by {margin}"
                )
            ax.set_xlim(-0.5, len(head_dims) - 0.5)
            ax.set_ylim(len(seq_lens) - 0.5, -0.5)
            ax.set_xticks(range(len(head_dims)), [str(d) for d in head_dims])
            ax.set_yticks(range(len(seq_lens)), [str(n) for n in seq_lens])
            ax.set_xlabel("head_dim")
            ax.set_title("causal" if causal else "not causal", color=INK, fontsize=9)
            ax.tick_params(length=0)
            for side in ax.spines.values():
                side.set_visible(False)
        axes[0].set_ylabel("seq_len")
        svg = to_svg(fig, "Which attention is fastest. " + "; ".join(alt) + ".")
    return figure_html(
        svg, sourced, "Fastest implementation per shape (margin over the runner-up)."
    )


def _rect(x: int, y: int, color: str):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.48, y - 0.46), 0.96, 0.92, facecolor=color, edgecolor="none")


def winners_claim(m: Measurement) -> str:
    """Which implementation wins most cells, and where naive attention stands."""
    records = m.tables["winners"].records()
    if not records:
        return "No implementation ran on this device."
    counts: dict[str, int] = {}
    for r in records:
        counts[r["fastest"]] = counts.get(r["fastest"], 0) + 1
    top, wins = max(counts.items(), key=lambda kv: kv[1])
    times = m.tables["times"].records()
    naive_vs_best = []
    for r in records:
        naive = next(
            (
                t["time"]
                for t in times
                if t["implementation"] == "naive (eager)"
                and t["seq_len"] == r["seq_len"]
                and t["head_dim"] == r["head_dim"]
                and t["causal"] == r["causal"]
                and t["time"]
            ),
            None,
        )
        if naive:
            naive_vs_best.append(naive / r["time"])
    spread = ""
    if naive_vs_best:
        spread = (
            f" Naive attention is between {min(naive_vs_best):.2f}× and {max(naive_vs_best):.2f}× slower than "
            f"the winner of each cell."
        )
    return f"**{top}** is fastest in {wins} of {len(records)} cells.{spread}"


def summary_table(sourced: Sourced) -> str:
    """The closing table: what each implementation removed, in ops/kernels, memory and time."""
    from attention_docs.render.caption import caption_html
    from attention_docs.render.tables import markdown_table

    m = sourced.measurement
    where = "kernels" if m.device_kind == "cuda" else "top-level ops"
    rows, missing = [], []
    for r in m.tables["summary"].records():
        if r["time"] is None:
            missing.append(f"- **{r['implementation']}**: {r['status']}")
            continue
        # Compiled code can allocate where the CPU profiler's memory events do not see it.
        peak = fmt.nbytes(r["peak memory"]) if r["peak memory"] else "not seen by the profiler"
        rows.append(
            [
                r["implementation"],
                r["what it removes"],
                str(r["ops or kernels"]),
                peak,
                fmt.time_us(r["time"]),
                f"{r['speed-up vs naive']:.2f}×",
            ]
        )
    header = [
        "Implementation",
        "What the trick removes",
        f"{where.capitalize()} / forward",
        "Peak memory",
        "Time",
        "vs naive",
    ]
    extra = ("\n\nDid not run here:\n\n" + "\n".join(missing)) if missing else ""
    return (
        markdown_table(header, rows, "llrrrr")
        + extra
        + "\n\n"
        + caption_html(sourced, "What each trick removed.")
    )


def times_table(sourced: Sourced) -> str:
    """Every cell's time per implementation, one row per shape; why an implementation did not
    run is said once, under the table."""
    from attention_docs.render.caption import caption_html
    from attention_docs.render.tables import markdown_table

    m = sourced.measurement
    records = m.tables["times"].records()
    names = list(dict.fromkeys(r["implementation"] for r in records))
    ran = [n for n in names if any(r["implementation"] == n and r["time"] for r in records)]
    shapes = list(dict.fromkeys((r["causal"], r["seq_len"], r["head_dim"]) for r in records))
    best = {
        (r["causal"], r["seq_len"], r["head_dim"]): r["fastest"]
        for r in m.tables["winners"].records()
    }
    rows = []
    for shape in shapes:
        causal, n, d = shape
        cells = []
        for name in ran:
            r = next(
                r
                for r in records
                if (r["causal"], r["seq_len"], r["head_dim"]) == shape
                and r["implementation"] == name
            )
            text = fmt.time_us(r["time"]) if r["time"] else r["status"]
            cells.append(f"**{text}**" if best.get(shape) == name else text)
        rows.append(["causal" if causal else "full", str(n), str(d), *cells])
    missing = []
    for name in names:
        if name in ran:
            continue
        status = next(r["status"] for r in records if r["implementation"] == name)
        missing.append(f"- **{name}**: {status}")
    table = markdown_table(["Mask", "seq_len", "head_dim", *ran], rows, "lrr" + "r" * len(ran))
    extra = ("\n\nDid not run here:\n\n" + "\n".join(missing)) if missing else ""
    return table + extra + "\n\n" + caption_html(sourced, "Time per forward (fastest in bold).")
