# The Measurement record: everything an experiment observed, as plain JSON-ready data. It is
# the only thing that crosses from the worker process to the pages, so it must round-trip
# exactly. Bump SCHEMA_VERSION whenever a field changes meaning; older files are then
# reported and re-measured instead of being misread, except where a version reads
# losslessly: version 2 had no Timing cells in tables, version 3's Timing stored a median and IQR that version 4 derives from its rounds
# (version 4's provenance may also name the allocator's behaviour). A key measured the old
# way is stale anyway, but `show`, `prune` and the tests' second device can still read it.
# A newer version's file is NewerSchemaError: named, and kept for the checkout that can
# read it.
from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from attention_docs.records.device import DeviceInfo, device_id
from attention_docs.records.load import Load
from attention_docs.records.timing import Timing
from attention_docs.records.trace import Trace

SCHEMA_VERSION = 4


class SchemaError(ValueError):
    """A stored measurement could not be read as this version's Measurement."""


class NewerSchemaError(SchemaError):
    """A stored measurement written by a newer version of attention_docs: this checkout
    cannot read it, and the checkout that wrote it can, so it is never deleted or
    overwritten (measurements/store.py) — only named, with what to do."""

    def __init__(self, version: int, where: str = "", outcome: str = "") -> None:
        self.version = version
        super().__init__(
            f"{where}written by a newer version of attention_docs (schema {version}, this "
            f"checkout reads {SCHEMA_VERSION}): update your checkout{outcome}"
        )


def newer_version(data: Any) -> int | None:
    """The schema version of a stored measurement's JSON `data` when it is newer than this
    checkout's, else None."""
    version = data.get("schema_version") if isinstance(data, Mapping) else None
    newer = isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION
    return version if newer else None


@dataclass(frozen=True)
class Provenance:
    """Where and when a measurement was made. Not part of its key."""

    device: DeviceInfo
    torch_version: str
    cuda_version: str | None
    python_version: str
    package_version: str
    date: str  # ISO 8601, UTC, seconds
    duration_s: float
    device_id: str = ""  # e.g. "cuda-h200", "cpu-amd-epyc": names the store file
    load: Load | None = None  # how busy the machine was while it measured
    # What malloc did with freed memory in the worker (profiling/environment.py).
    allocator: str | None = None

    def __post_init__(self) -> None:
        if not self.device_id:
            object.__setattr__(self, "device_id", device_id(self.device))

    @property
    def busy(self) -> bool:
        return self.load is not None and self.load.busy

    def to_json(self) -> dict:
        return asdict(self)  # the device and the load too: both are flat records

    @classmethod
    def from_json(cls, data: Mapping) -> Provenance:
        load = data.get("load")
        return cls(
            **{
                **data,
                "device": DeviceInfo.from_json(data["device"]),
                "load": Load.from_json(load) if load else None,
            }
        )


class _Flat:
    """A record of scalars: its JSON is its fields."""

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping):
        return cls(**data)


@dataclass(frozen=True)
class StepStat(_Flat):
    """One labelled step (`attention.softmax`, ...), averaged per forward."""

    label: str
    calls: int  # calls per forward
    time_us: float  # device time per forward (CPU time on a CPU run)
    cpu_us: float  # host time per forward
    flops: float  # from the cost model
    bytes: float  # minimum bytes moved, from the cost model


@dataclass(frozen=True)
class OpStat(_Flat):
    """One op or kernel name, per forward."""

    name: str
    where: str  # "CPU" or "GPU"
    calls: float
    self_us: float
    total_us: float
    flops: float | None = None  # torch.profiler's own count, where it reports one


def _cell_to_json(cell: Any) -> Any:
    return {"timing": cell.to_json()} if isinstance(cell, Timing) else cell


def _cell_from_json(cell: Any) -> Any:
    if isinstance(cell, Mapping) and set(cell) == {"timing"}:
        return Timing.from_json(cell["timing"])
    return cell


