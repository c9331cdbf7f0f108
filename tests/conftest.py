# Shared fixtures. Everything runs on the CPU with tiny shapes; GPU tests are marked `gpu`
# and skipped without CUDA.
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"

# Experiments defined in tests/fake_experiments.py are visible to worker processes too.
os.environ["ATTENTION_DOCS_EXPERIMENTS"] = "fake_experiments"
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(TESTS), os.environ.get("PYTHONPATH", "")])
)
sys.path.insert(0, str(TESTS))
# The suite runs two workers on shared cores, so the tiny fake experiments its builds measure
# are usually "busy"; their numbers are never published, and a build would otherwise wait up
# to a minute for the machine to calm before measuring each again. tests/test_busy.py sets
# its own wait to test exactly that.
os.environ.setdefault("ATTENTION_DOCS_BUSY_WAIT", "0")
# Inductor checks each vector ISA this CPU reports by building a test library with g++ and
# loading it in a new interpreter: ~9 s of CPU per empty compile cache (each cold compile the
# suite measures has one) and ~1 s per process that compiles. The suite trusts what the CPU
# reports (torch still reads its flags from /proc/cpuinfo): the fusion notebook's test took
# 91 CPU-seconds with the checks, 68 without.
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
# The suite's builds are local builds, also where CI sets GITHUB_REPOSITORY (GitHub Actions):
# no site address, no edit links. tests/test_publish.py builds with a repository on purpose.
for _variable in ("ATTENTION_DOCS_REPOSITORY", "GITHUB_REPOSITORY"):
    os.environ.pop(_variable, None)


from short_timing import short_cpu_rounds  # noqa: E402 (tests/ is on sys.path from here)

short_cpu_rounds()


# The tests run on two workers with `--dist loadscope` (noxfile.py): each module's tests go to
# one worker, so a module-scoped fixture (the whole site's build, a measurement, the GPU run's
# rehearsal) is made once, not once per worker. The modules that measure through this
# process's worker server go to one worker together, in this order, and share it: each
# server costs seconds to start (torch, and Dynamo and Inductor once a request declares
# them), and test_workers replaces its own last.
SHARED_SERVER = ("tests/test_busy.py", "tests/test_gpu_run.py", "tests/test_workers.py")
# A module whose tests are long and independent: each test is a scope of its own, so that
# both workers start one (the fusion notebook alone takes about a third of the run).
ONE_BY_ONE = ("tests/test_notebook_alone.py",)


def pytest_configure(config):
    """Each of the suite's processes gets its share of the cores as OpenMP threads: two test
    workers with two threads each on a 2-core machine oversubscribe it, and the threads
    waiting for each other took about 15% more of its CPU time. Set here, before a test
    module imports torch and before xdist starts its workers (they inherit it, as do the
    builds and worker servers the tests start); a value the caller set is kept."""
    from attention_docs.profiling.load import cores_available  # torch-free

    workers = getattr(config.option, "numprocesses", None)
    workers = workers if isinstance(workers, int) and workers > 0 else 1
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, cores_available() // workers)))


@pytest.hookimpl(optionalhook=True)  # `pytest -p no:xdist` (nox -s browser) has no such hook
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    # xdist would sort the modules by their number of tests (a parametrised module of quick
    # checks first), undoing the order pytest_collection_modifyitems gives them below.
    config.option.loadscopereorder = False

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.split("::", 1)[0] in SHARED_SERVER:
                return "worker server"
            if nodeid.split("::", 1)[0] in ONE_BY_ONE:
                return nodeid
            return super()._split_scope(nodeid)

    return Scheduling(config, log)


