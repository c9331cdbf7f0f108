# `python -m attention_docs list | run | show | prune | new-chapter | trace |
# forecast`: the experiments outside the docs, what a reader's own profile says, and what the
# site forecasts for any shape on a named GPU. Every bad input ends in one sentence saying
# what was wrong and what to do, exit code 2 — never a traceback.
#
# Adding a command from another module: give it a `register(sub)` that calls
# `sub.add_parser(...)` and `set_defaults(handler=fn)` (fn(args, extra) -> exit code; raise
# UsageError for bad input), and call it from `_parser` below.
from __future__ import annotations

import argparse
import html
import json
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attention_docs import arguments, folders

COMMITTED_STORE = Path("docs/measurements")
# Where `run` writes unless told otherwise: the committed store changes only on purpose.
SCRATCH_STORE = Path(".cache/scratch-store")
PROG = "python -m attention_docs"


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit code 2."""


PRUNE_HELP = """\
Delete stale entries from the store. An entry is stale when it can no longer be shown:
its file cannot be read; its experiment no longer exists; the code it measured has changed
since (its fingerprint differs from the code's now); its parameters are not the
experiment's now; or its key was computed the old way (an older measuring method,
METHOD_VERSION, or parameters given at their default, which now share the default's key).
import-archive leaves out what this calls stale. Current entries are kept, including ones
no page asks for unless --unrequested is given. An entry written by a newer version of
attention_docs is kept and named."""


def _parser() -> argparse.ArgumentParser:
    parser = arguments.Parser(
        prog=PROG,
        description="Run the experiments behind 'Attention, Profiled' and read the measurement store.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=arguments.Parser)
    sub.add_parser("list", help="list experiments and their parameters").set_defaults(
        handler=cmd_list
    )

    run = sub.add_parser(
        "run",
        help="run an experiment and print its tables",
        description="Run NAME with --PARAM VALUE pairs (see `list`) in a worker process and "
        f"print the tables a chapter shows. It is stored in {SCRATCH_STORE} unless --store "
        f"says otherwise: give --store {COMMITTED_STORE} to add it to the committed store.",
    )
    run.add_argument("name", nargs="?", help="experiment name")
    run.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    run.add_argument(
        "--store",
        type=arguments.path,
        default=SCRATCH_STORE,
        help="store folder (default: %(default)s)",
    )
    run.add_argument("--no-store", action="store_true", help="do not keep the result")
    run.add_argument(
        "--requests",
        type=arguments.path,
        help="run every request listed in this manifest instead of NAME",
    )
    run.add_argument(
        "--allow-busy",
        action="store_true",
        help="store the result even if other work competed for the machine while it ran "
        "(it is flagged as busy); without it such a result is refused",
    )
    run.add_argument(
        "--timeout",
        type=arguments.seconds("--timeout"),
        default=900.0,
        help="stop the experiment after this many seconds (default: %(default)s; at most a week)",
    )
    run.add_argument(
        "--traceback", action="store_true", help="on failure, print the worker's last output"
    )
    run.set_defaults(handler=cmd_run, takes_params=True)

    show = sub.add_parser("show", help="print a stored measurement")
    show.add_argument("name", help="experiment name, or the path of a stored .json file")
    show.add_argument(
        "--store",
        type=arguments.path,
        default=None,
        help=f"store folder (default: {COMMITTED_STORE}, then {SCRATCH_STORE})",
    )
    show.add_argument(
        "--device",
        type=arguments.word,
        default=None,
        help="device id of the entry to show, e.g. cuda-h200 (default: GPU entries first)",
    )
    show.set_defaults(handler=cmd_show, takes_params=True)

    prune = sub.add_parser(
        "prune", help="delete stale entries from the store", description=PRUNE_HELP
    )
    prune.add_argument("--store", type=arguments.path, default=COMMITTED_STORE)
    prune.add_argument("--dry-run", action="store_true", help="only say what would be deleted")
    prune.add_argument(
        "--unrequested",
        action="store_true",
        help="also delete current entries that no request of the store's requests.json asks "
        "for (what a full build of the site renders)",
    )
    prune.set_defaults(handler=cmd_prune)

    from attention_docs import archive, fleet, forecast_command, scaffold, trace_command

    archive.add_parser(sub)
    fleet.add_parser(sub)
    scaffold.register(sub)
    trace_command.register(sub)
    forecast_command.register(sub)

    return parser


def parse_params(extra: Sequence[str]) -> dict[str, str]:
    """`--seq-len 512 --causal false` -> {"seq_len": "512", "causal": "false"}."""
    params: dict[str, str] = {}
    items = list(extra)
    while items:
        flag = items.pop(0)
        if not flag.startswith("--") or len(flag) < 3:
            raise UsageError(f"unexpected argument {flag!r}; parameters are given as --NAME VALUE")
        name, _, value = flag[2:].partition("=")
        if not _:
            if not items or items[0].startswith("--"):
                raise UsageError(f"parameter --{name} needs a value")
            value = items.pop(0)
        params[name.replace("-", "_")] = value
    return params


def _plain(markdown: str) -> str:
    """Text for a terminal: HTML tags (captions', facts') removed, entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", markdown))


def print_measurement(sourced, *, kept: bool = True) -> None:
    """`sourced`'s tables, then where its raw data and trace are (`kept` False: nowhere, a
    run under --no-store measured into a folder deleted since)."""
    from attention_docs import render

    m = sourced.measurement
    print(f"# {m.experiment} — {_plain(render.caption.caption_text(sourced))}\n")
    if m.steps:
        print(_plain(render.steps.step_table(sourced)) + "\n")
        print(_plain(render.claims.dominant_step(m)) + "\n")
    if m.timing:
        print(_plain(render.claims.forward_time(m)) + "\n")
    if m.ops:
        print(_plain(render.steps.op_table(sourced)) + "\n")
    for name in sorted(m.tables):
        print(f"## {name}\n\n" + _plain(render.tables.records_table(sourced, name)) + "\n")
    for note in m.notes:
        print(f"note: {note}")
    if not kept:
        print("not stored (--no-store): neither its raw data nor its trace was kept")
        return
    print(f"raw data: {sourced.json_href}")
    if sourced.trace_href:
        print(
            f"trace: {sourced.trace_href} (open it at https://ui.perfetto.dev or chrome://tracing)"
        )


def cmd_list(args: argparse.Namespace, extra: list[str]) -> int:
    from attention_docs.experiments import load_all
    from attention_docs.experiments.registry import REGISTRY

    load_all()
    for name in sorted(REGISTRY):
        exp = REGISTRY[name]
        print(f"{name}\n    {exp.summary}")
        for pname, p in exp.params.items():
            default = repr(p.default)
            if p.gpu_default is not None:
                default += f" (GPU: {p.gpu_default!r})"
            choices = f"; one of {', '.join(map(str, p.choices))}" if p.choices else ""
            helptext = f" — {p.help}" if p.help else ""
            print(
                f"    --{pname.replace('_', '-')} {p.type.__name__} = {default}{choices}{helptext}"
            )
    return 0


def _read_manifest(path: Path) -> list[dict[str, Any]]:
    from attention_docs.measurements.manifest import read_requests

    try:
        return read_requests(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _run_requests(args: argparse.Namespace, store: Path | None) -> int:
    """Every request of a manifest, in this process (one torch import for them all)."""
    from attention_docs.experiments.runner import run_experiment
    from attention_docs.measurements.store import Store
    from attention_docs.records.load import BusyMachineError

    requests = _read_manifest(args.requests)
    if not requests:
        raise UsageError(f"{args.requests} holds no requests: there is nothing to measure")
    target = Store(store) if store else None
    failures = 0
    for request in requests:
        name, requested = request["experiment"], request["requested"]
        try:
            run_experiment(
                name,
                requested,
                device_setting=args.device,
                store=target,
                allow_busy=args.allow_busy,
            )
            print(f"ok      {name} {requested}")
        except BusyMachineError as exc:
            failures += 1
            why = busy_unstored(name, requested, exc.load) if target is None else str(exc)
            print(f"FAILED  {name} {requested}: {why}")
        except Exception as exc:  # one failed request must not stop the others
            failures += 1
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            print(f"FAILED  {name} {requested}: {type(exc).__name__}: {first}")
    return 1 if failures else 0


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    from attention_docs.book import local_device_id
    from attention_docs.experiments.registry import get
    from attention_docs.measurements.store import Store
    from attention_docs.profiling.device import resolve_device
    from attention_docs.profiling.headroom import free_memory_bytes
    from attention_docs.records.device import DEVICE_CHOICES

    if args.device not in DEVICE_CHOICES:
        raise UsageError(
            f"unknown device {args.device!r}; choose one of: {', '.join(DEVICE_CHOICES)}"
        )
    store = None if args.no_store else args.store
    if args.requests:
        if args.name or extra:
            raise UsageError(
                "give either --requests FILE or an experiment name with parameters, not both"
            )
        if store is not None:
            writable_store(store, "nothing was measured")
        return _run_requests(args, store)
    if not args.name:
        raise UsageError(f"run needs an experiment name (see `{PROG} list`)")
    exp = get(args.name)
    target = resolve_device(args.device)
    kind = target.type
    # A parameter given at this device's default lands on the key the chapters use.
    requested = exp.canonical(parse_params(extra), kind)
    # Refused here, before a worker starts, in the command line's words.
    problem = exp.memory_problem(
        exp.resolve(requested, kind), free_memory_bytes(target), f"this {kind}"
    )
    if problem:
        raise UsageError(problem)
    if store is None:
        with tempfile.TemporaryDirectory(prefix=folders.owned("attention-docs-run-")) as tmp:
            return _run_in_worker(args, exp, requested, kind, Path(tmp), keep=False)
    writable_store(store, "nothing was measured")
    # An entry a newer version of attention_docs wrote: the store would refuse to replace it
    # after the whole measurement.
    problem = Store(store).newer_problem(exp.name, exp.key(requested), local_device_id(kind))
    if problem:
        raise UsageError(f"{problem}, or give another --store; nothing was measured")
    return _run_in_worker(args, exp, requested, kind, store, keep=True)


def _run_in_worker(args, exp, requested: dict, kind: str, store: Path, *, keep: bool) -> int:
    from attention_docs.book import local_device_id
    from attention_docs.measurements.schema import Sourced
    from attention_docs.measurements.store import Store
    from attention_docs.workers import MeasurementError, run_worker

    try:
        # In a child of the worker server, as a build measures: the same imports done
        # before the experiment starts (and a caller that runs several reuses the server).
        run_worker(
            exp.name,
            requested,
            kind,
            store,
            args.timeout,
            allow_busy=args.allow_busy,
            imports=exp.imports,
        )
    except MeasurementError as exc:
        message = exc.message
        if exc.kind == "busy" and not keep:
            message = busy_unstored(exp.name, requested, exc.busy)
        if exc.kind == "timeout":
            had = arguments.seconds_text(args.timeout)
            message += f", or allow more time with --timeout (it had {had} s)"
        print(f"{PROG}: error: {message}", file=sys.stderr)
        if args.traceback and exc.output:
            print(exc.output, file=sys.stderr)
        elif exc.details:
            print(f"{PROG}: the worker's last output: add --traceback", file=sys.stderr)
        return 1 if exc.kind == "failed" else 2
    stored = Store(store)
    found = stored.get(exp.name, exp.key(requested), local_device_id(kind))
    if found is None:
        raise UsageError(f"the worker finished but left no readable entry of {exp.name} in {store}")
    rel = stored.relative(found.experiment, found.key, found.device_id)
    if keep:
        print_measurement(Sourced(found, "measured now", rel, base=f"{store}/"))
    else:
        print_measurement(Sourced(found, "measured now (not stored)", rel), kept=False)
    return 0


def busy_unstored(name: str, requested: dict, load: str | None) -> str:
    """Why a busy run under --no-store was refused. The runner's own sentence says it "was
    not stored" and that --allow-busy stores it: under --no-store nothing is ever stored."""
    from attention_docs.measurements.keys import params_text

    return (
        f"{name}({params_text(requested)}) was measured while other work competed for the "
        f"machine ({load or 'load not recorded'}), so its timings are not trustworthy; run it "
        "again on an idle machine, or pass --allow-busy to show it flagged as busy"
    )


def _read_entry(path: Path):
    from attention_docs.measurements.schema import Measurement, SchemaError

    try:
        return Measurement.loads(path.read_text(encoding="utf-8"))
    except IsADirectoryError:
        raise UsageError(f"{path} is a folder; give a stored .json file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(
            f"cannot read {path}: it is a binary file, not a stored measurement (.json)"
        ) from None
    except (SchemaError, KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"cannot read {path} as a stored measurement: {exc}") from None


def cmd_show(args: argparse.Namespace, extra: list[str]) -> int:
    from attention_docs.experiments.registry import get
    from attention_docs.measurements.schema import Sourced
    from attention_docs.measurements.store import Store

    path = Path(args.name)
    if path.suffix in (".json", ".gz") or path.is_file() or "/" in args.name:
        m = _read_entry(path)
        # Links are the store's: from its root, which holds the entry's experiment folder.
        root = path.parent.parent if path.parent.name == m.experiment else path.parent
        rel = path.relative_to(root).as_posix()
        print_measurement(Sourced(m, "from the store", rel, base=f"{root}/"))
        return 0
    exp = get(args.name)
    params = parse_params(extra)
    requested = exp.canonical(params)
    if args.store and not args.store.is_dir():  # a mistyped path, not an empty store
        raise UsageError(arguments.missing_store(args.store))
    stores = [args.store] if args.store else [COMMITTED_STORE, SCRATCH_STORE]
    # Under the key every device shares, then under the key a run on the command line gives
    # when a parameter equals that device's default (often the same key).
    keys = [exp.key(requested)] + [exp.key(exp.canonical(params, k)) for k in ("cuda", "cpu")]
    problems, elsewhere = [], set()
    for root in stores:
        # Problems are reported here, once each: the store's own warning says an entry "will
        # be measured again", which is a build's doing, never show's.
        store = Store(root, warn=False)
        found = [
            (key, device_id)
            for key in dict.fromkeys(keys)
            for device_id in store.devices(exp.name, key)
        ]
        if args.device:
            elsewhere.update(d for _, d in found if d != args.device)
            found = [(k, d) for k, d in found if d == args.device]
        found.sort(key=lambda kd: (not kd[1].startswith("cuda-"), kd[1]))
        for key, device_id in found:
            reported = len(store.problems)
            m = store.get(args.name, key, device_id)
            if m is not None:
                for problem in problems:
                    print(f"{PROG}: note: {problem}", file=sys.stderr)
                rel = store.relative(m.experiment, key, device_id)
                print_measurement(Sourced(m, "from the store", rel, base=f"{store.root}/"))
                return 0
            problems += [
                _unreadable(p, exp.name, requested, root) for p in store.problems[reported:]
            ]
    if problems:
        raise UsageError("; and ".join(problems))
    where = " or ".join(str(s) for s in stores)
    if elsewhere:  # the entry is there, for other devices than the one asked for
        raise UsageError(
            f"no stored measurement of {args.name} with {requested or 'default parameters'} on "
            f"the device {args.device} in {where}; it is stored for: {', '.join(sorted(elsewhere))}"
        )
    raise UsageError(
        f"no stored measurement of {args.name} with {requested or 'default parameters'} in "
        f"{where} (key {exp.key(requested)}); run it with: {PROG} run {args.name} ..."
    )


def _unreadable(problem, name: str, requested: dict, store: Path) -> str:
    from attention_docs.book import command_line

    if problem.newer:  # measuring it again here would not be stored: put refuses
        return f"the stored measurement {problem.path} was {problem.reason}"
    return (
        f"the stored measurement {problem.path} cannot be read ({problem.reason}); measure it "
        f"again with: {command_line(name, requested, store)}"
    )


def existing_store(path: Path) -> Path:
    """`path`, if it is a store folder; a mistyped path is a usage error, not an empty store."""
    from attention_docs.measurements.store import Store

    if not path.is_dir():
        raise UsageError(arguments.missing_store(path))
    if not Store(path).entry_paths():
        raise UsageError(
            f"{path} holds no measurement entries (<experiment>/<key>.<device id>.json): is it "
            f"a store? The committed store is {COMMITTED_STORE}; give another with --store"
        )
    return path


def writable_store(path: Path, outcome: str) -> None:
    """Raise UsageError unless the store at `path` can be written; `outcome` says what was
    left undone."""
    from attention_docs.measurements.store import Store

    problem = Store(path).write_problem()
    if problem:
        raise UsageError(
            f"{problem}; {outcome}: make it writable, or give a store you can write with --store"
        )


def cmd_prune(args: argparse.Namespace, extra: list[str]) -> int:
    from attention_docs.experiments import load_all
    from attention_docs.experiments.registry import REGISTRY
    from attention_docs.measurements.store import Store, stale_reason

    load_all()
    store = Store(existing_store(args.store))
    wanted = _requested_by_pages(args.store / "requests.json") if args.unrequested else None
    stale, kept = [], []
    for path, m, problem in store.entries():
        if m is None and problem.newer:
            kept.append((path, problem.reason))  # the checkout that wrote it reads it
        elif m is None:
            stale.append((path, f"unreadable: {problem.reason}"))
        elif why := stale_reason(m, REGISTRY.get(m.experiment)):
            stale.append((path, why))
        elif wanted is not None and _request_id(m.experiment, m.requested) not in wanted:
            stale.append((path, "no page requests it (requests.json)"))
    if stale and not args.dry_run:
        writable_store(args.store, "nothing was deleted")
    for path, why in kept:
        print(f"kept {path} ({why})")
    for path, why in stale:
        if not args.dry_run:
            store.remove(path)
        print(f"{'would delete' if args.dry_run else 'deleted'} {path} ({why})")
    print(
        f"{len(stale)} stale entr{'y' if len(stale) == 1 else 'ies'} {'found' if args.dry_run else 'removed'}"
    )
    return 0


def _requested_by_pages(manifest: Path) -> set[tuple[str, str]]:
    """(experiment, canonical requested JSON) of every request in the store's manifest."""
    from attention_docs.experiments.registry import REGISTRY, ExperimentError

    if not manifest.is_file():
        raise UsageError(
            f"--unrequested needs {manifest}, which a full build (`nox -s docs`) writes"
        )
    wanted = set()
    for i, r in enumerate(_read_manifest(manifest)):
        if r["experiment"] not in REGISTRY:
            continue
        try:
            wanted.add(_request_id(r["experiment"], r["requested"]))
        except ExperimentError as exc:
            raise UsageError(
                f"request {i} of {manifest} is not valid: {exc}; nothing was deleted (a full "
                "build, `nox -s docs`, writes the manifest anew)"
            ) from None
    return wanted


def _request_id(experiment: str, requested: dict) -> tuple[str, str]:
    """(experiment, its canonical parameters as JSON): one request, however it was asked."""
    from attention_docs.experiments.registry import REGISTRY

    return experiment, json.dumps(REGISTRY[experiment].canonical(requested), sort_keys=True)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "takes_params", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from attention_docs.analytic.gpu import UnknownGpuError
    from attention_docs.experiments.registry import ExperimentError
    from attention_docs.findings.gpu_forecast import ForecastError
    from attention_docs.findings.gpu_trace import TraceError
    from attention_docs.profiling.device import DeviceError
    from attention_docs.records.load import BusyMachineError
    from attention_docs.scaffold import ScaffoldError

    try:
        return args.handler(args, extra)
    except (
        UsageError,
        ExperimentError,
        DeviceError,
        BusyMachineError,
        ScaffoldError,
        TraceError,
        ForecastError,
        UnknownGpuError,  # `trace` and `forecast --gpu`: its message lists the known GPUs
    ) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `show ... | head -1`: the reader has what they wanted
        # Python flushes stdout again at exit, into the closed pipe: point it elsewhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
