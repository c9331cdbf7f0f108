# What a chapter's executed block calls. `measure()` answers from the store when it can and
# otherwise runs the experiment in a worker process (never inside MkDocs), then reads the
# result back from the store. The MkDocs plugin sets the settings and reads the build log.
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from attention_docs.experiments.registry import get
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.measurements.store import Store
from attention_docs.render._format import params_text

log = logging.getLogger("attention_docs")

MODES = ("auto", "refresh", "frozen")
PREFERENCES = ("gpu", "local")


class MeasurementError(RuntimeError):
    """A measurement a page needs could not be had; the message names the experiment."""


@dataclass(frozen=True)
class Settings:
    """How `measure()` finds measurements. The MkDocs plugin replaces the defaults."""

    store: Path = Path("docs/measurements")
    mode: str = "auto"
    prefer: str = "gpu"  # "gpu": a stored GPU entry wins over measuring on a local CPU
    device: str = "auto"
    timeout_s: float = 1800.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"store mode {self.mode!r} is not one of: {', '.join(MODES)}")
        if self.prefer not in PREFERENCES:
            raise ValueError(f"prefer {self.prefer!r} is not one of: {', '.join(PREFERENCES)}")


@dataclass(frozen=True)
class Fetch:
    """One request a build made, for the build summary and the requests manifest."""

    experiment: str
    requested: dict[str, Any]
    origin: str
    device: str
    seconds: float


@dataclass
class BuildLog:
    fetches: list[Fetch] = field(default_factory=list)
    refreshed: set[tuple[str, str]] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)  # stored files found unusable


_settings = Settings()
_log = BuildLog()


def configure(settings: Settings) -> None:
    """Set the settings and start a fresh build log (the plugin calls this per build)."""
    global _settings, _log  # noqa: PLW0603 - one build at a time per MkDocs process
    _settings = settings
    _log = BuildLog()


def settings() -> Settings:
    return _settings


def build_log() -> BuildLog:
    return _log


def local_device_kind(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def measure(experiment: str, **requested: Any) -> Sourced:
    """The measurement of `experiment` with `requested` parameters, stored or fresh."""
    store = Store(_settings.store)
    try:
        return _measure(store, experiment, requested)
    finally:
        _log.problems.extend(str(p) for p in store.problems)


def _measure(store: Store, experiment: str, requested: dict[str, Any]) -> Sourced:
    s = _settings
    exp = get(experiment)
    requested = exp.check(requested)
    key = exp.key(requested)
    local = local_device_kind(s.device)
    order = list(dict.fromkeys(["cuda", local] if s.prefer == "gpu" else [local]))
    what = f"{experiment}({params_text(requested)})"
    fresh_this_build = (experiment, key) in _log.refreshed
    if s.mode != "refresh" or fresh_this_build:
        for kind in order:
            found = store.get(experiment, key, kind)
            if found is not None:
                origin = "measured during this build" if fresh_this_build else "from the store"
                return _record(found, requested, origin, store, 0.0)
        if s.mode == "frozen":
            raise MeasurementError(
                f"{what} is not in the store {s.store} (key {key}; looked for "
                f"{', '.join(order)} entries) and the store is frozen. Build without --frozen "
                f"to measure it, then commit the new files under {s.store}."
            )
    started = time.perf_counter()
    run_worker(experiment, requested, local, s.store, s.timeout_s)
    elapsed = time.perf_counter() - started
    found = store.get(experiment, key, local)
    if found is None:
        raise MeasurementError(
            f"{what}: the worker finished but wrote no readable entry to {s.store}"
        )
    _log.refreshed.add((experiment, key))
    return _record(found, requested, "measured during this build", store, elapsed)


def _record(m: Measurement, requested: dict, origin: str, store: Store, seconds: float) -> Sourced:
    _log.fetches.append(
        Fetch(m.experiment, dict(requested), origin, m.provenance.device.label, seconds)
    )
    return Sourced(m, origin, store.relative(m.experiment, m.key, m.device_kind))


def run_worker(
    experiment: str, requested: dict, device: str, store: Path, timeout_s: float
) -> None:
    """Run one experiment in a fresh Python process that writes its result into `store`."""
    what = f"{experiment}({params_text(requested)})"
    cmd = [
        sys.executable,
        "-m",
        "attention_docs",
        "_worker",
        experiment,
        "--params",
        json.dumps(requested),
        "--device",
        device,
        "--store",
        str(store),
    ]
    log.info("measuring %s on %s in a worker process", what, device)
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    except subprocess.TimeoutExpired:
        raise MeasurementError(
            f"{what} did not finish within {timeout_s:.0f} s and was stopped"
        ) from None
    if proc.returncode == 0:
        return
    tail = "\n".join(line for line in proc.stderr.strip().splitlines()[-15:] if "USDT" not in line)
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        hint = " (SIGKILL usually means the system ran out of memory)" if name == "SIGKILL" else ""
        reason = f"was killed by {name}{hint}"
    else:
        reason = f"failed (exit code {proc.returncode})"
    raise MeasurementError(f"experiment {what} {reason} in its worker process:\n{tail}")


def with_base(sourced: Sourced, base: str) -> Sourced:
    """The same measurement with links under another base (e.g. a path for the CLI)."""
    return replace(sourced, base=base)
