# The measurement store: one JSON file per (experiment, key, device), with the gzipped
# Chrome trace beside it. The device is named (`cuda-h200`, `cpu-amd-epyc`), not only its
# kind, so that entries from several GPUs live side by side. Writes are atomic and
# serialised by a file lock, so two builds at once never leave a half-written entry. A file
# that cannot be read is reported by name and treated as missing, so the caller re-measures
# it — except one a newer version of attention_docs wrote (NewerSchemaError), which is left
# alone: `put` refuses to overwrite it rather than store the fresh entry where nothing would
# find it.
from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from filelock import FileLock

from attention_docs.files import try_writing, write_atomically
from attention_docs.measurements.schema import (
    Measurement,
    NewerSchemaError,
    SchemaError,
    newer_version,
)
from attention_docs.records.trace import chrome_bytes

log = logging.getLogger("attention_docs")

DEVICE_KINDS = ("cuda", "cpu")
# What an entry's file is called: `<key>.<device id>.json` (or `<key>.cpu.json`, as entries
# were named before devices were). Nothing else in a store folder is an entry, so nothing
# else is ever pruned.
ENTRY_NAME = re.compile(r"[0-9a-f]{16}\.(?:cpu|cuda)(?:-[a-z0-9-]+)?\.json")


@dataclass(frozen=True)
class Problem:
    """A stored file that could not be used, and why; `newer`: a newer version of
    attention_docs wrote it (keep it: the checkout that wrote it can read it)."""

    path: Path
    reason: str
    newer: bool = False

    def __str__(self) -> str:
        return f"{self.path.name}: {self.reason}"


