# Sentences, tables and figures for the quadratic-wall sweeps: fitted log-log slopes, where
# time stops being overhead-dominated and turns quadratic, which step is largest at each
# point, and what changes when the same tokens are split differently. Pure: computed from a
# Measurement.
#
# Noise decides every trend word. Each point's time carries its range over interleaved
# rounds, so a local slope between two points has a range too (slowest against fastest
# round); "less than double", "quadratic", "steeper than N²" are said only when the whole
# range is on that side, and "largest step" only when that step's range clears every other
# step's. Otherwise the sentence says "within noise".
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from attention_docs.findings.compare import compare
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.steps import MATMULS, STEPS
from attention_docs.records.timing import Timing
from attention_docs.render import words as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.figures import MUTED, SERIES_COLORS, figure_html, new_figure, to_svg
from attention_docs.render.plots import loglog_slope
from attention_docs.render.tables import markdown_table

QUADRATIC = 1.5  # a local slope whose whole range is at or above this reads as "growing like N²"
OVERHEAD = 1.0  # below this, fixed per-call costs grow faster than the work does
NEAR_TWO = 0.1  # a memory slope within this of 2 is "close to 2"
HEADERS = {
    "time_us": "Forward time (median; range over rounds)",
    "peak_bytes": "Peak memory",
    "flops": "Matmul FLOPs",
    "status": "Status",
}


def _ok(m: Measurement, table: str) -> list[dict]:
    return [
        r
        for r in m.tables[table].records()
        if r.get("status", "ok") == "ok" and r.get("time_us") is not None
    ]


def timing_of(row: dict) -> Timing:
    """A sweep row's forward time as a Timing: its median and its range over the rounds."""
    return Timing(
        median_us=row["time_us"],
        iqr_us=0.0,
        runs=0,
        method="",
        rounds_us=(row["time_low_us"], row["time_us"], row["time_high_us"]),
    )


def _time_text(row: dict) -> str:
    t = timing_of(row)
    return f"{fmt.time_us(t.median_us)} ({fmt.time_us(t.low_us)}–{fmt.time_us(t.high_us)})"


@dataclass(frozen=True)
class Slope:
    """The local log-log slope between two points, and its range over the rounds."""

    x0: float
    x1: float
    slope: float  # from the medians
    low: float  # the later point's fastest round against the earlier point's slowest
    high: float  # the later point's slowest round against the earlier point's fastest


def slope_ranges(xs: Sequence[float], rows: Sequence[tuple[float, float, float]]) -> list[Slope]:
    """Local slopes with their ranges; `rows` holds (median, low, high) per x."""
    out = []
    for (x0, x1), (a, b) in zip(pairwise(xs), pairwise(rows), strict=True):
        span = math.log(x1 / x0)
        out.append(
            Slope(
                x0,
                x1,
                math.log(b[0] / a[0]) / span,
                math.log(b[1] / a[2]) / span,
                math.log(b[2] / a[1]) / span,
            )
        )
    return out


def turning_point(slopes: Sequence[Slope]) -> float | None:
    """The first x from which every later local slope is at least QUADRATIC over its whole range."""
    for i, s in enumerate(slopes):
        if all(later.low >= QUADRATIC for later in slopes[i:]):
            return s.x0
    return None


def _slope_text(s: Slope) -> str:
    return f"{s.slope:.2f} ({s.low:.2f}–{s.high:.2f})"


