# The profiler primer: its experiments (first calls, profiler overhead, size sweep) at tiny
# shapes, for their structure only; its findings and renderers on hand-made measurements with
# known answers, and on recorded traces.
from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
import torch
from conftest import DATA
from fake_times import forward_times_for
from recorded import recorded
from timings import measured_in_rounds, spanning

from attention_docs import render
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments.primer import (
    OVERHEAD_COLUMNS,
    PER_CALL_COLUMNS,
    first_call_extra,
    profile_every_call,
)
from attention_docs.experiments.runner import run_experiment
from attention_docs.findings import primer as fprimer
from attention_docs.inputs import make_qkv
from attention_docs.measurements import Sourced, Table
from attention_docs.records.timing import Timing
from attention_docs.records.trace import Span, Trace

TINY = {"seq_len": 16, "num_heads": 1, "head_dim": 8}


def sourced(m) -> Sourced:
    return Sourced(m, "measured now", f"{m.experiment}/{m.key}.cpu.json")


def t(*rounds: float) -> Timing:
    return spanning(rounds)


def text(html: str) -> str:
    """What a reader sees: the fact spans' text without their markup."""
    return re.sub(r"<[^>]+>", "", html)


@pytest.fixture(scope="module")
def first_calls():
    return run_experiment("profile_first_calls", {**TINY, "calls": 4}, device_setting="cpu")


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


def test_first_calls_measures_every_call_and_leaves_the_settled_profile_to_naive_steps(
    first_calls,
):
    m = first_calls
    per_call = m.tables["per_call"]
    assert per_call.column("call") == [1, 2, 3, 4]
    assert None not in per_call.column("cold_step_us")  # every call a profiler step of its own
    for r in m.tables["first_call_ops"].records():
        assert r["extra_us"] == pytest.approx(r["self_first_us"] - r["self_warm_us"], abs=2e-3)
    assert m.facts["cold_ops_first"] >= m.facts["cold_ops_last"] >= len(STEPS)
    # One profile of the naive forward per shape: naive_steps' (no steps, ops or timeline here).
    assert m.timing is None and not m.steps and not m.ops and m.timeline is None
    cost = m.facts["fault_cost"]
    assert cost["buffer_bytes"] == 4096  # one N×N score matrix (1 kB), in whole pages
    assert cost["faults_per_buffer"] >= 1  # a freshly mapped page faults when first written
    assert len(cost["fresh"]["rounds_us"]) == len(cost["mapped"]["rounds_us"])
    order = [(r["calls_warm"] > 0, -r["extra_us"]) for r in m.tables["first_call_ops"].records()]
    assert order == sorted(order)  # names only the first call ran first, then by extra time


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
    rows = first_call_extra(Trace(tuple(spans), ("CPU thread",), steps)).records()
    assert rows[0]["name"] == "cudaMalloc" and rows[0]["calls_warm"] == 0
    # Warm steps are the second half (steps 2 and 3): mean self time 3 µs.
    assert rows[1]["name"] == "aten::bmm" and rows[1]["extra_us"] == pytest.approx(7.0)


def with_calls(m, cold, again, faults=None, faults_again=None, *, cost=None):
    """`m` with a hand-made per-call table (µs per call, both sessions) and fault cost."""
    n = len(cold)
    faults = faults or [None] * n
    faults_again = faults_again or faults
    rows = tuple(
        (i + 1, cold[i], cold[i], again[i], faults[i], faults_again[i], None) for i in range(n)
    )
    facts = {**m.facts, "fault_cost": cost or m.facts["fault_cost"]}
    return replace(m, tables={**m.tables, "per_call": Table(PER_CALL_COLUMNS, rows)}, facts=facts)


