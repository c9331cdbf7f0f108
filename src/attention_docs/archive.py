# The archive that carries measurements from a GPU machine to the store: a gzipped tar of
# `run-log.json` and `store/<experiment>/<key>.<device id>.json` (with gzipped traces).
# Reading never extracts: every member is checked (no absolute path, no `..`, no link, a size
# cap) and read into memory, and every entry is sorted into current or stale by prune's rule
# (`stale_reason`) before anything is written.
from __future__ import annotations

import argparse
import gzip
import io
import json
import re
import sys
import tarfile
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from attention_docs import arguments
from attention_docs.experiments.registry import bytes_text
from attention_docs.files import write_atomically

RUN_LOG = "run-log.json"
ARCHIVE = "measurements.tar.gz"  # the name tools/gpu_measure.py gives its archive
STORE_DIR = "store"
MAX_MEMBER_BYTES = 64 * 2**20
MAX_TOTAL_BYTES = 512 * 2**20
_ENTRY = re.compile(
    r"store/(?P<experiment>[A-Za-z0-9_]+)/(?P<key>[A-Za-z0-9]+)\.(?P<device>(?:cpu|cuda)-[a-z0-9-]+)"
    r"(?P<suffix>\.json|\.trace\.json\.gz)"
)


class ArchiveError(Exception):
    """The archive or one of its entries cannot be used; the message is one sentence."""


def write_archive(path: Path, store_root: Path, run_log: dict[str, Any]) -> Path:
    """Pack `run_log` and the store at `store_root` into the gzipped tar `path`, atomically.

    Members are `run-log.json` then the store's files in sorted order, with relative names,
    mode 0644 and no dates, owners or gzip timestamp: the same inputs give the same bytes.
    """
    members = [(RUN_LOG, (json.dumps(run_log, indent=1, sort_keys=True) + "\n").encode())]
    for p in sorted(Path(store_root).glob("*/*")):
        name = f"{STORE_DIR}/{p.relative_to(store_root).as_posix()}"
        if p.is_file() and not p.name.startswith(".") and _ENTRY.fullmatch(name):
            members.append((name, p.read_bytes()))
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    path = Path(path)
    write_atomically(path, buffer.getvalue())
    return path


def read_members(path: Path) -> dict[str, bytes]:
    """Every file member of the archive by name, after the safety checks; raises ArchiveError."""
    name = Path(path).name
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for info in tar:
                member = info.name
                parts = PurePosixPath(member).parts
                if member.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", member):
                    raise ArchiveError(f"{name} holds a member with an absolute path ({member!r})")
                if ".." in parts or "\\" in member:
                    raise ArchiveError(
                        f"{name} holds a member that points outside the archive ({member!r})"
                    )
                if info.issym() or info.islnk():
                    raise ArchiveError(f"{name} holds a link ({member!r}), which is never imported")
                if info.isdir():
                    continue
                if not info.isfile():
                    raise ArchiveError(f"{name} holds {member!r}, which is not a plain file")
                member = PurePosixPath(member).as_posix()  # drops `./` and doubled slashes
                if member != RUN_LOG and not _ENTRY.fullmatch(member):
                    raise ArchiveError(
                        f"{name} holds {member!r}, which is neither {RUN_LOG} nor a store entry "
                        "(store/<experiment>/<key>.<device id>.json or .trace.json.gz)"
                    )
                if member in files:
                    raise ArchiveError(f"{name} holds {member!r} twice")
                if info.size > MAX_MEMBER_BYTES:
                    raise ArchiveError(
                        f"{name} holds {member!r} of {bytes_text(info.size)}, more than the "
                        f"{bytes_text(MAX_MEMBER_BYTES)} one entry or trace of measurements can be"
                    )
                total += info.size
                if total > MAX_TOTAL_BYTES:
                    raise ArchiveError(
                        f"{name} is larger than an archive of measurements can be "
                        f"({member!r} takes it past {bytes_text(MAX_TOTAL_BYTES)})"
                    )
                handle = tar.extractfile(info)
                files[member] = handle.read() if handle else b""
    except FileNotFoundError:
        raise ArchiveError(f"there is no file {path}") from None
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise ArchiveError(
            f"{name} is not a readable gzipped tar archive ({type(exc).__name__}: {exc})"
        ) from None
    return files


@dataclass
class Entry:
    """One measurement found in an archive, checked against this build's code."""

    name: str  # store-relative: <experiment>/<key>.<device>.json
    measurement: Any  # Measurement
    data: bytes
    trace: tuple[str, bytes] | None  # store-relative name and bytes
    stale: str | None  # why it is stale (store.stale_reason), or None when it is current


