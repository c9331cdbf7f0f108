# Sentences and tables for sweeps: fitted log-log slopes, where time stops being
# overhead-dominated and turns quadratic, which step dominates at each point, and what
# changes when the same tokens are split differently. Pure: computed from a Measurement.
from __future__ import annotations

import math
from collections.abc import Sequence

from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import _format as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.plots import loglog_slope
from attention_docs.render.tables import markdown_table

STEPS = (
    "attention.scores",
    "attention.scale",
    "attention.mask",
    "attention.softmax",
    "attention.weighted_sum",
)
QUADRATIC = 1.5  # a local slope at or above this reads as "growing like N²"
OVERHEAD = 1.0  # below this, fixed per-call costs grow faster than the work does
HEADERS = {"time_us": "forward time", "peak_bytes": "peak memory", "flops": "matmul FLOPs"}


def _ok(m: Measurement, table: str) -> list[dict]:
    return [r for r in m.tables[table].records() if r.get("status", "ok") == "ok"]


def local_slopes(xs: Sequence[float], ys: Sequence[float]) -> list[float]:
    """Log-log slope between each pair of consecutive points."""
    return [
        math.log(y1 / y0) / math.log(x1 / x0)
        for x0, x1, y0, y1 in zip(xs, xs[1:], ys, ys[1:], strict=False)
        if x0 > 0 and x1 > x0 and y0 > 0 and y1 > 0
    ]


