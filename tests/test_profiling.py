import gzip
import itertools
import json
import math
import statistics
import subprocess
import sys

import pytest
import torch
from conftest import DATA

from attention_docs.analytic.cost import step_costs
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.inputs import make_qkv
from attention_docs.profiling import profile as profile_module
from attention_docs.profiling.device import DeviceError, describe, resolve_device
from attention_docs.profiling.environment import MMAP_THRESHOLD_MAX
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.timing import time_callable
from attention_docs.records.timing import Timing, interval_ranks
from attention_docs.records.trace import Trace, op_stats, step_span_times, trim_chrome


@pytest.fixture(scope="module")
def naive_run():
    q, k, v = make_qkv(1, 2, 32, 16, seed=5)
    return profile_callable(
        lambda: naive_attention(q, k, v, causal=True), torch.device("cpu"), sched=Schedule(1, 1, 2)
    )


def test_trace_holds_the_five_steps_in_order_nested_in_their_profiler_step(naive_run):
    trace = naive_run.trace
    assert [s.step for s in trace.steps] == sorted(s.step for s in trace.steps)
    assert len(trace.steps) == 2  # only the active steps are recorded
    for step in trace.steps:
        ranges = [s for s in trace.spans if s.kind == "range" and s.step == step.step]
        assert [r.name for r in ranges] == list(STEPS)
        assert all(a.end_us <= b.start_us + 1e-3 for a, b in itertools.pairwise(ranges))
        assert all(step.start_us <= r.start_us and r.end_us <= step.end_us + 1e-3 for r in ranges)
        # Disjoint ranges inside the step: together they cannot outlast it.
        assert sum(r.dur_us for r in ranges) <= step.dur_us + 1e-3


def test_ops_nest_under_the_step_that_ran_them(naive_run):
    trace = naive_run.trace
    softmax = next(s for s in trace.spans if s.name == "attention.softmax")
    inside = [
        s
        for s in trace.spans
        if s.kind == "op" and softmax.start_us <= s.start_us <= softmax.end_us
    ]
    assert "aten::softmax" in {s.name for s in inside}
    assert all(s.depth > softmax.depth for s in inside)
    # Durations nest: an op ends inside its range, so it cannot outlast it.
    assert all(s.end_us <= softmax.end_us + 1e-3 and s.dur_us <= softmax.dur_us for s in inside)
    assert all(0 <= s.self_us <= s.dur_us + 1e-6 for s in trace.spans)
    # A span's self time is its duration minus its direct children's.
    children = [s for s in inside if s.depth == softmax.depth + 1]
    assert softmax.self_us == pytest.approx(
        softmax.dur_us - sum(c.dur_us for c in children), abs=1e-3
    )


def test_step_times_sum_the_ranges_and_op_stats_sum_the_spans(naive_run):
    trace = naive_run.trace
    times = step_span_times(trace, STEPS)
    for label in STEPS:
        ranges = [s for s in trace.spans if s.kind == "range" and s.name == label]
        assert times[label]["calls"] == 2
        assert times[label]["cpu_us"] == pytest.approx(sum(r.dur_us for r in ranges))
        # No kernels on a CPU: the device time is the ranges' CPU time.
        assert times[label]["device_us"] == times[label]["cpu_us"]
    # The five steps together fit inside the two profiler steps.
    assert sum(t["cpu_us"] for t in times.values()) <= sum(s.dur_us for s in trace.steps) + 1e-3
    rows = {row["name"]: row for row in op_stats(trace)}
    assert {"aten::bmm", "aten::softmax", "aten::masked_fill"} <= set(rows)
    bmm = [s for s in trace.spans if s.kind == "op" and s.name == "aten::bmm"]
    assert rows["aten::bmm"]["calls"] == len(bmm) == 4  # two matmuls, two steps
    assert rows["aten::bmm"]["total_us"] == pytest.approx(sum(s.dur_us for s in bmm))
    assert rows["aten::bmm"]["self_us"] <= rows["aten::bmm"]["total_us"] + 1e-6


