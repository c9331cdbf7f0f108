# A declared sweep's verdicts (records/sweep.py): every measured cell as a Fact whose quantity
# the spec derives — metric, line, device, clock, the swept value and the given parameters
# (or the attention shape at that value) — the ranking at each value with its ties, the runs
# of values over which the same lines lead, and how the slowest line compares with the
# fastest at the last value measured. render/sweep.py only states them. Also `rows_of`: any
# stored table's rows with each cell read by column name, for findings that read one.
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

from attention_docs.findings.compare import compare
from attention_docs.findings.facts import Fact, Quantity
from attention_docs.findings.forward import SPEED, Versus
from attention_docs.findings.rank import Ranking, rank
from attention_docs.measurements.forward import OK
from attention_docs.measurements.schema import Measurement, Table
from attention_docs.records.shape import Shape
from attention_docs.records.sweep import Sweep, stored_sweeps
from attention_docs.records.timing import Timing

CLEAR = "clear"  # the one fastest line, outside the noise of every other
TIE = "tie"  # one of several lines within noise of the fastest
NOT_MEASURED = "not measured"  # a view's line with no row at this value


def rows_of(table: Table) -> list[SimpleNamespace]:
    """A stored table's rows, each cell read by its column's name (`row.time`: a Timing
    stays a Timing; `getattr(row, "attention.scores")` for a name with a dot)."""
    return [SimpleNamespace(**r) for r in table.records()]


@dataclass(frozen=True)
class Point:
    """One value of the swept parameter: each line's fact (None where it was not measured:
    `status` says why), and the ranking of the lines measured there."""

    x: Any
    status: str
    facts: Mapping[str, Fact | None]
    ranking: Ranking | None
    timings: Mapping[str, Timing]  # the measured lines' timings, rounds and all
    rows: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # a view's, by line

    def lead(self, line: str) -> str:
        """CLEAR where `line` alone is fastest here, TIE where it leads within noise of
        another, "" otherwise (or where fewer than two lines were measured)."""
        r = self.ranking
        if r is None or len(r.order) < 2 or line not in r.leaders:
            return ""
        return CLEAR if r.clear else TIE


@dataclass(frozen=True)
class Lead:
    """Consecutive values over which the same lines (or steps) lead: one (`clear`) or
    several within noise of each other; where the lead is a share, the first leader's share
    at each value."""

    leaders: tuple[str, ...]
    xs: tuple[Any, ...]
    shares: tuple[Fact, ...] = ()

    @property
    def clear(self) -> bool:
        return len(self.leaders) == 1


def leads(leaders_at: Iterable[tuple[Any, tuple[str, ...], Fact | None]]) -> tuple[Lead, ...]:
    """(x, leaders, share or None) at each value, in order, as runs of the same leaders."""
    out: list[Lead] = []
    for x, leaders, share in leaders_at:
        last = out.pop() if out and out[-1].leaders == leaders else Lead(leaders, ())
        shares = last.shares if share is None else (*last.shares, share)
        out.append(Lead(leaders, (*last.xs, x), shares))
    return tuple(out)


@dataclass(frozen=True)
class SweepFindings:
    spec: Sweep
    device_id: str
    points: tuple[Point, ...]
    leads: tuple[Lead, ...]
    # The slowest line against the fastest at `last_x`, the largest value where two or more
    # lines were measured (None, None: no such value).
    last: Versus | None
    last_x: Any
    # A one-line sweep's values ranked against each other, by str(x) (which block size is
    # fastest, and which are within its noise); None for several lines.
    across: Ranking | None = None

    @property
    def failed(self) -> bool:
        """Whether some value was not measured (out of memory, too large): its status shows."""
        return any(p.status != OK for p in self.points)


def sweep_spec(m: Measurement, table: str | None = None) -> Sweep:
    """The sweep a measurement declares (its only one, or the one stored as `table`)."""
    specs = stored_sweeps(m.facts)
    if not specs:
        raise ValueError(f"the {m.experiment} entry declares no sweep (records/sweep.py)")
    if table is None:
        if len(specs) > 1:
            raise ValueError(
                f"the {m.experiment} entry declares several sweeps: name one of {sorted(specs)}"
            )
        return next(iter(specs.values()))
    return specs[table]


