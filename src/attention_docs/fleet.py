"""Many GPUs through Hugging Face Jobs: `python -m attention_docs fleet FLAVOR [FLAVOR ...]`.

One job per flavor runs tools/gpu_measure.py with this checkout's wheel and the requests
manifest, writing its archive to a bucket volume; each archive is then fetched under
`.cache/fleet/<stamp>/<flavor>/` and imported as `import-archive` would (one that cannot be
imported stays there). The Hub is reached only through huggingface_hub's job API.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from attention_docs import arguments
from attention_docs.measurements.keys import PACKAGE_ROOT

PROJECT = PACKAGE_ROOT.parents[1]
SCRIPT = PROJECT / "tools" / "gpu_measure.py"
MANIFEST = PROJECT / "docs" / "measurements" / "requests.json"
OUT_MOUNT = "/out"
# What a job spends before the script measures: the container's start and uv's install of
# torch's CUDA build with its NVIDIA libraries (about 3 GB), plus the archive's writing.
SETUP_S = 900
# Enough for every request of the manifest on one GPU (gpu_measure.py --plan --device cuda
# estimates them); a job is stopped at its timeout, budget + SETUP_S.
DEFAULT_BUDGET_S = 1800.0
HUB_NEEDED = (
    "the fleet needs huggingface_hub 2.4 or newer: run it through `nox -s fleet -- FLAVOR ...`, "
    "which installs it, or `pip install 'huggingface_hub>=2.4,<3'`"
)
PRICING = "https://huggingface.co/docs/hub/jobs-pricing"


class FleetError(Exception):
    """What stops the fleet, in one sentence a reader can act on."""


@dataclass(frozen=True)
class JobSpec:
    """One job: what `HfApi.run_uv_job` is given for one flavor, the output volume aside."""

    flavor: str
    device_kind: str  # what gpu_measure.py measures there: cuda, or cpu on a CPU flavor
    script: str
    script_args: tuple[str, ...]
    timeout_s: int
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    out_folder: str = ""  # the job's folder of the jobs-artifacts bucket

    def run_kwargs(self, out_volume: Any) -> dict[str, Any]:
        return {
            "script": self.script,
            "script_args": list(self.script_args),
            "flavor": self.flavor,
            "timeout": self.timeout_s,
            "name": self.name,
            "labels": dict(self.labels),
            "volumes": [out_volume],
        }

    def command(self) -> str:
        """The same job by hand, with the `hf` command line (its `-v` syncs the folder)."""
        volume = f"./{self.flavor}:{OUT_MOUNT}:rw"
        hf = ["hf", "jobs", "uv", "run", "--flavor", self.flavor, "--timeout"]
        return shlex.join([*hf, f"{self.timeout_s}s", "-v", volume, self.script, *self.script_args])


def flavors_known() -> list[str]:
    """The flavors huggingface_hub knows (its JobHardware enum, kept in step with the Hub)."""
    from huggingface_hub import JobHardware

    return [h.value for h in JobHardware]


def job_specs(
    flavors: list[str],
    *,
    script: Path,
    wheel: Path,
    manifest: Path,
    budget_s: float,
    stamp: str,
    commit: str,
) -> list[JobSpec]:
    """The job of each flavor. Local files among the arguments (the script, the wheel, the
    manifest) are uploaded by run_uv_job and mounted at /data; the output is a volume."""
    specs = []
    for flavor in dict.fromkeys(flavors):
        device_kind = "cpu" if flavor.startswith("cpu-") else "cuda"
        args = ["--package", str(wheel), "--requests", str(manifest), "--out", OUT_MOUNT]
        args += ["--device", device_kind, "--budget-s", f"{budget_s:g}"]
        specs.append(
            JobSpec(
                flavor=flavor,
                device_kind=device_kind,
                script=str(script),
                script_args=tuple(args),
                timeout_s=int(budget_s + SETUP_S),
                name=f"attention-docs-{flavor}",
                labels={"project": "attention-docs", "flavor": flavor, "commit": commit},
                out_folder=f"attention-docs-{stamp}-{flavor}",
            )
        )
    return specs


def ordered_manifest(manifest: Path, target: Path) -> Path:
    """`manifest`'s requests in run order (gpu_plan.py), written to `target`: the job has no
    chapters to order them by."""
    from attention_docs.gpu_plan import planned

    try:
        order, _ = planned(manifest, PROJECT / "docs" / "chapters")
    except ValueError as exc:
        raise FleetError(str(exc)) from None
    target.write_text(json.dumps(order, indent=1) + "\n", encoding="utf-8")
    return target


def wheel_into(folder: Path) -> Path:
    """This checkout's package as the wheel the site publishes, written into `folder`."""
    from attention_docs import site_pages
    from attention_docs.mkdocs_plugin import package_wheel

    data = package_wheel(PROJECT / ".cache")
    if data is None:
        raise FleetError(
            "the package's wheel could not be built from this checkout (the fleet runs from a "
            "source checkout, with hatchling installed: `nox -s fleet` has both)"
        )
    path = folder / site_pages.WHEEL
    path.write_bytes(data)
    return path