def memory_slope_sentence(rows: list[dict]) -> str:
    """The fitted slope of peak memory against seq_len, in words computed from it, and why
    it is below 2 if it is. `rows` hold `seq_len`, `peak_bytes` (measured) and
    `quadratic_bytes` (the model's N×N part: two score matrices and the mask)."""
    xs = [r["seq_len"] for r in rows]
    peaks = [r["peak_bytes"] for r in rows]
    whole = loglog_slope(xs, peaks)
    half = rows[len(rows) // 2 :]
    upper = loglog_slope([r["seq_len"] for r in half], [r["peak_bytes"] for r in half])
    if whole is None:
        return ""
    if abs(whole - 2) <= NEAR_TWO:
        text = f"Peak memory grows with a fitted slope of **{whole:.2f}**, close to 2 over the whole sweep."
    else:
        side = "below" if whole < 2 else "above"
        text = f"Peak memory grows with a fitted slope of **{whole:.2f}** over the whole sweep, {side} 2."
    if upper is not None and len(half) >= 2:
        text += (
            f" Over its upper half ({half[0]['seq_len']:,} to {half[-1]['seq_len']:,} tokens) "
            f"the slope is **{upper:.2f}**."
        )
    first, last = rows[0], rows[-1]
    if whole < 2 - NEAR_TWO and first.get("quadratic_bytes") and first["peak_bytes"]:
        rest = [(r["seq_len"], r["peak_bytes"] - r["quadratic_bytes"]) for r in (first, last)]
        rest_slope = (
            math.log(rest[1][1] / rest[0][1]) / math.log(rest[1][0] / rest[0][0])
            if rest[0][1] > 0 and rest[1][1] > 0
            else None
        )
        final = math.log(rows[-1]["peak_bytes"] / rows[-2]["peak_bytes"]) / math.log(
            rows[-1]["seq_len"] / rows[-2]["seq_len"]
        )
        text += (
            f" It is below 2 because not all of the peak is N×N: at seq_len {first['seq_len']:,} "
            f"the two score-sized matrices and the mask are "
            f"{fmt.percent(first['quadratic_bytes'] / first['peak_bytes'])} of the measured "
            f"peak, at {last['seq_len']:,} {fmt.percent(last['quadratic_bytes'] / last['peak_bytes'])}. "
            f"The rest (the output, B·H·N·D, and small buffers) goes from "
            f"{fmt.nbytes(rest[0][1])} to {fmt.nbytes(rest[1][1])}"
            + (f", a slope of {rest_slope:.2f}" if rest_slope is not None else "")
            + f"; the last doubling's memory slope is {final:.2f}."
        )
    return text


def _cache_sentence(m: Measurement, rows: list[dict], steep: Slope) -> str:
    """Whether the N×N working set crossed the last-level cache across a super-quadratic step."""
    llc = m.facts.get("llc_bytes")
    at = {r["seq_len"]: r for r in rows}
    before, after = at[steep.x0].get("quadratic_bytes"), at[steep.x1].get("quadratic_bytes")
    steps = _step_slopes(m, "seq_len", steep)
    bent = [f"`{label}` {_slope_text(s)}" for label, s in steps.items() if s.low > 2]
    bent_text = (
        " The steps whose own local slope is above 2 outside the noise over that doubling: "
        + ", ".join(bent)
        + "."
        if bent
        else " No single step's local slope is above 2 outside its own noise over that doubling."
    )
    if not llc or before is None or after is None:
        return (
            " This measurement does not record the size of the last-level cache, so it cannot "
            "say whether the matrices fell out of it: the bend is not explained here." + bent_text
        )
    level = m.facts.get("llc_level")
    cache = f"the {fmt.nbytes(llc)} last-level (L{level}) cache"
    if before <= llc < after:
        return (
            f" Across that doubling the N×N working set of an element-wise step — its input "
            f"and its output matrix, plus the mask — grows from {fmt.nbytes(before)} to "
            f"{fmt.nbytes(after)}, past {cache} of this device: the passes that fit in the "
            f"cache before now stream from main memory, which is consistent with a slope "
            f"above 2." + bent_text
        )
    where = "already larger than" if before > llc else "still inside"
    return (
        f" The N×N working set ({fmt.nbytes(before)} to {fmt.nbytes(after)}) is {where} "
        f"{cache} on both sides of that doubling, so leaving the cache does not explain it; "
        f"these measurements do not say what does." + bent_text
    )


def _step_slopes(m: Measurement, x: str, s: Slope) -> dict[str, Slope]:
    """Each step's local slope, with its range, between the two points of `s`."""
    if "step_rounds" not in m.tables:
        return {}
    spread = {(r[x], r["step"]): r for r in m.tables["step_rounds"].records()}
    medians = {r[x]: r for r in m.tables[x].records()}
    out = {}
    for label in STEPS:
        a, b = spread.get((s.x0, label)), spread.get((s.x1, label))
        m0, m1 = medians[s.x0].get(label), medians[s.x1].get(label)
        if not a or not b or not m0 or not m1 or min(a["low_us"], b["low_us"]) <= 0:
            continue
        out[label] = slope_ranges(
            [s.x0, s.x1], [(m0, a["low_us"], a["high_us"]), (m1, b["low_us"], b["high_us"])]
        )[0]
    return out


def seq_len_claim(m: Measurement, table: str = "seq_len") -> str:
    """Fitted slopes of time and memory against seq_len, where time turns quadratic, and any
    doubling steeper than N², each judged against the rounds' ranges."""
    rows = _ok(m, table)
    xs = [r["seq_len"] for r in rows]
    time_slope = loglog_slope(xs, [r["time_us"] for r in rows])
    if time_slope is None or len(rows) < 3:
        return "Too few points were measured to fit a slope."
    slopes = slope_ranges(xs, [(r["time_us"], r["time_low_us"], r["time_high_us"]) for r in rows])
    half = rows[len(rows) // 2 :]
    upper = loglog_slope([r["seq_len"] for r in half], [r["time_us"] for r in half])
    text = (
        f"Over the whole sweep ({xs[0]:,} to {xs[-1]:,} tokens), time grows with a fitted "
        f"log-log slope of **{time_slope:.2f}**, and over its upper half with **{upper:.2f}**."
    )
    flat = 0
    while flat < len(slopes) and slopes[flat].high < OVERHEAD:
        flat += 1
    if flat:
        text += (
            f" From {xs[0]:,} to {xs[flat]:,} tokens each doubling costs less than double the "
            f"time even at the rounds' extremes (local slope under {OVERHEAD:g}): fixed per-call "
            f"costs — dispatch, allocation, kernel launches — dominate and the N² work hides "
            f"under them."
        )
    turn = turning_point(slopes)
    if turn is not None and turn != xs[-1]:
        text += (
            f" From **{turn:,}** tokens on, every doubling multiplies time by at least "
            f"{2**QUADRATIC:.1f}× even at the rounds' extremes (local slope ≥ {QUADRATIC:g}): "
            f"that is the quadratic wall."
        )
    else:
        text += (
            f" No stretch at the end of this sweep keeps a local slope of {QUADRATIC:g} or more "
            f"outside the noise; longer sequences would be needed to see the wall on this device."
        )
    steep = [s for s in slopes if s.low > 2]
    if steep:
        worst = max(steep, key=lambda s: s.slope)
        text += (
            f" Between {worst.x0:,} and {worst.x1:,} tokens the local slope is "
            f"**{_slope_text(worst)}**: steeper than N² even at the rounds' extremes, so "
            f"something besides the N² work grew there."
        )
        text += _cache_sentence(m, rows, worst)
    else:
        text += " No doubling is steeper than N² outside the rounds' noise."
    return text + "\n\n" + memory_slope_sentence(rows)


def step_ranges(m: Measurement, table: str, x: str) -> dict[tuple, tuple[float, float, float]]:
    """(x, step) -> (median, low, high) of the step's profiled time over the calls."""
    spread = {(r[x], r["step"]): r for r in m.tables["step_rounds"].records()}
    out = {}
    for r in m.tables[table].records():
        for label in STEPS:
            s = spread.get((r[x], label))
            if s is not None and r.get(label) is not None:
                out[(r[x], label)] = (r[label], s["low_us"], s["high_us"])
    return out


def largest_steps(
    m: Measurement, table: str, x: str
) -> list[tuple[object, tuple[str, ...], float]]:
    """Per row: the steps that may be the largest (the leader and every step whose range
    reaches the leader's), and the leader's share of the five steps' medians."""
    ranges = step_ranges(m, table, x)
    out = []
    for r in m.tables[table].records():
        if r.get("status", "ok") != "ok":
            continue
        here = {label: ranges[(r[x], label)] for label in STEPS if (r[x], label) in ranges}
        total = sum(v[0] for v in here.values())
        if not here or not total:
            continue
        leader = max(here, key=lambda label: here[label][0])
        contenders = tuple(
            label
            for label in STEPS
            if label in here and (label == leader or here[label][2] >= here[leader][1])
        )
        out.append((r[x], contenders, here[leader][0] / total))
    return out


def step_shares_claim(m: Measurement, table: str, x: str) -> str:
    """Which step is largest over which rows — only where its range clears the others' —
    and the matmuls' share at the ends of the sweep."""
    found = largest_steps(m, table, x)
    if not found:
        return ""

    def clear_leader(row: tuple) -> str | None:
        return row[1][0] if len(row[1]) == 1 else None

    groups: list[list[tuple]] = []
    for row in found:  # consecutive rows with the same clear leader, or tied, form a group
        if groups and clear_leader(groups[-1][0]) == clear_leader(row):
            groups[-1].append(row)
        else:
            groups.append([row])
    name = x.replace("_", " ")
    parts = []
    for g in groups:
        where = f"{g[0][0]}" if len(g) == 1 else f"{g[0][0]} to {g[-1][0]}"
        if len(g[0][1]) == 1:
            low, high = (fmt.percent(f([row[2] for row in g])) for f in (min, max))
            share = low if low == high else f"{low}–{high}"
            parts.append(f"`{g[0][1][0]}` is the largest at {name} {where} ({share})")
        else:
            tied = [label for label in STEPS if any(label in row[1] for row in g)]
            parts.append(
                f"at {name} {where} no step is the largest outside the noise: "
                + ", ".join(f"`{t}`" for t in tied)
                + " are within noise of each other"
            )
    records = {r[x]: r for r in m.tables[table].records()}
    first, last = records.get(found[0][0]), records.get(found[-1][0])
    text = "Per step, over the profiled calls: " + "; ".join(parts) + "."
    if first and last:

        def matmuls(r: dict) -> float:
            total = sum(r[s] or 0.0 for s in STEPS)
            return sum(r[s] or 0.0 for s in MATMULS) / total if total else 0.0

        text += (
            f" The two matmuls together take {fmt.percent(matmuls(first))} of the five steps "
            f"at {name} {first[x]} and {fmt.percent(matmuls(last))} at {last[x]}."
        )
    return text


def sweep_table(sourced: Sourced, table: str, columns: Sequence[str]) -> str:
    """A sweep table with times (and their range over rounds), bytes and FLOPs formatted."""
    t = sourced.measurement.tables[table]
    header = [HEADERS.get(c, c.replace("_", " ")) for c in columns]
    rows = []
    for r in t.records():
        cells = []
        for c in columns:
            value = r[c]
            unit = t.units.get(c)
            if value is None:
                cells.append("—")
            elif c == "time_us" and r.get("time_low_us") is not None:
                cells.append(_time_text(r))
            elif unit == "µs":
                cells.append(fmt.time_us(value))
            elif unit == "B":
                cells.append(fmt.nbytes(value))
            elif c == "flops":
                cells.append(fmt.count(value))
            else:
                cells.append(str(value))
        rows.append(cells)
    align = "".join("l" if c == "status" else "r" for c in columns)
    return markdown_table(header, rows, align) + "\n\n" + caption_html(sourced)


def change(before: dict, after: dict) -> str:
    """How the forward's time changes from row `before` to row `after`, with its range over
    the rounds: "multiplies time by **3.10×** (2.9–3.3×)", "divides ...", or a tie."""
    grows = after["time_us"] >= before["time_us"]
    c = (
        compare(timing_of(before), timing_of(after))
        if grows
        else compare(timing_of(after), timing_of(before))
    )
    if c.tie:
        return f"leaves time within noise ({c.ratio:.2f}× apart)"
    verb = "multiplies" if grows else "divides"
    return f"{verb} time by **{c.ratio:.2f}×** ({c.low:.2f}–{c.high:.2f}×)"


def tokens_claim(m: Measurement) -> str:
    """The same tokens as more, shorter sequences: how time and memory follow seq_len."""
    rows = _ok(m, "tokens")
    if len(rows) < 2:
        return ""
    longest, shortest = rows[0], rows[-1]
    xs = [r["seq_len"] for r in rows]
    slope = loglog_slope(xs, [r["time_us"] for r in rows])
    text = (
        f"The same {longest['batch_size'] * longest['seq_len']:,} tokens as one sequence of "
        f"{longest['seq_len']:,} take **{_time_text(longest)}** and "
        f"{fmt.nbytes(longest['peak_bytes'])} at the peak; as {shortest['batch_size']} "
        f"sequences of {shortest['seq_len']} they take **{_time_text(shortest)}** and "
        f"{fmt.nbytes(shortest['peak_bytes'])}: the split {change(longest, shortest)}. "
        f"The FLOPs fall by "
        f"{longest['flops'] / shortest['flops']:.0f}×: with the tokens fixed, work is "
        f"proportional to seq_len, not its square."
    )
    big = [r for r in rows if r["seq_len"] >= 256]
    if slope is not None:
        text += f" Time against seq_len has a fitted slope of **{slope:.2f}** over all rows"
        big_slope = loglog_slope([r["seq_len"] for r in big], [r["time_us"] for r in big])
        if big_slope is not None and len(big) < len(rows):
            text += f" and {big_slope:.2f} over the rows with seq_len ≥ {big[-1]['seq_len']}"
        text += "."
    return text


def heads_claim(m: Measurement) -> str:
    """The same model width as more, narrower heads: FLOPs fixed, memory and time not."""
    rows = _ok(m, "heads")
    if len(rows) < 2:
        return ""
    few, many = rows[0], rows[-1]
    return (
        f"Splitting the same width into {many['num_heads']} heads of {many['head_dim']} instead "
        f"of {few['num_heads']} of {few['head_dim']} leaves the matmul FLOPs unchanged "
        f"({fmt.count(few['flops'])}) but multiplies peak memory by "
        f"**{many['peak_bytes'] / few['peak_bytes']:.1f}×** — every head has its own N×N "
        f"matrix — and {change(few, many)}: from {_time_text(few)} to {_time_text(many)}."
    )


def head_dim_claim(m: Measurement) -> str:
    """How time follows head_dim at a fixed seq_len, and how the matmuls' share moves."""
    rows = _ok(m, "head_dim")
    if len(rows) < 2:
        return ""
    xs = [r["head_dim"] for r in rows]
    slope = loglog_slope(xs, [r["time_us"] for r in rows])

    def matmul_share(r: dict) -> float:
        total = sum(r[s] or 0.0 for s in STEPS)
        return sum(r[s] or 0.0 for s in MATMULS) / total if total else 0.0

    first, last = rows[0], rows[-1]
    return (
        f"From head_dim {first['head_dim']} to {last['head_dim']} the FLOPs grow "
        f"{last['flops'] / first['flops']:.0f}×, while widening the heads {change(first, last)} "
        f"(fitted slope {slope:.2f}): the three element-wise "
        f"passes do not depend on head_dim at all. The matmuls' share of the five profiled "
        f"steps goes from {fmt.percent(matmul_share(first))} to "
        f"**{fmt.percent(matmul_share(last))}**."
    )


def sweep_figure(
    sourced: Sourced, table: str, *, x: str, y: str, label: str, what: str, ylabel: str
) -> str:
    """One measured column against a swept one, log-log, with its fitted slope; a time is
    drawn with its range over the rounds as a band."""
    t = sourced.measurement.tables[table]
    rows = [r for r in t.records() if isinstance(r.get(y), int | float)]
    missing = [r[x] for r in t.records() if not isinstance(r.get(y), int | float)]
    xs = [r[x] for r in rows]
    ys = [r[y] for r in rows]
    slope = loglog_slope(xs, ys)
    name = label + (f" (slope {slope:.2f})" if slope is not None else "")
    banded = y == "time_us" and all(r.get("time_low_us") is not None for r in rows)
    with new_figure(7.0, 3.6) as fig:
        ax = fig.add_subplot()
        if banded and rows:
            ax.fill_between(
                xs,
                [r["time_low_us"] for r in rows],
                [r["time_high_us"] for r in rows],
                color=SERIES_COLORS[0],
                alpha=0.25,
                linewidth=0,
                label="range over rounds",
            )
        if rows:
            ax.plot(xs, ys, marker="o", markersize=3.5, color=SERIES_COLORS[0], label=name)
        if missing:
            ax.plot(
                missing, [0.02] * len(missing), "x", color=MUTED, transform=ax.get_xaxis_transform()
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(x)
        ax.set_ylabel(ylabel)
        ax.grid(color=MUTED, alpha=0.3, linewidth=0.5, which="both")
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(frameon=False, fontsize=8)
        unit = "µs" if y.endswith("_us") else "B" if "bytes" in y else None
        points = ", ".join(
            f"{x} {r[x]:g}: {fmt.figure_number(r[y], unit)}"
            + (
                f" ({fmt.figure_number(r['time_low_us'], 'µs')}–"
                f"{fmt.figure_number(r['time_high_us'], 'µs')})"
                if banded
                else ""
            )
            for r in rows
        )
        alt = f"{what} {name}: {points}" + (
            f"; not measured at {', '.join(str(v) for v in missing)}" if missing else ""
        )
        svg = to_svg(fig, alt)
    return figure_html(svg, sourced, what)


def step_share_figure(sourced: Sourced, table: str, *, x: str, what: str) -> str:
    """Stacked shares of the five steps for each row of a per-step sweep table."""
    from attention_docs.render.plots import stacked_share_figure

    return stacked_share_figure(sourced, table, x=x, parts=STEPS, what=what)
