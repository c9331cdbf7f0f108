# The profiler primer's experiments (first calls, profiler overhead, size sweep) at tiny
# shapes, and its renderers on real and hand-built traces.
from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
import torch
from conftest import DATA
from fake_times import forward_times_for

from attention_docs import render
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments.primer import OVERHEAD_COLUMNS, first_call_extra, profile_every_call
from attention_docs.experiments.runner import run_experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements import Sourced, Table
from attention_docs.records.trace import Span, Trace
from attention_docs.render.primer import dispatch_lines, size_fit

TINY = {"seq_len": 16, "num_heads": 1, "head_dim": 8}


def sourced(m) -> Sourced:
    return Sourced(m, "measured now", f"{m.experiment}/{m.key}.cpu.json")


@pytest.fixture(scope="module")
def first_calls():
    return run_experiment("profile_first_calls", {**TINY, "calls": 4}, device="cpu")


def test_profile_every_call_records_each_call_as_a_step():
    q, k, v = make_qkv(1, 1, 16, 8)
    trace, per_call = profile_every_call(
        lambda: naive_attention(q, k, v, causal=True), torch.device("cpu"), 3
    )
    assert len(trace.steps) == 3
    for step in trace.steps:
        names = [s.name for s in trace.spans if s.kind == "range" and s.step == step.step]
        assert names == list(STEPS)
    assert len(per_call.wall_us) == 3 and all(t > 0 for t in per_call.wall_us)
    assert per_call.reserve_growth == [None, None, None]  # the CPU keeps no reserve


def test_first_calls_measures_every_call_but_no_unprofiled_time(first_calls):
    m = first_calls
    per_call = m.tables["per_call"]
    assert per_call.column("call") == [1, 2, 3, 4]
    # Every call was recorded as a profiler step of its own.
    assert None not in per_call.column("cold_step_us")
    for r in m.tables["first_call_ops"].records():
        assert r["extra_us"] == pytest.approx(r["self_first_us"] - r["self_warm_us"], abs=2e-3)
    # Every op of a warm call runs on the first one too.
    assert m.facts["cold_ops_first"] >= m.facts["cold_ops_last"] >= len(STEPS)
    assert m.timing is None  # the unprofiled forward is forward_times' fact
    assert {s.label for s in m.steps} == set(STEPS)
    cost = m.facts["fault_cost"]
    assert cost["buffer_bytes"] == 4096  # one N×N score matrix (1 kB), in whole pages
    assert cost["faults_per_buffer"] >= 1  # a freshly mapped page faults when first written
    assert len(cost["fresh"]["rounds_us"]) == len(cost["mapped"]["rounds_us"]) == 3
    extra = m.tables["first_call_ops"]
    assert 0 < len(extra.rows) <= 12
    # Names only the first call ran come first, then the rest by extra time, largest first.
    order = [(r["calls_warm"] > 0, -r["extra_us"]) for r in extra.records()]
    assert order == sorted(order)


def test_first_call_extra_puts_first_only_names_first():
    def span(name, kind, step, self_us):
        return Span(name, kind, "CPU thread", 0.0, self_us, 1, self_us, None, step)

    spans = [
        span("aten::bmm", "op", 0, 10.0),
        span("cudaMalloc", "runtime", 0, 3.0),
        span("aten::bmm", "op", 1, 2.0),
        span("aten::bmm", "op", 2, 4.0),
        span("aten::bmm", "op", 3, 2.0),
    ]
    steps = tuple(
        Span(f"ProfilerStep#{i}", "step", "CPU thread", 0.0, 1.0, step=i) for i in range(4)
    )
    table = first_call_extra(Trace(tuple(spans), ("CPU thread",), steps))
    rows = table.records()
    assert rows[0]["name"] == "cudaMalloc" and rows[0]["calls_warm"] == 0
    # Warm steps are the second half (steps 2 and 3): mean self time 3 µs.
    assert rows[1]["name"] == "aten::bmm" and rows[1]["extra_us"] == pytest.approx(7.0)