def test_per_forward_table_splits_the_steps_forward_by_forward(naive_run):
    from attention_docs.experiments.naive import per_forward_table

    table = per_forward_table(naive_run.chrome, STEPS)
    assert table.column("forward") == [1, 2]
    totals = step_span_times(naive_run.trace, STEPS)
    for label in STEPS:
        assert sum(table.column(label)) == pytest.approx(totals[label]["device_us"], abs=1e-2)


def test_cost_model_matmul_flops_match_the_profiler(naive_run):
    costs = {c.label: c for c in step_costs(1, 2, 32, 16, causal=True)}
    # torch.profiler counts FLOPs for aten::bmm only: the two matmuls, per step.
    assert naive_run.flops_by_op["aten::bmm"] == pytest.approx(
        costs["attention.scores"].flops + costs["attention.weighted_sum"].flops
    )


def test_in_step_rebases_one_step(naive_run):
    last = naive_run.trace.steps[-1].step
    one = naive_run.trace.in_step(last)
    assert min(s.start_us for s in one.spans) >= 0
    assert {s.step for s in one.spans} == {last}
    assert [s.name for s in one.spans if s.kind == "range"] == list(STEPS)


def test_a_profile_counts_the_page_faults_of_its_profiled_calls_only(monkeypatch):
    # Call i of the schedule takes i faults; the profiled ones are calls 3, 4 and 5.
    taken = {"faults": 0, "calls": 0}

    def fn():
        taken["faults"] += taken["calls"]
        taken["calls"] += 1
        return torch.ones(4).sum()

    monkeypatch.setattr(profile_module, "minor_faults", lambda: taken["faults"])
    run = profile_callable(fn, torch.device("cpu"), sched=Schedule(1, 2, 3))
    assert taken["calls"] == 6
    assert run.page_faults == 4.0
    monkeypatch.setattr(profile_module, "minor_faults", lambda: None)
    assert profile_callable(fn, torch.device("cpu"), sched=Schedule(0, 1, 1)).page_faults is None


