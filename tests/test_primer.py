# The profiler primer's experiments (first calls, profiler overhead, size sweep) at tiny
# shapes, and its renderers on real and hand-built traces.
from __future__ import annotations

import json
import re

import pytest
import torch
from conftest import DATA

from attention_docs import render
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments.primer import first_call_extra, profile_every_call
from attention_docs.experiments.runner import run_experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements import Sourced, Table
from attention_docs.profiling.trace import Span, Trace
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


def test_first_calls_measures_every_call_and_the_warm_reference(first_calls):
    m = first_calls
    per_call = m.tables["per_call"]
    assert per_call.column("call") == [1, 2, 3, 4]
    for column in ("cold_wall_us", "cold_step_us", "warm_session_wall_us"):
        assert all(t > 0 for t in per_call.column(column)), column
    # The profiler's step spans a call (plus prof.step()), so it cannot be much shorter.
    assert m.facts["cold_ops_first"] >= m.facts["cold_ops_last"] > 0
    assert m.timing.median_us > 0
    assert {s.label for s in m.steps} == set(STEPS)
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


def test_first_call_renderers_state_the_measured_numbers(first_calls):
    s = sourced(first_calls)
    table = render.first_calls_table(s)
    assert table.count("\n| ") >= 5 and "ad-caption" in table
    claim = render.first_calls_claim(first_calls)
    first = first_calls.tables["per_call"].column("cold_wall_us")[0]
    assert f"**{render._format.time_us(first)}**" in claim
    ops = render.first_call_ops_table(s)
    assert "Calls first / warm" in ops
    assert "op calls against" in render.first_call_ops_claim(first_calls) or "things no warm" in (
        render.first_call_ops_claim(first_calls)
    )


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
    tree = render.dispatch_tree(sourced(first_calls))
    assert tree.startswith("```text\n") and "├─ " in tree and "ad-caption" in tree
    claim = render.self_vs_total_claim(first_calls)
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
    assert len(rows) == 5
    assert all(r["time_per_forward_us"] > 0 for r in rows)
    events = [r["events_per_forward"] for r in rows[1:]]
    # Each forward records at least the five ranges and their ops; stacks add events.
    assert all(e >= 10 for e in events) and events[-1] >= events[0]
    for r in rows[1:]:
        assert r["overhead_per_event_us"] == pytest.approx(
            r["overhead_us"] / r["events_per_forward"], rel=1e-2, abs=1e-3
        )
    assert "ad-caption" in render.overhead_table(sourced(m))
    assert "events per forward" in render.overhead_claim(m)


def test_op_size_sweep_reports_bytes_and_time_per_size():
    m = run_experiment("op_size_sweep", {"min_log2": 4, "max_log2": 8}, device="cpu")
    table = m.tables["sizes"]
    assert table.column("elements") == [16, 32, 64, 128, 256]
    assert table.column("bytes") == [12 * n for n in (16, 32, 64, 128, 256)]
    assert all(t > 0 for t in table.column("time_us"))
    assert set(table.column("status")) == {"ok"}
    html = render.size_sweep_figure(sourced(m))
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


def test_size_sweep_claim_computes_its_numbers(first_calls):
    from dataclasses import replace

    rows = tuple(
        (2**p, 12 * 2**p, max(3.0, 12 * 2**p / 2e10 * 1e6), 0.0, "ok") for p in range(4, 20)
    )
    table = Table(("elements", "bytes", "time_us", "bandwidth_gbs", "status"), rows)
    m = replace(first_calls, tables={"sizes": table}, facts={"op": "torch.add(a, b)"})
    claim = render.size_sweep_claim(m)
    assert re.search(r"fixed floor of \*\*3 µs\*\*", claim)
    assert "20 GB/s" in claim and "5 k elements" in claim


def test_the_benchmark_timer_uses_as_many_threads_as_the_profiled_runs():
    from attention_docs.profiling.timing import time_callable

    seen = []
    before = torch.get_num_threads()
    time_callable(
        lambda: seen.append(torch.get_num_threads()), torch.device("cpu"), min_run_time=0.01
    )
    assert set(seen) == {before}