def test_first_calls_are_set_against_the_settled_calls_of_their_process(first_calls):
    m = with_calls(first_calls, [900.0, 210.0, 200.0, 205.0], [400.0, 190.0, 200.0, 195.0])
    f = fprimer.first_calls(m)
    # The settled calls' time is their lower quartile (records/timing.py), their range whole.
    assert f.settled.value == pytest.approx(201.25) and (f.settled.low, f.settled.high) == (
        200,
        205,
    )
    assert f.first_over_settled.value == pytest.approx(900 / 201.25)
    # 400 − the second session's settled calls (200, 195; their lower quartile 196.25)
    assert f.startup.value == pytest.approx(203.75)
    assert f.cold_start.value == pytest.approx(500.0)
    claim = render.primer.first_calls(sourced(m))
    assert "| 1 | 900 µs | 400 µs | — | — |" in text(claim)
    assert "took **900 µs**, 4.47× the settled calls" in text(claim)
    # Profiled calls are set against calls of their own process only: no unprofiled forward,
    # timed in another process, beside them.
    assert "unprofiled" not in text(claim) and ";unprofiled;" not in claim
    assert "204 µs more than its settled calls, the profiler's own start-up" in text(claim)
    assert "**500 µs** longer" in text(claim)
    # A first call inside the settled calls' range is said to be, never "N× slower".
    calm = with_calls(first_calls, [201.0, 210.0, 200.0, 205.0], [200.0, 190.0, 200.0, 195.0])
    found = fprimer.first_calls(calm)
    assert found.first_over_settled is found.startup is found.cold_start is None
    claim = text(render.primer.first_calls(sourced(calm)))
    assert "within the range of the settled calls" in claim
    assert "not slower by more than calls vary" in claim
    assert "the profiler's own start-up did not show" in claim
    # A first call faster than its settled calls shows no start-up, never a negative one.
    quick = with_calls(first_calls, [201.0, 210.0, 200.0, 205.0], [150.0, 190.0, 200.0, 195.0])
    assert "did not show" in render.primer.first_calls(sourced(quick))


def fault_cost(fresh=(70.0, 70.0, 70.0), per_buffer=50.0):
    def timing(*rounds):
        return t(*rounds).to_json()

    return {
        "buffer_bytes": 2**20,
        "faults_per_buffer": per_buffer,
        "fresh": timing(*fresh),
        "mapped": timing(10.0, 10.0, 10.0),
    }  # a fresh buffer: 50 faults and 60 µs more than a mapped one, 1.2 µs per fault


def test_page_faults_show_their_groups_not_a_median(first_calls):
    """Issue 16: 4 faults in most calls and 257-260 in others is two groups, not a median."""
    cold = [1350, 4, 4, 257, 4, 4, 260, 4]
    again = [260, 4, 4, 4, 258, 4, 4, 4]
    m = with_calls(first_calls, [500.0] * 8, [500.0] * 8, cold, again, cost=fault_cost())
    times = forward_times_for(m, (1000.0, 990.0, 1010.0))
    found = fprimer.faults(m, times)
    assert found.distribution.multimodal
    groups = [(g.faults.low, g.faults.high, g.calls.value) for g in found.groups]
    # The very first call, which maps the process's memory, is a group of its own.
    assert groups == [(4, 4, 11), (257, 260, 4), (1350, 1350, 1)]
    low, high, _ = found.groups
    assert found.page_cost.value == pytest.approx(1.2)
    assert low.cost.value == pytest.approx(4.8) and low.level == "small"
    assert high.cost.value == pytest.approx(259 * 1.2) and high.level == "part"
    claim = text(render.primer.faults(sourced(m), times))
    assert "do not all fault alike: 4 faults in 11 calls, 259 (257–260) faults in 4 calls" in claim
    assert "A fresh page costs 1.2 µs" in claim
    # The price comes from a buffer of its own, not from the calls: said, so that a group's
    # priced cost is not read as a second measure of the calls' own times.
    assert "timed apart from any forward" in claim and "may cost otherwise" in claim
    table = claim
    assert "| 259 (257–260) | 4 | 311 µs | 31.1% (30.8–31.4%) | a measurable part |" in table
    # Fresh and mapped writes within noise of each other: the faults are not priced.
    tie = with_calls(
        first_calls, [500.0] * 8, [500.0] * 8, cold, again, cost=fault_cost(fresh=(9.0, 10.0, 11.0))
    )
    assert fprimer.faults(tie, times).page_cost is None
    assert "is not measured" in render.primer.faults(sourced(tie), times)
    one = with_calls(first_calls, [500.0] * 4, [500.0] * 4, [4, 5, 4, 6], None, cost=fault_cost())
    assert not fprimer.faults(one, times).distribution.multimodal


def test_fault_groups_take_a_verdict_only_when_the_noise_allows(first_calls):
    m = with_calls(first_calls, [500.0] * 4, [500.0] * 4, [100] * 4, None, cost=fault_cost())
    (group,) = fprimer.faults(m, forward_times_for(m, (200.0, 200.0, 200.0))).groups
    assert group.share.value == pytest.approx(0.6) and group.level == "most"
    (noisy,) = fprimer.faults(m, forward_times_for(m, (200.0, 20.0, 2000.0))).groups
    assert noisy.level == "open"


@pytest.fixture(scope="module")
def naive():
    return recorded("naive_steps")


