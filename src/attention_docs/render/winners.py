# "Which attention wins where", drawn from findings/winners.py: the map of each view (forward
# times from `forward_times`, training steps from `train_times`, a decode step from
# `decode_steps`), each cell naming the winner and its lead over the runner-up, or a tie; the
# timings behind it; what did not run; the H200 forecast of the GPU map; and the closing "what
# each trick removed" table. Draws and fills templates; decides nothing. Pure: no torch.
from __future__ import annotations

import textwrap
from collections import Counter

from attention_docs.analytic import gpu as gpus
from attention_docs.findings import forward as ffwd
from attention_docs.findings import winners as fwinners
from attention_docs.findings.forecast import measured_on
from attention_docs.findings.model_check import FUSED_FA2, NAIVE_KINDS
from attention_docs.findings.trend import FALLS, FLAT, RISES
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import claims, words
from attention_docs.render import compare as cmp
from attention_docs.render.caption import caption_html
from attention_docs.render.decode import shape_text
from attention_docs.render.figures import INK, figure_html, new_figure, to_svg
from attention_docs.render.forecast import forecast_box
from attention_docs.render.sweep import lead_phrases
from attention_docs.render.tables import captioned_table, markdown_table, measurement_of

# One colour per implementation on every device (Okabe–Ito, grey for the baseline); the decode
# cell's paths take the colours of their forward counterparts.
GREY = "#999999"
COLORS = {fwd.NAIVE: GREY, fwd.COMPILED: "#E69F00", fwd.SDPA_MATH: "#56B4E9",
          fwd.SDPA_FLASH: "#0072B2", fwd.SDPA_EFFICIENT: "#009E73", fwd.SDPA_CUDNN: "#CC79A7",
          fwd.FLEX: "#D55E00", fwd.TILED: "#F0E442", fwd.TRITON: "#000000",
          "sdpa": "#0072B2", "naive": GREY, "naive_repeat_kv": "#E69F00"}  # fmt: skip
SDPA_KERNELS = {fwd.SDPA_MATH: "math", fwd.SDPA_FLASH: "FlashAttention",
                fwd.SDPA_EFFICIENT: "memory-efficient", fwd.SDPA_CUDNN: "cuDNN"}  # fmt: skip


def _tick(label) -> str:
    """A heatmap's row or column label: a number as every axis writes it (1,024), a dtype as
    it is named."""
    return words.tick(label) if isinstance(label, int | float) else str(label)


def _where(s) -> str:
    mask = "causal" if s.causal else "no mask"
    return f"{s.num_heads} heads, seq_len {s.seq_len}, head_dim {s.head_dim}, {s.dtype}, {mask}"


# --- the maps --------------------------------------------------------------------------------


def _wrap(name: str) -> str:
    return name.replace(" (", "\n(").replace(" + ", "\n+ ")


def cell_label(c: fwinners.Cell) -> str:
    """What a cell of a map says: the winner and its lead, or the tie."""
    name = _wrap(c.winner)
    if c.margin is None:
        return f"{name}\nonly one ran"
    if c.tied:
        # The alt text names every implementation in the tie; the cell only the top two.
        return f"tie: {name}\n≈ {_wrap(c.tied[0])}\n{words.times(c.margin.ratio)} apart"
    return f"{name}\n{words.versus(c.margin)}"


def cell_sentence(c: fwinners.Cell) -> str:
    """One cell in words (alt text)."""
    if c.margin is None:
        return f"{c.winner}, the only one that ran"
    if c.tied:
        return f"{c.winner} and {words.series(c.tied)} within noise ({words.times(c.margin.ratio)} apart)"
    return f"{c.winner}, {words.versus(c.margin)} ahead of {c.runner_up}"


CELL_TEXT = {"ha": "center", "va": "center", "fontsize": 7, "color": INK,
             "bbox": {"boxstyle": "round,pad=0.25", "facecolor": "white", "alpha": 0.9, "lw": 0}}  # fmt: skip


def _fill(c: fwinners.Cell) -> dict:
    """The winner's colour; a tie hatched in the colour of the first one tied with it."""
    tie = {"hatch": "////", "edgecolor": COLORS.get(c.tied[0], GREY), "lw": 0} if c.tied else {}
    return {"facecolor": COLORS.get(c.winner, GREY), **tie}