def commit_of(root: Path) -> str:
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return proc.stdout.strip() or "unknown"


def network_problem(exc: Exception) -> str | None:
    """One sentence for an error of the Hub's client, or None for a bug of ours."""
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(exc, HfHubHTTPError):
        status = getattr(exc.response, "status_code", None)
        if status == 401:
            return (
                "the Hugging Face Hub refused the token (401 Unauthorized): log in again with "
                "`hf auth login`, or set HF_TOKEN to a token with write access"
            )
        if status == 402:
            return f"the account has no credit for Jobs (402 Payment Required): see {PRICING}"
        first = str(exc).strip().splitlines()[0]
        return f"the Hugging Face Hub answered with an error: {first}"
    module = type(exc).__module__.split(".")[0]
    if isinstance(exc, OSError) or module.startswith("httpx"):
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (
            f"cannot reach the Hugging Face Hub at {constants.ENDPOINT} ({reason}): the fleet "
            "needs a network; nothing was submitted"
        )
    return None


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "fleet",
        help="measure the manifest on Hugging Face Jobs, one job per flavor, and import it",
        description="Submit one Hugging Face job per FLAVOR (a100-large, h200, l40sx1, l4x1, "
        "...) running tools/gpu_measure.py, wait for them, fetch each archive and import it "
        "into the store as import-archive would. Needs huggingface_hub, a token (`hf auth "
        "login`) and credit. Exit code 0: every job ran every request and was imported; 1: "
        "some job failed, was cut short or left entries out; 2: nothing was submitted.",
    )
    parser.add_argument("flavors", nargs="+", metavar="FLAVOR", help="Jobs hardware flavors")
    parser.add_argument("--store", type=arguments.path, default=Path("docs/measurements"))
    parser.add_argument("--requests", type=arguments.path, default=MANIFEST)
    parser.add_argument(
        "--budget-s",
        type=arguments.seconds("--budget-s", example="1800"),
        default=DEFAULT_BUDGET_S,
        help=f"seconds of measuring per job (default {DEFAULT_BUDGET_S:g}; each job's "
        f"timeout adds {SETUP_S} s for its start and installs)",
    )
    parser.add_argument("--namespace", help="the user or organisation the jobs run under")
    parser.add_argument(
        "--folder",
        type=arguments.path,
        help="where the wheel, the manifest and the fetched archives are kept (default: "
        ".cache/fleet/STAMP in the checkout)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the jobs it would submit, with their prices when the Hub answers; submit none",
    )
    parser.set_defaults(handler=cmd_fleet)


def cmd_fleet(args: argparse.Namespace, extra: list[str]) -> int:
    try:
        return run_fleet(args)
    except FleetError as exc:
        print(f"python -m attention_docs fleet: error: {exc}", file=sys.stderr)
        return 2


def run_fleet(args: argparse.Namespace) -> int:
    try:
        import huggingface_hub
    except ImportError:
        raise FleetError(HUB_NEEDED) from None
    if not hasattr(huggingface_hub.HfApi, "sync_job_volume"):
        raise FleetError(f"{HUB_NEEDED} (this is {huggingface_hub.__version__})")
    known = flavors_known()
    unknown = [f for f in args.flavors if f not in known]
    if unknown:
        raise FleetError(
            f"{', '.join(map(repr, unknown))} {'is not a' if len(unknown) == 1 else 'are not'} "
            f"Jobs flavor{'s' if len(unknown) > 1 else ''}; the flavors are: {', '.join(known)}"
        )
    if not args.store.is_dir():
        raise FleetError(f"{arguments.missing_store(args.store)}; nothing was submitted")
    if not SCRIPT.is_file():
        raise FleetError(f"the fleet runs from a source checkout: {SCRIPT} is missing")
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    staging = args.folder or PROJECT / ".cache" / "fleet" / stamp
    try:
        staging.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FleetError(f"cannot make the folder {staging}: {exc.strerror or exc}") from None
    used = [f for f in dict.fromkeys(args.flavors) if any((staging / f).glob("*"))]
    if used:  # an earlier run's archive would be uploaded again, or imported for this one's
        raise FleetError(
            f"{staging} holds an earlier run's folder for {', '.join(used)}: import what it "
            "holds with import-archive, then give another --folder"
        )
    manifest = ordered_manifest(args.requests, staging / "requests.json")
    wheel = wheel_into(staging)
    specs = job_specs(
        args.flavors,
        script=SCRIPT,
        wheel=wheel,
        manifest=manifest,
        budget_s=args.budget_s,
        stamp=stamp,
        commit=commit_of(PROJECT),
    )
    api = huggingface_hub.HfApi()
    if args.dry_run:  # what it staged under .cache/ is for jobs that are never submitted
        return dry_run(api, specs, None if args.folder else staging)
    if huggingface_hub.get_token() is None:
        raise FleetError(
            "no Hugging Face token: log in with `hf auth login` (or set HF_TOKEN); the jobs "
            f"are billed to that account by the minute ({PRICING})"
        )
    jobs: list[Submitted] = []
    try:
        namespace = args.namespace or api.whoami()["name"]
        submit(api, specs, staging, namespace, jobs)
        return collect(api, jobs, args.store, namespace)
    except Exception as exc:
        problem = network_problem(exc)
        if problem is None:
            raise
        if jobs:  # submitted jobs run on, and their folders can be fetched later
            problem = problem.replace("; nothing was submitted", "")
            fetch = "; ".join(
                f"hf buckets sync hf://buckets/{s.volume.source}/{s.volume.path} {s.folder}"
                for s in jobs
            )
            problem += (
                f", after {len(jobs)} job(s) were submitted ({', '.join(s.job.id for s in jobs)}):"
                f" when they end, fetch their archives with `{fetch}` and import each with "
                "`python -m attention_docs import-archive FOLDER/measurements.tar.gz`"
            )
        raise FleetError(problem) from None


