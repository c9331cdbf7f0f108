# The timeline figure: one profiled forward, lanes for CPU threads and CUDA streams, ops
# nested under the five labelled steps, launch->kernel flows on a GPU trace. Data
# preparation (rows of bars) is separate from drawing, as in HolisticTraceAnalysis.
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from attention_docs.measurements.schema import Sourced
from attention_docs.records.trace import GPU_KINDS, Span, Trace, attribute
from attention_docs.render import words as fmt
from attention_docs.render.figures import (
    INK,
    MUTED,
    SERIES_COLORS,
    STEP_COLORS,
    figure_html,
    new_figure,
    perfetto_button,
    settle,
    text_color_for,
    to_svg,
    tooltip,
)
from attention_docs.render.plots import label_in_box


@dataclass(frozen=True)
class TimelineSettings:
    """What a timeline colours and says. Frozen: vary it with `dataclasses.replace`."""

    # Labelled ranges drawn in colour (label, colour); other ranges and ops stay grey.
    colors: tuple[tuple[str, str], ...] = tuple(STEP_COLORS.items())
    title: str = "Timeline of one forward."
    xlabel: str = "Time since the start of the forward (µs)"


DEFAULT_SETTINGS = TimelineSettings()
WIDTH_IN, ROW_HEIGHT_IN = 10.0, 0.34
MAX_CPU_DEPTH = 3  # rows below the step ranges on a CPU lane


def ranges_settings(labels: Sequence[str], title: str) -> TimelineSettings:
    """Settings that colour other labelled ranges than the five steps (one series colour
    each), e.g. a forward and its backward, over a whole profiled step."""
    colors = tuple(zip(labels, SERIES_COLORS, strict=False))
    xlabel = "Time since the start of the step (µs)"
    return replace(DEFAULT_SETTINGS, colors=colors, title=title, xlabel=xlabel)


@dataclass(frozen=True)
class Bar:
    row: int
    color: str
    alpha: float
    label: str
    span: Span
    tip: str  # the span's name and duration, on hover


def layout(
    trace: Trace, settings: TimelineSettings = DEFAULT_SETTINGS
) -> tuple[list[str], list[Bar], list[tuple[Bar, Bar]]]:
    """Rows (labels, top to bottom), bars, and (launch, kernel) flow pairs."""
    colors = dict(settings.colors)
    ranges = [s for s in trace.spans if s.kind == "range" and s.name in colors]
    rows: list[str] = []
    row_of: dict[tuple[str, int], int] = {}
    for lane in trace.lanes:
        spans = [s for s in trace.spans if s.lane == lane]
        if any(s.kind in GPU_KINDS for s in spans):
            row_of[(lane, 0)] = len(rows)
            rows.append(lane)
            continue
        # layout: rows for the CPU depths shown
        depth = min(max((s.depth for s in spans), default=0), MAX_CPU_DEPTH)
        for d in range(depth + 1):
            row_of[(lane, d)] = len(rows)
            rows.append(f"{lane} · steps" if d == 0 else f"{lane} · depth {d}")
    # A span takes the colour of the range it ran for, on whichever thread (an autograd
    # thread's ops and kernels belong to the backward); the first range in time wins.
    step_of: dict[int, str] = {}
    for label, spans in attribute(trace, dict.fromkeys(r.name for r in ranges)).items():
        for s in spans:
            step_of.setdefault(id(s), label)
    bars: list[Bar] = []
    by_flow: dict[int, list[Bar]] = {}
    for s in trace.spans:
        gpu = s.kind in GPU_KINDS
        if s.kind == "gpu_range":
            continue
        # layout: rows for the CPU depths shown
        depth = 0 if gpu else min(s.depth, MAX_CPU_DEPTH)
        step = s.name if s in ranges else step_of.get(id(s))
        color = colors.get(step or "", MUTED)
        alpha = 1.0 if (s in ranges or gpu) else 0.45
        # A span deeper than the rows shown shares its row with the span around it.
        # layout: such a span goes unnamed
        hidden = not gpu and s.depth > MAX_CPU_DEPTH
        label = s.name.removeprefix("attention.") if s in ranges else "" if hidden else s.name
        tip = f"{s.name} · {fmt.time_us(s.dur_us)}"
        bar = Bar(row_of[(s.lane, depth)], color, alpha, label, s, tip)
        bars.append(bar)
        if s.flow is not None and s.kind in ("runtime", "kernel"):
            by_flow.setdefault(s.flow, []).append(bar)
    # Each flow's first launch and first kernel (a dict keeps the last: read it backwards).
    ends = [{b.span.kind: b for b in reversed(pair)} for pair in by_flow.values()]
    flows = [(e["runtime"], e["kernel"]) for e in ends if len(e) == 2]
    return rows, bars, flows


def describe(trace: Trace, labels: Sequence[str] = tuple(STEP_COLORS)) -> str:
    """Alt text: what the figure shows, in words (`labels`: the ranges it colours)."""
    ranges = [s for s in trace.spans if s.kind == "range" and s.name in labels]
    parts = ", ".join(f"{s.name} {fmt.time_us(s.dur_us)}" for s in ranges)
    kernels, ops = (sum(s.kind == kind for s in trace.spans) for kind in ("kernel", "op"))
    gpu = f", {kernels} GPU kernels" if kernels else ""
    return (
        f"Timeline of one profiled forward ({fmt.time_us(trace.duration_us)}): {ops} CPU ops{gpu}. "
        f"Labelled steps: {parts}."
    )