def _panels_svg(panels: list[tuple[str, str, list, list, dict]], lead: str) -> str:
    """Side-by-side panels; each is (title, x label, row keys, column keys, {(row, col): Cell})."""
    from matplotlib.patches import Rectangle

    # layout: the tallest panel sets the height
    rows_most = max(len(p[2]) for p in panels)
    widths, alt = [len(p[3]) for p in panels], []
    with new_figure(2.3 * sum(widths) + 0.8, 1.2 + 1.05 * rows_most) as fig:
        axes = fig.subplots(1, len(panels), gridspec_kw={"width_ratios": widths}, squeeze=False)[0]
        for ax, (title, xlabel, rows, cols, found) in zip(axes, panels, strict=True):
            for (row, col), c in found.items():
                y, x = rows.index(row), cols.index(col)
                ax.add_patch(Rectangle((x - 0.48, y - 0.46), 0.96, 0.92, **_fill(c)))
                ax.text(x, y, cell_label(c), **CELL_TEXT)
                alt.append(f"{title}, {row}, {col}: {cell_sentence(c)}")
            ax.set(xlim=(-0.5, len(cols) - 0.5), ylim=(rows_most - 0.5, -0.5), xlabel=xlabel)
            ax.set_xticks(range(len(cols)), [_tick(c) for c in cols])
            ax.set_yticks(range(len(rows)), [_tick(r) for r in rows])
            ax.set_title(title, color=INK, fontsize=9)
            ax.tick_params(length=0)
            ax.spines[:].set_visible(False)
        axes[0].set_ylabel("seq_len")
        return to_svg(fig, lead + " " + "; ".join(alt) + ".")


def _grid(found: list[fwinners.Cell], col) -> tuple[list, list, dict]:
    # layout: rows in seq_len order
    rows = sorted({c.shape.seq_len for c in found})
    # layout: columns in order, names after numbers
    cols = sorted({col(c) for c in found}, key=lambda v: (isinstance(v, str), v))
    return rows, cols, {(c.shape.seq_len, col(c)): c for c in found}


LEGEND = (
    "Each cell: the fastest implementation, unprofiled, and its lead over the runner-up "
    "(ratio of the times; its range from their intervals); hatched: a tie within noise."
)


def map_figure(times: Sourced) -> str:
    """The teaching slice's forward map: causal and not, seq_len × head_dim."""
    found = fwinners.teaching_cells(times.measurement)
    panels = [
        ("causal" if causal else "no mask", "head_dim", *_grid(part, lambda c: c.shape.head_dim))
        for causal in (True, False)
        if (part := [c for c in found if c.shape.causal == causal])
    ]
    s = found[0].shape
    what = f"Forward pass, batch_size={s.batch_size}, num_heads={s.num_heads}, {s.dtype}. {LEGEND}"
    return figure_html(_panels_svg(panels, "Which attention is fastest."), times, what)


def model_figure(times: Sourced, train: Sourced, steps: Sourced) -> str:
    """Closer to real models: 16 heads in both dtypes (forward, training) and one decode cell."""
    found = fwinners.map_cells(times.measurement)
    trains = fwinners.map_cells(train.measurement, fwinners.TRAINING)
    dtype = lambda c: c.shape.dtype  # noqa: E731
    panels = [("forward", "dtype", *_grid(found, dtype))]
    panels.append(("training (forward + backward)", "dtype", *_grid(trains, dtype)))
    s, what = found[0].shape, ""
    if dec := fwinners.decode_cell(steps.measurement):
        d = dec.shape
        panels.append(("decode step (GQA)", "cache_len", [1], [d.keys], {(1, d.keys): dec}))
        what = f" Decode: one new token (row 1) per sequence, {shape_text(d)}, per layer."
    what = (
        f"Forward and training: batch_size={s.batch_size}, num_heads={s.num_heads}, "
        f"head_dim={s.head_dim}, causal, by seq_len and dtype.{what} {LEGEND}"
    )
    lead = "Which attention is fastest, closer to real models."
    return figure_html(_panels_svg(panels, lead), times, what)


# --- claims ----------------------------------------------------------------------------------


def _count(found: list[fwinners.Cell], what: str) -> str:
    """`SDPA flash in 14 and FlexAttention in 1 of the 16 WHAT (1 within noise)`; with no
    clear winner anywhere, `no implementation in any of the 2 WHAT (all within noise)`."""
    clear = Counter(c.winner for c in found if not c.tied)
    ties = sum(1 for c in found if c.tied)
    if not clear:
        return f"no implementation in any of the {len(found)} {what} (all within noise)"
    wins = words.series(f"{name} in {k}" for name, k in clear.most_common())
    return f"{wins} of the {len(found)} {what}" + (f" ({ties} within noise)" if ties else "")


