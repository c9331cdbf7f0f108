# The measurement store: one JSON file per (experiment, key, device kind), with the gzipped
# Chrome trace beside it. Writes are atomic (temporary file + rename) and serialised by a
# file lock, so two builds at once never leave a half-written entry. A file that cannot be
# read is reported by name and treated as missing, so the caller re-measures it.
from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from filelock import FileLock

from attention_docs.measurements.schema import Measurement, SchemaError
from attention_docs.profiling.trace import chrome_bytes

log = logging.getLogger("attention_docs")

DEVICE_KINDS = ("cuda", "cpu")


@dataclass(frozen=True)
class Problem:
    """A stored file that could not be used, and why."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path.name}: {self.reason}"


class Store:
    """A folder of measurements: `<root>/<experiment>/<key>.<device>.json`."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.problems: list[Problem] = []

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    def _lock(self) -> FileLock:
        self.root.mkdir(parents=True, exist_ok=True)
        return FileLock(self.root / ".lock", timeout=600)

    def relative(self, experiment: str, key: str, device_kind: str, suffix: str = ".json") -> str:
        return f"{experiment}/{key}.{device_kind}{suffix}"

    def path(self, experiment: str, key: str, device_kind: str, suffix: str = ".json") -> Path:
        return self.root / self.relative(experiment, key, device_kind, suffix)

    def get(self, experiment: str, key: str, device_kind: str) -> Measurement | None:
        """The stored measurement, or None when it is missing or unusable (reported)."""
        path = self.path(experiment, key, device_kind)
        if not path.exists():
            return None
        try:
            measurement = Measurement.loads(path.read_text(encoding="utf-8"))
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

    def _report(self, path: Path, reason: str) -> None:
        problem = Problem(path, reason)
        self.problems.append(problem)
        log.warning(
            "stored measurement %s is unusable (%s); it will be measured again",
            path.relative_to(self.root.parent) if path.is_relative_to(self.root.parent) else path,
            reason,
        )

    def put(self, measurement: Measurement, chrome: Mapping | None = None) -> Measurement:
        """Write `measurement` (and its trace) atomically; returns it with `trace_file` set."""
        kind = measurement.device_kind
        with self._lock():
            if chrome is not None:
                rel = self.relative(measurement.experiment, measurement.key, kind, ".trace.json.gz")
                _atomic_write(self.root / rel, chrome_bytes(chrome))
                measurement = replace(measurement, trace_file=rel)
            target = self.path(measurement.experiment, measurement.key, kind)
            _atomic_write(target, measurement.dumps().encode())
        return measurement

    def entries(self) -> Iterator[tuple[Path, Measurement | None, str | None]]:
        """Every stored JSON file: (path, measurement or None, reason it is unreadable)."""
        for path in sorted(self.root.glob("*/*.json")):
            try:
                yield path, Measurement.loads(path.read_text(encoding="utf-8")), None
            except (SchemaError, OSError, UnicodeDecodeError) as exc:
                yield path, None, str(exc)

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


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