def test_settling_the_heap_touches_and_frees_its_blocks(monkeypatch):
    made = []
    real_ones = torch.ones

    def ones(*args, **kwargs):
        made.append(real_ones(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(profile_module.torch, "ones", ones)
    profile_module.settle_heap()
    assert len(made) == profile_module.SETTLE_BLOCKS
    # Each block is written (ones, not empty: its pages are mapped) and below the mmap
    # threshold a worker's malloc keeps (profiling/environment.py), so it comes from the heap.
    assert all(int(b.sum()) == profile_module.SETTLE_BLOCK for b in made)
    assert profile_module.SETTLE_BLOCK < MMAP_THRESHOLD_MAX


def test_trace_json_round_trip(naive_run):
    assert Trace.from_json(json.loads(json.dumps(naive_run.trace.to_json()))) == naive_run.trace


def test_gpu_trace_device_time_comes_from_launched_kernels():
    # A small CUDA trace in torch.profiler's Chrome format (hand-made, shaped like a real one:
    # cuda_runtime launches, kernels on a stream, ac2g flows linked by correlation ids).
    chrome = json.loads((DATA / "cuda_trace_small.json").read_text())
    trace = Trace.from_chrome(trim_chrome(chrome))
    assert trace.has_gpu
    assert trace.lanes == ("CPU thread", "GPU stream 7")
    times = step_span_times(trace, ["attention.scores", "attention.softmax"])
    assert times["attention.scores"]["device_us"] == pytest.approx(40.0)
    assert times["attention.softmax"]["device_us"] == pytest.approx(25.0 + 5.0)
    assert times["attention.scores"]["cpu_us"] == pytest.approx(10.0)
    kernels = [s for s in trace.spans if s.kind == "kernel"]
    assert {k.step for k in kernels} == {7}  # kernels belong to the step that launched them
    gpu_ops = [r for r in op_stats(trace) if r["where"] == "GPU"]
    assert gpu_ops[0]["name"] == "ampere_sgemm_64x64_nn" and gpu_ops[0]["total_us"] == 40.0


def test_trim_drops_what_lies_outside_the_steps():
    chrome = json.loads((DATA / "cuda_trace_small.json").read_text())
    names = {e["name"] for e in trim_chrome(chrome)["traceEvents"]}
    assert "outside_the_steps" not in names
    assert "ampere_sgemm_64x64_nn" in names


def test_timing_takes_its_rounds_and_states_them_in_microseconds():
    import time

    t = time_callable(lambda: time.sleep(0.002), torch.device("cpu"), min_run_time=0.03, rounds=3)
    # Three rounds, one time per call each: too few for a 90 % interval, so the whole range.
    assert len(t.rounds_us) == 3 and t.runs >= 3
    ordered = sorted(t.rounds_us)
    assert t.time_us == pytest.approx(ordered[0] + (ordered[1] - ordered[0]) / 2)  # quartile
    assert (t.low_us, t.high_us) == (min(t.rounds_us), max(t.rounds_us))
    assert t.spread == pytest.approx((t.high_us - t.low_us) / t.time_us)
    # Microseconds: a 2 ms sleep cannot take less, nor a whole second.
    assert t.low_us >= 2000 and t.high_us < 1e6
    # The record round-trips with its rounds.
    assert Timing.from_json(json.loads(json.dumps(t.to_json()))) == t
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        time_callable(lambda: None, torch.device("cpu"), rounds=0)


def test_a_timing_states_its_rounds_lower_quartile_which_slow_rounds_cannot_move():
    calm = [100.0 + i for i in range(20)]  # 100..119 µs
    t = Timing(tuple(calm), 20, "test")
    assert t.time_us == pytest.approx(104.75)  # the lower quartile, interpolated
    # Contention only adds time: up to three rounds in four made slower, however much,
    # leave the lower quartile where it was; the median would have moved.
    disturbed = [x * (3.0 if i >= 6 else 1.0) for i, x in enumerate(calm)]
    assert Timing(tuple(disturbed), 20, "test").time_us == pytest.approx(t.time_us)
    assert statistics.median(disturbed) > 2 * statistics.median(calm)
    # Its interval is the rounds' 2nd and 9th of 20: a 90 % interval for the quartile.
    assert (t.low_us, t.high_us) == (101.0, 108.0)
    assert t.spread == pytest.approx(7.0 / 104.75)
    with pytest.raises(ValueError, match="needs its rounds"):
        Timing((), 0, "test")


def test_a_timing_from_rounds_or_from_calls_states_what_the_constructor_does():
    rounds = [12.0, 10.5, 11.25, 30.0, 10.75, 11.5, 10.0, 12.5, 10.25, 11.0]
    built = Timing(tuple(rounds), len(rounds), "test")
    made = Timing.from_rounds(rounds, "test")
    assert made == built and made.runs == len(rounds)
    for stat in ("time_us", "low_us", "high_us", "spread"):
        assert getattr(made, stat) == getattr(built, stat)
    assert Timing.from_rounds(rounds, "test", runs=100).runs == 100
    # Every round to the nanosecond, whichever path made it.
    assert Timing.from_rounds([1.23456789, 2.0], "test").rounds_us == (1.235, 2.0)
    # Single calls grouped by round: a round is its calls' median, the mean of the middle two
    # for an even count (not the upper one), and every call counts as a run.
    calls = [[10.0, 14.0, 11.0, 99.0], [10.0, 10.5, 12.0], [9.0, 9.5]]
    t = Timing.from_calls(calls, "test")
    assert t.rounds_us == (12.5, 10.5, 9.25) and t.runs == 9
    assert t == Timing.from_rounds([statistics.median(c) for c in calls], "test", runs=9)


def test_a_timing_is_made_in_records_timing_only():
    import ast

    from conftest import ROOT

    made = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Timing":
                made.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    # Timing.from_rounds / from_calls keep every timing's rounds alike; scaled and from_json
    # are the record's own.
    assert all(m.startswith("src/attention_docs/records/timing.py") for m in made), made


@pytest.mark.parametrize("n", [3, 5, 8, 10, 15, 20, 40, 100])
def test_the_interval_of_the_lower_quartile_holds_it_with_90_percent_probability(n):
    j, k = interval_ranks(n)
    pmf = [math.comb(n, i) * 0.25**i * 0.75 ** (n - i) for i in range(n + 1)]
    coverage = sum(pmf[j:k])  # P(j <= B <= k - 1), B ~ Binomial(n, 1/4)
    if (j, k) == (1, n):  # too few rounds for 90 %: the whole range
        assert n <= 8
    else:
        assert coverage >= 0.90
        # ... and no narrower pair of order statistics reaches it.
        narrower = [sum(pmf[a : a + k - j - 1]) for a in range(1, n - (k - j - 1) + 1)]
        assert max(narrower) < 0.90
    assert 1 <= j < k <= n


def test_device_choice():
    assert resolve_device("cpu").type == "cpu"
    assert describe(torch.device("cpu")).kind == "cpu"
    with pytest.raises(DeviceError, match="choose one of: auto, cpu, cuda"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="no usable CUDA device"):
            resolve_device("cuda")


def test_chrome_bytes_are_gzipped_and_deterministic(naive_run):
    from attention_docs.records.trace import chrome_bytes

    a, b = chrome_bytes(naive_run.chrome), chrome_bytes(naive_run.chrome)
    assert a == b
    assert json.loads(gzip.decompress(a))["traceEvents"]


def test_published_traces_name_no_host_or_temporary_path(naive_run):
    assert not {"host_name", "trace_id", "traceName"} & set(naive_run.chrome)


def test_a_profilers_chrome_trace_is_read_back_and_its_file_removed(tmp_path, monkeypatch):
    import tempfile

    from torch.profiler import profile

    from attention_docs.profiling.profile import activities_on, chrome_of

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    a = torch.ones(4, 4)
    with profile(activities=activities_on(torch.device("cpu"))) as prof:
        torch.mm(a, a)
    chrome = chrome_of(prof)
    assert any(e.get("name") == "aten::mm" for e in chrome["traceEvents"])
    assert list(tmp_path.iterdir()) == []  # written under the temporary folder, then removed


def test_a_worker_reuses_the_memory_of_n_by_n_tensors_above_32_mib():
    # glibc maps a block above 32 MiB afresh on each call by default: at 2,048 tokens each
    # N×N tensor of four heads is 64 MiB (16,384 pages), and a warm naive forward faulted
    # 65,540 pages (a third of its time). A worker's malloc keeps every block on its heap.
    # How fast the heap settles depends on the machine: here most warm calls fault nothing,
    # on CI one call in two still faulted one tensor. Either way the warm calls fault a
    # fraction of what the default's do, which this compares in two fresh processes.
    code = """
import resource, sys, torch
from attention_docs.attention.naive import naive_attention
from attention_docs.profiling.environment import KEPT, keep_freed_memory
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
print(keep_freed_memory() == KEPT if sys.argv[1] == "kept" else True)
torch.set_num_threads(1)
q, k, v = (torch.randn(1, 4, 2048, 64) for _ in range(3))
for _ in range(8):
    before = faults()
    naive_attention(q, k, v, causal=True)
    print(faults() - before)
"""
    runs = {
        how: subprocess.Popen([sys.executable, "-c", code, how], stdout=subprocess.PIPE, text=True)
        for how in ("kept", "default")
    }
    out = {how: run.communicate()[0] for how, run in runs.items()}
    assert all(run.returncode == 0 for run in runs.values()), out
    (kept, first, *warm), (_, _, *default) = (out[how].split() for how in runs)
    if kept != "True":
        pytest.skip("this C library has no mallopt")
    assert int(first) > 16_384, out  # the first call grows the heap by its tensors
    # Without the fix every warm call faults about four tensors; with it, under a third.
    assert 3 * sum(map(int, warm)) < sum(map(int, default)), out
