# A busy machine's numbers are not facts (DESIGN principle 11): a build on a deliberately
# loaded machine — CPU burners on half its cores — stores no busy entry unless told to, keeps
# the entry it had, and says how busy the machine was; timing never uses more threads than
# the process has cores. A failing request fails its block, and so a strict build
# (test_docs_build.py shows that); here `measure` is called as a build calls it.
from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from attention_docs import book
from attention_docs.measurements.store import Store
from attention_docs.render.caption import caption_text
from attention_docs.workers import MeasurementError, run_worker

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the machine's load is read from /proc"
)


@pytest.fixture
def burners(tmp_path):
    """Processes that keep half the cores busy while the test runs: others then use about
    half the CPU, twice the share that makes a measurement busy (records/load.py), and the
    suite's other test worker is not starved meanwhile. The worker server is started first
    (its imports take seconds), so that the burners compete with the measurements alone."""
    run_worker("_test_environment", {}, "cpu", tmp_path / "server-started", 120, imports=("torch",))
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(max(1, (os.cpu_count() or 1) // 2))
    ]
    yield
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.fixture
def build(tmp_path, caplog):
    """`measure` as a build on this machine calls it, into a store in tmp_path; its log."""
    logger = logging.getLogger("attention_docs")  # MkDocs' plugin may stop its propagation
    logger.addHandler(caplog.handler)

    def configure(**settings):
        # allow_busy is stated, never inherited: the suite's environment allows busy entries.
        settings.setdefault("allow_busy", False)
        book.configure(book.Settings(store=tmp_path, busy_wait_s=1.0, **settings))

    yield configure
    logger.removeHandler(caplog.handler)
    book.configure(book.Settings())


def entries(store):
    return {p.name: p.read_bytes() for p in store.glob("*/*.json")}


def test_a_build_on_a_loaded_machine_never_stores_a_busy_entry_silently(
    tmp_path, burners, build, caplog
):
    # Asked to store busy entries, a build does, and the caption says how busy it was.
    build(allow_busy=True)
    flagged = book.measure("_test_timed")
    assert flagged.measurement.provenance.busy
    caption = caption_text(flagged)
    assert "measured on a busy machine (load " in caption and "other processes used" in caption
    stored = entries(tmp_path)
    assert len(stored) == 1
    # Re-measured while still busy: measured twice, not stored, the previous entry kept.
    build(mode="refresh")
    kept = book.measure("_test_timed")
    assert "waiting up to 1 s for the machine to calm" in caplog.text
    assert "_test_timed() was measured twice while other work competed" in caplog.text
    assert "is kept" in caplog.text
    assert kept.measurement == flagged.measurement and entries(tmp_path) == stored
    # Nothing to keep: the request fails (and with it a strict build), saying how busy.
    for path in tmp_path.glob("*/*.json"):
        path.unlink()
    build()
    with pytest.raises(MeasurementError) as refused:
        book.measure("_test_timed")
    assert refused.value.kind == "busy"
    message = refused.value.message
    assert message.startswith("_test_timed() was measured twice while other work competed")
    assert "other processes used" in message and "allow_busy: true" in message
    assert entries(tmp_path) == {}
    # Asked again in the same build (another block of the page), it measures nothing more.
    with pytest.raises(MeasurementError) as again:
        book.measure("_test_timed")
    assert again.value is refused.value


def test_timing_uses_no_more_threads_than_the_process_has_cores(tmp_path, monkeypatch):
    import torch

    from attention_docs.experiments.runner import run_experiment

    before = torch.get_num_threads()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    try:
        torch.set_num_threads(max(before, 2))
        m = run_experiment("_test_timed", {"size": 8}, device="cpu", store=Store(tmp_path))
    finally:
        torch.set_num_threads(before)
    assert m.provenance.device.threads == 1 == m.provenance.load.threads
    assert ", 1 threads" in m.provenance.device.label  # what every CPU caption states
