# The worker server (workers.py): experiments run in forked children that are given what a
# new process would be given, and a worker that hangs, dies or loses its server costs only
# itself.
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import python_prints

from attention_docs import book, workers
from attention_docs.experiments.registry import PRELOAD, get
from attention_docs.profiling.load import cores_available
from attention_docs.workers import MeasurementError, run_worker

pytestmark = pytest.mark.skipif(not workers.forking(), reason="workers are forked on Linux only")


def request(experiment: str, requested: dict, store: Path, timeout_s: float) -> None:
    """`run_worker` as a build calls it: with what the experiment's declaration imports."""
    run_worker(experiment, requested, "cpu", store, timeout_s, imports=get(experiment).imports)


def environment(store, **requested) -> dict:
    request("_test_environment", requested, store, 120)
    (path,) = (store / "_test_environment").glob("*.json")
    facts = json.loads(path.read_text())["facts"]
    path.unlink()
    return facts


def stopped(pid: int, within_s: float = 10.0) -> bool:
    """Whether process `pid` has ended (gone, or a zombie waiting to be reaped)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


# The tests down to the variable read share one worker server (this process's), in this
# order: those that leave it as it was come first, then those that replace it (a server
# lost mid-run, a variable read at import), each costing a server's start (~2 s: torch).
def test_a_worker_is_given_the_requesters_environment_and_folder(tmp_path, monkeypatch):
    store = tmp_path / "store"
    first = environment(store)
    server = workers._current
    assert server is not None and server.proc.poll() is None
    # As `python -m attention_docs.workers JOB` gives it: the job, as JSON.
    assert json.loads(first["argv"][0])["experiment"] == "_test_environment"
    monkeypatch.setenv("ATTENTION_DOCS_TEST_MARK", "set after the server started")
    monkeypatch.chdir(tmp_path)
    second = environment(store)
    assert second["mark"] == "set after the server started"
    assert second["cwd"] == str(tmp_path)
    assert second["pid"] != first["pid"]  # a fresh child each time
    assert workers._current is server  # no new server for a variable no library reads early


def test_the_server_imports_what_each_experiment_declares_before_forking_it(tmp_path):
    store = tmp_path / "store"
    workers._stop_server()
    # A new server, asked by a build for an experiment that neither profiles nor compiles:
    # its child starts with torch alone (Dynamo and Inductor cost seconds it does not need).
    book.configure(book.Settings(store=store))
    try:
        assert book.measure("_test_environment").measurement.facts["imported"] == ["torch"]
    finally:
        book.configure(book.Settings())
    # One that profiles: the server imports Dynamo before forking it, and keeps it.
    request("_test_quick", {"seq_len": 4}, store, 120)
    assert environment(store)["imported"] == ["torch", "torch._dynamo"]
    # Everything else declares the default: whatever a profile or a compile imports.
    assert get("naive_steps").imports == PRELOAD == get("forward_times").imports


def test_a_worker_past_its_time_is_killed_and_the_server_goes_on(tmp_path):
    store = tmp_path / "store"
    environment(store)
    server = workers._current
    started = time.perf_counter()
    with pytest.raises(MeasurementError) as caught:
        request("_test_sleeps", {"seconds": 60.0}, store, 1)
    assert caught.value.kind == "timeout"
    assert time.perf_counter() - started < 30
    environment(store)  # the next request is answered by the same server
    assert workers._current is server


def test_parameters_too_large_for_the_free_memory_are_refused_before_the_experiment(tmp_path):
    store = tmp_path / "store"
    with pytest.raises(MeasurementError) as caught:
        request("_test_quick", {"seq_len": 10**7}, store, 120)
    assert caught.value.kind == "refused"
    message = caught.value.message
    assert message.startswith(
        "experiment _test_quick(seq_len=10000000) was refused: _test_quick with "
        "seq_len=10000000 needs at least 363.8 TiB"
    )
    assert "but this cpu has" in message and "choose smaller parameters" in message
    assert not list(store.rglob("*.json"))


def test_a_result_whose_entry_a_newer_checkout_wrote_is_refused_and_that_entry_kept(tmp_path):
    """A build overwrote an entry of a newer schema with what it measured."""
    from attention_docs.measurements.schema import SCHEMA_VERSION

    store = tmp_path / "store"
    key = get("_test_sleeps").key({})
    newer = store / "_test_sleeps" / f"{key}.{book.local_device_id('cpu')}.json"
    newer.parent.mkdir(parents=True)
    newer.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1, "key": key}))
    before = newer.read_bytes()
    with pytest.raises(MeasurementError) as caught:
        request("_test_sleeps", {}, store, 120)
    assert caught.value.kind == "refused"
    assert f"was refused: the stored measurement {newer} was written by a newer version of " in (
        caught.value.message
    )
    assert "update your checkout; it is left as it is" in caught.value.message
    assert newer.read_bytes() == before and [p.name for p in newer.parent.iterdir()] == [newer.name]


@pytest.mark.parametrize("fork", ["1", "0"])
def test_a_refusal_is_the_outcome_a_worker_reports_not_a_line_of_its_output(
    tmp_path, monkeypatch, fork
):
    """A worker that exits 2 after printing a refusal's words reported no outcome: it failed,
    whatever its output says, on both paths (forked, new interpreter)."""
    monkeypatch.setenv("ATTENTION_DOCS_FORK_SERVER", fork)
    with pytest.raises(MeasurementError) as caught:
        request("_test_mimics", {}, tmp_path / "store", 60)
    assert caught.value.kind == "failed"
    assert "failed (exit code 2)" in caught.value.message


def test_a_worker_killed_by_a_signal_says_so(tmp_path):
    with pytest.raises(MeasurementError) as caught:
        request("_test_killed", {}, tmp_path / "store", 60)
    assert caught.value.kind == "killed"
    assert "SIGKILL" in caught.value.message


def test_a_server_lost_during_a_run_costs_no_measurement(tmp_path, caplog):
    store = tmp_path / "store"
    environment(store)
    lost = workers._current
    done = threading.Event()
    thread = threading.Thread(
        target=lambda: (request("_test_sleeps", {"seconds": 2.0}, store, 120), done.set())
    )
    logger = logging.getLogger("attention_docs")  # MkDocs' plugin may stop its propagation
    logger.addHandler(caplog.handler)
    try:
        thread.start()
        deadline = time.monotonic() + 30
        while lost.in_flight is None and time.monotonic() < deadline:
            time.sleep(0.01)
        child = lost.in_flight
        assert child is not None
        lost.proc.kill()  # the server dies while its child sleeps
        # The orphaned child is stopped at once, not left to run beside its replacement (its
        # 2 s sleep began after the server answered, so it cannot have ended by itself).
        assert stopped(child, within_s=1.0)
        thread.join(60)
    finally:
        logger.removeHandler(caplog.handler)
    assert done.is_set()  # the request was made again, in a new interpreter, and stored
    assert list((store / "_test_sleeps").glob("*.json"))
    assert "the worker server stopped" in caplog.text
    assert environment(store)["pid"] > 0  # and the next request starts a new server
    assert workers._current is not lost


def test_a_new_server_clears_what_killed_requesters_left_and_names_its_own(tmp_path):
    """A requester killed with SIGKILL left its server's folder (and pipes' files) under the
    temporary folder, for ever."""
    import shutil
    import tempfile

    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait()
    temp = Path(tempfile.gettempdir())
    dead = temp / f"attention-docs-workers-{ended.pid}-left"
    live = temp / f"attention-docs-workers-{os.getppid()}-kept"  # a process that runs
    for folder in (dead, live):
        folder.mkdir()
        (folder / "server.log").write_text("")
    try:
        workers._stop_server()
        environment(tmp_path / "store")
        assert not dead.exists() and (live / "server.log").exists()
        own = Path(workers._current.folder.name).name
        assert own.startswith(f"attention-docs-workers-{os.getpid()}-")
    finally:
        shutil.rmtree(live)
        shutil.rmtree(dead, ignore_errors=True)


def test_a_variable_read_at_import_starts_a_new_server(tmp_path, monkeypatch):
    store = tmp_path / "store"
    environment(store)
    server = workers._current
    # A variable of the kind torch reads when it is imported (the server imported it).
    monkeypatch.setenv("TORCH_ATTENTION_DOCS_TEST", str(os.getpid()))
    environment(store)
    assert workers._current is not server
    assert server.proc.poll() is not None  # the old one was stopped


def test_a_worker_gives_torch_half_the_cores_whatever_the_environment_says(tmp_path, monkeypatch):
    # More threads than that asked for by the environment: the worker's policy wins
    # (profiling/environment.py), and the provenance records it.
    monkeypatch.setenv("OMP_NUM_THREADS", str(2 * cores_available()))
    assert environment(tmp_path / "store")["threads"] == max(1, cores_available() // 2)


def test_the_server_imports_none_of_the_measured_code():
    """A child imports this package afresh, so an edit is measured as edited."""
    code = (
        f"import sys; from attention_docs import workers; workers.preload({list(PRELOAD)}); "
        "print(sorted(m for m in sys.modules if m.startswith('attention_docs')), "
        "'torch' in sys.modules)"
    )
    assert python_prints(code).split() == [
        "['attention_docs',",
        "'attention_docs.workers']",
        "True",
    ]


def test_without_fork_each_worker_is_a_new_interpreter(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_DOCS_FORK_SERVER", "0")
    monkeypatch.setattr(workers, "_current", None)
    facts = environment(tmp_path / "store")
    assert json.loads(facts["argv"][0])["experiment"] == "_test_environment"
    assert workers._current is None
    assert os.environ["ATTENTION_DOCS_FORK_SERVER"] == "0"
    # A new interpreter imports what the experiment declares, before it starts: no more.
    assert facts["imported"] == ["torch"]
    # An experiment that imports, while it runs, what it said it would not need is refused:
    # a compile or a profile would have timed the import.
    with pytest.raises(MeasurementError) as caught:
        environment(tmp_path / "store", late="torch._dynamo")
    assert caught.value.kind == "refused"
    assert caught.value.message.startswith(
        "experiment _test_environment(late=torch._dynamo) was refused: _test_environment "
        "imported torch._dynamo while it ran, which its declaration (imports=('torch',)) "
        "says it does not need"
    )
    assert "Add it to imports= in its @experiment" in caught.value.message
    assert not list((tmp_path / "store").rglob("*.json"))


REQUESTER = (
    "import sys; from pathlib import Path; from attention_docs.workers import run_worker; "
    "run_worker('_test_marks', {'mark': sys.argv[1], 'seconds': 8.0}, 'cpu', Path(sys.argv[2]), "
    "120, imports=('torch',))"
)


@pytest.mark.parametrize("fork", ["1", "0"])
def test_a_killed_build_leaves_no_worker_behind_to_write_into_the_store(tmp_path, fork):
    """`mkdocs` killed mid-measurement: its worker must not finish later and write an entry."""
    mark, store = tmp_path / "pid", tmp_path / "store"
    requester = subprocess.Popen(
        [sys.executable, "-c", REQUESTER, str(mark), str(store)],
        env={**os.environ, "ATTENTION_DOCS_FORK_SERVER": fork},
    )
    try:
        deadline = time.monotonic() + 120
        while not (mark.exists() and mark.read_text()) and time.monotonic() < deadline:
            assert requester.poll() is None, "the requester ended before its worker started"
            time.sleep(0.05)
        child = int(mark.read_text())
    finally:
        requester.kill()
        requester.wait()
    assert stopped(child, within_s=4.0)  # well before its 8 s sleep would end
    assert not list(store.rglob("*.json"))
