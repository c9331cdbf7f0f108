# "Which attention wins where", drawn from the one forward-time table of a device
# (`forward_times`): for each cell of its grid (seq_len × head_dim × causal or not) the
# implementations ranked by median time, the winner, the implementations within noise of it
# (a tie is drawn and said as a tie), and the margin over the runner-up with the range the
# timing rounds allow. Rows timing one naive step alone ("step attention.softmax") are not
# implementations and stay out. Also the closing "what each trick removed" table, whose
# times come from the same table. Pure: no torch.
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from attention_docs.analytic.cost import itemsize
from attention_docs.findings.compare import Comparison, compare
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.timing import Timing
from attention_docs.render import compare as cmp
from attention_docs.render import words as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.figures import INK, figure_html, new_figure, to_svg
from attention_docs.render.tables import markdown_table

# One colour per implementation on every device (Okabe–Ito, and grey for the baseline).
COLORS = {
    fwd.NAIVE: "#999999",
    fwd.COMPILED: "#E69F00",
    fwd.SDPA_MATH: "#56B4E9",
    fwd.SDPA_FLASH: "#0072B2",
    fwd.SDPA_EFFICIENT: "#009E73",
    fwd.SDPA_CUDNN: "#CC79A7",
    fwd.FLEX: "#D55E00",
    fwd.TILED: "#F0E442",
    fwd.TRITON: "#000000",
}
# The kernel behind each pinned SDPA backend, as chapter 7 names it.
SDPA_KERNELS = {
    fwd.SDPA_MATH: "math",
    fwd.SDPA_FLASH: "FlashAttention",
    fwd.SDPA_EFFICIENT: "memory-efficient",
    fwd.SDPA_CUDNN: "cuDNN",
}


def _m(source: Sourced | Measurement) -> Measurement:
    return source.measurement if isinstance(source, Sourced) else source


@dataclass(frozen=True)
class Cell:
    """One shape of the grid: the implementations that ran, fastest first."""

    shape: fwd.Shape
    ranked: tuple[tuple[str, Timing], ...]

    @property
    def winner(self) -> str:
        return self.ranked[0][0]

    @property
    def runner_up(self) -> str | None:
        return self.ranked[1][0] if len(self.ranked) > 1 else None

    @property
    def margin(self) -> Comparison | None:
        """The winner against the runner-up (ratio > 1: the winner is faster)."""
        return compare(self.ranked[0][1], self.ranked[1][1]) if len(self.ranked) > 1 else None

    @property
    def tied(self) -> tuple[str, ...]:
        """The others whose rounds overlap the winner's: within noise of it."""
        best = self.ranked[0][1]
        return tuple(name for name, t in self.ranked[1:] if compare(best, t).tie)

    @property
    def tie(self) -> bool:
        return bool(self.tied)


def implementations(times: Sourced | Measurement) -> list[str]:
    """The implementations of the table, in its order; single naive steps left out."""
    names = (r["implementation"] for r in fwd.rows(_m(times)))
    return [n for n in dict.fromkeys(names) if not n.startswith(fwd.STEP_PREFIX)]


def shapes(times: Sourced | Measurement) -> list[fwd.Shape]:
    """The grid's shapes: causal first, then by head_dim and seq_len."""
    found = {fwd.Shape.of(r) for r in fwd.rows(_m(times))}
    return sorted(found, key=lambda s: (not s.causal, s.head_dim, s.seq_len))


def cells(times: Sourced | Measurement) -> list[Cell]:
    """Every shape where at least one implementation ran, its implementations ranked."""
    m = _m(times)
    names = implementations(m)
    found = []
    for shape in shapes(m):
        ran = [(n, _timing(m, n, shape)) for n in names]
        ranked = sorted(((n, t) for n, t in ran if t is not None), key=lambda x: x[1].median_us)
        if ranked:
            found.append(Cell(shape, tuple(ranked)))
    return found


def _timing(m: Measurement, name: str, shape: fwd.Shape) -> Timing | None:
    """The time of `name` at `shape`, or None where it did not run or has no row."""
    try:
        return fwd.timing(m, name, shape)
    except fwd.NotMeasuredError:
        return None


def _grid_text(m: Measurement) -> str:
    ss = shapes(m)
    first = ss[0]
    seq_lens = sorted({s.seq_len for s in ss})
    head_dims = sorted({s.head_dim for s in ss})
    return (
        f"batch_size={first.batch_size}, num_heads={first.num_heads}, {first.dtype}; "
        f"seq_len {', '.join(map(str, seq_lens))} × head_dim {', '.join(map(str, head_dims))}"
        " × causal or not"
    )