def with_calls(m, cold, again, faults=None, growth=None):
    """`m` with a hand-made per-call table (µs per call, both sessions)."""
    n = len(cold)
    rows = tuple(
        (
            i + 1,
            cold[i],
            cold[i],
            again[i],
            (faults or [None] * n)[i],
            (faults or [None] * n)[i],
            (growth or [None] * n)[i],
        )
        for i in range(n)
    )
    table = Table(
        (
            "call",
            "cold_wall_us",
            "cold_step_us",
            "warm_session_wall_us",
            "minor_page_faults",
            "warm_session_page_faults",
            "reserve_growth_bytes",
        ),
        rows,
    )
    return replace(m, tables={**m.tables, "per_call": table})


def test_first_call_renderers_set_calls_against_the_unprofiled_forward(first_calls):
    m = with_calls(first_calls, [900.0, 210.0, 200.0, 205.0], [400.0, 190.0, 200.0, 195.0])
    times = forward_times_for(m, (100.0, 95.0, 105.0))
    table = render.primer.first_calls_table(sourced(m), times)
    assert "| 1 | 900 µs | 9.0× | 400 µs | 4.0× |" in table
    assert "ad-caption" in table
    claim = render.primer.first_calls_claim(m, times)
    assert "**900 µs**" in claim and "4.4× the 202 µs" in claim
    assert 'data-fact="forward;' in claim and "took 9.0× that" in claim
    assert "202 µs more than that session's settled calls" in claim  # 400 - median(200, 195)
    assert "**500 µs** more than that of the warm one" in claim
    # A first call inside the later calls' range is said to be within it, not N× slower.
    calm = with_calls(first_calls, [201.0, 210.0, 200.0, 205.0], [200.0, 190.0, 200.0, 195.0])
    text = render.primer.first_calls_claim(calm, times)
    assert "within the range of the session's later calls" in text
    assert "was within noise" in text
    within = render.primer.first_calls_table(
        sourced(calm), forward_times_for(m, (200.0, 190.0, 210.0))
    )
    assert "| 1 | 201 µs | within noise |" in within


def test_fault_verdict_prices_the_faults_of_a_warm_call(first_calls):
    faults = [300, 100, 100, 100]
    m = with_calls(first_calls, [900.0, 210.0, 200.0, 205.0], [400.0, 190.0, 200.0, 195.0], faults)

    def timing(*rounds):
        return {
            "median_us": sorted(rounds)[1],
            "iqr_us": 0.0,
            "runs": 3,
            "method": "t",
            "rounds_us": list(rounds),
        }

    # A fresh buffer takes 50 faults and 60 µs more than a mapped one: 1.2 µs per fault.
    cost = {
        "buffer_bytes": 2**20,
        "faults_per_buffer": 50.0,
        "fresh": timing(70.0, 70.0, 70.0),
        "mapped": timing(10.0, 10.0, 10.0),
    }
    m = replace(m, facts={**m.facts, "fault_cost": cost})
    times = forward_times_for(m, (200.0, 200.0, 200.0))
    verdict = render.primer.fault_verdict(m, times)
    assert "about **100 minor page faults**" in verdict
    assert "A fresh page costs 1.2 µs" in verdict
    assert "**120 µs**" in verdict and "60.0%" in verdict  # 100 × 1.2 µs of 200 µs
    assert "explains **most** of a warm call" in verdict
    noisy = forward_times_for(m, (200.0, 20.0, 2000.0))
    assert "the noise leaves open whether" in render.primer.fault_verdict(m, noisy)
    tie = dict(cost, fresh=timing(9.0, 10.0, 11.0))
    untimed = render.primer.fault_verdict(replace(m, facts={**m.facts, "fault_cost": tie}), times)
    assert "is not measured" in untimed and "A fresh page costs" not in untimed
    none = with_calls(first_calls, [900.0, 210.0, 200.0, 205.0], [400.0] * 4, [300, 0, 0, 0])
    assert "the median settled call takes no page faults (at most 0" in render.primer.fault_verdict(
        none, times
    )


def test_first_call_renderers_state_the_measured_numbers(first_calls):
    s = sourced(first_calls)
    ops = render.primer.first_call_ops_table(s)
    assert "Calls first / warm" in ops
    assert "op calls against" in render.primer.first_call_ops_claim(
        first_calls
    ) or "things no warm" in (render.primer.first_call_ops_claim(first_calls))


