# Measurement -> Markdown tables with their captions: the pipe-table writer every renderer
# uses, a table of typed rows drawn by a column spec, and a generic table of stored records.
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from attention_docs.findings.facts import Fact
from attention_docs.measurements.schema import Measurement, Sourced, Table
from attention_docs.records.timing import Timing
from attention_docs.render import words
from attention_docs.render.caption import caption_html


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """A pipe table; `align` is one letter per column (l/r), default left then right."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = ["---:" if a == "r" else ":---" for a in align]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(_cell_text(str(c)) for c in cells) + " |"

    return "\n".join([line(header), line(rule), *(line(r) for r in rows)])


def captioned_table(
    header: str | Sequence[str],
    rows: Iterable[Sequence],
    align: str,
    sourced: Sourced,
    what: str = "",
) -> str:
    """A pipe table with, under it, the caption of the measurement it shows: the one way a
    page writes a table of a measurement. `header` as a list, or as the table's header line
    ("Step | Calls | …"); a cell is a Fact (stated with its id), None (—) or text; `align`
    one letter per column (l/r), "" for left then right."""
    if isinstance(header, str):
        header = [h.strip() for h in header.split(" | ")]
    cells = [[_cell_of(c) for c in r] for r in rows]
    return markdown_table(header, cells, align) + "\n\n" + caption_html(sourced, what)


@dataclass(frozen=True)
class Column:
    """One column of a table drawn from typed rows: its header, how a row says its cell (a
    Fact, None, a Timing or text, as `captioned_table` takes them) and its alignment."""

    header: str
    cell: Callable[[Any], Any]
    align: str = "r"


def column_table(
    columns: Sequence[Column], rows: Iterable, sourced: Sourced, what: str = ""
) -> str:
    """A captioned table with a row per item of `rows`, its columns as `columns` say."""
    header, align = [c.header for c in columns], "".join(c.align for c in columns)
    return captioned_table(
        header, [[c.cell(r) for c in columns] for r in rows], align, sourced, what
    )


def _cell_text(text: str) -> str:
    """A cell's text with its pipes escaped: `\\|` in text (the table syntax's escape), but
    `&#124;` inside an HTML tag, where a backslash would stay in the attribute (a fact id
    such as `forward|cpu-…|…` must reach the page unchanged)."""
    parts = re.split(r"(<[^<>]*>)", text)
    return "".join(
        part.replace("|", "&#124;") if part.startswith("<") else part.replace("|", "\\|")
        for part in parts
    )


def measurement_of(source: Sourced | Measurement | None) -> Measurement | None:
    """The Measurement of a Sourced entry (what `measure` returns), or the argument itself."""
    return getattr(source, "measurement", source)


def _cell_of(cell) -> str:
    """A Fact stated with its id; a Timing as its time and interval; another float to three
    significant figures in the column's unit, which the header names, with no prefix (one
    column never reads "7,590" in one row and "16 k" in the next); — for None; else text."""
    if isinstance(cell, Fact):
        return words.fact(cell)
    if isinstance(cell, Timing):
        return words.timing(cell)
    if isinstance(cell, float):
        return words.number(cell)
    return "—" if cell is None else str(cell)


def records_table(sourced: Sourced, name: str, columns: Sequence[str] | None = None) -> str:
    """A generic result table stored in `measurement.tables[name]`."""
    table: Table = sourced.measurement.tables[name]
    columns = list(columns or table.columns)
    header = [words.quantity_label(c, table.units.get(c)) for c in columns]
    return captioned_table(header, [[r[c] for c in columns] for r in table.records()], "", sourced)
