# `python -m attention_docs list | run | show | prune`: the experiments outside the docs.
# Every bad input ends in one line saying what was wrong and what is valid, exit code 2.
from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_STORE = Path("docs/measurements")


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit code 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m attention_docs",
        description="Run the experiments behind 'Attention, Profiled' and read the measurement store.",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="{list,run,show,prune,migrate,import-archive}"
    )
    sub.add_parser("list", help="list experiments and their parameters")

    run = sub.add_parser(
        "run",
        help="run an experiment and print its tables",
        description="Run NAME with --PARAM VALUE pairs (see `list`) and print the tables a chapter shows.",
    )
    run.add_argument("name", nargs="?", help="experiment name")
    run.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    run.add_argument(
        "--store", type=Path, default=DEFAULT_STORE, help="store folder (default: %(default)s)"
    )
    run.add_argument("--no-store", action="store_true", help="do not write the result to the store")
    run.add_argument(
        "--requests", type=Path, help="run every request listed in this manifest instead of NAME"
    )
    run.add_argument(
        "--allow-busy",
        action="store_true",
        help="store the result even if other work competed for the machine while it ran "
        "(it is flagged as busy); without it such a result is refused",
    )

    show = sub.add_parser("show", help="print a stored measurement")
    show.add_argument("name", help="experiment name, or the path of a stored .json file")
    show.add_argument("--store", type=Path, default=DEFAULT_STORE)
    show.add_argument(
        "--device",
        default=None,
        help="device id of the entry to show, e.g. cuda-h200 (default: GPU entries first)",
    )

    prune = sub.add_parser("prune", help="delete stale or unreadable entries from the store")
    prune.add_argument("--store", type=Path, default=DEFAULT_STORE)
    prune.add_argument("--dry-run", action="store_true", help="only say what would be deleted")

    migrate = sub.add_parser(
        "migrate",
        help="rename entries named by device kind (KEY.cpu.json) to their device id",
    )
    migrate.add_argument("--store", type=Path, default=DEFAULT_STORE)

    from attention_docs import archive

    archive.add_parser(sub)

    worker = sub.add_parser("_worker", help=argparse.SUPPRESS)
    worker.add_argument("name")
    worker.add_argument("--params", default="{}")
    worker.add_argument("--device", default="auto")
    worker.add_argument("--store", type=Path, required=True)
    worker.add_argument("--allow-busy", action="store_true")
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
    """Tables for a terminal: captions' HTML tags removed."""
    return re.sub(r"<[^>]+>", "", markdown)


def print_measurement(sourced) -> None:
    from attention_docs import render

    m = sourced.measurement
    print(f"# {m.experiment} — {render.caption_text(sourced)}\n")
    if m.steps:
        print(_plain(render.step_table(sourced)) + "\n")
        print(render.dominant_step(m) + "\n")
    if m.timing:
        print(render.forward_time(m) + "\n")
    if m.ops:
        print(_plain(render.op_table(sourced)) + "\n")
    for name in sorted(m.tables):
        print(f"## {name}\n\n" + _plain(render.records_table(sourced, name)) + "\n")
    for note in m.notes:
        print(f"note: {note}")
    print(f"raw data: {sourced.json_href}")
    if sourced.trace_href:
        print(
            f"trace: {sourced.trace_href} (open it at https://ui.perfetto.dev or chrome://tracing)"
        )


def cmd_list() -> int:
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


def _run_one(
    name: str,
    params: dict[str, Any],
    device: str,
    store_root: Path | None,
    *,
    quiet: bool = False,
    allow_busy: bool = False,
):
    from attention_docs.experiments.runner import run_experiment
    from attention_docs.measurements.schema import Sourced
    from attention_docs.measurements.store import Store

    store = Store(store_root) if store_root else None
    m = run_experiment(name, params, device=device, store=store, allow_busy=allow_busy)
    if store is None:
        return Sourced(m, "measured now (not stored)", "-", base="")
    rel = store.relative(m.experiment, m.key, m.device_id)
    sourced = Sourced(m, "measured now", rel, base=f"{store.root}/")
    if not quiet:
        print_measurement(sourced)
    return sourced


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    from attention_docs.profiling.device import DEVICE_CHOICES

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
        try:
            requests = json.loads(args.requests.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"cannot read requests manifest {args.requests}: {exc}") from None
        failures = 0
        for request in requests:
            try:
                _run_one(
                    request["experiment"],
                    request["requested"],
                    args.device,
                    store,
                    quiet=True,
                    allow_busy=args.allow_busy,
                )
                print(f"ok      {request['experiment']} {request['requested']}")
            except Exception as exc:
                failures += 1
                print(
                    f"FAILED  {request['experiment']} {request['requested']}: {type(exc).__name__}: {exc}"
                )
        return 1 if failures else 0
    if not args.name:
        raise UsageError("run needs an experiment name (see `python -m attention_docs list`)")
    result = _run_one(
        args.name, parse_params(extra), args.device, store, allow_busy=args.allow_busy
    )
    if store is None:
        print_measurement(result)
    return 0


