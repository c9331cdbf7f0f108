# The machinery behind "numbers a reader can trust": timings in interleaved rounds with their
# spread, ties called ties, the machine's load recorded, one forward-time fact table, entries
# named by device and chosen in the configured order.
from __future__ import annotations

import itertools
import shlex
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import synthetic_forward
from recorded import recorded
from timings import spanning

from attention_docs.book import choose_device
from attention_docs.findings.compare import compare
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced, Table
from attention_docs.measurements.store import Store
from attention_docs.profiling.load import LoadMonitor
from attention_docs.profiling.timing import time_callables
from attention_docs.records.load import Load
from attention_docs.records.timing import Timing


def timing(*rounds: float) -> Timing:
    return spanning(rounds)


@pytest.fixture
def naive():
    """naive_steps as the store recorded it (tests/data/measurements/)."""
    return recorded("naive_steps")


def test_overlapping_rounds_are_a_tie_and_separate_ones_are_not():
    fast, slow = timing(10.0, 11.0, 12.0), timing(20.0, 21.0, 22.0)
    c = compare(fast, slow)
    assert not c.tie
    assert c.ratio == pytest.approx(21.0 / 11.0)
    assert c.low == pytest.approx(20.0 / 12.0) and c.high == pytest.approx(22.0 / 10.0)
    assert c.low < c.ratio < c.high
    # A 1 % difference inside a 10 % spread is a tie, whichever median is smaller.
    assert compare(timing(10.0, 10.5, 11.0), timing(10.1, 10.6, 11.1)).tie
    assert compare(timing(10.1, 10.6, 11.1), timing(10.0, 10.5, 11.0)).tie


def test_callables_are_timed_in_interleaved_rounds():
    import torch

    calls: list[str] = []

    def make(name: str, seconds: float):
        def fn():
            calls.append(name)
            time.sleep(seconds)

        return fn

    result = time_callables(
        {"a": make("a", 0.002), "b": make("b", 0.02)},
        torch.device("cpu"),
        min_run_time=0.1,
        rounds=3,
    )
    assert set(result) == {"a", "b"}
    for t in result.values():
        assert len(t.rounds_us) == 3 and t.low_us <= t.time_us <= t.high_us
    assert result["b"].time_us > result["a"].time_us
    # After the warm-up (three calls each), one block of each per round, in an order that
    # turns each round: a..., b..., then b..., a..., then a..., b...
    timed = calls[6:]
    blocks = [name for name, _ in itertools.groupby(timed)]
    assert blocks == ["a", "b", "a", "b"]  # a b | b a | a b, the middle pair merged


def test_others_compete_only_beyond_the_cores_a_measurement_leaves_free():
    # One thread on two cores leaves one core free: another process may use all of it.
    idle = Load(cores=2, threads=1, load1_before=0.3, load1_after=1.9, other_cpu_share=0.02)
    assert not idle.busy
    assert idle.threshold == pytest.approx(0.625)
    assert not replace(idle, other_cpu_share=0.55).busy  # one busy process on the free core
    assert replace(idle, other_cpu_share=0.7).busy  # more: it took time from the measurement
    # A thread on every core leaves nothing free: a quarter of a core competes.
    assert replace(idle, threads=2, other_cpu_share=0.3).busy
    # A burst shows in the windows though the average over the run does not.
    burst = replace(idle, busiest_share=0.95, busy_windows=0.3)
    assert burst.busy and not replace(burst, busy_windows=0.1).busy
    text = burst.describe()
    assert "other processes used 2% of the CPU (at most 95% in a half-second" in text
    assert "competing in 30% of them" in text