def quantity(
    spec: Sweep,
    params: Mapping[str, Any],
    device_id: str,
    line: str,
    x: Any,
    *,
    row: Mapping[str, Any] | None = None,
) -> Quantity:
    """The quantity of `line` at `x` (a view's: of its `row`): derived from the spec, never
    assembled by a chapter."""
    at = {**params, **(row or {}), spec.x: x}
    shape = None
    if spec.shape_from:
        # a keyword takes the row's column (or the parameter) it names, else the constant
        shape = Shape.of(
            params,
            **{k: at[v] if isinstance(v, str) and v in at else v for k, v in spec.shape_from},
        )
    elif spec.shape:
        shape = Shape.of(at)  # x may be a dimension (seq_len) or not (a block size)
    if spec.detail:
        detail = spec.detail.format(**at)
    else:
        told = () if shape is not None else (spec.x, *spec.given)
        detail = ", ".join(f"{name}={at[name]}" for name in told)
    return Quantity(spec.metric, spec.subject_of(line, x, at), device_id, spec.clock, shape, detail)


# One value of x as stored: its status, and each line's Timing (None: not measured) and the
# row that holds it.
_Cells = tuple[Any, str, dict[str, tuple[Timing | None, Mapping[str, Any] | None]]]


def _chosen(spec: Sweep, row: Mapping[str, Any]) -> bool:
    return all(row[k] == v for k, v in spec.where)


def _cells(spec: Sweep, m: Measurement) -> list[_Cells]:
    rows = m.tables[spec.table].records()
    if not spec.long:
        return [
            (r[spec.x], r["status"], {line: (r[line] if r["status"] == OK else None, None)
                                      for line in spec.lines})
            for r in rows
        ]  # fmt: skip
    chosen = [r for r in rows if _chosen(spec, r) and r[spec.line] in spec.lines]
    out = []
    for x in sorted({r[spec.x] for r in chosen}):
        here = {r[spec.line]: r for r in chosen if r[spec.x] == x}
        statuses = [here[line]["status"] if line in here else NOT_MEASURED for line in spec.lines]
        cells = {
            line: (here[line][spec.value] if line in here and here[line]["status"] == OK else None,
                   here.get(line))
            for line in spec.lines
        }  # fmt: skip
        out.append((x, next((s for s in statuses if s != OK), OK), cells))
    return out


def sweep_findings(
    m: Measurement, table: str | None = None, *, spec: Sweep | None = None
) -> SweepFindings:
    """The sweep's findings: the one `m` stores (as `table`), or the view `spec` over it."""
    spec = spec or sweep_spec(m, table)
    if spec.long and not spec.lines:
        held = (r[spec.line] for r in m.tables[spec.table].records() if _chosen(spec, r))
        spec = replace(spec, lines=tuple(dict.fromkeys(held)))
    dev = m.device_id
    points = []
    for x, status, cells in _cells(spec, m):
        timings = {line: t for line, (t, _) in cells.items() if isinstance(t, Timing)}
        facts = {
            line: Fact.of_timing(quantity(spec, m.params, dev, line, x, row=row), timings[line])
            if line in timings
            else None
            for line, (_, row) in cells.items()
        }
        rows = {line: row for line, (_, row) in cells.items() if row is not None}
        points.append(Point(x, status, facts, rank(timings) if timings else None, timings, rows))
    across = None
    if len(spec.lines) == 1:
        (line,) = spec.lines
        timed = {str(p.x): p.timings[line] for p in points if line in p.timings}
        across = rank(timed) if timed else None
    ranked = [p for p in points if p.ranking is not None and len(p.ranking.order) >= 2]
    runs = leads((p.x, tuple(sorted(p.ranking.leaders)), None) for p in ranked)
    return SweepFindings(spec, dev, tuple(points), runs, *_last(spec, m, ranked), across)


def _last(spec: Sweep, m: Measurement, ranked: list[Point]) -> tuple[Versus | None, Any]:
    """The slowest line against the fastest at the last ranked value, and that value."""
    if not ranked:
        return None, None
    p = ranked[-1]
    r = p.ranking
    fast, slow = r.fastest, r.order[-1]
    c = compare(p.timings[fast], p.timings[slow])
    fast_q, slow_q = (
        quantity(spec, m.params, m.device_id, line, p.x, row=p.rows.get(line))
        for line in (fast, slow)
    )
    # A view's lines can share a subject (decode's variants are all "sdpa"): name the lines.
    subject = (
        f"{fast_q.subject} vs {slow_q.subject}"
        if fast_q.subject != slow_q.subject
        else f"{fast} vs {slow}"
    )
    base = replace(fast_q, subject=subject)
    detail = f"{spec.metric}, {base.detail}" if base.detail else spec.metric
    q = Quantity(SPEED, base.subject, base.device_id, base.clock, base.shape, detail)
    return Versus.of(q, fast, slow, c), p.x