def cmd_show(args: argparse.Namespace, extra: list[str]) -> int:
    from attention_docs.experiments.registry import get
    from attention_docs.measurements.schema import Measurement, SchemaError, Sourced
    from attention_docs.measurements.store import Store

    path = Path(args.name)
    if path.suffix == ".json":
        try:
            m = Measurement.loads(path.read_text(encoding="utf-8"))
        except (OSError, SchemaError) as exc:
            raise UsageError(f"cannot read {path}: {exc}") from None
        print_measurement(Sourced(m, "from the store", path.name, base=f"{path.parent}/"))
        return 0
    exp = get(args.name)
    requested = exp.check(parse_params(extra))
    key = exp.key(requested)
    store = Store(args.store)
    available = store.devices(args.name, key)
    devices = (
        [args.device]
        if args.device
        else sorted(available, key=lambda d: (not d.startswith("cuda-"), d))
    )
    for device in devices:
        m = store.get(args.name, key, device)
        if m is not None:
            print_measurement(
                Sourced(
                    m,
                    "from the store",
                    store.relative(m.experiment, key, device),
                    base=f"{store.root}/",
                )
            )
            return 0
    raise UsageError(
        f"no stored measurement of {args.name} with {requested or 'default parameters'} in {args.store} "
        f"(key {key}); run it with: python -m attention_docs run {args.name} ..."
    )


def cmd_prune(args: argparse.Namespace) -> int:
    from attention_docs.experiments import load_all
    from attention_docs.experiments.registry import REGISTRY
    from attention_docs.measurements.store import Store

    load_all()
    store = Store(args.store)
    stale = []
    for path, m, problem in store.entries():
        if m is None:
            stale.append((path, f"unreadable: {problem}"))
        elif m.experiment not in REGISTRY:
            stale.append((path, f"experiment {m.experiment} no longer exists"))
        elif m.fingerprint != REGISTRY[m.experiment].fingerprint():
            stale.append((path, "the code it measured has changed"))
        elif m.key != REGISTRY[m.experiment].key(m.requested):
            stale.append((path, "it was measured with an older measuring method"))
    for path, why in stale:
        if not args.dry_run:
            store.remove(path)
        print(f"{'would delete' if args.dry_run else 'deleted'} {path} ({why})")
    print(
        f"{len(stale)} stale entr{'y' if len(stale) == 1 else 'ies'} {'found' if args.dry_run else 'removed'}"
    )
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from attention_docs.measurements.store import Store

    moved = Store(args.store).migrate()
    for old, new in moved:
        print(f"renamed {old.name} -> {new.name}")
    print(f"{len(moved)} entr{'y' if len(moved) == 1 else 'ies'} renamed")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from attention_docs.experiments.runner import run_experiment
    from attention_docs.measurements.store import Store

    run_experiment(
        args.name,
        json.loads(args.params),
        device=args.device,
        store=Store(args.store),
        allow_busy=args.allow_busy,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("run", "show"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from attention_docs import archive
    from attention_docs.experiments.registry import ExperimentError
    from attention_docs.experiments.runner import BusyMachineError
    from attention_docs.profiling.device import DeviceError

    commands = {
        "list": cmd_list,
        "run": lambda: cmd_run(args, extra),
        "show": lambda: cmd_show(args, extra),
        "prune": lambda: cmd_prune(args),
        "migrate": lambda: cmd_migrate(args),
        "import-archive": lambda: archive.cmd_import_archive(args, parser.prog),
        "_worker": lambda: cmd_worker(args),
    }
    try:
        return commands[args.command]()
    except (UsageError, ExperimentError, DeviceError, BusyMachineError) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
