# The experiment registry. An experiment is a function that answers one question a chapter
# asks and returns what it observed; its declaration says which parameters it takes (with
# larger defaults on a GPU), and which source files it measures (its fingerprint).
from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attention_docs.measurements.keys import PACKAGE_ROOT, fingerprint, source_tokens, store_key
from attention_docs.measurements.schema import OpStat, StepStat, Table
from attention_docs.profiling.timing import Timing
from attention_docs.profiling.trace import Trace


class ExperimentError(ValueError):
    """A bad experiment name or parameter; the message says what is valid."""


@dataclass(frozen=True)
class Param:
    """One parameter: its default (and a larger one on a GPU), valid choices, and help."""

    default: Any
    gpu_default: Any = None
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    help: str = ""

    @property
    def type(self) -> type:
        return type(self.default)

    def default_for(self, device_kind: str) -> Any:
        return (
            self.gpu_default
            if device_kind == "cuda" and self.gpu_default is not None
            else self.default
        )

    def coerce(self, name: str, value: Any) -> Any:
        """Check `value` (or parse it from a command-line string)."""
        kind = self.type
        if isinstance(value, str) and kind is not str:
            value = _parse(name, value, kind)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ExperimentError(f"parameter {name} must be {kind.__name__}, got {value!r}")
        if self.choices and value not in self.choices:
            valid = ", ".join(str(c) for c in self.choices)
            raise ExperimentError(
                f"parameter {name}={value!r} is not valid; choose one of: {valid}"
            )
        if self.minimum is not None and value < self.minimum:
            raise ExperimentError(f"parameter {name}={value!r} must be at least {self.minimum}")
        return value


def _parse(name: str, text: str, kind: type) -> Any:
    if kind is bool:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ExperimentError(f"parameter {name} must be true or false, got {text!r}")
    try:
        return kind(text)
    except ValueError:
        raise ExperimentError(f"parameter {name} must be {kind.__name__}, got {text!r}") from None


@dataclass(frozen=True)
class Observed:
    """What an experiment function returns; the runner adds key and provenance."""

    steps: tuple[StepStat, ...] = ()
    ops: tuple[OpStat, ...] = ()
    timing: Timing | None = None
    timeline: Trace | None = None
    tables: Mapping[str, Table] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    chrome: Mapping | None = None  # the Chrome trace behind `timeline`, stored gzipped


@dataclass(frozen=True)
class Experiment:
    name: str
    summary: str
    func: Callable[..., Observed]
    params: Mapping[str, Param]
    measures: tuple[str, ...]  # package-relative source files whose code is measured

    @property
    def source_files(self) -> tuple[str, ...]:
        """The experiment's own module and the files it measures, relative to the package."""
        own = Path(inspect.getfile(self.func)).resolve()
        if own.is_relative_to(PACKAGE_ROOT):
            return (own.relative_to(PACKAGE_ROOT).as_posix(), *self.measures)
        return self.measures  # an out-of-tree experiment: its own file is hashed separately

    def fingerprint(self, root: Path = PACKAGE_ROOT) -> str:
        own = Path(inspect.getfile(self.func)).resolve()
        extra = (
            ""
            if own.is_relative_to(PACKAGE_ROOT)
            else source_tokens(own.read_text(encoding="utf-8"))
        )
        base = fingerprint(self.source_files, root)
        return base if not extra else hashlib.sha256((base + extra).encode()).hexdigest()[:16]

    def check(self, requested: Mapping[str, Any]) -> dict[str, Any]:
        """Validate requested parameters; returns them coerced to their types."""
        checked = {}
        for name, value in requested.items():
            if name not in self.params:
                valid = ", ".join(self.params) or "(none)"
                raise ExperimentError(
                    f"experiment {self.name} has no parameter {name!r}; its parameters are: {valid}"
                )
            checked[name] = self.params[name].coerce(name, value)
        return checked

    def resolve(self, requested: Mapping[str, Any], device_kind: str) -> dict[str, Any]:
        """Every parameter's value for a run on `device_kind`."""
        checked = self.check(requested)
        return {n: checked.get(n, p.default_for(device_kind)) for n, p in self.params.items()}

    def key(self, requested: Mapping[str, Any]) -> str:
        return store_key(self.name, self.check(requested), self.fingerprint())


REGISTRY: dict[str, Experiment] = {}


def experiment(
    name: str, *, summary: str, measures: tuple[str, ...] = (), **params: Param
) -> Callable[[Callable[..., Observed]], Callable[..., Observed]]:
    """Register `func(ctx, **params) -> Observed` as experiment `name`."""

    def register(func: Callable[..., Observed]) -> Callable[..., Observed]:
        if name in REGISTRY:
            raise RuntimeError(f"experiment {name} is registered twice")
        REGISTRY[name] = Experiment(name, summary, func, dict(params), tuple(measures))
        return func

    return register


def get(name: str) -> Experiment:
    from attention_docs.experiments import load_all

    load_all()
    try:
        return REGISTRY[name]
    except KeyError:
        valid = ", ".join(sorted(REGISTRY))
        raise ExperimentError(
            f"no experiment named {name!r}; the experiments are: {valid}"
        ) from None
