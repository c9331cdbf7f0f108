# Many GPUs through Hugging Face Jobs (issue 29), tested up to the network boundary: the
# script's own metadata against the package's, the jobs the fleet would submit (through
# huggingface_hub's real run_uv_job, with only its uploads and its POST replaced), the one
# sentence without a network, a token or huggingface_hub, the script run end to end here
# with --device cpu from the wheel alone, and archives from two real CPUs imported side by
# side without losing an entry.
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.requirements import Requirement
from recorded import DATA

from attention_docs import cli, fleet, site_pages
from attention_docs.archive import ARCHIVE, RUN_LOG, write_archive
from attention_docs.experiments.registry import get
from attention_docs.measurements.schema import Measurement
from attention_docs.measurements.store import Store, stale_reason

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "gpu_measure.py"
# The reference regex of PEP 723 (https://peps.python.org/pep-0723/#reference-implementation).
PEP_723 = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")
FLAVORS = ["a100-large", "h200", "l40sx1", "l4x1"]
EXPERIMENTS = "ATTENTION_DOCS_EXPERIMENTS"


def script_metadata(path: Path) -> dict:
    (block,) = [m for m in PEP_723.finditer(path.read_text()) if m["type"] == "script"]
    content = "".join(
        line[2:] if line.startswith("# ") else line[1:]
        for line in block["content"].splitlines(keepends=True)
    )
    return tomllib.loads(content)