def test_dispatch_tree_shows_matmul_dispatching_to_bmm(naive):
    d = fprimer.dispatch(naive, "attention.scores")
    assert d.outer == "aten::matmul" and d.worker == "aten::bmm"
    assert d.own.value <= d.total.value and d.outer_own.value <= d.outer_total.value
    tree = render.primer.dispatch_tree(sourced(naive))
    lines = tree.split("```")[1].splitlines()
    assert lines[2].startswith("attention.scores")
    rows = [re.match(r"([│├└─ ]*)(\S+)", line).groups() for line in lines[2:]]
    names = [name for _, name in rows]
    matmul, bmm = names.index("aten::matmul"), names.index("aten::bmm")
    assert matmul < bmm and len(rows[bmm][0]) > len(rows[matmul][0])  # bmm nested in matmul
    assert "├─ " in tree and "ad-caption" in tree and "profiled clock" in tree
    claim = render.primer.self_vs_total_claim(naive)
    assert "`aten::matmul`" in claim and "`aten::bmm`" in claim and "data-fact=" in claim


def test_dispatch_tree_follows_launches_to_their_kernels(naive):
    trace = Trace.from_chrome(json.loads((DATA / "cuda_trace_small.json").read_text()))
    tree = render.primer.dispatch_tree(sourced(replace(naive, timeline=trace)))
    lines = tree.split("```")[1].splitlines()[2:]
    assert lines[0].startswith("attention.scores")
    assert lines[1].startswith("└─ aten::bmm") and lines[2].startswith("   └─ cudaLaunchKernel")
    assert "→ ampere_sgemm_64x64_nn (40 µs on the GPU)" in lines[2]
    with pytest.raises(KeyError, match="no range named"):
        fprimer.range_spans(trace, "attention.mask")


def test_profile_overhead_keeps_each_setting_as_a_timing():
    m = run_experiment("profile_overhead", {**TINY, "iterations": 2}, device_setting="cpu")
    rows = m.tables["overhead"].records()
    assert m.tables["overhead"].columns == OVERHEAD_COLUMNS
    assert [r["configuration"] for r in rows][:2] == ["no profiler", "activities only"]
    assert len(rows) == 5 and m.timing is None
    assert all(len(r["time"].rounds_us) == m.facts["rounds"] == 10 for r in rows)
    events = [r["events_per_forward"] for r in rows[1:]]
    # Each forward records at least the five ranges and their ops; stacks add events.
    assert all(e >= 10 for e in events) and events[-1] >= events[0]
    times = forward_times_for(m, (100.0, 95.0, 105.0))
    assert "ad-caption" in render.primer.overhead(sourced(m), times)


def overhead_measurement(m, rows):
    return replace(
        m, tables={"overhead": Table(OVERHEAD_COLUMNS, tuple(rows))}, facts={"rounds": 3}
    )


def test_overhead_is_within_noise_when_the_rounds_overlap(first_calls):
    base = ("no profiler", t(95.0, 100.0, 105.0), 0.0)
    clear = ("activities only", t(140.0, 150.0, 160.0), 50.0)
    noisy = ("+ with_stack", t(96.0, 104.0, 110.0), 200.0)
    m = overhead_measurement(first_calls, [base, clear, noisy])
    found = fprimer.overhead(m)
    assert (found[0].added.value, found[0].added.low, found[0].added.high) == (50, 35, 65)
    assert found[0].per_event.value == pytest.approx(1.0) and not found[0].versus.tie
    assert found[1].versus.tie and found[1].per_event is None
    times = forward_times_for(m, (100.0, 95.0, 105.0))
    table = text(render.primer.overhead(sourced(m), times))
    assert "| activities only | 50 µs (35–65 µs) | 1.5× (1.33–1.68×) | 50 events | 1 µs" in table
    assert "| + with_stack | 4 µs (−9 µs to 15 µs) | within noise (1.04×) |" in table
    claim = table
    assert "Recording 50 events per forward added **50 µs (35–65 µs)**" in claim
    assert "about 1 µs per event" in claim
    assert "a forward was within noise (1.04×) of the loop without the profiler" in claim
    # Profiled times from the page's other processes are not this cost, and the page says so.
    assert "ran in other processes: only these rounds measure the profiler's cost" in claim
    quiet = overhead_measurement(first_calls, [base, noisy, noisy])
    assert "was within noise" in render.primer.overhead(sourced(quiet), times)


def test_op_size_sweep_keeps_each_size_as_a_timing():
    m = run_experiment("op_size_sweep", {"min_log2": 4, "max_log2": 8}, device_setting="cpu")
    table = m.tables["sizes"]
    assert table.column("elements") == [16, 32, 64, 128, 256]
    assert table.column("bytes") == [12 * n for n in (16, 32, 64, 128, 256)]
    assert all(measured_in_rounds(r["time"]) for r in table.records())
    assert set(table.column("status")) == {"ok"}
    html = render.primer.size_sweep_figure(sourced(m))
    assert '<svg role="img"' in html and "floor" in html
    # Both lines are times: the axis says its unit in its ticks (1 µs), not in its label.
    assert re.search(r">[\d.,]+ [nµm]?s</text>", html) and "(µs)" not in html