def test_load_monitor_sees_another_process_burning_a_core():
    burn = "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass\n"
    with LoadMonitor(threads=1) as monitor:
        child = subprocess.Popen([sys.executable, "-c", burn])
        time.sleep(1.0)  # this process idles while its child spins
    child.wait()
    # A child, running or waited for (a worker's compile), is this process's own work ...
    own_share = monitor.load.other_cpu_share
    with LoadMonitor(threads=1) as monitor:
        # ... an orphan, adopted by init when the shell that started it exits, is not.
        subprocess.run(["sh", "-c", f"{sys.executable} -c {shlex.quote(burn)} &"], check=True)
        time.sleep(1.0)
    load = monitor.load
    assert load is not None and load.cores >= 1
    assert load.other_cpu_share > own_share
    assert load.other_cpu_share >= 0.9 / load.cores * 0.5
    assert load.busiest_share >= 0.9 / load.cores * 0.5  # the half-second windows saw it too


# --- entries named by device ---------------------------------------------------------------


def test_choose_device_follows_the_preference_order():
    prefer = ("local-gpu", "cuda-h200", "any-gpu", "local")
    stored = ["cpu-amd-epyc", "cuda-a100-sxm4-80gb", "cuda-h200"]
    assert choose_device(stored, prefer, "cpu-amd-epyc") == "cuda-h200"
    assert choose_device(["cpu-amd-epyc", "cuda-l4"], prefer, "cpu-amd-epyc") == "cuda-l4"
    assert choose_device(["cpu-amd-epyc"], prefer, "cpu-amd-epyc") == "cpu-amd-epyc"
    # Another CPU's entry is not this machine's: measure here.
    assert choose_device(["cpu-intel-xeon"], prefer, "cpu-amd-epyc") is None
    # On a GPU machine its own GPU comes first, measured when missing.
    assert choose_device(stored, prefer, "cuda-a100-sxm4-80gb") == "cuda-a100-sxm4-80gb"
    assert choose_device(["cuda-h200"], prefer, "cuda-l4") is None
    assert choose_device(stored, ("local",), "cpu-amd-epyc") == "cpu-amd-epyc"


def test_without_a_gpu_the_store_serves_any_device_and_a_page_keeps_to_one():
    from attention_docs.book import DEFAULT_PREFER, THIS_MACHINE

    here = "cpu-amd-epyc"
    # A fresh clone on another CPU shows the committed entries: nothing is measured.
    assert choose_device(["cpu-intel-xeon"], DEFAULT_PREFER, here) == "cpu-intel-xeon"
    assert choose_device([], DEFAULT_PREFER, here) is None  # missing: measured here
    # This machine's own entries come first; --this-machine measures what they lack.
    assert choose_device(["cpu-intel-xeon", here], DEFAULT_PREFER, here) == here
    assert choose_device(["cpu-intel-xeon"], THIS_MACHINE, here) is None
    # Among other devices, the one the store holds most of.
    both = ["cpu-a", "cpu-b"]
    assert choose_device(both, DEFAULT_PREFER, here, held={"cpu-a": 3, "cpu-b": 40}) == "cpu-b"
    # A page keeps to the device of its first entry wherever it holds the next one ...
    assert choose_device(both, DEFAULT_PREFER, here, page="cpu-a", held={"cpu-b": 40}) == "cpu-a"
    assert choose_device(["cpu-b", here], DEFAULT_PREFER, here, page="cpu-b") == "cpu-b"
    # ... and a machine with a GPU measures its GPU.
    assert choose_device(["cpu-intel-xeon"], DEFAULT_PREFER, "cuda-l4") is None


def test_store_names_entries_by_device(tmp_path, naive: Measurement):
    store = Store(tmp_path)
    m = store.put(naive, chrome={"traceEvents": []})
    device = m.device_id
    assert device.startswith("cpu-") and device != "cpu"
    assert store.devices(m.experiment, m.key) == [device]
    json_path = store.path(m.experiment, m.key, device)
    assert json_path.stat().st_mode & 0o777 == 0o644
    assert m.trace_file == store.relative(m.experiment, m.key, device, ".trace.json.gz")
    # An entry named by kind (as before devices had ids) is no device's.
    (tmp_path / m.experiment / f"{m.key}.cpu.json").write_text(json_path.read_text())
    assert store.devices(m.experiment, m.key) == [device]