class Store:
    """A folder of measurements: `<root>/<experiment>/<key>.<device id>.json`."""

    def __init__(self, root: Path | str, *, warn: bool = True) -> None:
        self.root = Path(root)
        self.problems: list[Problem] = []
        # False: problems are only collected, for a caller that reports them itself (a frozen
        # build does not measure again, so "it will be measured again" would be untrue).
        self.warn = warn

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    def _lock(self) -> FileLock:
        self.root.mkdir(parents=True, exist_ok=True)
        return FileLock(self.root / ".lock", timeout=600)

    def write_problem(self) -> str | None:
        """Why this store cannot be written, as a clause naming it; None when it can.

        Ask before work that ends in a write (a measurement, a prune, an import), so that a
        read-only store is one sentence up front instead of filelock's error on `.lock`
        afterwards. Each folder a write may touch is tried with a file created and removed
        there, not judged from its permission bits: a read-only mount, another user's folder
        and root's capabilities then count as they would for the write. A store folder that
        does not exist yet is writable when the folder it would be made in is.
        """
        folder = self.root
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir():
            return f"the store {self.root} cannot be written ({folder} is not a folder)"
        folders = [folder]
        if folder == self.root:
            folders += sorted(p for p in self.root.iterdir() if p.is_dir())
        for place in folders:
            try:
                try_writing(place)
            except OSError as exc:
                return f"the store {self.root} cannot be written ({exc.strerror or exc}: {place})"
        lock = self.root / ".lock"
        try:
            if lock.exists():
                lock.open("a").close()
        except OSError as exc:
            return f"the store {self.root} cannot be written ({exc.strerror or exc}: {lock})"
        return None

    def relative(self, experiment: str, key: str, device_id: str, suffix: str = ".json") -> str:
        return f"{experiment}/{key}.{device_id}{suffix}"

    def path(self, experiment: str, key: str, device_id: str, suffix: str = ".json") -> Path:
        return self.root / self.relative(experiment, key, device_id, suffix)

    def devices(self, experiment: str, key: str) -> list[str]:
        """The ids of the devices that have an entry for (experiment, key), sorted."""
        folder = self.root / experiment
        found = []
        for path in folder.glob(f"{key}.*.json"):
            device_id = path.name[len(key) + 1 : -len(".json")]
            if "." not in device_id and device_id not in DEVICE_KINDS:
                found.append(device_id)
        return sorted(found)

    def get(self, experiment: str, key: str, device_id: str) -> Measurement | None:
        """The stored measurement, or None when it is missing or unusable (reported)."""
        path = self.path(experiment, key, device_id)
        if not path.exists():
            return None
        try:
            measurement = Measurement.loads(path.read_text(encoding="utf-8"))
        except NewerSchemaError as exc:
            self._report(path, str(exc), newer=True)
            return None
        except (SchemaError, OSError, UnicodeDecodeError) as exc:
            self._report(path, str(exc))
            return None
        if measurement.key != key or measurement.experiment != experiment:
            self._report(
                path, f"holds {measurement.experiment}/{measurement.key}, not {experiment}/{key}"
            )
            return None
        if measurement.trace_file and not (self.root / measurement.trace_file).exists():
            self._report(path, f"its trace {measurement.trace_file} is missing")
            return None
        return measurement

    def _report(self, path: Path, reason: str, *, newer: bool = False) -> None:
        problem = Problem(path, reason, newer)
        self.problems.append(problem)
        if not self.warn:
            return
        log.warning(
            "stored measurement %s is unusable (%s); %s",
            path.relative_to(self.root.parent) if path.is_relative_to(self.root.parent) else path,
            reason,
            "it is left as it is" if newer else "it will be measured again",
        )

    def put(self, measurement: Measurement, chrome: Mapping | None = None) -> Measurement:
        """Write `measurement` (and its trace) atomically; returns it with `trace_file` set."""
        device_id = measurement.device_id
        with self._lock():
            target = self.path(measurement.experiment, measurement.key, device_id)
            version = _newer_file(target)
            if version is not None:
                raise NewerSchemaError(
                    version,
                    f"the stored measurement {target} was ",
                    "; it is left as it is, and this measurement was not stored",
                )
            if chrome is not None:
                rel = self.relative(
                    measurement.experiment, measurement.key, device_id, ".trace.json.gz"
                )
                write_atomically(self.root / rel, chrome_bytes(chrome))
                measurement = replace(measurement, trace_file=rel)
            write_atomically(target, measurement.dumps().encode())
        return measurement

    def entry_paths(self) -> list[Path]:
        """Every file named as an entry (`<experiment>/<key>.<device id>.json`), sorted."""
        return sorted(p for p in self.root.glob("*/*.json") if ENTRY_NAME.fullmatch(p.name))

    def entries(self) -> Iterator[tuple[Path, Measurement | None, Problem | None]]:
        """Every entry: (path, measurement or None, why it cannot be read)."""
        for path in self.entry_paths():
            try:
                yield path, Measurement.loads(path.read_text(encoding="utf-8")), None
            except (SchemaError, OSError, UnicodeDecodeError) as exc:
                yield path, None, Problem(path, str(exc), isinstance(exc, NewerSchemaError))

    def newer_problem(self, experiment: str, key: str, device_id: str) -> str | None:
        """The sentence saying that the entry a write of (experiment, key, device_id) would
        replace was written by a newer version of attention_docs; None when it was not: ask
        before measuring what `put` would refuse to store."""
        target = self.path(experiment, key, device_id)
        version = _newer_file(target)
        if version is None:
            return None
        return str(NewerSchemaError(version, f"the stored measurement {target} was "))

    def remove(self, path: Path) -> list[Path]:
        """Delete one entry and its trace; returns what was deleted."""
        removed = []
        with self._lock():
            stem = path.name.removesuffix(".json")
            for candidate in (path, path.with_name(stem + ".trace.json.gz")):
                if candidate.exists():
                    candidate.unlink()
                    removed.append(candidate)
        return removed


def stale_reason(measurement: Measurement, experiment) -> str | None:
    """Why the stored `measurement` is stale, or None when it is current: the one rule that
    `prune` deletes by, `import-archive` leaves entries out by, and a frozen build names
    when it finds only such an entry for a request. `experiment` is the Experiment of the
    measurement's name as the code declares it now, or None when there is none; the code's
    fingerprint decides, whatever the entry's key says."""
    if experiment is None:
        return f"experiment {measurement.experiment} no longer exists"
    now = experiment.fingerprint()
    if measurement.fingerprint != now:
        return (
            f"the code it measured has changed since (its fingerprint {measurement.fingerprint}, "
            f"the code's now {now}): it was measured on {measurement.provenance.date[:10]} and "
            f"measures {', '.join(experiment.source_files)}"
        )
    try:
        current = experiment.key(measurement.requested)
    except ValueError as exc:  # ExperimentError: a parameter renamed, retyped or out of range
        return f"its parameters are not the experiment's now: {exc}"
    if measurement.key != current:
        return (
            f"its key {measurement.key} is not the key this code gives its parameters "
            f"({current}): it was keyed by an older measuring method, or with parameters given "
            "at their default"
        )
    return None


def _newer_file(path: Path) -> int | None:
    """The schema version of the entry at `path` when a newer attention_docs wrote it."""
    try:
        return newer_version(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