def queue_gap(trace: Trace) -> tuple[float, float] | None:
    """Where a timeline's axis breaks: from the end of the CPU's work to the start of the
    GPU's, when the GPU ran it later than the two windows last together (a launch queue
    milliseconds deep); None when one axis shows both."""
    cpu = [s for s in trace.spans if s.kind not in GPU_KINDS]
    gpu = [s for s in trace.spans if s.kind in GPU_KINDS]
    if not cpu or not gpu:
        return None
    # layout: the two windows, the CPU's and the GPU's
    cpu_end, gpu_start = max(s.end_us for s in cpu), min(s.start_us for s in gpu)
    # layout: the GPU's window, as wide as it is drawn
    gpu_span = max(s.end_us for s in gpu) - gpu_start
    # layout: break the axis where the gap is wider than both windows together
    return (cpu_end, gpu_start) if gpu_start - cpu_end > cpu_end + gpu_span else None


def timeline_svg(trace: Trace, settings: TimelineSettings = DEFAULT_SETTINGS) -> str:
    """The figure; where the GPU ran its work long after the CPU launched it (`queue_gap`),
    two panels, each with its own time axis, and the launch arrows cross between them."""
    from matplotlib.patches import ConnectionPatch, Patch

    rows, bars, flows = layout(trace, settings)
    height = 1.0 + ROW_HEIGHT_IN * len(rows)
    # layout: the x axis spans every bar
    end = max((b.span.end_us for b in bars), default=1.0)
    gap = queue_gap(trace)
    windows = [(0.0, end)] if gap is None else [(0.0, gap[0]), (gap[1], end)]
    with new_figure(WIDTH_IN, height) as fig:
        axes = list(fig.subplots(1, len(windows), sharey=True, squeeze=False)[0])
        for ax, (lo, hi) in zip(axes, windows, strict=True):
            pad = (hi - lo) * 0.01
            for b in bars:
                # layout: a bar at least a pixel wide
                extent = [(b.span.start_us, max(b.span.dur_us, (hi - lo) * 1e-4))]
                style = {"facecolors": b.color, "edgecolor": "white", "linewidth": 0.3}
                tooltip(ax.broken_barh(extent, (b.row - 0.4, 0.8), **style, alpha=b.alpha), b.tip)
            ax.set_xlim(lo - (pad if lo else 0), hi + pad)
            ax.grid(axis="x", color=MUTED, alpha=0.3, linewidth=0.5)
            ax.spines[["top", "right"]].set_visible(False)
            ax.set_xlabel(settings.xlabel)
        if gap is not None:
            axes[1].spines["left"].set_linestyle((0, (2, 2)))
            axes[1].tick_params(axis="y", length=0)
            axes[0].set_xlabel("CPU: launching (µs since the first op)")
            axes[1].set_xlabel(f"GPU: running, {fmt.time_us(gap[1] - gap[0])} later (µs)")
        arrow = {"arrowstyle": "-|>", "color": MUTED, "lw": 0.5, "alpha": 0.6}

        def side(x: float):
            # layout: a time before the break is drawn in the left panel
            return axes[0] if gap is None or x <= gap[0] else axes[1]

        for launch, kernel in flows:  # an arrow from each launch to its kernel
            start = (launch.span.start_us, launch.row + 0.4)
            end_ = (kernel.span.start_us, kernel.row - 0.4)
            a, b = side(start[0]), side(end_[0])
            if a is b:
                a.annotate("", xy=end_, xytext=start, arrowprops=arrow)
            else:
                fig.add_artist(ConnectionPatch(start, end_, a.transData, b.transData, **arrow))
        axes[0].set_yticks(range(len(rows)), rows)
        axes[0].set_ylim(len(rows) - 0.5, -0.5)
        drawn = {b.span.name for b in bars if b.span.kind == "range"}
        handles = [
            Patch(facecolor=color, label=label.removeprefix("attention."))
            for label, color in settings.colors
            if label in drawn
        ]
        if handles:
            legend = {"frameon": False, "fontsize": 8}
            fig.legend(handles=handles, loc="outside lower center", ncols=5, **legend)
        # Labels last, in the final layout: each is measured against its bar in pixels.
        settle(fig)
        for b in bars:
            # A solid bar takes white or dark text, whichever contrasts more; a pale one, dark.
            color = text_color_for(b.color) if b.alpha == 1.0 else INK
            s = b.span
            if b.label:
                ax = side(s.start_us)
                label_in_box(ax, s.start_us, s.end_us, b.row, b.label, full=b.tip, color=color)
        return to_svg(fig, describe(trace, [label for label, _ in settings.colors]))


def timeline_figure(sourced: Sourced, settings: TimelineSettings = DEFAULT_SETTINGS) -> str:
    """The timeline of the measurement's representative step as a captioned <figure>."""
    m = sourced.measurement
    if m.timeline is None:
        raise ValueError(f"{m.experiment} recorded no timeline")
    extra = f" · {perfetto_button(sourced.trace_href)}" if sourced.trace_href else ""
    return figure_html(timeline_svg(m.timeline, settings), sourced, settings.title, extra)
