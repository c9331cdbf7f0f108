# What a chapter's executed block calls. `measure()` answers from the store when it can and
# otherwise runs the experiment in a worker process (never inside MkDocs), then reads the
# result back from the store. The MkDocs plugin sets the settings and reads the build log.
from __future__ import annotations

import functools
import json
import logging
import os
import re
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
# Device selectors for `prefer`, tried in order: "local-gpu" (this machine's GPU, when it
# has one: its stored entry, else measured now), "any-gpu" (any stored GPU entry), an exact
# device id such as "cuda-h200" (that device's stored entry), "local" (this machine's
# device: its stored entry, else measured now). The list should end with "local".
SELECTORS = ("local-gpu", "any-gpu", "local")
DEFAULT_PREFER = ("local-gpu", "cuda-h200", "any-gpu", "local")


class MeasurementError(RuntimeError):
    """A measurement a page needs could not be had; the message names the experiment."""


@dataclass(frozen=True)
class Settings:
    """How `measure()` finds measurements. The MkDocs plugin replaces the defaults."""

    store: Path = Path("docs/measurements")
    mode: str = "auto"
    prefer: tuple[str, ...] = DEFAULT_PREFER
    device: str = "auto"
    timeout_s: float = 1800.0
    allow_busy: bool = True  # store entries measured while other work competed (flagged)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"store mode {self.mode!r} is not one of: {', '.join(MODES)}")
        object.__setattr__(self, "prefer", tuple(self.prefer))
        for selector in self.prefer:
            if selector not in SELECTORS and not re.fullmatch(r"(cpu|cuda)-[a-z0-9-]+", selector):
                raise ValueError(
                    f"prefer: {selector!r} is neither one of {', '.join(SELECTORS)} nor a "
                    "device id such as cuda-h200 or cpu-amd-epyc"
                )
        if not self.prefer or self.prefer[-1] != "local":
            object.__setattr__(self, "prefer", (*self.prefer, "local"))


@dataclass(frozen=True)
class Fetch:
    """One request a build made, for the build summary and the requests manifest."""

    experiment: str
    requested: dict[str, Any]
    origin: str
    device: str  # the device's label, as captions say it
    seconds: float
    device_id: str = ""
    busy: str | None = None  # how busy the machine was, when other work competed


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


@functools.cache
def local_device_id(device: str) -> str:
    """This machine's device id for `device` (auto, cpu or cuda), e.g. `cpu-amd-epyc`."""
    from attention_docs.profiling.device import describe, device_id, resolve_device

    return device_id(describe(resolve_device(local_device_kind(device))))


def choose_device(available: list[str], prefer: tuple[str, ...], local: str) -> str | None:
    """The stored device id to use among `available`, or None: measure on `local`.

    `prefer` is tried in order (see SELECTORS); "local" and a "local-gpu" that applies stop
    the search, since a missing local entry is measured rather than taken from elsewhere.
    """
    for selector in prefer:
        if selector == "local-gpu":
            if local.startswith("cuda-"):
                return local if local in available else None
        elif selector == "any-gpu":
            gpus = [d for d in available if d.startswith("cuda-")]
            if gpus:
                return gpus[0]
        elif selector == "local":
            return local if local in available else None
        elif selector in available:
            return selector
    return None


def measure(experiment: str, **requested: Any) -> Sourced:
    """The measurement of `experiment` with `requested` parameters, stored or fresh."""
    store = Store(_settings.store)
    try:
        return _measure(store, experiment, requested)
    finally:
        _log.problems.extend(str(p) for p in store.problems)


def measure_each_device(experiment: str, **requested: Any) -> list[Sourced]:
    """`measure`'s entry first, then every other device's stored entry for the same
    parameters: what a page comparing devices may compare (it never measures those)."""
    first = measure(experiment, **requested)
    store = Store(_settings.store)
    exp = get(experiment)
    key = exp.key(exp.check(requested))
    others = []
    for device in store.devices(experiment, key):
        if device == first.measurement.device_id:
            continue
        found = store.get(experiment, key, device)
        if found is not None:
            others.append(_record(found, requested, "from the store", store, 0.0))
    _log.problems.extend(str(p) for p in store.problems)
    return [first, *others]


def _measure(store: Store, experiment: str, requested: dict[str, Any]) -> Sourced:
    s = _settings
    exp = get(experiment)
    requested = exp.check(requested)
    key = exp.key(requested)
    local = local_device_id(s.device)
    what = f"{experiment}({params_text(requested)})"
    fresh_this_build = (experiment, key) in _log.refreshed
    if s.mode != "refresh" or fresh_this_build:
        chosen = choose_device(store.devices(experiment, key), s.prefer, local)
        found = store.get(experiment, key, chosen) if chosen else None
        if found is not None:
            origin = "measured during this build" if fresh_this_build else "from the store"
            return _record(found, requested, origin, store, 0.0)
        if s.mode == "frozen":
            raise MeasurementError(
                f"{what} is not in the store {s.store} (key {key}; devices tried in order: "
                f"{', '.join(s.prefer)}; this machine is {local}) and the store is frozen. "
                f"Build without --frozen to measure it, then commit the new files under "
                f"{s.store}."
            )
    started = time.perf_counter()
    run_worker(
        experiment,
        requested,
        local_device_kind(s.device),
        s.store,
        s.timeout_s,
        allow_busy=s.allow_busy,
    )
    elapsed = time.perf_counter() - started
    found = store.get(experiment, key, local)
    if found is None:
        raise MeasurementError(
            f"{what}: the worker finished but wrote no readable entry to {s.store}"
        )
    _log.refreshed.add((experiment, key))
    if found.provenance.busy:
        log.warning(
            "%s was measured while other work competed for the machine (%s); it is flagged "
            "as busy in the build summary: measure it again on an idle machine",
            what,
            found.provenance.load.describe(),
        )
    return _record(found, requested, "measured during this build", store, elapsed)


def _record(m: Measurement, requested: dict, origin: str, store: Store, seconds: float) -> Sourced:
    p = m.provenance
    busy = p.load.describe() if p.busy and p.load else None
    _log.fetches.append(
        Fetch(m.experiment, dict(requested), origin, p.device.label, seconds, p.device_id, busy)
    )
    return Sourced(m, origin, store.relative(m.experiment, m.key, m.device_id))


def run_worker(
    experiment: str,
    requested: dict,
    device: str,
    store: Path,
    timeout_s: float,
    *,
    allow_busy: bool = True,
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
        *(["--allow-busy"] if allow_busy else []),
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