def turning_point(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The first x from which every later local slope is at least QUADRATIC, or None."""
    slopes = local_slopes(xs, ys)
    for i in range(len(slopes)):
        if all(s >= QUADRATIC for s in slopes[i:]):
            return xs[i]
    return None


def seq_len_claim(m: Measurement, table: str = "seq_len") -> str:
    """Fitted slopes of time and memory against seq_len, and where time turns quadratic."""
    rows = _ok(m, table)
    xs = [r["seq_len"] for r in rows]
    times = [r["time_us"] for r in rows]
    peaks = [r["peak_bytes"] for r in rows]
    time_slope = loglog_slope(xs, times)
    peak_slope = loglog_slope(xs, peaks)
    if time_slope is None or peak_slope is None:
        return "Too few points were measured to fit a slope."
    slopes = local_slopes(xs, times)
    tail = loglog_slope(xs[-3:], times[-3:])
    peak_tail = loglog_slope(xs[-3:], peaks[-3:])
    text = (
        f"Over the whole sweep ({xs[0]:,} to {xs[-1]:,} tokens), time grows with a fitted "
        f"log-log slope of **{time_slope:.2f}** and peak memory with **{peak_slope:.2f}**. "
        f"Over the last three points alone the slopes are **{tail:.2f}** for time and "
        f"{peak_tail:.2f} for memory."
    )
    flat = 0
    while flat < len(slopes) and slopes[flat] < OVERHEAD:
        flat += 1
    if flat:
        text += (
            f" From {xs[0]:,} to {xs[flat]:,} tokens each doubling costs less than double the "
            f"time (local slope under {OVERHEAD:g}): fixed per-call costs — dispatch, "
            f"allocation, kernel launches — dominate and the N² work hides under them."
        )
    turn = turning_point(xs, times)
    if turn is not None and turn != xs[-1]:
        text += (
            f" From **{turn:,}** tokens on, every doubling multiplies time by at least "
            f"{2**QUADRATIC:.1f}× (local slope ≥ {QUADRATIC:g}): that is the quadratic wall."
        )
    else:
        text += (
            f" No stretch at the end of this sweep keeps a local slope of {QUADRATIC:g} or more;"
            f" longer sequences would be needed to see the wall on this device."
        )
    return text


def step_shares_claim(m: Measurement, table: str, x: str) -> str:
    """Which step leads over which rows of a per-step table, and the matmuls' share."""
    rows = []
    for r in _ok(m, table):
        times = {s: r[s] or 0.0 for s in STEPS if s in r}
        total = sum(times.values())
        if total:
            top = max(times, key=times.get)
            matmuls = times.get("attention.scores", 0) + times.get("attention.weighted_sum", 0)
            rows.append((r[x], top, times[top] / total, matmuls / total))
    if not rows:
        return ""
    groups: list[list[tuple]] = []
    for row in rows:
        if groups and groups[-1][-1][1] == row[1]:
            groups[-1].append(row)
        else:
            groups.append([row])
    name = x.replace("_", " ")
    parts = []
    for g in groups:
        where = f"{g[0][0]}" if len(g) == 1 else f"{g[0][0]} to {g[-1][0]}"
        low, high = (fmt.percent(f([row[2] for row in g])) for f in (min, max))
        share = low if low == high else f"{low}–{high}"
        parts.append(f"`{g[0][1]}` at {name} {where} ({share})")
    first, last = rows[0], rows[-1]
    return (
        "The largest step, measured: "
        + "; ".join(parts)
        + f". The two matmuls together take {fmt.percent(first[3])} of the five steps at "
        f"{name} {first[0]} and {fmt.percent(last[3])} at {last[0]}."
    )


def sweep_table(sourced: Sourced, table: str, columns: Sequence[str]) -> str:
    """A sweep table with times, bytes and FLOPs formatted for reading."""
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


def tokens_claim(m: Measurement) -> str:
    """The same tokens as more, shorter sequences: how time and memory follow seq_len."""
    rows = _ok(m, "tokens")
    if len(rows) < 2:
        return ""
    longest, shortest = rows[0], rows[-1]
    xs = [r["seq_len"] for r in rows]
    slope = loglog_slope(xs, [r["time_us"] for r in rows])
    big = [r for r in rows if r["seq_len"] >= 256]
    big_slope = loglog_slope([r["seq_len"] for r in big], [r["time_us"] for r in big])
    text = (
        f"The same {longest['batch_size'] * longest['seq_len']:,} tokens as one sequence of "
        f"{longest['seq_len']:,} take **{fmt.time_us(longest['time_us'])}** and "
        f"{fmt.nbytes(longest['peak_bytes'])} at the peak; as {shortest['batch_size']} "
        f"sequences of {shortest['seq_len']} they take **{fmt.time_us(shortest['time_us'])}** "
        f"and {fmt.nbytes(shortest['peak_bytes'])}. The FLOPs fall by "
        f"{longest['flops'] / shortest['flops']:.0f}×: with the tokens fixed, work is "
        f"proportional to seq_len, not its square."
    )
    if slope is not None:
        text += f" Time against seq_len has a fitted slope of **{slope:.2f}** over all rows"
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
        f"matrix — and time by **{many['time_us'] / few['time_us']:.1f}×**."
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
        mm = (r["attention.scores"] or 0.0) + (r["attention.weighted_sum"] or 0.0)
        return mm / total if total else 0.0

    first, last = rows[0], rows[-1]
    return (
        f"From head_dim {first['head_dim']} to {last['head_dim']} the FLOPs grow "
        f"{last['flops'] / first['flops']:.0f}× but time only "
        f"**{last['time_us'] / first['time_us']:.1f}×** (fitted slope {slope:.2f}): the three "
        f"element-wise passes do not depend on head_dim at all. The matmuls' share of the five "
        f"steps goes from {fmt.percent(matmul_share(first))} to "
        f"**{fmt.percent(matmul_share(last))}**."
    )


def sweep_figure(sourced: Sourced, table: str, *, x: str, y: str, label: str, what: str) -> str:
    """One measured column against a swept one, on log-log axes with its fitted slope."""
    from attention_docs.render.plots import line_figure

    return line_figure(
        sourced, table, x=x, ys=[y], labels=[label], what=what, logx=True, logy=True, fit_slope=True
    )


def step_share_figure(sourced: Sourced, table: str, *, x: str, what: str) -> str:
    """Stacked shares of the five steps for each row of a per-step sweep table."""
    from attention_docs.render.plots import stacked_share_figure

    return stacked_share_figure(sourced, table, x=x, parts=STEPS, what=what)