@dataclass(frozen=True)
class Table:
    """A generic result table (sweeps, backend comparisons): named columns and rows of
    scalars, or of `Timing`s (a time with its rounds: stored whole, so that the spread a
    page shows is the real one, never rebuilt from a low, a median and a high)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    units: Mapping[str, str] = field(default_factory=dict)

    def column(self, name: str) -> list[Any]:
        index = self.columns.index(name)
        return [row[index] for row in self.rows]

    def numbers(self, name: str) -> list[float | None]:
        """A column's numbers, a Timing cell as its time; None for anything else."""
        return [
            v.time_us
            if isinstance(v, Timing)
            else (v if isinstance(v, int | float) and not isinstance(v, bool) else None)
            for v in self.column(name)
        ]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def to_json(self) -> dict:
        return {
            "columns": list(self.columns),
            "rows": [[_cell_to_json(c) for c in r] for r in self.rows],
            "units": dict(self.units),
        }

    @classmethod
    def from_json(cls, data: Mapping) -> Table:
        return cls(
            columns=tuple(data["columns"]),
            rows=tuple(tuple(_cell_from_json(c) for c in r) for r in data["rows"]),
            units=dict(data.get("units", {})),
        )


@dataclass(frozen=True)
class Measurement:
    """What one experiment observed, with its parameters, key and provenance."""

    experiment: str
    key: str
    fingerprint: str
    requested: Mapping[str, Any]  # parameters as asked for (part of the key)
    params: Mapping[str, Any]  # every parameter as run (device defaults resolved)
    provenance: Provenance
    steps: tuple[StepStat, ...] = ()
    ops: tuple[OpStat, ...] = ()
    timing: Timing | None = None
    timeline: Trace | None = None  # one representative profiled step
    tables: Mapping[str, Table] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    trace_file: str | None = None  # store-relative path of the gzipped Chrome trace
    schema_version: int = SCHEMA_VERSION

    @property
    def device_kind(self) -> str:
        return self.provenance.device.kind

    @property
    def device_id(self) -> str:
        return self.provenance.device_id

    def step(self, label: str) -> StepStat:
        for s in self.steps:
            if s.label == label:
                return s
        raise KeyError(f"{self.experiment} has no step {label!r}")

    def to_json(self) -> dict:
        return {
            "schema_version": self.schema_version,
            "experiment": self.experiment,
            "key": self.key,
            "fingerprint": self.fingerprint,
            "requested": dict(self.requested),
            "params": dict(self.params),
            "provenance": self.provenance.to_json(),
            "steps": [s.to_json() for s in self.steps],
            "ops": [o.to_json() for o in self.ops],
            "timing": self.timing.to_json() if self.timing else None,
            "timeline": self.timeline.to_json() if self.timeline else None,
            "tables": {name: t.to_json() for name, t in sorted(self.tables.items())},
            "facts": dict(sorted(self.facts.items())),
            "notes": list(self.notes),
            "trace_file": self.trace_file,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1, sort_keys=False, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, data: Mapping) -> Measurement:
        version = data.get("schema_version") if isinstance(data, Mapping) else None
        if version in (2, 3):  # 2: tables held scalars only; 3: see the top of this file
            version = SCHEMA_VERSION
        if newer_version(data) is not None:
            raise NewerSchemaError(version)
        if version != SCHEMA_VERSION:
            raise SchemaError(f"schema version {version!r}, this build reads {SCHEMA_VERSION}")
        try:
            measurement = cls(
                schema_version=version,
                experiment=data["experiment"],
                key=data["key"],
                fingerprint=data["fingerprint"],
                requested=dict(data["requested"]),
                params=dict(data["params"]),
                provenance=Provenance.from_json(data["provenance"]),
                steps=tuple(StepStat.from_json(s) for s in data["steps"]),
                ops=tuple(OpStat.from_json(o) for o in data["ops"]),
                timing=Timing.from_json(data["timing"]) if data["timing"] else None,
                timeline=Trace.from_json(data["timeline"]) if data["timeline"] else None,
                tables={k: Table.from_json(t) for k, t in data["tables"].items()},
                facts=dict(data["facts"]),
                notes=tuple(data["notes"]),
                trace_file=data["trace_file"],
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SchemaError(f"malformed measurement: {type(exc).__name__}: {exc}") from exc
        check_types(measurement)
        return measurement

    @classmethod
    def loads(cls, text: str) -> Measurement:
        try:
            data = json.loads(text, parse_float=_finite, parse_constant=_not_a_number)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"not valid JSON ({exc})") from exc
        return cls.from_json(data)


