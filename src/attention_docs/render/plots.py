# Generic figures: the one line chart (fed a table's columns, with the log-log slopes a finding
# fitted, or a sweep's facts with their bands), stacked shares (the shares a finding
# computed), and horizontal bars over a measurement's tables; and the label
# placement every figure can use: a label shortened to fit its box (full name in a tooltip).
# A figure draws the values it is given and decides nothing about them. Chapter-specific
# figures (timeline, roofline, memory) live in their own modules but share figures.py's
# deterministic SVG settings.
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from attention_docs.measurements.schema import Sourced, Table
from attention_docs.render.figures import (
    INK,
    LINE,
    SERIES_COLORS,
    STEP_COLORS,
    figure_html,
    frame_lines,
    measured_ticks,
    min_font_pt,
    new_figure,
    to_svg,
    tooltip,
    unit_ticks,
)
from attention_docs.render.words import figure_number, number, percent, quantity_label, tick

ELLIPSIS = "…"


def fit_label(text: str, room: float, width_of: Callable[[str], float]) -> str | None:
    """`text` if it fits in `room`, else its longest start + "…" that does; None when not even
    three characters fit. `width_of` measures a string in the same units as `room`."""
    # layout: a label's width against its box
    if width_of(text) <= room:
        return text

    def shortened(end: int) -> str:
        return text[:end].rstrip() + ELLIPSIS

    # A longer start is never narrower: bisect for the longest that fits (a timeline has
    # hundreds of labels, and a linear search measured each one up to its length in text).
    fits, too_long = 2, len(text)
    # layout: bisecting a label's length
    while too_long - fits > 1:
        end = (fits + too_long) // 2
        # layout: a label's width against its box
        if width_of(shortened(end)) <= room:
            fits = end
        else:
            too_long = end
    # layout: a label too short to show
    return shortened(fits) if fits >= 3 else None


def text_width_px(fig, fontsize: float) -> Callable[[str], float]:
    """Measures a string's drawn width in display pixels at `fontsize`, with the figure's font."""
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    probe = Text(0, 0, "", fontsize=fontsize, figure=fig)

    def width_of(text: str) -> float:
        probe.set_text(text)
        return probe.get_window_extent(renderer).width

    return width_of


def label_in_box(ax, x0: float, x1: float, y: float, text: str, *, full: str = "", **kwargs):
    """Write `text` centred in the data-space box [x0, x1] at height y, shortened to fit (the
    full name, or `full`, as a tooltip). Returns the Text, or None when nothing fits.

    Call it once the figure's layout is final (`figures.settle`): it measures in pixels."""
    fig = ax.get_figure()
    fontsize = kwargs.pop("fontsize", min_font_pt(fig.get_size_inches()[0]))
    left = ax.transData.transform((x0, y))[0]
    right = ax.transData.transform((x1, y))[0]
    pad = 0.3 * fontsize * fig.dpi / 72
    # Browsers without DejaVu Sans draw the text with a font up to ~10% wider.
    short = fit_label(text, (right - left - 2 * pad) / 1.1, text_width_px(fig, fontsize))
    if short is None:
        return None
    label = ax.text(
        (x0 + x1) / 2,
        y,
        short,
        ha="center",
        va="center",
        fontsize=fontsize,
        clip_on=True,
        in_layout=False,
        **kwargs,
    )
    if short != text or full:
        tooltip(label, full or text)
    return label


@dataclass(frozen=True)
class Series:
    """One line of a line chart: y at each x (None: not measured, a cross on the x axis), and
    where given the interval (low, high) around each measured y, drawn as a band."""

    label: str
    points: tuple[tuple[Any, float | None], ...]
    band: tuple[tuple[float, float], ...] = ()
    band_label: str | None = None  # the band's legend entry, where it has one


def line_chart(
    sourced: Sourced,
    what: str,
    series: Sequence[Series],
    *,
    alt: str,
    xlabel: str,
    ylabel: str = "",
    unit: str | None = None,
    logx: bool = False,
    logy: bool = False,
    xticks: Sequence | None = None,
) -> str:
    """Every line chart on the site: each series against x, with `unit` in the y ticks (1 ms,
    10 MB, as the tables say it), `xticks` at the measured values, and `alt` as its text."""
    with new_figure(7.0, 3.6) as fig:
        ax = fig.add_subplot()
        for i, line in enumerate(series):
            color = SERIES_COLORS[i % len(SERIES_COLORS)]
            drawn = [(a, b) for a, b in line.points if b is not None]
            if line.band:
                lows, highs = zip(*line.band, strict=True)
                band = {"label": line.band_label} if line.band_label else {}
                ax.fill_between([a for a, _ in drawn], lows, highs, color=color, alpha=0.2, linewidth=0, **band)  # fmt: skip
            if drawn:
                ax.plot(*zip(*drawn, strict=True), color=color, label=line.label, **LINE)
            if missing := [a for a, b in line.points if b is None]:
                ax.plot(missing, [0.02] * len(missing), "x", color=color, transform=ax.get_xaxis_transform())  # fmt: skip
        if logx:
            ax.set_xscale("log", base=2)
        if xticks:
            measured_ticks(ax, xticks)
        if logy:  # after measured_ticks: its minor ticks label a log axis shorter than a decade
            ax.set_yscale("log")
        if unit:
            unit_ticks(ax.yaxis, unit)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        frame_lines(ax)
        svg = to_svg(fig, alt)
    return figure_html(svg, sourced, what)


