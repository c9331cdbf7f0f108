# /// script
# requires-python = ">=3.11"
# dependencies = [
#     "torch==2.13.0",
#     "numpy>=1.26",
#     "matplotlib>=3.8",
#     "filelock>=3.13",
# ]
# ///
"""Measure every request of the manifest on one device, in one call, into one archive.

Usage (from the repository root; the lent GPU machine has no nox, so the source tree runs):

    PYTHONPATH=src python3 tools/gpu_measure.py --out "$OUT" [--device cuda]
        [--requests docs/measurements/requests.json] [--budget-s 480]
    PYTHONPATH=src python3 tools/gpu_measure.py --plan [--device cuda]
    uv run tools/gpu_measure.py --package attention_docs-0.1.0-py3-none-any.whl --out OUT ...

The script carries its own dependencies (PEP 723, the block above), so `uv run` needs
nothing else: that is how `python -m attention_docs fleet` runs it on Hugging Face Jobs,
where there is no source tree and `--package` gives the package as a wheel. README.md
("One call on a lent GPU machine") says what a run does and returns.

Each request runs in its own worker process, as a docs build runs it, into a temporary
store, in gpu_plan.py's order. A request is not started when the budget's remaining seconds
are fewer than its estimate, and a started one is stopped when the budget runs out; the
archive `OUT/measurements.tar.gz` is rewritten after every request, so a call killed at its
limit still returns what it measured. Exit code 0: every request ran (with --plan: all
fit); 1: some failed or were skipped (would be); 2: bad input.
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MAX_RETURNED_BYTES = 16 * 2**20  # the most the device tool brings back in one file from $OUT
PROBE = """
import json, platform, sys
import torch
import attention_docs
from attention_docs.profiling.device import describe, resolve_device
from attention_docs.records.device import device_id
info = describe(resolve_device(sys.argv[1]))
try:
    import triton
    triton_version = triton.__version__
except Exception:
    triton_version = None
print(json.dumps({
    "device": info.to_json(), "device_id": device_id(info), "device_label": info.label,
    "torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton_version,
    "python": platform.python_version(), "platform": platform.platform(),
    "package": attention_docs.__file__,
}))
"""


def use_package(argv: list[str]) -> None:
    """Import attention_docs, here and in the workers (which must find the same code), from
    the wheel given with `--package`, unpacked into a temporary folder (a Hugging Face job has
    this script and its arguments' files, no source tree), else from the source tree beside
    this script. Read before the parser, which comes from the package."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--package")
    wheel = early.parse_known_args(argv)[0].package
    folder = ROOT / "src"
    if wheel:
        import zipfile

        try:
            with zipfile.ZipFile(wheel) as archive:
                names = archive.namelist()
                if "attention_docs/__init__.py" not in names:
                    raise SystemExit(
                        f"tools/gpu_measure.py: error: --package {wheel} is not a wheel of "
                        "attention_docs (it holds no attention_docs/__init__.py)"
                    )
                folder = Path(tempfile.mkdtemp(prefix=f"gpu-measure-{os.getpid()}-package-"))
                atexit.register(shutil.rmtree, folder, ignore_errors=True)
                archive.extractall(folder, [n for n in names if n.startswith("attention_docs/")])
        except (OSError, zipfile.BadZipFile) as exc:
            raise SystemExit(
                f"tools/gpu_measure.py: error: --package {wheel} cannot be read as a wheel: {exc}"
            ) from None
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    paths = [str(folder), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(filter(None, paths)))