def test_dispatch_tree_shows_matmul_dispatching_to_bmm(first_calls):
    lines = dispatch_lines(first_calls.timeline, "attention.scores")
    names = [line.name for line in lines]
    assert names[0] == "attention.scores"
    assert names.index("aten::matmul") < names.index("aten::bmm")
    matmul = lines[names.index("aten::matmul")]
    bmm = lines[names.index("aten::bmm")]
    assert len(bmm.prefix) > len(matmul.prefix)  # bmm is nested inside matmul
    assert lines[-1].prefix.endswith("└─ ")
    assert all(line.self_us <= line.total_us + 1e-6 for line in lines)
    tree = render.primer.dispatch_tree(sourced(first_calls))
    assert tree.startswith("```text\n") and "├─ " in tree and "ad-caption" in tree
    claim = render.primer.self_vs_total_claim(first_calls)
    assert "`aten::matmul`" in claim and "`aten::bmm`" in claim


def test_dispatch_tree_follows_launches_to_their_kernels():
    trace = Trace.from_chrome(json.loads((DATA / "cuda_trace_small.json").read_text()))
    lines = dispatch_lines(trace, "attention.scores")
    assert [line.name for line in lines] == ["attention.scores", "aten::bmm", "cudaLaunchKernel"]
    assert lines[2].kernel.startswith("→ ampere_sgemm_64x64_nn (40 µs")
    assert lines[1].prefix == "└─ " and lines[2].prefix == "   └─ "
    with pytest.raises(KeyError, match="no range named"):
        dispatch_lines(trace, "attention.mask")


def test_profile_overhead_counts_events_and_compares_with_no_profiler():
    m = run_experiment("profile_overhead", {**TINY, "iterations": 2}, device="cpu")
    rows = m.tables["overhead"].records()
    assert rows[0]["configuration"] == "no profiler"
    assert len(rows) == 5 and m.timing is None
    base = rows[0]
    events = [r["events_per_forward"] for r in rows[1:]]
    # Each forward records at least the five ranges and their ops; stacks add events.
    assert all(e >= 10 for e in events) and events[-1] >= events[0]
    for r in rows:
        assert r["low_us"] <= r["median_us"] <= r["high_us"]
    for r in rows[1:]:
        assert r["overhead_us"] == pytest.approx(r["median_us"] - base["median_us"], abs=2e-3)
        assert r["overhead_low_us"] == pytest.approx(r["low_us"] - base["high_us"], abs=2e-3)
        assert r["overhead_high_us"] == pytest.approx(r["high_us"] - base["low_us"], abs=2e-3)
        assert r["overhead_per_event_us"] == pytest.approx(
            r["overhead_us"] / r["events_per_forward"], rel=1e-2, abs=1e-3
        )
    assert "ad-caption" in render.primer.overhead_table(sourced(m))


def overhead_measurement(m, rows):
    return replace(
        m, tables={"overhead": Table(OVERHEAD_COLUMNS, tuple(rows))}, facts={"rounds": 3}
    )


def test_overhead_renderers_say_within_noise_when_the_rounds_overlap(first_calls):
    base = ("no profiler", 100.0, 95.0, 105.0, 0.0, 0.0, 0.0, 0.0, None)
    clear = ("activities only", 150.0, 140.0, 160.0, 50.0, 50.0, 35.0, 65.0, 1.0)
    noisy = ("+ with_stack", 104.0, 96.0, 110.0, 200.0, 4.0, -9.0, 15.0, 0.02)
    m = overhead_measurement(first_calls, [base, clear, noisy])
    table = render.primer.overhead_table(sourced(m))
    assert "| activities only | 50 µs (35 µs to 65 µs) | 1.50× (1.33–1.68×) |" in table
    assert "| + with_stack | within noise (4 µs) | within noise (1.04×) |" in table
    claim = render.primer.overhead_claim(m, forward_times_for(m, (100.0, 95.0, 105.0)))
    assert "added **50 µs** to each forward (35 µs to 65 µs over the rounds)" in claim
    assert "a forward was within noise of the same loop without the profiler (1.04×)" in claim
    assert 'data-fact="forward;' in claim
    quiet = overhead_measurement(first_calls, [base, noisy, noisy])
    assert "within the noise of this run (4 µs per forward" in render.primer.overhead_claim(quiet)