@dataclass
class Contents:
    run_log: dict[str, Any] | None
    entries: list[Entry] = field(default_factory=list)


def check_archive(path: Path) -> Contents:
    """The archive's run log and entries, every one readable; raises ArchiveError."""
    from attention_docs.experiments import load_all
    from attention_docs.experiments.registry import REGISTRY
    from attention_docs.measurements.schema import Measurement
    from attention_docs.measurements.store import stale_reason

    name = Path(path).name
    files = read_members(path)
    run_log = None
    if RUN_LOG in files:
        try:
            run_log = json.loads(files[RUN_LOG])
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ArchiveError(f"{name}: {RUN_LOG} is not valid JSON ({exc})") from None
        _check_run_log(run_log, name)
    contents = Contents(run_log)
    load_all()
    traces = {m for m in files if m.endswith(".trace.json.gz")}
    for member in sorted(m for m in files if m.endswith(".json") and m != RUN_LOG):
        where = f"{name}: {member}"
        try:
            m = Measurement.loads(files[member].decode("utf-8"))
        except Exception as exc:  # a malformed entry can fail in many ways
            raise ArchiveError(
                f"{where} is not a measurement this build can read ({exc})".replace("\n", " ")
            ) from None
        rel = member.removeprefix(f"{STORE_DIR}/")
        expected = f"{m.experiment}/{m.key}.{m.device_id}.json"
        if rel != expected:
            raise ArchiveError(f"{where} holds the measurement that belongs at {expected}")
        trace = None
        if m.trace_file:
            trace_member = f"{STORE_DIR}/{m.trace_file}"
            expected_trace = f"{m.experiment}/{m.key}.{m.device_id}.trace.json.gz"
            if m.trace_file != expected_trace:
                raise ArchiveError(
                    f"{where} names the trace {m.trace_file!r}, not {expected_trace}"
                )
            if trace_member not in files:
                raise ArchiveError(f"{where} names the trace {m.trace_file}, which is missing")
            try:
                json.loads(gzip.decompress(files[trace_member]))
            except (OSError, EOFError, zlib.error, ValueError) as exc:
                raise ArchiveError(
                    f"{name}: {trace_member} is not a gzipped JSON trace ({exc})"
                ) from None
            trace = (m.trace_file, files[trace_member])
            traces.discard(trace_member)
        stale = stale_reason(m, REGISTRY.get(m.experiment))  # the rule prune deletes by
        contents.entries.append(Entry(rel, m, files[member], trace, stale))
    if traces:
        raise ArchiveError(f"{name} holds {min(traces)}, a trace that no entry names")
    return contents


def _check_run_log(run_log: Any, name: str) -> None:
    """The run log's shape, as tools/gpu_measure.py writes it, checked before anything is
    written so that a damaged log cannot stop an import halfway; raises ArchiveError."""
    where = f"{name}: {RUN_LOG}"
    if not isinstance(run_log, dict):
        raise ArchiveError(f"{where} does not hold a JSON object")
    if not isinstance(run_log.get("environment") or {}, dict):
        raise ArchiveError(f"{where}: 'environment' is not a JSON object")
    requests = run_log.get("requests") or []
    if not isinstance(requests, list) or not all(isinstance(r, dict) for r in requests):
        raise ArchiveError(f"{where}: 'requests' is not a list of JSON objects")
    for i, r in enumerate(requests):
        for key in ("experiment", "status", "error", "reason"):
            if r.get(key) is not None and not isinstance(r[key], str):
                raise ArchiveError(f"{where}: request {i} has a {key!r} that is not a string")
    total = run_log.get("total_s")
    if total is not None and (isinstance(total, bool) or not isinstance(total, int | float)):
        raise ArchiveError(f"{where}: 'total_s' is not a number")


@dataclass
class Imported:
    contents: Contents
    written: list[tuple[Entry, bool]]  # (entry, replaced an existing file)
    left_out: list[Entry]  # stale entries not imported