def _lead(m: Measurement, c: fwinners.Cell, slow: str | None) -> str:
    """The cell's winner against `slow` (the runner-up where `slow` won or did not run), as
    a marked fact: `a is 2× (…) faster than b`, or a tie."""
    slow = slow if slow in c.ranking.against_fastest else c.runner_up
    f = fwinners.lead_fact(m, c, slow)
    if f is None:
        return f"{c.winner} is the only one that ran"
    return words.fact_span(f.id, words.speed(c.ranking.against_fastest[slow], c.winner, slow))


def finding(times: Sourced) -> str:
    """The chapter's point: the implementation to use on this device, the one that leads
    (alone or within noise) at the most shapes of the map; its clear wins and ties go in the
    caption."""
    m = times.measurement
    teach = fwinners.teaching_cells(m)
    best, leads = fwinners.recommended(teach)
    dtypes = words.series(dict.fromkeys(c.shape.dtype for c in teach))
    heads = teach[0].shape.num_heads
    where = "this GPU" if m.device_kind == "cuda" else "this CPU"
    far = fwinners.largest_cell(teach)
    return claims.opening(
        f"Use {best} on {where}: its forward is the fastest, or within noise of the "
        f"fastest, at {leads} of the {len(teach)} {dtypes} shapes on the map below.",
        times,
        f"Fastest beyond the noise: {_count(teach, f'shapes at {heads} heads')}. At "
        f"{far.shape.text()}, {_lead(m, far, fwd.NAIVE)}.",
    )


def _fastest(found: list[fwinners.Cell], view: str, what: str) -> str:
    """A sentence: who is fastest in `view` beyond the noise, counted over `found`."""
    if any(not c.tied for c in found):
        return f"The fastest {view} beyond the noise is {_count(found, what)}."
    return (
        f"No {view} is fastest beyond the noise in any of the {len(found)} {what}: each is a tie."
    )


def model_claim(times: Sourced, train: Sourced, steps: Sourced) -> str:
    """What the map closer to real models shows: who wins the forward and the training step,
    the forward at the map's far corner against naive attention, and the decode step."""
    m, d = times.measurement, steps.measurement
    model = fwinners.map_cells(m)
    big = fwinners.largest_cell(model)
    trains = fwinners.map_cells(train.measurement, fwinners.TRAINING)
    text = [
        _fastest(model, "forward", f"cells at {big.shape.num_heads} heads"),
        f"At seq_len {big.shape.seq_len:,} in {big.shape.dtype}, {_lead(m, big, fwd.NAIVE)}.",
        _fastest(trains, "training step", "cells timed"),
    ]
    if dec := fwinners.decode_cell(d):
        text.append(f"In a grouped-query decode step, {_lead(d, dec, None)}.")
    return " ".join(text)


def what_to_do(times: Sourced) -> str:
    """What the map means for your own model, each action backed by the page."""
    found = fwinners.series(times.measurement)
    changes = sum(1 for t in found if t.changes)
    _, widest = fwinners.lead_ends(fwinners.forecast_cells(gpus.sheet()))
    return claims.what_to_do(
        f"Start from SDPA. On an NVIDIA H200 a fused kernel leads naive attention by "
        f"{words.fact(widest.lead.forecast)} at {_where(widest.shape)} (a forecast).",
        f"Time the candidates at your own shapes before you pick one: here the fastest forward "
        f"changes with seq_len in {changes or 'none'} of the {len(found)} series of the map.",
        "Reach for FlexAttention when your mask is not causal or full: SDPA then takes a mask "
        "tensor, while FlexAttention skips the blocks the mask rules out "
        "([chapter 10](10-flex-attention.md) measures what that saves).",
    )


def _series_name(t: fwinners.Series) -> str:
    return f"{'causal' if t.causal else 'no mask'}, head_dim {t.head_dim}"


_LEAD_MOVES = {RISES: "grows", FALLS: "shrinks", FLAT: "change within noise"}


def _ends(m: Measurement, t: fwinners.Series) -> str:
    """The fastest against naive attention at the series' shortest and longest ranked length,
    and how that lead moved: `1.6× (…) → 2.2× (…): grows`; — where it is not compared."""
    if t.lead is None:
        return "—"
    ranked = [c for c in t.cells if len(c.ranking.order) >= 2]
    ends = [
        words.versus_fact(fwinners.lead_fact(m, c, fwd.NAIVE), c.ranking.against_fastest[fwd.NAIVE])
        for c in (ranked[0], ranked[-1])
    ]
    return f"{' → '.join(ends)}: {_LEAD_MOVES[t.lead]}"