def _finite(text: str) -> float:
    """A JSON number as a float, refused when it does not fit one (`1e999`): `dumps` writes no
    such number, so a file that holds one was damaged or written by hand."""
    value = float(text)
    if not math.isfinite(value):
        raise SchemaError(f"malformed measurement: it holds {text}, a number out of range")
    return value


def _not_a_number(name: str) -> float:
    raise SchemaError(f"malformed measurement: it holds {name}, which is not a number")


# Fields that hold a time or a size: never negative (a time of -5 µs is a damaged file).
_AMOUNT = re.compile(r"(_us|_s|_bytes)$|^(bytes|flops|calls|runs)$")


def check_types(record: Any, where: str = "") -> None:
    """Raise SchemaError unless every field of the dataclass `record`, nested records
    included, holds a value of its declared type (a float field may hold an int).

    A stored file with a wrongly typed field (a date that is a number, a time that is a
    string) is then reported as unreadable, by name, like any other damaged file — instead
    of crashing a renderer, `show` or `prune` later with a traceback.
    """
    for name, hint in _hints(type(record)).items():
        _check(getattr(record, name), hint, f"{where}{name}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {n: h for n, h in typing.get_type_hints(cls).items() if n in names}


def _check(value: Any, hint: Any, where: str) -> None:  # noqa: PLR0912 - one case per kind of type
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return
    if origin in (typing.Union, types.UnionType):
        for option in args:
            if dataclasses.is_dataclass(option) and isinstance(value, option):
                check_types(value, f"{where}.")  # a record of the right kind: say which field
                return
        for option in args:
            try:
                _check(value, option, where)
            except SchemaError:
                continue
            return
        raise SchemaError(f"malformed measurement: {where} is {value!r:.60}, not {_name(hint)}")
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):
            raise SchemaError(
                f"malformed measurement: {where} is {value!r:.60}, not a {hint.__name__}"
            )
        check_types(value, f"{where}.")
        return
    expected = origin or hint
    if expected is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif expected is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif expected is type(None):
        ok = value is None
    elif expected in (tuple, list):
        ok = isinstance(value, tuple | list)
    else:
        ok = isinstance(value, expected)
    if not ok:
        raise SchemaError(f"malformed measurement: {where} is {value!r:.60}, not {_name(hint)}")
    field_name = re.sub(r"\[\d+\]$", "", where).rsplit(".", 1)[-1]
    if expected in (int, float) and value < 0 and _AMOUNT.search(field_name):
        raise SchemaError(f"malformed measurement: {where} is {value!r}, a negative time or size")
    if expected in (tuple, list) and args:
        items = args[:1] * len(value) if args[-1] is Ellipsis or expected is list else args
        if len(items) != len(value):
            raise SchemaError(
                f"malformed measurement: {where} has {len(value)} items, not {len(items)}"
            )
        for i, (item, item_hint) in enumerate(zip(value, items, strict=True)):
            _check(item, item_hint, f"{where}[{i}]")
    elif expected in (dict, Mapping) and len(args) == 2:
        for key, item in value.items():
            _check(key, args[0], f"{where} key")
            _check(item, args[1], f"{where}[{key!r}]")


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


@dataclass(frozen=True)
class Sourced:
    """A measurement as a page shows it: where it came from and where its raw data lives.

    `base` prefixes the store-relative paths: the docs use the placeholder `@measurements/`,
    which the MkDocs plugin rewrites into a link relative to each page.
    """

    measurement: Measurement
    origin: str  # "measured during this build", "from the store", "measured now"
    json_path: str  # store-relative
    base: str = "@measurements/"

    @property
    def json_href(self) -> str:
        return self.base + self.json_path

    @property
    def trace_href(self) -> str | None:
        tf = self.measurement.trace_file
        return self.base + tf if tf else None
