# Generic figures over a measurement's tables: lines (sweeps, with a fitted log-log slope),
# stacked shares, and horizontal bars. Chapter-specific figures (timeline, roofline, memory)
# live in their own modules but share figures.py's deterministic SVG settings.
from __future__ import annotations

import math
from collections.abc import Sequence

from attention_docs.measurements.schema import Sourced, Table
from attention_docs.render.figures import (
    INK,
    MUTED,
    SERIES_COLORS,
    STEP_COLORS,
    figure_html,
    new_figure,
    to_svg,
)


def loglog_slope(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """Least-squares slope of log(y) against log(x) over the points where y is a number > 0.

    A slope of 2 means y grows with the square of x (the quadratic wall).
    """
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if y and y > 0 and x > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def _numbers(table: Table, column: str) -> list[float | None]:
    return [
        v if isinstance(v, int | float) and not isinstance(v, bool) else None
        for v in table.column(column)
    ]


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
    fit_slope: bool = False,
    labels: Sequence[str] | None = None,
) -> str:
    """One line per column in `ys` against column `x`. Missing values (None: out of memory,
    not available) leave a gap and are marked with a cross on the axis."""
    table = sourced.measurement.tables[table_name]
    xs = _numbers(table, x)
    alt_parts = []
    with new_figure(7.0, 3.6) as fig:
        ax = fig.add_subplot()
        for i, column in enumerate(ys):
            values = _numbers(table, column)
            color = SERIES_COLORS[i % len(SERIES_COLORS)]
            name = labels[i] if labels else column
            slope = loglog_slope(xs, values) if fit_slope else None
            if slope is not None:
                name += f" (slope {slope:.2f})"
            pts = [
                (a, b) for a, b in zip(xs, values, strict=True) if a is not None and b is not None
            ]
            if pts:
                ax.plot(
                    *zip(*pts, strict=True),
                    marker="o",
                    markersize=3.5,
                    color=color,
                    label=name,
                    linewidth=1.4,
                )
            missing = [a for a, b in zip(xs, values, strict=True) if a is not None and b is None]
            if missing:
                ax.plot(
                    missing,
                    [0.02] * len(missing),
                    "x",
                    color=color,
                    transform=ax.get_xaxis_transform(),
                )
            alt_parts.append(
                f"{name}: "
                + ", ".join(
                    f"{a:g}→{b:.3g}" if b is not None else f"{a:g}→none"
                    for a, b in zip(xs, values, strict=True)
                    if a is not None
                )
            )
        if logx:
            ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel or _with_unit(table, x))
        ax.set_ylabel(ylabel or (_with_unit(table, ys[0]) if len(ys) == 1 else ""))
        ax.grid(color=MUTED, alpha=0.3, linewidth=0.5, which="both")
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(frameon=False, fontsize=8)
        svg = to_svg(fig, f"{what} {'; '.join(alt_parts)}")
    return figure_html(svg, sourced, what)


def stacked_share_figure(
    sourced: Sourced, table_name: str, *, x: str, parts: Sequence[str], what: str
) -> str:
    """Stacked bars: for each x, the share of each part (columns hold times; shares computed)."""
    table = sourced.measurement.tables[table_name]
    xs = table.column(x)
    with new_figure(7.0, 3.4) as fig:
        ax = fig.add_subplot()
        bottoms = [0.0] * len(xs)
        totals = [sum((r[p] or 0) for p in parts) for r in table.records()]
        for i, part in enumerate(parts):
            values = [
                ((v or 0) / t * 100 if t else 0)
                for v, t in zip(table.column(part), totals, strict=True)
            ]
            color = STEP_COLORS.get(part, SERIES_COLORS[i % len(SERIES_COLORS)])
            ax.bar(
                [str(v) for v in xs],
                values,
                bottom=bottoms,
                color=color,
                label=part.removeprefix("attention."),
            )
            bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
        ax.set_ylim(0, 100)
        ax.set_ylabel("share of time (%)")
        ax.set_xlabel(_with_unit(table, x))
        ax.spines[["top", "right"]].set_visible(False)
        fig.legend(loc="outside right center", frameon=False, fontsize=8)
        alt = f"{what} Shares per {x}: " + "; ".join(
            f"{xv}: " + ", ".join(f"{p} {((r[p] or 0) / t * 100 if t else 0):.0f}%" for p in parts)
            for xv, r, t in zip(xs, table.records(), totals, strict=True)
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
                ax.text(0, i, f"  {r[value] or 'n/a'}", va="center", color=INK, fontsize=8)
        if log:
            ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_xlabel(_with_unit(table, value))
        ax.spines[["top", "right"]].set_visible(False)
        alt = f"{what} " + "; ".join(f"{r[label]}: {r[value]}" for r in rows)
        svg = to_svg(fig, alt)
    return figure_html(svg, sourced, what)


def _with_unit(table: Table, column: str) -> str:
    unit = table.units.get(column)
    return f"{column} ({unit})" if unit else column