def test_the_scripts_inline_metadata_is_the_packages_with_torch_pinned_as_ci_pins_it():
    """uv installs what the header says on a job: a dependency the package gained, or a
    torch pin moved in constraints.txt but not here, would measure other code there."""
    meta = script_metadata(SCRIPT)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["requires-python"] == project["requires-python"]
    pins = {
        Requirement(line).name: Requirement(line)
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    declared = {Requirement(d).name: Requirement(d) for d in project["dependencies"]}
    script = {Requirement(d).name: Requirement(d) for d in meta["dependencies"]}
    assert set(script) == set(declared)
    for name, requirement in script.items():
        expected = pins.get(name, declared[name])
        assert str(requirement.specifier) == str(expected.specifier), name
    assert str(script["torch"].specifier) == "==2.13.0"
    # The pin lies in the range the package declares.
    assert declared["torch"].specifier.contains("2.13.0")


def specs(tmp_path: Path, flavors=FLAVORS) -> list[fleet.JobSpec]:
    wheel = tmp_path / site_pages.WHEEL
    wheel.write_bytes(b"PK")
    manifest = tmp_path / "requests.json"
    manifest.write_text("[]")
    return fleet.job_specs(
        flavors,
        script=SCRIPT,
        wheel=wheel,
        manifest=manifest,
        budget_s=1800,
        stamp="20261201-120000",
        commit="abc123",
    )


def test_one_job_per_flavor_with_what_it_runs(tmp_path):
    jobs = specs(tmp_path, [*FLAVORS, "h200", "cpu-upgrade"])
    assert [j.flavor for j in jobs] == [*FLAVORS, "cpu-upgrade"]  # named twice: one job
    assert [j.device_kind for j in jobs] == ["cuda"] * 4 + ["cpu"]  # a CPU flavor measures its CPU
    for job in jobs:
        args = list(job.script_args)
        assert args[args.index("--package") + 1] == str(tmp_path / site_pages.WHEEL)
        assert args[args.index("--requests") + 1] == str(tmp_path / "requests.json")
        assert args[args.index("--out") + 1] == fleet.OUT_MOUNT
        assert args[args.index("--device") + 1] == job.device_kind
        assert float(args[args.index("--budget-s") + 1]) == 1800
        assert job.timeout_s == 1800 + fleet.SETUP_S
        assert job.labels == {"project": "attention-docs", "flavor": job.flavor, "commit": "abc123"}
        assert job.command().startswith(f"hf jobs uv run --flavor {job.flavor} --timeout ")
        assert f":{fleet.OUT_MOUNT}:rw {SCRIPT} --package" in job.command()
    assert len({j.out_folder for j in jobs}) == len(jobs)  # each job writes its own folder
    assert all(j.flavor in fleet.flavors_known() for j in jobs)


@pytest.mark.filterwarnings("ignore:'HfApi.run_uv_job' is experimental")
def test_the_submitted_job_is_the_script_with_the_wheel_and_manifest_mounted(tmp_path, monkeypatch):
    """Through huggingface_hub's own run_uv_job: local files among the arguments are
    uploaded and mounted at /data, and the command is `uv run` of the uploaded script."""
    from huggingface_hub import HfApi, Volume

    uploaded, posted = [], []

    def create_bucket(self, bucket_id, **kwargs):
        return SimpleNamespace(url=f"https://huggingface.co/buckets/{bucket_id}")

    def batch_bucket_files(self, bucket_id, add=(), **kwargs):
        uploaded.extend((Path(local), remote) for local, remote in add)

    def run_job(self, **kwargs):
        posted.append(kwargs)
        return SimpleNamespace(id="job-1", url="https://huggingface.co/jobs/me/job-1")

    monkeypatch.setattr(HfApi, "create_bucket", create_bucket)
    monkeypatch.setattr(HfApi, "batch_bucket_files", batch_bucket_files)
    monkeypatch.setattr(HfApi, "run_job", run_job)
    (job,) = specs(tmp_path, ["h200"])
    out = Volume(type="bucket", source="me/jobs-artifacts", mount_path="/out", path=job.out_folder)
    HfApi(token="hf_unused").run_uv_job(**job.run_kwargs(out), namespace="me")
    assert sorted(p.name for p, _ in uploaded) == sorted(
        ["gpu_measure.py", site_pages.WHEEL, "requests.json"]
    )
    (sent,) = posted
    command = sent["command"]
    assert command[:3] == ["uv", "run", "/data/gpu_measure.py"]
    assert command[command.index("--package") + 1] == f"/data/{site_pages.WHEEL}"
    assert command[command.index("--requests") + 1] == "/data/requests.json"
    assert command[command.index("--out") + 1] == "/out"
    assert sent["flavor"] == "h200" and sent["timeout"] == job.timeout_s
    assert {v.mount_path for v in sent["volumes"]} == {"/out", "/data"}
    assert sent["name"] == "attention-docs-h200"


def fleet_cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    store = tmp_path / "store"
    store.mkdir(exist_ok=True)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    environ |= {"HF_HOME": str(tmp_path / "hf-home"), **env}  # no token stored there
    command = [sys.executable, "-m", "attention_docs", "fleet", *args, "--store", str(store)]
    return subprocess.run(
        [*command, "--folder", str(tmp_path / "fleet")],
        capture_output=True,
        text=True,
        env=environ,
        cwd=ROOT,
        timeout=300,
        check=False,
    )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once the socket is: nothing listens there


def one_sentence(proc: subprocess.CompletedProcess, message: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_without_a_network_the_fleet_says_so_and_submits_nothing(tmp_path):
    endpoint = f"http://127.0.0.1:{closed_port()}"
    proc = fleet_cli(tmp_path, "h200", "l4x1", HF_ENDPOINT=endpoint, HF_TOKEN="hf_test")
    one_sentence(proc, f"cannot reach the Hugging Face Hub at {endpoint}")
    assert "the fleet needs a network; nothing was submitted" in proc.stderr
    # What it prepared is kept, and nothing came back to import.
    assert (tmp_path / "fleet" / site_pages.WHEEL).is_file()
    assert list((tmp_path / "store").iterdir()) == []


def test_offline_mode_is_no_network_either(tmp_path):
    proc = fleet_cli(tmp_path, "h200", HF_HUB_OFFLINE="1", HF_TOKEN="hf_test")
    one_sentence(proc, "cannot reach the Hugging Face Hub")


def test_without_a_token_the_fleet_says_how_to_log_in(tmp_path):
    proc = fleet_cli(tmp_path, "a100-large")
    one_sentence(proc, "no Hugging Face token: log in with `hf auth login` (or set HF_TOKEN)")


def test_an_unknown_flavor_is_named_with_the_known_ones(tmp_path):
    proc = fleet_cli(tmp_path, "h200", "h100x9")
    one_sentence(proc, "'h100x9' is not a Jobs flavor; the flavors are: cpu-basic")


def test_a_folder_with_an_earlier_runs_archive_is_refused(tmp_path):
    (tmp_path / "fleet" / "h200").mkdir(parents=True)
    (tmp_path / "fleet" / "h200" / ARCHIVE).write_bytes(b"earlier")
    proc = fleet_cli(tmp_path, "h200", "--dry-run", HF_HUB_OFFLINE="1")
    one_sentence(proc, "holds an earlier run's folder for h200")
    assert (tmp_path / "fleet" / "h200" / ARCHIVE).read_bytes() == b"earlier"


def test_a_dry_run_prints_each_job_and_submits_none(tmp_path):
    tmp_path = tmp_path / "with space"  # the commands it prints quote what they must
    tmp_path.mkdir()
    proc = fleet_cli(tmp_path, *FLAVORS, "--dry-run", "--budget-s", "600", HF_HUB_OFFLINE="1")
    assert proc.returncode == 0, proc.stderr
    for flavor in FLAVORS:
        assert f"hf jobs uv run --flavor {flavor} --timeout {600 + fleet.SETUP_S}s" in proc.stdout
        line = next(x for x in proc.stdout.splitlines() if f"--flavor {flavor} " in x)
        words = shlex.split(line)
        assert words[words.index("--package") + 1] == str(tmp_path / "fleet" / site_pages.WHEEL)
    assert f"price: see {fleet.PRICING} (the Hub did not answer)" in proc.stdout
    assert "4 job(s) would be submitted; none was (--dry-run)" in proc.stdout
    # The manifest it would send holds the store's requests, in the pages' order.
    sent = json.loads((tmp_path / "fleet" / "requests.json").read_text())
    committed = json.loads((ROOT / "docs/measurements/requests.json").read_text())
    assert sorted(map(json.dumps, sent)) == sorted(map(json.dumps, committed))
    assert sent[0]["experiment"] == "machine_ceilings"


def test_without_huggingface_hub_the_fleet_says_how_to_get_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails
    code = cli.main(["fleet", "h200"])
    err = capsys.readouterr().err
    assert code == 2 and "the fleet needs huggingface_hub 2.4 or newer" in err
    assert "nox -s fleet" in err and len(err.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    return fleet.wheel_into(folder)


def test_the_script_runs_alone_from_the_wheel_with_device_cpu_and_its_archive_imports(
    tmp_path, wheel
):
    """As a job runs it: the script copied away from the source tree, the package from
    the wheel (in the script and in its workers), a one-request manifest."""
    job = tmp_path / "data"
    job.mkdir()
    shutil.copy(SCRIPT, job / "gpu_measure.py")
    shutil.copy(wheel, job / wheel.name)
    (job / "requests.json").write_text(json.dumps([{"experiment": "sdpa_why", "requested": {}}]))
    # A job's environment: no source tree on the path, no tests' experiments.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", EXPERIMENTS)}
    command = [sys.executable, str(job / "gpu_measure.py"), "--package", str(job / wheel.name)]
    command += ["--requests", str(job / "requests.json"), "--out", str(tmp_path / "out")]
    proc = subprocess.run(
        [*command, "--device", "cpu", "--budget-s", "300"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = json.loads((tmp_path / "out" / RUN_LOG).read_text())
    assert log["package"] == wheel.name
    package = Path(log["environment"]["package"])  # where the workers' probe imported it from
    assert not package.is_relative_to(ROOT / "src") and "package" in package.parent.parent.name
    assert [r["status"] for r in log["requests"]] == ["ok"]
    store = tmp_path / "store"
    store.mkdir()
    code = cli.main(["import-archive", str(tmp_path / "out" / ARCHIVE), "--store", str(store)])
    assert code == 0
    (entry,) = store.glob("sdpa_why/*.json")
    measured = Measurement.loads(entry.read_text())
    assert stale_reason(measured, get(measured.experiment)) is None
    # The unpacked wheel went with the run.
    assert not package.parent.exists()


def ours(count: int) -> list[Path]:
    """`count` recorded entries of this machine's store that name no trace file."""
    found = [
        p
        for p in sorted(DATA.glob("*.json"))
        if "cpu-intel-xeon" not in p.name and not json.loads(p.read_text()).get("trace_file")
    ]
    assert len(found) >= count
    return found[:count]


def archive_of(tmp_path: Path, name: str, entries: list[Path]) -> Path:
    """An archive as gpu_measure.py writes it, holding these real entries."""
    store = tmp_path / f"{name}-store"
    for path in entries:
        m = Measurement.loads(path.read_text())
        target = Store(store).path(m.experiment, m.key, m.device_id)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    log = {"format": 1, "device": "cpu", "complete": True, "requests": [], "total_s": 1.0}
    return write_archive(tmp_path / f"{name}.tar.gz", store, log)


def test_archives_from_two_real_cpus_fill_the_store_side_by_side(tmp_path, capsys):
    """The Intel Xeon guest's forward_times (the project's history) and this store's
    entries: both devices' files end in the store, and importing one again loses none."""
    here = ours(3)
    xeon = DATA / "forward_times.cpu-intel-xeon.json"
    mine = archive_of(tmp_path, "here", here)
    theirs = archive_of(tmp_path, "xeon", [xeon])
    store = tmp_path / "store"
    store.mkdir()
    assert cli.main(["import-archive", str(mine), "--store", str(store)]) == 0
    # The Xeon's entry was keyed by older code: import-archive says so and keeps it out,
    # unless asked; then it lies beside this machine's.
    assert cli.main(["import-archive", str(theirs), "--store", str(store)]) == 1
    assert "stale, not imported" in capsys.readouterr().out
    flags = ["--store", str(store), "--allow-stale"]
    assert cli.main(["import-archive", str(theirs), *flags]) == 0
    assert cli.main(["import-archive", str(mine), "--store", str(store)]) == 0
    devices = {Measurement.loads(p.read_text()).device_id for p in store.glob("*/*.json")}
    assert devices == {Measurement.loads(here[0].read_text()).device_id, "cpu-intel-xeon"}
    assert len(list(store.glob("*/*.json"))) == len(here) + 1
    assert "replaced" in capsys.readouterr().out


class FakeHub:
    """The Hub after the jobs ran: each job's folder as the job left it."""

    def __init__(self, left: dict[str, Path | None], stages: dict[str, str]):
        self.left, self.stages = left, stages

    def wait_for_job(self, ids, **kwargs):
        return [SimpleNamespace(id=i, status=SimpleNamespace(stage=self.stages[i])) for i in ids]

    def fetch_job_logs(self, job_id, **kwargs):
        return [f"log of {job_id}: CUDA out of memory"]

    def sync_bucket(self, source, dest):
        archive = self.left[source.rsplit("-", 1)[-1]]
        if archive is not None:
            shutil.copy(archive, Path(dest) / ARCHIVE)


def test_collect_imports_what_each_job_left_and_keeps_what_it_cannot(tmp_path, capsys):
    """A completed job's archive is imported; a failed job's partial archive too; a job that
    left none is said; an archive that cannot be imported stays, with the command."""
    here = ours(2)
    good = archive_of(tmp_path, "good", here[:1])
    partial = archive_of(tmp_path, "partial", here[1:2])
    stale = archive_of(tmp_path, "stale", [DATA / "forward_times.cpu-intel-xeon.json"])
    left = {"h200": good, "a100": partial, "l4x1": None, "l40sx1": stale}
    stages = {"h200": "COMPLETED", "a100": "ERROR", "l4x1": "ERROR", "l40sx1": "COMPLETED"}
    jobs = []
    for flavor in left:
        folder = tmp_path / "fleet" / flavor
        folder.mkdir(parents=True)
        spec = SimpleNamespace(flavor=flavor, timeout_s=60)
        volume = SimpleNamespace(source="me/jobs-artifacts", path=f"attention-docs-x-{flavor}")
        jobs.append(fleet.Submitted(spec, SimpleNamespace(id=flavor), volume, folder))
    store = tmp_path / "store"
    store.mkdir()
    code = fleet.collect(FakeHub(left, stages), jobs, store, "me")
    out = capsys.readouterr().out
    assert code == 1
    assert len(list(store.glob("*/*.json"))) == 2  # the completed and the partial one
    assert "a100: job a100 ended ERROR" in out and "log of a100: CUDA out of memory" in out
    assert "no archive came back from l4x1: nothing to import" in out
    kept = tmp_path / "fleet" / "l40sx1" / ARCHIVE
    assert kept.is_file() and f"the archive stays in {kept}" in out


def test_the_fleet_is_listed_with_the_other_commands(capsys):
    with pytest.raises(SystemExit):
        cli.main(["fleet", "--help"])
    help_text = capsys.readouterr().out
    assert "--dry-run" in help_text and "--budget-s" in help_text


def test_a_dry_run_without_a_folder_leaves_nothing_it_staged_behind(tmp_path):
    # Without --folder it stages under .cache/fleet/<stamp>/, and takes that away again.
    staged = ROOT / ".cache" / "fleet"
    before = sorted(staged.iterdir()) if staged.is_dir() else []
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    environ |= {"HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_OFFLINE": "1"}
    store = tmp_path / "store"
    store.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "attention_docs", "fleet", "h200", "--dry-run", "--store", store],
        capture_output=True, text=True, env=environ, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--folder keeps what it stages" in done.stdout
    assert (sorted(staged.iterdir()) if staged.is_dir() else []) == before
