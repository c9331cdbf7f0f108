# A declared sweep (records/sweep.py) as the page shows it: one table (a row per value of the
# swept parameter, a column per line, each cell a fact with its range over the rounds, the
# leaders marked), one figure (each line's time with its interval as a band) and one
# sentence (which lines lead where, and the slowest against the fastest at the last value).
# Every verdict comes from findings/sweep.py and every number from words; `names` gives a
# line a reader's label (default: its key), without changing its fact id.
from __future__ import annotations

from collections.abc import Mapping

from attention_docs.findings import sweep as fsw
from attention_docs.measurements.schema import Sourced
from attention_docs.records.sweep import Sweep
from attention_docs.render import words
from attention_docs.render.plots import Series, line_chart
from attention_docs.render.tables import Column, column_table

LEAD = {fsw.CLEAR: " (fastest)", fsw.TIE: " (tied for fastest: within noise)", "": ""}


def _label(line: str, names: Mapping[str, str] | None) -> str:
    return (names or {}).get(line, line)


def _shown(line: str, names: Mapping[str, str] | None) -> str:
    """A line as a header or legend names it: the chapter's label as given (it may be code:
    `create_block_mask`), or its key capitalised."""
    return (names or {}).get(line) or _heading(line)


def _heading(text: str) -> str:
    """A label as a header or legend entry starts: capitalised (`bool mask` -> `Bool mask`)."""
    return text[:1].upper() + text[1:]


def _x(found: fsw.SweepFindings, x) -> str:
    return words.value(x, found.spec.x_unit)


def sweep_table(
    sourced: Sourced,
    what: str = "",
    *,
    table: str | None = None,
    spec: Sweep | None = None,
    names: Mapping[str, str] | None = None,
) -> str:
    """The sweep's table: each line's value at each x, with its range over the rounds; the
    leaders at each x marked (fastest, or tied for fastest within noise)."""
    found = fsw.sweep_findings(sourced.measurement, table, spec=spec)
    spec = found.spec

    def cell(line: str):
        return lambda p: p.facts[line] and words.fact(p.facts[line]) + LEAD[p.lead(line)]

    columns = [Column(words.quantity_label(spec.x), lambda p: _x(found, p.x), "l")]
    columns += [Column(_shown(line, names), cell(line)) for line in spec.lines]
    columns += [Column("Status", lambda p: p.status, "l")] if found.failed else []
    what = what or (
        f"{_heading(spec.metric)} against {words.quantity_label(spec.x).lower()}"
        f", every line timed in the same interleaved rounds; the range is over the rounds."
    )
    return column_table(columns, found.points, sourced, what)


def sweep_claim(
    sourced: Sourced,
    *,
    table: str | None = None,
    spec: Sweep | None = None,
    names: Mapping[str, str] | None = None,
    versus: bool = True,
) -> str:
    """Which lines lead over which values, and the slowest against the fastest at the last
    (`versus=False`: not that, where the page states the ratio already)."""
    found = fsw.sweep_findings(sourced.measurement, table, spec=spec)
    if not found.leads:
        return ""
    x_name = words.quantity_label(found.spec.x).lower()
    clauses = []
    for lead in found.leads:
        who = words.series([_label(line, names) for line in lead.leaders])
        verdict = "is fastest" if lead.clear else "are within noise of each other, tied for fastest"
        clauses.append(f"{who} {verdict} at {x_name} {lead_span(found, lead)}")
    text = _heading("; ".join(clauses) + ".")
    last = found.last
    if last is not None and versus:
        fast, slow = _label(last.a, names), _label(last.b, names)
        at = f"At {x_name} {_x(found, found.last_x)}"
        if last.comparison.tie:
            text += f" {at}, {slow} and {fast} are {words.versus_fact(last.fact, last.comparison)}."
        else:
            text += (
                f" {at}, {slow} takes {words.versus_fact(last.fact, last.comparison)} as long as"
                f" {fast}."
            )
    return text


def lead_span(found: fsw.SweepFindings, lead: fsw.Lead) -> str:
    """The values a lead covers: `512 tokens`, `512–1,024 tokens`."""
    if len(lead.xs) == 1:
        return _x(found, lead.xs[0])
    return words.span(lead.xs[0], lead.xs[-1], lambda x: _x(found, x))


def lead_phrases(found: fsw.SweepFindings, names: Mapping[str, str] | None = None) -> list[str]:
    """Who leads where, briefly: `naive + torch.compile at 128 tokens`, `SDPA flash and
    FlexAttention (within noise) at 256–1,024 tokens`."""
    return [
        f"{words.series([_label(line, names) for line in lead.leaders])}"
        f"{'' if lead.clear else ' (within noise)'} at {lead_span(found, lead)}"
        for lead in found.leads
    ]


def sweep_figure(
    sourced: Sourced,
    what: str,
    *,
    table: str | None = None,
    spec: Sweep | None = None,
    names: Mapping[str, str] | None = None,
    ylabel: str = "",
) -> str:
    """Each line against x: its stated value (the rounds' lower quartile) as a line, the
    interval over the rounds as a band around it; a value not measured leaves a gap."""
    found = fsw.sweep_findings(sourced.measurement, table, spec=spec)
    spec = found.spec
    series, alt_parts = [], []
    for line in spec.lines:
        facts = [(p.x, p.facts[line]) for p in found.points if p.facts[line] is not None]
        points = tuple((x, f.value) for x, f in facts)
        series.append(Series(_shown(line, names), points, tuple((f.low, f.high) for _, f in facts)))  # fmt: skip
        stated = ", ".join(
            f"{_x(found, p.x)} → "
            + (
                "not measured"
                if p.facts[line] is None
                else f"{words.value(p.facts[line].value, spec.unit)} "
                f"({words.span(p.facts[line].low, p.facts[line].high, _say(spec.unit))})"
            )
            for p in found.points
        )
        alt_parts.append(f"{_label(line, names)}: {stated}")
    against = words.quantity_label(spec.x).lower()
    band = "each band is the range over the rounds"
    return line_chart(
        sourced,
        what,
        series,
        alt=f"{what} Against {against}, {band}: {'; '.join(alt_parts)}",
        xlabel=words.quantity_label(spec.x, spec.x_unit),
        ylabel=ylabel or _heading(spec.metric),  # the ticks say the unit
        unit=spec.unit,
        logx=spec.log_x,
        logy=spec.log_y,
        xticks=[p.x for p in found.points],
    )


def _say(unit: str):
    return lambda v: words.value(v, unit)