def trend_claim(times: Sourced) -> str:
    """How the answer changes with seq_len, per (mask, head_dim) series of the teaching map:
    a sentence, then a row per series saying who leads where, ties said as ties
    (findings/winners.series, a sweep per series), and the lead over naive at both ends."""
    m = times.measurement
    found = fwinners.series(m)
    changes = sum(1 for t in found if t.changes)
    leads = Counter(t.lead for t in found if t.lead)
    text = (
        f"Along seq_len the fastest implementation changes in {changes or 'none'} of the "
        f"{len(found)} series of the map"
    )
    if leads:
        text += (
            f"; its lead over naive attention grows beyond the noise in {leads[RISES] or 'none'}"
        )
    rows = [[_series_name(t), "; ".join(lead_phrases(t.sweep)), _ends(m, t)] for t in found]
    header = ["Series", "Fastest, by seq_len", "Fastest vs naive, shortest → longest"]
    what = (
        "Each series of the map along seq_len. Fastest: alone, or with those within noise of "
        "it. Vs naive: naive attention's time over the fastest's, at the shortest and the "
        "longest length ranked."
    )
    return f"{text}.\n\n" + captioned_table(header, rows, "lll", times, what)


# --- every timing, and what did not run -------------------------------------------------------


def _time_cell(m: Measurement, c: fwinners.Cell, name: str) -> str:
    f = c.facts.get(name)
    if f is None:
        return "—"
    # Four or five such cells a row: each range goes under its value, so that the table
    # fits the column beside both sidebars at 1280 px.
    text = words.fact(f, stacked=True)
    return f"**{text}**" if name == c.winner else f"≈ {text}" if name in c.tied else text


def _tab(title: str, m: Measurement, found: list[fwinners.Cell]) -> str:
    # layout: columns in seq_len order
    found = sorted(found, key=lambda c: c.shape.seq_len)
    names = [n for n in fwinners.implementations(m) if any(n in c.timings for c in found)]
    header = ["Implementation", *(f"seq_len {c.shape.seq_len}" for c in found)]
    rows = [[n, *(_time_cell(m, c, n) for c in found)] for n in names]
    table = markdown_table(header, rows, "l" + "r" * len(found))
    return f'=== "{title}"\n\n{textwrap.indent(table, "    ")}\n'


def times_tabs(times: Sourced, train: Sourced) -> str:
    """Content tabs, one per series of each map: every time with its rounds' range; the
    winner in bold, those within noise of it marked ≈."""
    m, t = times.measurement, train.measurement
    tabs = [_tab(_series_name(s), m, s.cells) for s in fwinners.teaching(m) if s.cells]
    views = (
        (m, "forward", fwinners.map_cells(m)),
        (t, "training", fwinners.map_cells(t, fwinners.TRAINING)),
    )
    for source, view, found in views:
        # layout: tabs in dtype order
        for dtype in sorted({c.shape.dtype for c in found}):
            part = [c for c in found if c.shape.dtype == dtype]
            tabs.append(_tab(f"{part[0].shape.num_heads} heads, {dtype}: {view}", source, part))
    what = (
        "Unprofiled times (each with its confidence interval). Bold: the fastest; ≈: within noise."
    )
    return "\n".join(tabs) + "\n" + caption_html(times, what) + caption_html(train, "Training.")


def why_not(name: str, status: str, device_kind: str) -> str:
    """Why an implementation did not run, in the site's words (as chapter 7 says it)."""
    kernel = SDPA_KERNELS.get(name)
    if kernel and status.startswith("not available on this device"):
        if device_kind == "cpu":
            return (
                f"not available on this device: PyTorch has no {kernel} kernel for the CPU "
                "(see [the SDPA chapter](07-sdpa-backends.md))"
            )
        return f"not available for these inputs: SDPA's {kernel} backend refused them when pinned"
    return "ran out of memory" if status == "out of memory" else status


def not_run(times: Sourced, train: Sourced) -> str:
    """A bullet per implementation (and reason) that did not run somewhere, and where."""
    lines = []
    for view, m in (("forward", times.measurement), ("training", train.measurement)):
        where = Counter(
            (r["implementation"], r["status"])
            for r in fwd.rows(m)
            if r["status"] != fwd.OK and not r["implementation"].startswith(fwd.STEP_PREFIX)
        )
        for (name, status), k in where.items():
            places = "every shape" if k == fwinners.shape_count(m) else f"{k} shapes"
            why = why_not(name, status, m.device_kind).rstrip(".")
            lines.append(f"- **{name}** ({view}, {places}): {why}.")
        lines += [f"- {note}" for note in m.notes if f"- {note}" not in lines]
    return "Did not run here:\n\n" + "\n".join(lines) if lines else "Everything ran everywhere."


