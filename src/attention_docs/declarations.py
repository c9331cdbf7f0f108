# What a warm build needs to know about experiments and this machine, without importing
# torch (2–4 s of a build that otherwise only reads the store and renders; experiment modules
# import it at their top): each experiment's declaration (parameters, measured files,
# fingerprint) and this machine's device id, remembered under .cache/. The experiment index
# is valid while no source file of the package (nor an out-of-tree experiment module)
# changes; the device id while the machine has not rebooted and torch is the same. Anything
# that measures still loads the real registry.
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import pickle
import platform
from collections.abc import Callable
from pathlib import Path

from attention_docs.experiments.registry import REGISTRY, Experiment
from attention_docs.files import write_atomically
from attention_docs.measurements.keys import PACKAGE_ROOT

INDEX_VERSION = 5
# Bump when records/device.py names devices differently: a remembered id is then computed anew.
DEVICE_IDS = 2


@dataclasses.dataclass(frozen=True)
class IndexedExperiment(Experiment):
    """An experiment's declaration read from the index: keys and fingerprints, no function."""

    stored_fingerprint: str = ""
    stored_sources: tuple[str, ...] = ()

    @property
    def source_files(self) -> tuple[str, ...]:
        return self.stored_sources

    def fingerprint(self, root: Path = PACKAGE_ROOT) -> str:
        return self.stored_fingerprint if root == PACKAGE_ROOT else super().fingerprint(root)


def _declared_only(ctx, **params):
    """What an indexed declaration holds in place of its function: it is never run."""
    raise RuntimeError("an indexed declaration cannot run; use experiments.registry.get")


def _indexed(exp: Experiment) -> IndexedExperiment:
    fields = {f.name: getattr(exp, f.name) for f in dataclasses.fields(Experiment)}
    # Functions stay out: unpickling one imports its module, and so torch.
    fields |= {"func": _declared_only, "estimate_bytes": None, "gpu_work": None}
    return IndexedExperiment(
        **fields | {"params": dict(exp.params)},
        stored_fingerprint=exp.fingerprint(),
        stored_sources=exp.source_files,
    )


def sources_digest() -> str:
    """Hash of every source file the declarations can depend on (bytes: fast, not tokens).

    That is the package but its renderers: nothing that measures imports them, so a
    renderer edit (the usual one under `mkdocs serve`) keeps the index.
    """
    h = hashlib.sha256()
    render = PACKAGE_ROOT / "render"
    files = sorted(p for p in PACKAGE_ROOT.rglob("*.py") if not p.is_relative_to(render))
    extra = os.environ.get("ATTENTION_DOCS_EXPERIMENTS", "").split(",")
    for module in (m.strip() for m in extra if m):
        spec = importlib.util.find_spec(module)
        h.update(f"module {module}\0".encode())
        if spec and spec.origin:
            files.append(Path(spec.origin))
    for path in files:
        with contextlib.suppress(OSError):
            h.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


_memo: dict[Path, tuple[str, dict[str, Experiment]]] = {}


def experiments(cache_dir: Path | None) -> dict[str, Experiment]:
    """Every experiment's declaration: from the index when it is current, else the registry
    (which imports torch and every experiment module) — and the index is written anew."""
    from attention_docs.experiments import load_all

    if cache_dir is None:
        load_all()
        return REGISTRY
    digest = sources_digest()
    known = _memo.get(cache_dir)
    if known and known[0] == digest:
        return known[1]
    path = cache_dir / "experiments.pickle"
    try:
        version, stored, found = pickle.loads(path.read_bytes())
    except Exception:  # missing, damaged or of another version (any error): rebuilt below
        version = stored = found = None
    if (version, stored) == (INDEX_VERSION, digest):
        _memo[cache_dir] = (digest, found)
        return found
    load_all()
    index = {name: _indexed(exp) for name, exp in REGISTRY.items()}
    with contextlib.suppress(OSError, pickle.PicklingError, AttributeError, TypeError):
        write_atomically(path, pickle.dumps((INDEX_VERSION, digest, index)))
    _memo[cache_dir] = (digest, REGISTRY)
    return REGISTRY


def device_id(setting: str, cache_dir: Path | None, compute: Callable[[str], str]) -> str:
    """`compute(setting)` (which imports torch): the device id of the device setting (auto,
    cpu, cuda) on this machine, remembered for this boot of this machine, this torch and
    these visible GPUs."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="utf-8").strip()
        torch_version = importlib.metadata.version("torch")
    except (OSError, importlib.metadata.PackageNotFoundError):
        cache_dir = None
    if cache_dir is None:
        return compute(setting)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    machine = f"{setting}|{platform.node()}|{boot}|torch {torch_version}|{visible}|{DEVICE_IDS}"
    path = cache_dir / "device.json"
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if isinstance(known, dict) and isinstance(known.get(machine), str):
        return known[machine]
    found = compute(setting)
    with contextlib.suppress(OSError):
        write_atomically(path, json.dumps({machine: found}))
    return found