# --- the map ------------------------------------------------------------------------------


def _wrap(name: str) -> str:
    """A long implementation name on two lines, so that it fits a cell of the map."""
    for sep in (" (", " + "):
        if sep in name:
            head, tail = name.split(sep, 1)
            return f"{head}\n{sep.strip()} {tail}" if sep == " + " else f"{head}\n({tail}"
    return name


def cell_label(c: Cell) -> str:
    """What a cell of the map says: the winner and its margin, or the tie."""
    if c.margin is None:
        return f"{_wrap(c.winner)}\nonly one ran"
    if c.tie:
        more = f", +{len(c.tied) - 1} more" if len(c.tied) > 1 else ""
        return f"tie: {_wrap(c.winner)}\n≈ {_wrap(c.tied[0])}{more}\n{c.margin.ratio:.2f}× apart"
    return f"{_wrap(c.winner)}\n{c.margin.ratio:.2f}× ({c.margin.low:.2f}–{c.margin.high:.2f}×)"


def cell_sentence(c: Cell) -> str:
    """One cell in words (the figure's alt text, a table cell)."""
    if c.margin is None:
        return f"{c.winner}, the only one that ran"
    if c.tie:
        others = " and ".join(c.tied)
        return f"{c.winner} and {others} within noise ({c.margin.ratio:.2f}× apart)"
    return f"{c.winner}, {cmp.ratio_text(c.margin)} ahead of {c.runner_up}"


def winners_figure(times: Sourced) -> str:
    """Two panels (causal, not causal) of seq_len × head_dim; each cell names the winner and
    its margin over the runner-up, or — hatched in both colours — a tie."""
    from matplotlib.patches import Rectangle

    m = times.measurement
    found = cells(m)
    seq_lens = sorted({c.shape.seq_len for c in found})
    head_dims = sorted({c.shape.head_dim for c in found})
    alt = []
    with new_figure(7.5, 1.0 + 0.75 * len(seq_lens)) as fig:
        axes = fig.subplots(1, 2, sharey=True)
        for ax, causal in zip(axes, (True, False), strict=True):
            for c in (c for c in found if c.shape.causal == causal):
                y, x = seq_lens.index(c.shape.seq_len), head_dims.index(c.shape.head_dim)
                color = COLORS.get(c.winner, "#999999")
                box = {"facecolor": color, "edgecolor": "none"}
                if c.tie:
                    box = {
                        "facecolor": color,
                        "hatch": "////",
                        "edgecolor": COLORS.get(c.tied[0], "#999999"),
                        "linewidth": 0,
                    }
                ax.add_patch(Rectangle((x - 0.48, y - 0.46), 0.96, 0.92, **box))
                ax.text(
                    x,
                    y,
                    cell_label(c),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color=INK,
                    bbox={
                        "boxstyle": "round,pad=0.25",
                        "facecolor": "white",
                        "alpha": 0.9,
                        "edgecolor": "none",
                    },
                )
                mask = "causal" if causal else "not causal"
                alt.append(
                    f"{mask}, seq_len {c.shape.seq_len}, head_dim {c.shape.head_dim}: "
                    f"{cell_sentence(c)}"
                )
            ax.set_xlim(-0.5, len(head_dims) - 0.5)
            ax.set_ylim(len(seq_lens) - 0.5, -0.5)
            ax.set_xticks(range(len(head_dims)), [str(d) for d in head_dims])
            ax.set_yticks(range(len(seq_lens)), [str(n) for n in seq_lens])
            ax.set_xlabel("Head dimension (head_dim)")
            ax.set_title("causal" if causal else "not causal", color=INK, fontsize=9)
            ax.tick_params(length=0)
            for side in ax.spines.values():
                side.set_visible(False)
        axes[0].set_ylabel("Sequence length (seq_len)")
        svg = to_svg(fig, "Which attention is fastest. " + "; ".join(alt) + ".")
    return figure_html(
        svg,
        times,
        "Fastest implementation per shape, unprofiled forward times: its lead over the "
        "runner-up (median ratio, and the range over the timing rounds); hatched: a tie, the "
        "top two within noise.",
    )