# --- the forward-time fact table -----------------------------------------------------------


def forward_measurement(naive: Measurement, rows: list[tuple]) -> Measurement:
    return replace(
        naive,
        experiment="forward_times",
        tables={"times": Table(fwd.COLUMNS, tuple(rows))},
        facts={"method": "test"},
    )


SHAPE = fwd.Shape(1, 4, 512, 64, "float32", True)


def row(name: str, median, low, high, status: str = fwd.OK) -> tuple:
    return synthetic_forward.row(name, SHAPE, median, low, high, status=status)


def test_forward_lookup_and_speedup_sentences(naive):
    from attention_docs.render import compare as cmp

    m = forward_measurement(
        naive,
        [
            row(fwd.NAIVE, 10_000.0, 9_800.0, 10_300.0),
            row(fwd.SDPA_FLASH, 4_000.0, 3_900.0, 4_100.0),
            row(fwd.COMPILED, 9_900.0, 9_700.0, 10_100.0),
            row(fwd.SDPA_CUDNN, None, None, None, "not available on this device"),
        ],
    )
    t = fwd.timing(m, fwd.NAIVE, SHAPE)
    assert (t.time_us, t.low_us, t.high_us) == (10_000.0, 9_800.0, 10_300.0)
    assert fwd.timing(m, fwd.SDPA_CUDNN, SHAPE) is None
    with pytest.raises(fwd.NotMeasuredError, match="add the shape to the grid"):
        fwd.timing(m, fwd.NAIVE, replace(SHAPE, seq_len=100))
    faster = cmp.speedup(m, fwd.SDPA_FLASH, fwd.NAIVE, SHAPE)
    assert "2.5× (2.39–2.64×) faster" in faster and 'data-fact="speed ratio;' in faster
    tie = cmp.speedup(m, fwd.COMPILED, fwd.NAIVE, SHAPE)
    assert "within noise" in tie and "faster" not in tie
    assert "did not run here" in cmp.speedup(m, fwd.SDPA_CUDNN, fwd.NAIVE, SHAPE)
    table = cmp.forward_table(
        Sourced(m, "from the store", "x.json"), [fwd.NAIVE, fwd.COMPILED, fwd.SDPA_FLASH], SHAPE
    )
    assert "within noise (1.01×)" in table and "2.5×" in table


def test_every_shape_another_experiment_profiles_is_in_the_grid():
    """A chapter that profiles at a shape reads that shape's forward time from the grid."""
    from attention_docs.experiments.registry import get

    shaped = ["naive_steps", "profile_first_calls", "fusion_kernels", "flash_tiled_vs_naive"]
    for kind in ("cpu", "cuda"):
        shapes = set(fwd.GRIDS[kind].shapes())
        for name in shaped:
            exp = get(name)
            params = exp.resolve({}, kind)
            assert fwd.Shape.of(params) in shapes, (name, kind, params)


def test_a_run_on_a_busy_machine_is_refused_unless_allowed(tmp_path, monkeypatch):
    from attention_docs.experiments import runner

    class Busy(LoadMonitor):
        def __exit__(self, *exc):
            self.load = Load(2, 2, load1_before=3.5, load1_after=3.9, other_cpu_share=0.6)

    monkeypatch.setattr(runner, "LoadMonitor", Busy)
    store = Store(tmp_path)
    with pytest.raises(runner.BusyMachineError, match="other processes used 60%"):
        runner.run_experiment(
            "_test_quick", {"seq_len": 8}, device_setting="cpu", store=store, allow_busy=False
        )
    assert not list(tmp_path.rglob("*.json"))
    m = runner.run_experiment("_test_quick", {"seq_len": 8}, device_setting="cpu", store=store)
    assert m.provenance.busy and store.get(m.experiment, m.key, m.device_id) is not None