def line_figure(
    sourced: Sourced,
    table_name: str,
    *,
    x: str,
    ys: Sequence[str],
    what: str,
    xlabel: str | None = None,
    ylabel: str = "",
    logx: bool = False,
    logy: bool = False,
    slopes: Mapping[str, float | None] | None = None,
    labels: Sequence[str] | None = None,
) -> str:
    """One line per column in `ys` of a table against its column `x`. Missing values (None:
    out of memory, not available) leave a gap and are marked with a cross on the axis.
    `slopes[column]`, a log-log slope a finding fitted (findings/trend.table_slopes), is said
    in the legend."""
    table = sourced.measurement.tables[table_name]
    xs = table.numbers(x)
    series, alt_parts = [], []
    for i, column in enumerate(ys):
        values = table.numbers(column)
        # A column named for a quantity (time_us) reads as words; one named for an
        # implementation (naive, sdpa-math) keeps its name.
        name = labels[i] if labels else (quantity_label(column) if "_" in column else column)
        slope = (slopes or {}).get(column)
        if slope is not None:
            name += f" (slope {number(slope)})"
        pairs = [(a, b) for a, b in zip(xs, values, strict=True) if a is not None]
        series.append(Series(name, tuple(pairs)))
        unit = table.units.get(column)
        said = ", ".join(f"{figure_number(a)} → {figure_number(b, unit)}" for a, b in pairs)
        alt_parts.append(f"{name}: {said}")
    # Lines of one unit: the ticks say it as the tables do (10 ms, 1 MB), the label not.
    units = {table.units.get(column) for column in ys}
    unit = next(iter(units)) if len(units) == 1 else None
    shown = quantity_label(ys[0]) if unit else _with_unit(table, ys[0])
    # layout: ticks at the measured x values, in order
    xticks = _spaced(sorted({a for a in xs if a is not None and a > 0})) if logx else None
    return line_chart(
        sourced,
        what,
        series,
        alt=f"{what} Against {_with_unit(table, x).lower()}: {'; '.join(alt_parts)}",
        xlabel=xlabel or _with_unit(table, x),
        ylabel=ylabel or (shown if len(ys) == 1 else ""),
        unit=unit,
        logx=logx,
        logy=logy,
        xticks=xticks,
    )


def stacked_share_figure(
    sourced: Sourced,
    xs: Sequence,
    shares: Sequence[Mapping[str, float]],
    *,
    x: str,
    parts: Sequence[str],
    what: str,
    x_unit: str | None = None,
) -> str:
    """Stacked bars: for each x in `xs`, each part's share (`shares[i][part]`, a fraction of
    the whole that a finding computed: a median share, as the prose states it)."""
    with new_figure(7.0, 3.4) as fig:
        ax = fig.add_subplot()
        bottoms = [0.0] * len(xs)
        for i, part in enumerate(parts):
            values = [100 * s[part] for s in shares]
            color = STEP_COLORS.get(part, SERIES_COLORS[i % len(SERIES_COLORS)])
            ax.bar(
                [tick(v) if isinstance(v, int | float) else str(v) for v in xs],
                values,
                bottom=bottoms,
                color=color,
                label=part.removeprefix("attention."),
            )
            bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
        ax.set_ylim(0, 100)
        ax.set_ylabel("Share of time (%)")
        ax.set_xlabel(quantity_label(x, x_unit))
        ax.spines[["top", "right"]].set_visible(False)
        fig.legend(loc="outside right center", frameon=False, fontsize=8)
        alt = f"{what} Shares per {quantity_label(x).lower()}: " + "; ".join(
            f"{figure_number(xv)}: " + ", ".join(f"{p} {percent(s[p])}" for p in parts)
            for xv, s in zip(xs, shares, strict=True)
        )
        svg = to_svg(fig, alt)
    return figure_html(svg, sourced, what)


def bar_figure(
    sourced: Sourced, table_name: str, *, label: str, value: str, what: str, log: bool = False
) -> str:
    """Horizontal bars of `value` per `label`; rows whose value is not a number are listed as such."""
    table = sourced.measurement.tables[table_name]
    rows = table.records()
    with new_figure(7.0, 0.6 + 0.35 * len(rows)) as fig:
        ax = fig.add_subplot()
        names = [str(r[label]) for r in rows]
        values = [r[value] if isinstance(r[value], int | float) else 0 for r in rows]
        ax.barh(
            names, values, color=[SERIES_COLORS[i % len(SERIES_COLORS)] for i in range(len(rows))]
        )
        for i, r in enumerate(rows):
            if not isinstance(r[value], int | float):
                ax.text(
                    0, i, f"  {r[value] or 'not available'}", va="center", color=INK, fontsize=8
                )
        if log:
            ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_xlabel(_with_unit(table, value))
        ax.spines[["top", "right"]].set_visible(False)
        unit = table.units.get(value)
        alt = f"{what} {_with_unit(table, value)}: " + "; ".join(
            f"{r[label]}: {figure_number(r[value], unit)}" for r in rows
        )
        svg = to_svg(fig, alt)
    return figure_html(svg, sourced, what)


def _spaced(values: list[float], slots: int = 10) -> list[float]:
    """The values to mark on a log axis: each at least 1/slots of the axis from the last, so
    that 26112 and 29056 do not print over each other."""
    if len(values) < 2:
        return values
    step = math.log(values[-1] / values[0]) / slots
    kept = [values[0]]
    for v in values[1:]:
        # layout: tick spacing on a log axis
        if math.log(v / kept[-1]) >= step:
            kept.append(v)
    return kept


def _with_unit(table: Table, column: str) -> str:
    """An axis label in words with its unit: `time_us` in µs -> "Time (µs)"."""
    return quantity_label(column, table.units.get(column))
