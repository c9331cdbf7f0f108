# Measurement -> Markdown tables (with their captions). Pure: no torch, no I/O.
from __future__ import annotations

import re
from collections.abc import Sequence

from attention_docs.measurements.schema import Measurement, Sourced, Table
from attention_docs.render import words as fmt
from attention_docs.render.caption import caption_html


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """A pipe table; `align` is one letter per column (l/r), default left then right."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = ["---:" if a == "r" else ":---" for a in align]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(_cell_text(str(c)) for c in cells) + " |"

    return "\n".join([line(header), line(rule), *(line(r) for r in rows)])


def captioned_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], align: str, sourced: Sourced, what: str
) -> str:
    """A pipe table with, under it, the caption of the measurement it shows."""
    return markdown_table(header, rows, align) + "\n\n" + caption_html(sourced, what)


def _cell_text(text: str) -> str:
    """A cell's text with its pipes escaped: `\\|` in text (the table syntax's escape), but
    `&#124;` inside an HTML tag, where a backslash would stay in the attribute (a fact id
    such as `forward|cpu-…|…` must reach the page unchanged)."""
    parts = re.split(r"(<[^<>]*>)", text)
    return "".join(
        part.replace("|", "&#124;") if part.startswith("<") else part.replace("|", "\\|")
        for part in parts
    )


def step_total_us(m: Measurement) -> float:
    return sum(s.time_us for s in m.steps)


def step_table(sourced: Sourced, total_label: str = "all five") -> str:
    """Per step: calls, time per forward, share of the steps, FLOPs, bytes, achieved rates.

    `total_label` names the total row (other chapters label other steps).
    """
    m = sourced.measurement
    total = step_total_us(m)
    time_head = "GPU time" if m.device_kind == "cuda" else "Time"
    per_forward = m.tables.get("per_forward")
    spread = {}
    if per_forward is not None and per_forward.rows:
        # Each profiled forward on its own: the range a reader must allow between steps.
        for s in m.steps:
            values = per_forward.column(s.label)
            spread[s.label] = f" ({fmt.time_us(min(values))}–{fmt.time_us(max(values))})"
    rows = [
        [
            f"`{s.label}`",
            str(s.calls),
            fmt.time_us(s.time_us) + spread.get(s.label, ""),
            fmt.percent(s.time_us / total) if total else "—",
            fmt.count(s.flops),
            fmt.nbytes(s.bytes),
            fmt.rate(s.flops, s.time_us, "FLOP"),
            fmt.rate(s.bytes, s.time_us, "B"),
        ]
        for s in m.steps
    ]
    rows.append(
        [
            f"**{total_label}**",
            "",
            f"**{fmt.time_us(total)}**",
            "100%",
            fmt.count(sum(s.flops for s in m.steps)),
            fmt.nbytes(sum(s.bytes for s in m.steps)),
            fmt.rate(sum(s.flops for s in m.steps), total, "FLOP"),
            fmt.rate(sum(s.bytes for s in m.steps), total, "B"),
        ]
    )
    header = [
        "Step",
        "Calls",
        f"{time_head} / forward",
        "Share",
        "FLOPs",
        "Bytes (min)",
        "Achieved FLOP/s",
        "Achieved B/s",
    ]
    what = "Per step, profiled" + (
        f"; time is the mean over {len(per_forward.rows)} profiled forwards, with their range."
        if spread
        else "."
    )
    return markdown_table(header, rows, "lrrrrrrr") + "\n\n" + caption_html(sourced, what)


def op_table(sourced: Sourced, limit: int = 10) -> str:
    """The most expensive ops (CPU, by self time) and kernels (GPU), per forward."""
    m = sourced.measurement
    ops = list(m.ops)[:limit]
    cpu_self = sum(o.self_us for o in m.ops if o.where == "CPU") or 1.0
    gpu_total = sum(o.self_us for o in m.ops if o.where == "GPU") or 1.0
    rows = [
        [
            f"`{o.name}`" if len(o.name) <= 60 else f"`{o.name[:57]}…`",
            o.where,
            f"{o.calls:g}",
            fmt.time_us(o.self_us),
            fmt.percent(o.self_us / (gpu_total if o.where == "GPU" else cpu_self)),
            fmt.time_us(o.total_us),
            fmt.count(o.flops),
        ]
        for o in ops
    ]
    header = [
        "Op or kernel",
        "Where",
        "Calls",
        "Self time",
        "Share of self",
        "Total time",
        "FLOPs (profiler)",
    ]
    return markdown_table(header, rows, "llrrrrr") + "\n\n" + caption_html(sourced, "Top ops.")


def records_table(sourced: Sourced, name: str, columns: Sequence[str] | None = None) -> str:
    """A generic result table stored in `measurement.tables[name]`."""
    table: Table = sourced.measurement.tables[name]
    columns = list(columns or table.columns)
    header = [fmt.quantity_label(c, table.units.get(c)) for c in columns]
    rows = [[_cell(r[c]) for c in columns] for r in table.records()]
    return markdown_table(header, rows) + "\n\n" + caption_html(sourced)


def _cell(value) -> str:
    """Compact: a float to 4 significant digits, with an SI prefix from 10 000 up (1.57 M);
    integers (shapes, counts) exactly; — for missing."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return fmt.count(value) if abs(value) >= 1e4 else f"{value:.4g}"
    return str(value)
