# A declarative sweep, after Triton's `perf_report(Benchmark(...))`: one frozen spec says what
# is swept, which lines are measured at each value (their names key the fact ids) and what
# quantity they give. Stored beside its table, it lets findings/sweep.py derive every fact,
# ranking and tie and render/sweep.py draw the one table and figure.
# A spec is also a *view* over one long table an experiment measured by its own loop (`line`,
# `value`, `where`, `shape_from`, `detail` say how to read it), with the same results.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

# Where a measurement keeps the specs of its sweeps: facts["sweeps"][table name].
SWEEPS = "sweeps"


@dataclass(frozen=True)
class Sweep:
    """One sweep: `lines` measured at each value of parameter `x`, stored as table `table`.

    `given`: the other parameters whose values tell the quantity apart (a dtype); with
    `shape`, the experiment's attention shape (batch_size, num_heads, seq_len, head_dim,
    dtype, causal) names it instead, with `x` taking its value at each point.
    """

    table: str  # the table's name in the measurement: "prepare"
    x: str  # the swept parameter: "seq_len"
    lines: tuple[str, ...]  # what is measured at each x, by key: "bool mask", "float bias"
    # (a view's may be empty: the values its line column holds)
    metric: str  # the quantity, as a fact id names it: "causal mask preparation time"
    x_unit: str = ""  # the parameter's unit, as words.value says it: "tokens"
    unit: str = "µs"  # the lines' unit (a Timing's: µs)
    clock: str = "unprofiled"  # findings/facts.py's CLOCKS
    given: tuple[str, ...] = ()
    shape: bool = False
    # The quantity's subject, from the line's key and the value: "{line}" (the default), or
    # a template that keeps an existing fact id ("tiled (Python loop), {x}×{x} tiles").
    subject: str = "{line}"
    log_x: bool = True
    log_y: bool = True
    # The view form (empty: the wide form above, a column per line).
    line: str = ""  # the long table's column that names the line: "variant"
    value: str = "time"  # the column that holds the line's Timing
    where: tuple[tuple[str, Any], ...] = ()  # the rows the sweep is: (("impl", "sdpa"),)
    # The quantity's shape: Shape.of(params, keyword=row[column] or a constant), as
    # (("batch_size", "batch_size"), ("seq_len", 1), ("kv_len", "cache_len")).
    shape_from: tuple[tuple[str, Any], ...] = ()
    # The quantity's detail, a template over the row and the parameters; "" derives it.
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "lines", tuple(self.lines))
        for name in ("given", "where", "shape_from"):
            object.__setattr__(self, name, tuple(tuple(v) if isinstance(v, list) else v
                                                 for v in getattr(self, name)))  # fmt: skip
        # A view may leave its lines to the table: every value of its line column, in the
        # order first stored (the kernels a GPU offered).
        if (not self.lines and not self.line) or len(set(self.lines)) != len(self.lines):
            raise ValueError(f"sweep {self.table}: give one or more lines, each once")
        if self.long:
            if self.line in (self.x, self.value):
                raise ValueError(f"sweep {self.table}: {self.line!r} names both the line and x")
        elif self.x in self.lines or "status" in (self.x, *self.lines):
            raise ValueError(f"sweep {self.table}: {self.x!r} names both x and a line (or status)")

    @property
    def long(self) -> bool:
        """Whether the sweep is a view over a long table (a row per cell) or a wide one."""
        return bool(self.line)

    @property
    def columns(self) -> tuple[str, ...]:
        """The table's measured columns: x, then one per line (`status` follows them); a
        view's: x, the line's column and the value's."""
        if self.long:
            return (self.x, self.line, self.value)
        return (self.x, *self.lines)

    def subject_of(self, line: str, x: Any, fields: Mapping[str, Any] | None = None) -> str:
        """The subject of `line`'s quantity at `x` (`fields`: the row and the parameters,
        for a view's template)."""
        return self.subject.format(**{**(fields or {}), "line": line, "x": x})

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)  # every field, in order
        for name in ("lines", "given"):
            data[name] = list(data[name])
        for name in ("where", "shape_from"):
            data[name] = [list(pair) for pair in data[name]]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sweep:
        return cls(**data)  # __post_init__ makes the lists tuples


def stored_sweeps(facts: Mapping[str, Any]) -> dict[str, Sweep]:
    """The sweeps a measurement's facts declare, by table name."""
    return {name: Sweep.from_json(spec) for name, spec in facts.get(SWEEPS, {}).items()}