def test_op_size_sweep_reports_bytes_and_time_per_size():
    m = run_experiment("op_size_sweep", {"min_log2": 4, "max_log2": 8}, device="cpu")
    table = m.tables["sizes"]
    assert table.column("elements") == [16, 32, 64, 128, 256]
    assert table.column("bytes") == [12 * n for n in (16, 32, 64, 128, 256)]
    for r in table.records():
        assert r["low_us"] <= r["time_us"] <= r["high_us"]
        expected = r["bytes"] / r["time_us"] * 1e-3
        assert r["bandwidth_gbs"] == pytest.approx(expected, rel=1e-3, abs=6e-5)  # 4 decimals
    assert set(table.column("status")) == {"ok"}
    html = render.primer.size_sweep_figure(sourced(m))
    assert '<svg role="img"' in html and "floor" in html


def test_size_fit_finds_the_floor_bandwidth_and_crossover():
    floor, bandwidth = 2.0, 1e10  # 2 µs per call, 10 GB/s
    sizes = [2**p for p in range(4, 23)]
    rows = tuple((n, 12 * n, max(floor, 12 * n / bandwidth * 1e6), 0.0, "ok") for n in sizes)
    table = Table(("elements", "bytes", "time_us", "bandwidth_gbs", "status"), rows)
    fit = size_fit(table)
    assert fit.floor_us == pytest.approx(floor)
    assert fit.bandwidth_bs == pytest.approx(bandwidth)
    assert fit.crossover_bytes == pytest.approx(2e-6 * 1e10)
    assert fit.crossover_elements == pytest.approx(2e4 / 12)
    assert fit.small_slope == pytest.approx(0.0, abs=1e-9)
    assert fit.large_slope == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="at least four"):
        size_fit(Table(table.columns, rows[:3]))


def sweep_measurement(m, times, spread=0.02):
    rows = tuple(
        (n, 12 * n, t, t * (1 - spread), t * (1 + spread), 0.0, "ok") for n, t in times.items()
    )
    columns = ("elements", "bytes", "time_us", "low_us", "high_us", "bandwidth_gbs", "status")
    return replace(m, tables={"sizes": Table(columns, rows)}, facts={"op": "torch.add(a, b)"})


def test_size_sweep_claim_computes_its_numbers(first_calls):
    times = {2**p: max(3.0, 12 * 2**p / 2e10 * 1e6) for p in range(4, 20)}
    claim = render.primer.size_sweep_claim(sweep_measurement(first_calls, times))
    assert re.search(r"fixed floor of \*\*3 µs\*\*", claim)
    assert "20 GB/s" in claim and "5 k elements" in claim
    assert "four smallest sizes are within noise of one another" in claim
    assert "No smaller size moved bytes faster than the largest ones" in claim


def test_size_sweep_claim_names_a_cache_only_beyond_noise(first_calls):
    times = {2**p: max(3.0, 12 * 2**p / 2e10 * 1e6) for p in range(4, 20)}
    times[2**14] /= 2  # twice the memory's rate at 16 k elements: a cache
    claim = render.primer.size_sweep_claim(sweep_measurement(first_calls, times))
    assert "At 16,384 elements" in claim and "stays in a cache" in claim
    # The same bump inside a ±60 % spread of every point is no evidence of a cache.
    noisy = render.primer.size_sweep_claim(sweep_measurement(first_calls, times, spread=0.6))
    assert "No smaller size moved bytes faster" in noisy
    steps = {2**p: 3.0 * (1 + p) for p in range(4, 8)} | {
        2**p: 12 * 2**p / 2e10 * 1e6 for p in range(8, 20)
    }
    rising = render.primer.size_sweep_claim(sweep_measurement(first_calls, steps))
    assert "which differ by more than their rounds' noise" in rising


def test_the_benchmark_timer_uses_as_many_threads_as_the_profiled_runs():
    from attention_docs.profiling.timing import time_callable

    seen = []
    before = torch.get_num_threads()
    time_callable(
        lambda: seen.append(torch.get_num_threads()), torch.device("cpu"), min_run_time=0.01
    )
    assert set(seen) == {before}
