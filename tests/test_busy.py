# A busy machine's numbers are not facts, and a busy machine is no reason to fail (DESIGN
# principle 11): on a deliberately loaded machine — CPU burners on every core and one more — a
# reader's build keeps its entry flagged and goes on, and only publishing refuses it; timing
# never uses more threads than the process has cores. Here `measure` is called as a build
# calls it.
from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from attention_docs import book
from attention_docs.measurements.store import Store
from attention_docs.records.load import Load
from attention_docs.render.caption import caption_text
from attention_docs.workers import MeasurementError, run_worker

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the machine's load is read from /proc"
)


@pytest.fixture
def burners(tmp_path):
    """Processes that keep every core busy, and one more, while the test runs: others then
    use about three quarters of the CPU, past the share that makes a measurement busy when
    it leaves half the cores free (records/load.py). The worker server is started first (its
    imports take seconds), so that the burners compete with the measurements alone."""
    run_worker("_test_environment", {}, "cpu", tmp_path / "server-started", 120, imports=("torch",))
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range((os.cpu_count() or 1) + 1)
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
        book.configure(book.Settings(store=tmp_path, busy_wait_s=1.0, **settings))

    yield configure
    logger.removeHandler(caplog.handler)
    book.configure(book.Settings())


def entries(store):
    return {p.name: p.read_bytes() for p in store.glob("*/*.json")}


def test_a_busy_machine_never_fails_a_readers_build_and_publishing_refuses_it(
    tmp_path, burners, build, caplog
):
    # A reader's build measures once, finds the machine busy, waits for it to calm, measures
    # again and keeps that entry, flagged: its caption says how busy the machine was.
    build()
    flagged = book.measure("_test_timed")
    assert "waiting up to 1 s for the machine to calm" in caplog.text
    assert "stored flagged as busy" in caplog.text
    assert flagged.measurement.provenance.busy
    caption = caption_text(flagged)
    assert "measured on a busy machine (load " in caption and "other processes used" in caption
    stored = entries(tmp_path)
    assert len(stored) == 1
    # Publishing refuses it, loudly, and loses nothing: the flagged entry stays as it was.
    build(mode="publish")
    with pytest.raises(MeasurementError) as refused:
        book.measure("_test_timed")
    assert refused.value.kind == "busy"
    message = refused.value.message
    assert message.startswith("_test_timed() was measured twice while other work competed")
    assert "publishing refuses a busy machine's timings" in message
    assert "nox -s docs" in message and "flagged as busy" in message
    assert entries(tmp_path) == stored
    # Asked again in the same build (another block of the page), it measures nothing more.
    with pytest.raises(MeasurementError) as again:
        book.measure("_test_timed")
    assert again.value is refused.value
    # One refusal ends the publish: a later request measures nothing and says why.
    with pytest.raises(MeasurementError, match="publishing stopped when _test_timed was refused"):
        book.measure("_test_quick", seq_len=8)
    assert entries(tmp_path) == stored


def test_publishing_needs_an_idle_machine_not_only_one_that_is_not_busy():
    # A newcomer's publish beside two CPU-bound processes on 2 cores: others used 54 % of
    # the CPU, under the share that flags a reader's entry busy, so it was published.
    beside_two = Load(2, 1, 2.17, 2.17, other_cpu_share=0.544, busiest_share=0.6, busy_windows=0.0)
    assert not beside_two.busy and not beside_two.idle
    idle = Load(2, 1, 0.1, 0.2, other_cpu_share=0.005, busiest_share=0.02, busy_windows=0.0)
    assert idle.idle
    assert not replace(idle, busy_windows=0.5).idle  # busy in bursts is not idle either


def test_timing_uses_no_more_threads_than_the_process_has_cores(tmp_path, monkeypatch):
    import torch

    from attention_docs.experiments.runner import run_experiment

    before = torch.get_num_threads()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    try:
        torch.set_num_threads(max(before, 2))
        m = run_experiment("_test_timed", {"size": 8}, device_setting="cpu", store=Store(tmp_path))
    finally:
        torch.set_num_threads(before)
    assert m.provenance.device.threads == 1 == m.provenance.load.threads
    assert ", 1 thread" in m.provenance.device.label  # what every CPU caption states