def sweep_measurement(m, times, spread=0.02):
    rows = tuple(
        (n, 12 * n, t(v * (1 - spread), v, v * (1 + spread)), "ok") for n, v in times.items()
    )
    table = Table(("elements", "bytes", "time", "status"), rows)
    return replace(
        m, params={"dtype": "float32"}, tables={"sizes": table}, facts={"op": "torch.add(a, b)"}
    )


def test_size_sweep_finds_the_floor_the_bandwidth_and_the_crossover(first_calls):
    times = {2**p: max(3.0, 12 * 2**p / 2e10 * 1e6) for p in range(4, 20)}
    s = fprimer.size_sweep(sweep_measurement(first_calls, times))
    assert s.floor.value == pytest.approx(3.0) and s.flat
    assert s.bandwidth.value == pytest.approx(2e10)
    assert s.crossover.value == pytest.approx(3e-6 * 2e10)
    assert s.model_us(12 * 2**19) == pytest.approx(12 * 2**19 / 2e10 * 1e6)
    claim = text(render.primer.size_sweep_claim(sweep_measurement(first_calls, times)))
    assert "A call's fixed cost is its floor, **3 µs**" in claim
    assert "once a call moves about **60 kB**: below that the fixed cost is most" in claim
    assert "within noise of one another" in claim and "largest size's rate, 20 GB/s" in claim
    assert "No smaller size moved bytes faster than the largest beyond the noise" in claim
    rising = {2**p: 3.0 * (1 + p) for p in range(4, 8)} | {
        2**p: 12 * 2**p / 2e10 * 1e6 for p in range(8, 20)
    }
    assert "differ beyond their noise" in render.primer.size_sweep_claim(
        sweep_measurement(first_calls, rising)
    )
    with pytest.raises(ValueError, match="at least 5 measured sizes"):
        fprimer.size_sweep(sweep_measurement(first_calls, dict(list(times.items())[:4])))


def test_a_faster_smaller_size_is_stated_only_beyond_the_noise(first_calls):
    """Issue 16: 102 GB/s at 524,288 elements against 22.5 GB/s at the largest size must not
    read "no smaller size moved bytes faster"."""
    times = {2**p: max(2.0, 12 * 2**p / 22.5e9 * 1e6) for p in range(4, 23)}
    times[2**19] = 12 * 2**19 / 102e9 * 1e6
    claim = text(render.primer.size_sweep_claim(sweep_measurement(first_calls, times)))
    assert "The rate peaked at 102 GB/s with 524,288 elements (6.29 MB moved)" in claim
    assert "4.53× the largest size's, beyond the noise of both" in claim
    assert "not measured here" in claim  # what served it is not guessed
    table = text(render.primer.size_sweep_table(sourced(sweep_measurement(first_calls, times))))
    assert "| 524,288 | 6.29 MB |" in table and "102 GB/s" in table
    noisy = text(render.primer.size_sweep_claim(sweep_measurement(first_calls, times, 0.7)))
    assert "No smaller size moved bytes faster" in noisy


def test_the_chapter_opens_with_its_finding_in_facts(first_calls):
    calls = with_calls(first_calls, [900.0, 210.0, 200.0, 205.0], [400.0, 190.0, 200.0, 195.0])
    found = render.primer.finding(sourced(calls))
    claim, caption = found.split('<p class="ad-caption">')
    # Two numbers in the claim, both from one process; the ranges in the caption.
    assert claim.count('class="ad-fact"') == 2
    assert "the first profiled call took 900 µs, 4.47× the calls after it had settled" in text(
        claim
    )
    assert "unprofiled" not in claim and "(" not in text(claim)
    assert caption.count('class="ad-fact"') == 2 and "201 µs (200–205 µs)" in text(caption)
    calm = with_calls(first_calls, [201.0, 210.0, 200.0, 205.0], [200.0, 190.0, 200.0, 195.0])
    quiet = text(render.primer.finding(sourced(calm)))
    assert "within the range of the calls after it" in quiet and "lies" not in quiet


def test_the_benchmark_timer_uses_as_many_threads_as_the_profiled_runs():
    from attention_docs.profiling.timing import time_callable

    seen = []
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # not the Timer's own default of one, whatever the suite set
    try:
        time_callable(
            lambda: seen.append(torch.get_num_threads()), torch.device("cpu"), min_run_time=0.01
        )
    finally:
        torch.set_num_threads(before)
    assert set(seen) == {2}
