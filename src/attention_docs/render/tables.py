# Measurement -> Markdown tables (with their captions). Pure: no torch, no I/O.
from __future__ import annotations

import re
from collections.abc import Sequence

from attention_docs.measurements.schema import Measurement, Sourced, Table
from attention_docs.render import _format as fmt
from attention_docs.render.caption import caption_html


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """A pipe table; `align` is one letter per column (l/r), default left then right."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = ["---:" if a == "r" else ":---" for a in align]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(_escape_pipes(str(c)) for c in cells) + " |"

    return "\n".join([line(header), line(rule), *(line(r) for r in rows)])


def _escape_pipes(cell: str) -> str:
    """Pipes in a cell's text become `\\|`; pipes inside an HTML tag (a `data-fact` id) become
    `&#124;`, which the table parser leaves alone and the browser reads back as `|` — a
    backslash there would stay in the attribute and change the fact's id."""
    return "".join(
        part.replace("|", "&#124;") if part.startswith("<") else part.replace("|", "\\|")
        for part in re.split(r"(<[^<>]*>)", cell)
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
    rows = [
        [
            f"`{s.label}`",
            str(s.calls),
            fmt.time_us(s.time_us),
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
    return markdown_table(header, rows, "lrrrrrrr") + "\n\n" + caption_html(sourced, "Per step.")


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
    header = [f"{c} ({table.units[c]})" if c in table.units else c for c in columns]
    rows = [[_cell(r[c]) for c in columns] for r in table.records()]
    return markdown_table(header, rows) + "\n\n" + caption_html(sourced)


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if value is None:
        return "—"
    return str(value)