# --- other devices and the GPU forecast ----------------------------------------------------


def devices_claim(entries: list[Sourced]) -> str:
    """How the forward map changes with the device, as far as the store holds devices."""
    if len(entries) < 2:
        return (
            "This build's store holds forward times from one device only; a GPU's "
            "`forward_times` entry committed to the store adds its map below."
        )
    return f"The store holds forward times from {len(entries)} devices:\n\n" + "\n".join(
        f"- **{s.measurement.provenance.device.label}**: fastest "
        f"{_count(fwinners.teaching_cells(s.measurement), 'shapes of its teaching slice')}."
        for s in entries
    )


def gpu_forecast(entries: list[Sourced]) -> str:
    """The H200's expected winner per cell of the GPU map's model-like panel, from the data
    sheet, with the measurement beside it when the store holds that GPU's forward_times."""
    gpu = gpus.sheet()
    measured = measured_on(entries, gpu)
    found = fwinners.forecast_cells(gpu, measured)
    rows = [
        (f"{what}, seq_len {c.shape.seq_len:,}, {c.shape.dtype}", k)
        for c in found
        for what, k in ((f"{fwd.NAIVE}: floor", c.naive),
                        (f"{c.fused}: floor", c.fused_floor),
                        (f"{c.fused}'s lead over {fwd.NAIVE}, realistic", c.lead))
    ]  # fmt: skip
    by_dtype = {c.shape.dtype: c.winner for c in found}
    winners = words.series(f"**{w}** in {dtype}" for dtype, w in by_dtype.items())
    s = found[0].shape
    lead = (
        f"Expected winner: {winners}, at every sequence length. Naive attention writes and reads the "
        f"N×N scores through HBM in {len(gpus.naive_kernels(gpu))} kernels, the ops its code "
        "records (the mask is rebuilt and filled out of place). A fused kernel keeps them on chip "
        "and is bound by its matmuls. On a GPU SDPA's FlashAttention kernel takes only fp16/bf16, so "
        "float32 runs the memory-efficient one."
    )
    model = (
        f"Cells: batch_size={s.batch_size}, num_heads={s.num_heads}, head_dim={s.head_dim}, "
        "causal (the GPU grid's shapes, so that its forward_times entry can check them); the "
        "lead is naive's range over the fused one's."
    )
    sources = gpus.flash_range(gpu).sources + gpus.naive_range(gpu).sources
    kinds = (*NAIVE_KINDS, FUSED_FA2)
    return forecast_box(gpu, rows, lead=lead, model=model, floors=True, sources=sources, kinds=kinds)  # fmt: skip


# --- what each trick removed -----------------------------------------------------------------


def summary_table(summary: Sourced, times: Sourced | Measurement) -> str:
    """What each implementation removed, in work per forward and memory, with its forward
    time and its ratio to naive attention from forward_times."""
    m, t = summary.measurement, measurement_of(times)
    shape = fwd.Shape.of(m.params)
    rows, missing = [], []
    for r in m.tables["summary"].records():
        name = r["implementation"]
        if r["status"] != fwd.OK:
            missing.append(f"- **{name}**: {why_not(name, r['status'], m.device_kind)}.")
            continue
        f = ffwd.forward_time(t, name, shape)
        time = words.fact(f) if f else "—"
        peak = words.fact(fwinners.peak_fact(m, r)) if r["peak_bytes"] else None
        versus = cmp.versus_cell(ffwd.versus(t, name, fwd.NAIVE, shape))
        work = words.count(r["work_per_forward"])
        rows.append(
            [name, words.trick(name), work, peak or "not seen by the profiler", time, versus]
        )
    unit = "Kernels" if m.device_kind == "cuda" else "Ops (every depth)"
    header = ["Implementation", "What the trick removes", f"{unit} / forward", "Peak memory"]
    header += ["Forward time (unprofiled)", "vs naive"]
    notes = ["\n\nDid not run here:\n\n" + "\n".join(missing)] if missing else []
    notes.append(f"\n\nWork counted: {words.work_counted(m.device_kind)}.")
    what = f"What each trick removed at {shape.text()}; times are forward_times'."
    table = markdown_table(header, rows, "llrrrr")
    return table + "".join(notes) + "\n\n" + caption_html(summary, what)