def estimates(store: Path, device_kind: str) -> dict[str, float]:
    """Seconds each request took when the store's entries for this device kind were measured
    (the worker's start added), keyed by `experiment + canonical requested JSON`."""
    from attention_docs.experiments.registry import START_S

    found: dict[str, float] = {}
    for path in sorted(store.glob("*/*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            provenance = data["provenance"]
            if provenance["device"]["kind"] != device_kind:
                continue
            seconds = float(provenance["duration_s"]) + START_S
            ident = _ident(data["experiment"], data["requested"])
            found[ident] = max(found.get(ident, 0.0), seconds)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def _ident(experiment: str, requested: dict) -> str:
    return f"{experiment} {json.dumps(requested, sort_keys=True)}"


def estimate(request: dict, known: dict[str, float], device_kind: str) -> tuple[float, str]:
    """(seconds, where they come from: "measured", "counted" or "default")."""
    from attention_docs.gpu_plan import work

    ident = _ident(request["experiment"], request["requested"])
    if ident in known:
        return known[ident], "measured"
    params, _ = resolve(request, device_kind)
    found, counted = work(request["experiment"], params)
    return found.seconds, "counted" if counted else "default"


def resolve(request: dict, device_kind: str) -> tuple[dict | None, str | None]:
    """(the parameters the request runs with on `device_kind`, or the reason it is invalid)."""
    from attention_docs.experiments.registry import get

    try:
        return get(request["experiment"]).resolve(request["requested"], device_kind), None
    except ValueError as exc:
        return None, str(exc)


def probe(device_kind: str, timeout_s: float) -> dict[str, Any]:
    """The device and software the workers see, from a process like theirs."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", PROBE, device_kind],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"the environment probe did not finish within {timeout_s:.0f} s"}
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        return {"error": tail[0]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def print_plan(
    order: list[dict], shown: dict[str, list[str]], device_kind: str, known: dict, budget: float
) -> int:
    elapsed, total, bad, skipped = 0.0, 0.0, 0, 0
    losses: dict[str, list[str]] = {}  # page -> the experiments it would lose
    print(f"{len(order)} requests, in run order, with their parameters on {device_kind}:")
    for i, request in enumerate(order, 1):
        name = request["experiment"]
        params, error = resolve(request, device_kind)
        seconds, source = estimate(request, known, device_kind)
        # As the run decides: an invalid request fails at once, spending none of the
        # budget; a request whose estimate the rest of the budget cannot hold is skipped,
        # and the next one is tried.
        if error is not None:
            bad += 1
            when = "not run: INVALID"
        elif seconds > budget - elapsed:
            skipped += 1
            for page in shown.get(name, ["(no chapter)"]):
                losses.setdefault(page, []).append(name)
            when = f"~{seconds:.0f} s {source}: SKIPPED, {max(budget - elapsed, 0):.0f} s left"
        else:
            elapsed += seconds
            when = f"~{seconds:.0f} s {source}, done by ~{elapsed:.0f} s"
        total += seconds if error is None else 0.0
        print(f"{i:3}. {name} {json.dumps(request['requested'])} [{when}]")
        print(
            "       "
            + (json.dumps(params, separators=(",", ":")) if error is None else f"INVALID: {error}")
        )
        print(f"       shown on: {', '.join(shown.get(name, [])) or 'no chapter'}")
    print(
        f"estimated total: ~{total:.0f} s against a budget of {budget:.0f} s (estimates: "
        "measured = the store's entry from this device kind; counted = from the request's "
        "work its experiment declares (gpu_work=); default = an experiment that declares none)"
    )
    if skipped:
        print(f"{skipped} requests would be skipped; these pages would lose them:")
        for page in sorted(losses):
            print(f"  {page}: {', '.join(losses[page])}")
    elif bad:
        print(
            f"{len(order) - bad} of the {len(order)} requests can run, and fit the budget; "
            f"{bad} cannot (INVALID above): fix or remove {'it' if bad == 1 else 'them'} in "
            "the manifest"
        )
    else:
        print(f"all {len(order)} requests fit the budget")
    return 2 if bad else (1 if skipped else 0)


def main(argv: list[str] | None = None) -> int:
    use_package(sys.argv[1:] if argv is None else [str(a) for a in argv])
    from attention_docs import arguments

    parser = arguments.Parser(prog="tools/gpu_measure.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=arguments.path, help="folder for measurements.tar.gz (the tool's $OUT)"
    )
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument(
        "--package",
        type=arguments.path,
        help="the attention_docs wheel to run (default: the source tree beside this script)",
    )
    parser.add_argument(
        "--requests", type=arguments.path, default=ROOT / "docs/measurements/requests.json"
    )
    parser.add_argument(
        "--budget-s",
        type=arguments.seconds("--budget-s", zero_ok=True, example="480"),
        default=480.0,
        help="seconds for everything (default: 480; 0 runs nothing)",
    )
    parser.add_argument(
        "--estimates",
        type=arguments.path,
        help="store whose entries' durations estimate each request (default: the manifest's folder)",
    )
    parser.add_argument(
        "--plan", action="store_true", help="list what would run, with its parameters; run nothing"
    )
    args = parser.parse_args(argv)
    # The package's own dependencies (pyproject.toml): a Python without them is the wrong one.
    missing = [m for m in ("torch", "numpy", "filelock") if importlib.util.find_spec(m) is None]
    if missing:
        parser.error(
            f"this Python ({sys.executable}) lacks {', '.join(missing)}: run the script with "
            "the Python that has torch (on a lent machine, its own python3), or install the "
            "project into this one first (pip install -e .)"
        )
    from attention_docs.gpu_plan import planned

    try:  # what the pages need most first (gpu_plan.py)
        order, shown = planned(args.requests, ROOT / "docs" / "chapters")
    except ValueError as exc:
        parser.error(str(exc))
    if args.estimates is not None and not args.estimates.is_dir():
        parser.error(
            f"--estimates {args.estimates} is not a store folder; give the store whose "
            "entries' durations estimate the requests, or leave it out"
        )
    known = estimates(args.estimates or args.requests.parent, args.device)
    if args.plan:
        return print_plan(order, shown, args.device, known, args.budget_s)
    out = args.out
    if out is None:
        parser.error("--out is required unless --plan is given")
    if out.exists() and not out.is_dir():
        parser.error(f"--out {out} is a file, not a folder; give the folder the archive goes in")
    from attention_docs.files import try_writing

    try:  # before anything is measured
        out.mkdir(parents=True, exist_ok=True)
        try_writing(out)
    except OSError as exc:
        parser.error(
            f"--out {out} cannot be written ({exc.strerror or exc}); give a folder you can write"
        )
    return measure_all(order, args, known)


def run_request(
    request: dict,
    device_kind: str,
    store: Path,
    *,
    remaining: float,
    estimate_s: float,
    unusable: str,
) -> dict[str, Any]:
    """Run one request in a worker process unless it cannot run; returns its log record."""
    from attention_docs.experiments.registry import get
    from attention_docs.workers import MeasurementError, run_worker

    name, requested = request["experiment"], request["requested"]
    params, invalid = resolve(request, device_kind)
    record: dict[str, Any] = {"experiment": name, "requested": requested, "params": params}
    before = {p.relative_to(store).as_posix() for p in store.glob("*/*")}
    started = time.monotonic()
    if unusable:
        record |= {"status": "skipped", "reason": f"the device is unusable: {unusable}"}
    elif invalid:
        record |= {"status": "failed", "error": f"not a valid request: {invalid}"}
    elif remaining < estimate_s:
        left = max(remaining, 0)
        record |= {
            "status": "skipped",
            "reason": f"over budget: ~{estimate_s:.0f} s estimated, {left:.0f} s left",
        }
    else:
        try:  # stopped when the budget runs out, so that the archive is written in time
            run_worker(name, requested, device_kind, store, remaining, imports=get(name).imports)
            record["status"] = "ok"
        except MeasurementError as exc:
            lines = str(exc).strip().splitlines()
            record |= {"status": "failed", "error": "\n".join(lines[-15:])}
    record["seconds"] = round(time.monotonic() - started, 2)
    after = {p.relative_to(store).as_posix() for p in store.glob("*/*")}
    record["entries"] = sorted(after - before)
    return record


def measure_all(order: list[dict], args: argparse.Namespace, known: dict[str, float]) -> int:
    from attention_docs.archive import ARCHIVE, write_archive

    started = time.monotonic()
    archive = args.out / ARCHIVE
    manifest = args.requests.resolve()
    log: dict[str, Any] = {
        "format": 1,
        "device": args.device,
        "manifest": (
            manifest.relative_to(ROOT).as_posix()
            if manifest.is_relative_to(ROOT)
            else manifest.name
        ),
        "budget_s": args.budget_s,
        "package": args.package.name if args.package else "the source tree",
        "started": datetime.now(UTC).replace(microsecond=0).isoformat(),
        "complete": False,
        "requests": [],
    }

    def elapsed() -> float:
        return time.monotonic() - started

    from attention_docs import folders

    with tempfile.TemporaryDirectory(prefix=folders.owned("gpu-measure-")) as tmp:
        store = Path(tmp) / "store"
        store.mkdir()
        env = probe(args.device, max(30.0, min(120.0, args.budget_s)))
        log["environment"] = env
        print(
            f"environment: {env.get('device_label') or env.get('error')}; torch {env.get('torch')}, "
            f"CUDA {env.get('cuda')}, Triton {env.get('triton')} ({elapsed():.0f} s)",
            flush=True,
        )
        for i, request in enumerate(order, 1):
            record = run_request(
                request,
                args.device,
                store,
                remaining=args.budget_s - elapsed(),
                estimate_s=estimate(request, known, args.device)[0],
                unusable=env.get("error"),
            )
            log["requests"].append(record)
            last = (record.get("error") or record.get("reason") or "").strip().splitlines()
            print(
                f"[{i:2}/{len(order)}] {record['status']:7} {record['seconds']:7.1f} s  "
                f"{record['experiment']} {json.dumps(record['requested'])}"
                + (f" — {last[-1][:160]}" if last else "")
                + f"  (t={elapsed():.0f} s)",
                flush=True,
            )
            log["total_s"] = round(elapsed(), 2)
            write_archive(archive, store, log)  # after every request: a killed call keeps it
        counts = {
            s: sum(r["status"] == s for r in log["requests"]) for s in ("ok", "failed", "skipped")
        }
        log |= {"complete": True, "total_s": round(elapsed(), 2), "counts": counts}
        write_archive(archive, store, log)
    # The log again, outside the archive: it comes back even if the archive is too large to.
    (args.out / "run-log.json").write_text(json.dumps(log, indent=1, sort_keys=True) + "\n")
    print(
        f"{counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped in "
        f"{log['total_s']:.0f} s (budget {args.budget_s:.0f} s); {archive} "
        f"({archive.stat().st_size / 1024:.0f} KiB)",
        flush=True,
    )
    if archive.stat().st_size > MAX_RETURNED_BYTES:
        print(
            f"WARNING: {archive.name} is over {MAX_RETURNED_BYTES // 2**20} MiB, more than the "
            "device tool returns in one file; run fewer requests per call (--requests)"
        )
    for r in log["requests"]:
        if r["status"] != "ok":
            print(f"  {r['status']}: {r['experiment']} {json.dumps(r['requested'])}")
    return 0 if counts["ok"] == len(order) else 1


if __name__ == "__main__":
    sys.exit(main())