def _names(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def winners_claim(times: Sourced | Measurement) -> str:
    """Who wins how many cells outside the noise, which cells are ties, and how far naive
    attention is behind each cell's winner."""
    m = _m(times)
    found = cells(m)
    if not found:
        return "No implementation ran on this device."
    clear = Counter(c.winner for c in found if not c.tie)
    # A tie is named by its top two (in a fixed order, so that A ≈ B and B ≈ A count as one).
    ties = Counter(" ≈ ".join(sorted((c.winner, c.tied[0]))) for c in found if c.tie)
    crowded = sum(1 for c in found if len(c.tied) > 1)
    text = (
        f"On {m.provenance.device.label}, over {len(found)} shapes ({_grid_text(m)}), "
        f"timed without the profiler ({m.facts.get('method', 'see the raw data')}): "
    )
    wins = [f"**{name}** is fastest outside the noise in {k}" for name, k in clear.most_common()]
    text += ("; ".join(wins) if wins else "no implementation is fastest outside the noise") + "."
    if ties:
        n = sum(ties.values())
        text += (
            f" In {n} cell{'s' if n != 1 else ''} the fastest are within noise of each other: "
            + "; ".join(f"{group} in {k}" for group, k in ties.most_common())
            + (
                f" (in {crowded} of them more than two are within noise of the fastest)"
                if crowded
                else ""
            )
            + "."
        )
    behind = [
        (compare(c.ranked[0][1], _timing(m, fwd.NAIVE, c.shape)).ratio, c)
        for c in found
        if c.winner != fwd.NAIVE and _timing(m, fwd.NAIVE, c.shape) is not None
    ]
    if behind:
        low, high = min(behind, key=lambda x: x[0])[1], max(behind, key=lambda x: x[0])[1]
        text += (
            f" Against naive attention, a cell's winner leads least at {_where(low.shape)} "
            f"({cmp.speedup(m, low.winner, fwd.NAIVE, low.shape)}) and most at "
            f"{_where(high.shape)} ({cmp.speedup(m, high.winner, fwd.NAIVE, high.shape)})."
        )
    return text


def _where(shape: fwd.Shape) -> str:
    mask = "causal" if shape.causal else "no mask"
    return f"seq_len {shape.seq_len}, head_dim {shape.head_dim}, {mask}"


def trend_claim(times: Sourced | Measurement) -> str:
    """How the answer changes with seq_len, per (mask, head_dim) series: does the winner
    change, and does its lead over naive attention grow outside the noise?"""
    m = _m(times)
    found = cells(m)
    series: dict[tuple[bool, int], list[Cell]] = {}
    for c in found:
        series.setdefault((c.shape.causal, c.shape.head_dim), []).append(c)
    if all(len(cs) < 2 for cs in series.values()):
        return ""  # one seq_len per series: no trend to speak of
    changes, grows, flat, shrinks = [], 0, 0, 0
    for (causal, head_dim), unordered in series.items():
        ordered = sorted(unordered, key=lambda c: c.shape.seq_len)
        first, last = ordered[0], ordered[-1]
        if first.winner != last.winner:
            mask = "causal" if causal else "no mask"
            changes.append(
                f"{mask}, head_dim {head_dim}: {first.winner} at seq_len {first.shape.seq_len}"
                f"{' (a tie)' if first.tie else ''}, {last.winner} at {last.shape.seq_len}"
                f"{' (a tie)' if last.tie else ''}"
            )
        leads = []
        for c in (first, last):
            naive = _timing(m, fwd.NAIVE, c.shape)
            leads.append(compare(c.ranked[0][1], naive) if naive else None)
        if None in leads or first is last:
            continue
        if leads[1].low > leads[0].high:
            grows += 1
        elif leads[1].high < leads[0].low:
            shrinks += 1
        else:
            flat += 1
    n = len(series)
    text = (
        f"The fastest implementation changes with seq_len in {len(changes)} of {n} series "
        "(one mask, one head_dim)" + (": " + "; ".join(changes) + "." if changes else ".")
    )
    compared = grows + flat + shrinks
    if compared:
        text += (
            f" From the shortest to the longest sequence, the winner's lead over naive "
            f"attention grows outside the noise in {grows} of {compared} series, shrinks in "
            f"{shrinks}, and stays within the noise of the timing rounds in {flat}."
        )
    return text


# --- every timing, and what did not run -----------------------------------------------------


def times_tabs(times: Sourced) -> str:
    """Content tabs, one per (mask, head_dim): each implementation's time at each seq_len,
    with the rounds' range; the winner in bold, those within noise of it marked ≈."""
    m = times.measurement
    found = {c.shape: c for c in cells(m)}
    names = implementations(m)
    tabs = []
    for causal in (True, False):
        for head_dim in sorted({s.head_dim for s in found}):
            row_shapes = sorted(
                (s for s in found if s.causal == causal and s.head_dim == head_dim),
                key=lambda s: s.seq_len,
            )
            ran = [n for n in names if any(_timing(m, n, s) is not None for s in row_shapes)]
            rows = [[n, *(_time_cell(m, n, found[s]) for s in row_shapes)] for n in ran]
            header = ["Implementation", *(f"seq_len {s.seq_len}" for s in row_shapes)]
            table = markdown_table(header, rows, "l" + "r" * len(row_shapes))
            title = f"{'causal' if causal else 'no mask'}, head_dim {head_dim}"
            body = "\n".join(f"    {line}" for line in table.splitlines())
            tabs.append(f'=== "{title}"\n\n{body}\n')
    return (
        "\n".join(tabs)
        + "\n"
        + caption_html(
            times,
            "Forward time per implementation (median; slowest–fastest round). Bold: the "
            "fastest; ≈: within noise of it.",
        )
    )


def _time_cell(m: Measurement, name: str, c: Cell) -> str:
    t = _timing(m, name, c.shape)
    if t is None:
        return "—"
    median = cmp.forward_time(m, name, c.shape, spread=False)
    text = f"{median}<br>{fmt.time_us(t.low_us)}–{fmt.time_us(t.high_us)}"
    if name == c.winner:
        return f"**{text}**"
    if name in c.tied:
        return f"≈ {text}"
    return text


def why_not(name: str, status: str, device_kind: str) -> str:
    """Why an implementation did not run, in the site's words (as chapter 7 says it)."""
    if status == "out of memory":
        return "ran out of memory"
    kernel = SDPA_KERNELS.get(name)
    if kernel and status.startswith("not available on this device"):
        if device_kind == "cpu":
            return (
                f"not available on this device: PyTorch has no {kernel} kernel for the CPU "
                "(see [the SDPA chapter](07-sdpa-backends.md))"
            )
        return (
            f"not available on this device for these inputs: SDPA's {kernel} backend refused "
            "them when pinned ([the SDPA chapter](07-sdpa-backends.md) shows its conditions "
            "and torch's reasons)"
        )
    return status


def not_run(times: Sourced | Measurement) -> str:
    """A bullet per implementation (and reason) that did not run somewhere, and where."""
    m = _m(times)
    grid = shapes(m)
    where: dict[tuple[str, str], list[fwd.Shape]] = {}
    for r in fwd.rows(m):
        name = r["implementation"]
        if name.startswith(fwd.STEP_PREFIX) or r["status"] == fwd.OK:
            continue
        where.setdefault((name, r["status"]), []).append(fwd.Shape.of(r))
    lines = []
    for (name, status), found in where.items():
        places = "every shape" if len(found) == len(grid) else "; ".join(map(_where, found))
        lines.append(f"- **{name}** ({places}): {why_not(name, status, m.device_kind)}.")
    lines += [f"- {note}" for note in m.notes]
    if not lines:
        return "Every implementation ran at every shape of the grid."
    return "Did not run here:\n\n" + "\n".join(lines)


# --- what each trick removed ------------------------------------------------------------------


def summary_table(summary: Sourced, times: Sourced | Measurement) -> str:
    """The closing table: what each implementation removed, in work per forward and memory,
    with its forward time and its ratio to naive attention from forward_times."""
    m, t = summary.measurement, _m(times)
    shape = fwd.Shape.of(m.params)
    unit = "Kernels" if m.device_kind == "cuda" else "Ops (every depth)"
    rows, missing = [], []
    for r in m.tables["summary"].records():
        name = r["implementation"]
        if r["status"] != fwd.OK:
            missing.append(f"- **{name}**: {why_not(name, r['status'], m.device_kind)}.")
            continue
        # Compiled code can allocate where the CPU profiler's memory events do not see it.
        peak = fmt.nbytes(r["peak_bytes"]) if r["peak_bytes"] else "not seen by the profiler"
        c = cmp.comparison(t, name, fwd.NAIVE, shape) if name != fwd.NAIVE else None
        rows.append(
            [
                name,
                r["trick"],
                str(r["work_per_forward"]),
                peak,
                cmp.forward_time(t, name, shape),
                "—" if c is None else cmp.ratio_text(c),
            ]
        )
    header = [
        "Implementation",
        "What the trick removes",
        f"{unit} / forward",
        "Peak memory",
        "Forward time (median; slowest–fastest round)",
        "vs naive",
    ]
    notes = [f"- {note}" for note in m.notes]
    extra = "\n\nDid not run here:\n\n" + "\n".join(missing + notes) if missing or notes else ""
    counted = m.facts.get("work_counted")
    return (
        markdown_table(header, rows, "llrrrr")
        + extra
        + (f"\n\nWork counted: {counted}." if counted else "")
        + "\n\n"
        + caption_html(summary, "What each trick removed; times are forward_times' rows.")
    )


# --- devices ---------------------------------------------------------------------------------


def devices_claim(entries: list[Sourced]) -> str:
    """How the answer changes with the device: said only as far as the store holds devices."""
    if len(entries) < 2:
        only = entries[0].measurement if entries else None
        where = f" ({only.provenance.device.label})" if only else ""
        return (
            f"This build's store holds forward times from one device only{where}, so how the "
            "map changes with the device cannot be shown here. A GPU's `forward_times` entry "
            "committed to the store adds its map to this page and this comparison."
        )
    parts = []
    for sourced in entries:
        m = sourced.measurement
        found = cells(m)
        clear = Counter(c.winner for c in found if not c.tie)
        ties = sum(1 for c in found if c.tie)
        top = (
            ", ".join(f"{name} in {k}" for name, k in clear.most_common())
            or "no implementation outside the noise"
        )
        parts.append(
            f"- **{m.provenance.device.label}** ({_grid_text(m)}): fastest outside the noise: "
            f"{top}; ties in {ties} of {len(found)} cells."
        )
    winners = [Counter(c.winner for c in cells(s.measurement)).most_common(1) for s in entries]
    same = len({w[0][0] for w in winners if w}) == 1
    verdict = (
        "The same implementation wins most cells on every device."
        if same
        else "A different implementation wins most cells on each device."
    )
    return (
        f"The store holds forward times from {len(entries)} devices (each at its own grid):\n\n"
        + "\n".join(parts)
        + f"\n\n{verdict}"
    )


# --- what the sizes measure -----------------------------------------------------------------


def _matrix_bytes(shape: fwd.Shape) -> float:
    return shape.batch_size * shape.num_heads * shape.seq_len**2 * itemsize(shape.dtype)


def grid_note(times: Sourced | Measurement) -> str:
    """The device's grid, and what its ends measure: the score matrix's size and the fastest
    forward at the shortest and the longest sequence."""
    m = _m(times)
    found = cells(m)
    if not found:
        return ""
    short = min(found, key=lambda c: (c.shape.seq_len, c.shape.head_dim, not c.shape.causal))
    long = max(found, key=lambda c: (c.shape.seq_len, -c.shape.head_dim, c.shape.causal))
    took = m.provenance.duration_s
    preface = (
        "On a GPU the grid spans prefill-sized attention layers"
        if m.device_kind == "cuda"
        else "On a CPU the grid is kept small, so that a build times all of it in minutes"
    )
    return (
        f"{preface}: {_grid_text(m)}"
        + (f" (the whole table took {took / 60:.1f} min to measure here)" if took else "")
        + f". At seq_len {short.shape.seq_len} one N×N score matrix is "
        f"{fmt.nbytes(_matrix_bytes(short.shape))} and the fastest forward "
        f"({_where(short.shape)}) takes {cmp.forward_time(m, short.winner, short.shape)}; at "
        f"seq_len {long.shape.seq_len} the matrix is {fmt.nbytes(_matrix_bytes(long.shape))} "
        f"and the fastest forward ({_where(long.shape)}) takes "
        f"{cmp.forward_time(m, long.winner, long.shape)}."
    )


def summary_size_note(summary: Sourced | Measurement) -> str:
    """The shape the closing table is measured at, and what it shows there."""
    m = _m(summary)
    shape = fwd.Shape.of(m.params)
    records = m.tables["summary"].records()
    failed = [r["implementation"] for r in records if r["status"] != fwd.OK]
    matrix = _matrix_bytes(shape)
    below = [r["implementation"] for r in records if r["peak_bytes"] and r["peak_bytes"] < matrix]
    return (
        f"The table is measured at {shape.text()}, a shape of the forward-time grid, where one "
        f"N×N score matrix is {fmt.nbytes(matrix)}"
        + (f"; {_names(below)} peak below that" if below else "")
        + ". "
        + (
            f"{len(records) - len(failed)} of {len(records)} implementations ran there."
            if failed
            else "Every implementation ran there."
        )
    )