# The longest modules first (cold compile caches, measuring builds), so that the run does not
# end with one worker still in one of them while the other has nothing left. A reader's
# notebook, run in a fresh environment and measuring what it shows, is the longest by far.
# xdist hands each worker two scopes to begin with (the 1st and 3rd, the 2nd and 4th): one
# worker makes the readers' environment and runs both notebooks, the fusion one first, while
# the other starts FlexAttention's compiles, which pay Inductor's one-time work (its ISA
# checks and precompiled header, ~15 s), instead of waiting for that environment; winners'
# compiles come later, and so do not wait on Inductor's locks with a core idle.
LONGEST_FIRST = (
    "tests/test_notebook_alone.py::test_a_downloaded_notebook_runs_alone_and_shows_rendered_tables[06_fusion]",
    "tests/test_flex.py",
    "tests/test_notebook_alone.py",
    "tests/test_docs_build.py",
    *SHARED_SERVER,
    "tests/test_winners.py",
    "tests/test_contributor_loop.py",
    "tests/test_flash.py",
    "tests/test_fusion.py",
    "tests/test_cli.py",
    "tests/test_reader.py",
)


def pytest_collection_modifyitems(config, items):
    import torch

    rank = {module: i for i, module in enumerate(LONGEST_FIRST)}
    # A stable sort: each module's tests keep their order.
    items.sort(
        key=lambda item: rank.get(item.nodeid, rank.get(item.nodeid.split("::", 1)[0], len(rank)))
    )
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_measurement():
    """A real measurement of naive attention at a tiny shape, made in this process once per
    test worker (a Measurement is immutable). Renderer and claim tests read recorded ones
    instead (tests/recorded.py)."""
    from attention_docs.experiments.runner import run_experiment

    return run_experiment(
        "naive_steps", {"seq_len": 32, "num_heads": 2, "head_dim": 16}, device_setting="cpu"
    )


def python_prints(code: str) -> str:
    """What `code` prints (stripped) when run in a new interpreter: for checks on what a
    fresh process imports, and on output that must not depend on the process."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="session")
def quick_entries(tmp_path_factory) -> Path:
    """A store holding _test_quick at seq_len 8 and 4, measured once for every test that
    needs a stored entry to begin with (a build that measures costs a worker's start)."""
    from attention_docs.experiments.runner import run_experiment
    from attention_docs.measurements.store import Store

    root = tmp_path_factory.mktemp("quick-entries")
    for seq_len in (8, 4):
        run_experiment("_test_quick", {"seq_len": seq_len}, device_setting="cpu", store=Store(root))
    return root


def with_entries(quick_entries: Path, root: Path, *seq_lens: int) -> None:
    """Copy the stored _test_quick entries at `seq_lens` into the minimal site at `root`."""
    for source in quick_entries.glob("_test_quick/*.json"):
        if json.loads(source.read_text())["requested"].get("seq_len") in seq_lens:
            target = root / "docs" / "measurements" / "_test_quick"
            target.mkdir(parents=True, exist_ok=True)
            stem = source.name.removesuffix(".json")
            for path in source.parent.glob(f"{stem}.*"):
                shutil.copy2(path, target / path.name)


@contextlib.contextmanager
def read_only(*folders: Path) -> Iterator[None]:
    """The files and folders under `folders` read-only while the block runs, as a store on a
    read-only mount or owned by another user is: a write there fails as it would.

    As root, permissions alone stop nothing (CAP_DAC_OVERRIDE): this thread then also drops
    that capability for the block (capabilities are per thread on Linux; processes it starts
    regain their own). Modes and capability are restored after, so tmp_path can be removed.
    """
    paths = [p for folder in folders for p in (folder, *folder.rglob("*"))]
    modes = {p: p.stat().st_mode for p in paths}
    for p in paths:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        with _without_dac_override():
            yield
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


@contextlib.contextmanager
def _without_dac_override() -> Iterator[None]:
    if os.geteuid() != 0:
        yield
        return
    if not sys.platform.startswith("linux"):
        pytest.skip("as root, a read-only folder needs Linux capabilities to stop a write")
    libc = ctypes.CDLL(None, use_errno=True)
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3
    if libc.capget(ctypes.byref(header), data) != 0:
        pytest.skip("cannot read this thread's capabilities")
    saved = data[0].effective
    data[0].effective &= ~((1 << 1) | (1 << 2))  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
    if libc.capset(ctypes.byref(header), data) != 0:
        pytest.skip("cannot drop CAP_DAC_OVERRIDE in this thread")
    try:
        yield
    finally:
        data[0].effective = saved
        libc.capset(ctypes.byref(header), data)