def import_archive(path: Path, store_root: Path, *, allow_stale: bool = False) -> Imported:
    """Copy the archive's entries (stale ones only with `allow_stale`) into the store;
    nothing is written unless every entry of the archive is readable."""
    from attention_docs.measurements.store import Store

    contents = check_archive(path)
    if not contents.entries:
        summary = _run_summary(contents.run_log)[0]
        raise ArchiveError(f"{Path(path).name} holds no measurement entries ({summary})")
    if not Path(store_root).is_dir():  # a mistyped path must not become a new store
        raise ArchiveError(
            f"{arguments.missing_store(Path(store_root))}; to start a new store, create its "
            "folder first"
        )
    chosen = [e for e in contents.entries if allow_stale or e.stale is None]
    left_out = [e for e in contents.entries if e not in chosen]
    if not chosen:  # nothing to write: not even the lock file
        return Imported(contents, [], left_out)
    store = Store(store_root)
    problem = store.write_problem()
    if problem:
        raise ArchiveError(f"{problem}: make it writable, or import into another with --store")
    for entry in chosen:  # a newer checkout's entry is never replaced
        m = entry.measurement
        problem = store.newer_problem(m.experiment, m.key, m.device_id)
        if problem:
            raise ArchiveError(problem)
    written = []
    with store._lock():
        for entry in chosen:
            target = store.root / entry.name
            replaced = target.exists()
            old_trace = target.with_name(target.name.removesuffix(".json") + ".trace.json.gz")
            if entry.trace:
                write_atomically(store.root / entry.trace[0], entry.trace[1])
            elif old_trace.exists():
                old_trace.unlink()  # the new entry has no trace: the old one would be orphaned
            write_atomically(target, entry.data)
            written.append((entry, replaced))
    return Imported(contents, written, left_out)


def _run_summary(run_log: dict[str, Any] | None) -> list[str]:
    if not run_log:
        return ["the archive has no run log"]
    env = run_log.get("environment") or {}
    device_label = env.get("device_label") or run_log.get("device", "?")
    software = ", ".join(
        f"{what} {env[key]}"
        for what, key in (("torch", "torch"), ("CUDA", "cuda"), ("Triton", "triton"))
        if env.get(key)
    )
    requests = run_log.get("requests") or []
    counts = Counter(r.get("status", "?") for r in requests)
    statuses = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    total = run_log.get("total_s")
    lines = [
        f"run on {device_label}"
        + (f" ({software})" if software else "")
        + f": {len(requests)} requests"
        + (f" ({statuses})" if statuses else "")
        + (f" in {total} s" if total is not None else "")
    ]
    for r in requests:
        if r.get("status") in ("failed", "skipped"):
            reason = (r.get("error") or r.get("reason") or "").strip().splitlines()
            lines.append(
                f"  {r['status']} on the device: {r.get('experiment')} {json.dumps(r.get('requested'))}"
                + (f": {reason[-1][:160]}" if reason else "")
            )
    return lines


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "import-archive",
        help="import a measurements.tar.gz made by tools/gpu_measure.py into the store",
        description="Check every entry of FILE against this build's code and copy the current "
        "ones into the store. Exit code 0: all imported; 1: stale entries were left out; "
        "2: the archive or an entry is unusable (nothing imported).",
    )
    parser.add_argument("file", type=arguments.path, help="the archive (measurements.tar.gz)")
    parser.add_argument("--store", type=arguments.path, default=Path("docs/measurements"))
    parser.add_argument(
        "--allow-stale",
        action="store_true",
        help="also import stale entries (measured with other code or parameters, or keyed the "
        "old way: what prune would delete)",
    )
    parser.set_defaults(handler=lambda args, extra: cmd_import_archive(args))


def cmd_import_archive(args: argparse.Namespace) -> int:
    try:
        result = import_archive(args.file, args.store, allow_stale=args.allow_stale)
    except ArchiveError as exc:
        print(f"python -m attention_docs: error: {exc}; nothing was imported.", file=sys.stderr)
        return 2
    for line in _run_summary(result.contents.run_log):
        print(line)
    by_device: dict[str, list[tuple[Entry, bool]]] = defaultdict(list)
    for entry, replaced in result.written:
        by_device[entry.measurement.device_id].append((entry, replaced))
    for device_id in sorted(by_device):
        written = by_device[device_id]
        replaced = sum(r for _, r in written)
        print(
            f"{device_id}: {len(written)} entr{'y' if len(written) == 1 else 'ies'} imported into "
            f"{args.store} ({len(written) - replaced} new, {replaced} replaced)"
        )
        for entry, was in written:
            note = " (stale)" if entry.stale else ""
            trace = " + trace" if entry.trace else ""
            print(f"  {'replaced' if was else 'new':8} {entry.name}{trace}{note}")
    if not result.written:
        print(f"no entries imported into {args.store}")
    for entry in result.left_out:
        print(f"stale, not imported: {entry.name}: {entry.stale}")
    if result.left_out:
        print(
            f"{len(result.left_out)} stale entr{'y was' if len(result.left_out) == 1 else 'ies were'} "
            "left out; pass --allow-stale to import them anyway"
        )
        return 1
    return 0
