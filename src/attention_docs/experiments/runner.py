# Runs one experiment in this process and turns what it observed into a Measurement. The
# docs never call this directly: they ask workers.py for a worker process, which does, so
# that each measurement starts from a fresh process (no CUDA context, allocator state or
# compile cache left behind by another page).
from __future__ import annotations

import contextlib
import importlib
import platform
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import torch

from attention_docs import __version__
from attention_docs.experiments.registry import PRELOAD, ExperimentError, get
from attention_docs.measurements.schema import Measurement, Provenance
from attention_docs.measurements.store import Store
from attention_docs.profiling.device import describe, resolve_device
from attention_docs.profiling.environment import keep_freed_memory, set_threads
from attention_docs.profiling.headroom import free_memory_bytes
from attention_docs.profiling.load import LoadMonitor
from attention_docs.records.device import DeviceInfo, device_id
from attention_docs.records.load import BusyMachineError


@dataclass(frozen=True)
class Context:
    """What an experiment function is given besides its parameters."""

    device: torch.device
    info: DeviceInfo


def run_experiment(
    name: str,
    requested: Mapping[str, Any] | None = None,
    *,
    device_setting: str = "auto",
    store: Store | None = None,
    allow_busy: bool = True,
    require_idle: bool = False,
) -> Measurement:
    """Run experiment `name` with `requested` parameters on the device `device_setting` names
    (auto, cpu or cuda); store it if `store` is given.

    A run during which other work competed for the machine is flagged in its provenance;
    with `allow_busy=False` it is not stored and `BusyMachineError` says why; with
    `require_idle` (publishing) neither is a run beside any other work to speak of.
    """
    exp = get(name)
    requested = exp.canonical(requested or {})
    target = resolve_device(device_setting)
    set_threads()
    allocator = keep_freed_memory()
    info = describe(target)
    params = exp.resolve(requested, target.type)
    problem = exp.memory_problem(params, free_memory_bytes(target), f"this {target.type}")
    if problem:
        raise ExperimentError(problem)
    absent = _import_first(exp.imports)
    torch.manual_seed(0)
    started = time.perf_counter()
    with LoadMonitor(torch.get_num_threads() if target.type == "cpu" else None) as monitor:
        observed = exp.func(Context(target, info), **params)
    duration = time.perf_counter() - started
    late = [module for module in absent if module in sys.modules]
    if late:
        raise ExperimentError(
            f"{name} imported {', '.join(late)} while it ran, which its declaration "
            f"(imports={exp.imports!r}) says it does not need: a first compile or profiled "
            "call would have timed the import. Add it to imports= in its @experiment "
            "(or leave imports= out: everything a profile or compile needs is imported)"
        )
    measurement = Measurement(
        experiment=name,
        key=exp.key(requested),
        fingerprint=exp.fingerprint(),
        requested=requested,
        params=params,
        provenance=Provenance(
            device=info,
            torch_version=torch.__version__,
            cuda_version=torch.version.cuda if target.type == "cuda" else None,
            python_version=platform.python_version(),
            package_version=__version__,
            date=datetime.now(UTC).replace(microsecond=0).isoformat(),
            duration_s=round(duration, 3),
            device_id=device_id(info),
            load=monitor.load,
            allocator=allocator,
        ),
        steps=observed.steps,
        ops=observed.ops,
        timing=observed.timing,
        timeline=observed.timeline,
        tables=observed.tables,
        facts=observed.facts,
        notes=observed.notes,
    )
    if require_idle and not monitor.load.idle:
        raise BusyMachineError(
            f"{name} was measured beside other work ({monitor.load.describe()}), and publishing "
            "needs an idle machine: it was not stored.",
            monitor.load.describe(),
        )
    if measurement.provenance.busy and not allow_busy:
        raise BusyMachineError(
            f"{name} was measured while other work competed for the machine "
            f"({monitor.load.describe()}), so its timings are not trustworthy and it was not "
            "stored. Run it again on an idle machine, or pass --allow-busy to store it flagged.",
            monitor.load.describe(),
        )
    if store is not None:
        measurement = store.put(measurement, observed.chrome)
    return measurement


def _import_first(imports: tuple[str, ...]) -> list[str]:
    """Import `imports` (what a worker server forked from has imported already); return the
    modules of PRELOAD that are not imported: an experiment that imports one of them while it
    runs has declared too little. A module that cannot be imported is left to the experiment,
    whose error names it."""
    for module in imports:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    return [module for module in PRELOAD if module not in sys.modules]