def dry_run(api: Any, specs: list[JobSpec], staged: Path | None = None) -> int:
    """Print each job and its price; submit none, and remove `staged`, if given."""
    price = {}  # flavor -> (US dollars per hour, pretty name), from the Hub's live list
    try:
        for hw in api.list_jobs_hardware():
            per = {"minute": 60.0, "hour": 1.0, "second": 3600.0}.get(hw.unit_label)
            if per is not None:
                price[hw.name] = (hw.unit_cost_usd * per, hw.pretty_name)
    except Exception as exc:
        if network_problem(exc) is None:
            raise
    for spec in specs:
        hourly = price.get(spec.flavor)
        cost = (
            f"{hourly[1]}, ${hourly[0]:.2f}/h: at most ${hourly[0] * spec.timeout_s / 3600:.2f}"
            if hourly
            else f"price: see {PRICING} (the Hub did not answer)"
        )
        print(f"{spec.flavor} ({spec.device_kind}; {cost} for its {spec.timeout_s} s timeout)")
        print(f"  {spec.command()}")
    print(f"{len(specs)} job(s) would be submitted; none was (--dry-run)")
    if staged is not None:
        shutil.rmtree(staged, ignore_errors=True)
        print(f"(removed {staged}, staged for them: --folder keeps what it stages)")
    return 0


@dataclass
class Submitted:
    spec: JobSpec
    job: Any
    volume: Any
    folder: Path


def submit(
    api: Any, specs: list[JobSpec], staging: Path, namespace: str, jobs: list[Submitted]
) -> None:
    """Submit each job, appending it to `jobs` as it goes (what was submitted is known
    when the network fails half-way)."""
    for spec in specs:
        folder = staging / spec.flavor
        folder.mkdir(exist_ok=True)
        volume = api.sync_job_volume(
            folder,
            OUT_MOUNT,
            remote_name=spec.out_folder,
            read_only=False,
            namespace=namespace,
        )
        job = api.run_uv_job(**spec.run_kwargs(volume), namespace=namespace)
        print(f"{spec.flavor}: submitted job {job.id} ({job.url})", flush=True)
        jobs.append(Submitted(spec, job, volume, folder))


def collect(api: Any, jobs: list[Submitted], store: Path, namespace: str) -> int:
    """Wait for every job, fetch each one's folder and import its archive."""
    from attention_docs.archive import ARCHIVE, cmd_import_archive

    started = time.monotonic()
    longest = max(s.spec.timeout_s for s in jobs) + 600
    try:
        finished = api.wait_for_job(
            [s.job.id for s in jobs], timeout=longest, poll_interval=30, namespace=namespace
        )
    except TimeoutError:
        finished = [api.inspect_job(job_id=s.job.id, namespace=namespace) for s in jobs]
    code = 0
    for s, info in zip(jobs, finished, strict=True):
        stage = str(getattr(info.status.stage, "value", info.status.stage))
        print(
            f"{s.spec.flavor}: job {info.id} ended {stage} after {time.monotonic() - started:.0f} s"
        )
        if stage != "COMPLETED":
            code = 1
            for line in list(api.fetch_job_logs(job_id=info.id, namespace=namespace, tail=5)):
                print(f"  {line.rstrip()}")
        api.sync_bucket(f"hf://buckets/{s.volume.source}/{s.volume.path}", str(s.folder))
        archive = s.folder / ARCHIVE
        if not archive.is_file():
            print(f"  no archive came back from {s.spec.flavor}: nothing to import")
            code = 1
            continue
        imported = cmd_import_archive(
            argparse.Namespace(file=archive, store=store, allow_stale=False)
        )
        if imported != 0:
            print(
                f"  the archive stays in {archive}: import it later with `python -m "
                f"attention_docs import-archive {archive}`"
            )
            code = 1
    return code
