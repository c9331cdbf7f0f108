# Attribution of GPU work on a multi-threaded CUDA trace, and the kernel-clock helpers, on
# tests/data/cuda_trace_kineto.json: a hand-made trace shaped like a recorded Kineto one
# (torch 2.x on an H100/H200). Two profiler steps; the forward runs on the main thread and
# the backward on the autograd engine's thread; launches through cudaLaunchKernel,
# cudaLaunchKernelExC (cuBLAS) and cuLaunchKernel (Triton); ac2g flows; gpu_user_annotation
# spans; a memset and a memcpy; two streams. Expected numbers are derived from the raw
# events here, independently of the parser.
from __future__ import annotations

import itertools
import json
import statistics
from collections import defaultdict
from dataclasses import replace

import pytest
import torch
from conftest import DATA

from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.inputs import make_qkv
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.records.kernels import names_per_step
from attention_docs.records.trace import (
    GPU_WORK,
    Span,
    Trace,
    attribute,
    kernel_time_us,
    launch_gaps,
    op_stats,
    step_span_times,
    trim_chrome,
)
from attention_docs.render.timeline import DEFAULT_SETTINGS, layout

LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
WORK_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
PHASES = ("attention.forward", "attention.backward")


@pytest.fixture(scope="module")
def chrome() -> dict:
    return json.loads((DATA / "cuda_trace_kineto.json").read_text())


@pytest.fixture(scope="module")
def trace(chrome) -> Trace:
    return Trace.from_chrome(trim_chrome(chrome))


def _x(chrome, *cats):
    return [e for e in chrome["traceEvents"] if e.get("ph") == "X" and e.get("cat") in cats]


def _thread(chrome, label: str) -> int:
    """The tid whose thread_name metadata contains `label`."""
    return next(
        e["tid"]
        for e in chrome["traceEvents"]
        if e.get("ph") == "M" and e["name"] == "thread_name" and label in e["args"]["name"]
    )


def _windows(chrome, name: str) -> list[tuple[float, float]]:
    return [
        (e["ts"], e["ts"] + e["dur"]) for e in _x(chrome, "user_annotation") if e["name"] == name
    ]


def _launch_of(chrome) -> dict[int, dict]:
    return {e["args"]["correlation"]: e for e in _x(chrome, *LAUNCH_CATS)}


def _work_launched(chrome, keep) -> list[dict]:
    """The raw GPU work whose launch satisfies `keep(launch)`."""
    launch = _launch_of(chrome)
    return [e for e in _x(chrome, *WORK_CATS) if keep(launch[e["args"]["correlation"]])]


def _inside(e, windows) -> bool:
    return any(lo <= e["ts"] <= hi for lo, hi in windows)


def test_the_fixture_is_shaped_like_a_recorded_cuda_trace(chrome):
    # What the attribution has to cope with, checked so that an edit of the fixture cannot
    # quietly remove it: the backward's launches come from another thread than its range.
    main, autograd = _thread(chrome, "python"), _thread(chrome, "pt_autograd")
    assert {e["tid"] for e in _x(chrome, "user_annotation") if e["name"] in PHASES} == {main}
    assert {e["name"] for e in _x(chrome, *LAUNCH_CATS) if e["tid"] == autograd} >= {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cuLaunchKernel",
        "cudaMemsetAsync",
        "cudaMemcpyAsync",
    }
    # Kineto's GPU annotation of the backward spans only what the main thread launched.
    backward_gpu = [e for e in _x(chrome, "gpu_user_annotation") if e["name"] == PHASES[1]]
    from_main = _work_launched(chrome, lambda launch: launch["tid"] == main)
    covered = [
        e for e in from_main if _inside(e, [(g["ts"], g["ts"] + g["dur"]) for g in backward_gpu])
    ]
    assert len(backward_gpu) == 2 and {e["cat"] for e in covered} == {"kernel"}
    assert sum(g["dur"] for g in backward_gpu) < 0.05 * sum(
        e["dur"] for e in _work_launched(chrome, lambda launch: launch["tid"] == autograd)
    )


def test_backward_kernels_from_the_autograd_thread_count_for_the_backward(chrome, trace):
    autograd = _thread(chrome, "pt_autograd")
    backward = _windows(chrome, PHASES[1])
    expected = _work_launched(
        chrome, lambda launch: launch["tid"] == autograd or _inside(launch, backward)
    )
    times = step_span_times(trace, PHASES)
    assert times[PHASES[1]]["device_us"] == pytest.approx(sum(e["dur"] for e in expected))
    assert times[PHASES[1]]["cpu_us"] == pytest.approx(sum(hi - lo for lo, hi in backward))
    # The backward costs more GPU time than the forward here, as it does on a real GPU.
    assert times[PHASES[1]]["device_us"] > 1.5 * times[PHASES[0]]["device_us"]


def test_per_step_gpu_time_is_the_sum_of_the_work_launched_in_each_step(chrome, trace):
    steps = {
        int(e["name"].removeprefix("ProfilerStep#")): (e["ts"], e["ts"] + e["dur"])
        for e in _x(chrome, "user_annotation")
        if e["name"].startswith("ProfilerStep#")
    }
    assert {s.step for s in trace.steps} == set(steps) == {3, 4}
    for step, window in steps.items():
        # A kernel belongs to the step its launch started in, on whichever thread, even when
        # the GPU runs it after the step has ended on the CPU.
        in_step = _work_launched(chrome, lambda launch, w=window: _inside(launch, [w]))
        launched = [s for s in trace.spans if s.kind in GPU_WORK and s.step == step]
        assert sum(s.dur_us for s in launched) == pytest.approx(sum(e["dur"] for e in in_step))
        # Each step's GPU time splits exactly into its forward and its backward.
        phases = kernel_time_us(trace.in_step(step), PHASES)
        main = _thread(chrome, "python")
        for name in PHASES:
            ranges = [w for w in _windows(chrome, name) if window[0] <= w[0] <= window[1]]
            expected = _work_launched(
                chrome,
                lambda launch, r=ranges, n=name, m=main: (
                    _inside(launch, r) and (launch["tid"] == m or n == PHASES[1])
                ),
            )
            assert phases[name] == pytest.approx(sum(e["dur"] for e in expected))
        assert sum(phases.values()) == pytest.approx(sum(s.dur_us for s in launched))


def test_memcpy_and_memset_count_as_gpu_work_and_are_listed_by_name(chrome, trace):
    copies = _x(chrome, "gpu_memcpy", "gpu_memset")
    assert {e["name"] for e in copies} == {"Memcpy DtoD (Device -> Device)", "Memset (Device)"}
    backward = attribute(trace, [PHASES[1]])[PHASES[1]]
    assert {s.kind for s in backward if s.kind in GPU_WORK} == {"kernel", "memcpy", "memset"}
    kernels_only = sum(s.dur_us for s in backward if s.kind == "kernel")
    assert kernel_time_us(trace, PHASES)[PHASES[1]] == pytest.approx(
        kernels_only + sum(e["dur"] for e in copies)
    )
    gpu_rows = {r["name"]: r for r in op_stats(trace) if r["where"] == "GPU"}
    for name in ("Memcpy DtoD (Device -> Device)", "Memset (Device)"):
        assert gpu_rows[name]["calls"] == 2


def test_both_streams_are_lanes_and_the_main_thread_comes_first(chrome, trace):
    assert trace.lanes == ("CPU thread 0", "CPU thread 1", "GPU stream 20", "GPU stream 7")
    lane_tids = defaultdict(set)
    for s in trace.spans:
        lane_tids[s.lane].add(s.kind)
    assert "range" in lane_tids["CPU thread 0"] and "kernel" in lane_tids["GPU stream 20"]
    assert {"memset", "memcpy"} <= lane_tids["GPU stream 20"]
    # Lanes are named by time, not by where Kineto happened to write the thread's events.
    reordered = dict(chrome, traceEvents=list(reversed(chrome["traceEvents"])))
    again = Trace.from_chrome(trim_chrome(reordered))
    assert again.lanes == trace.lanes
    assert {s.lane for s in again.spans if s.kind == "range" and s.name in PHASES} == {
        "CPU thread 0"
    }
    assert step_span_times(again, PHASES) == step_span_times(trace, PHASES)


@pytest.mark.parametrize("api", ["cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel"])
def test_flows_link_every_launch_api_to_its_kernel(chrome, trace, api):
    raw = [e for e in _x(chrome, *LAUNCH_CATS) if e["name"] == api]
    starts = {
        e["id"]: e for e in chrome["traceEvents"] if e.get("ph") == "s" and e["cat"] == "ac2g"
    }
    ends = {e["id"]: e for e in chrome["traceEvents"] if e.get("ph") == "f" and e["cat"] == "ac2g"}
    kernel_of = {e["args"]["correlation"]: e for e in _x(chrome, "kernel")}
    assert len(raw) >= 2
    for launch in raw:
        flow = launch["args"]["correlation"]
        # The fixture's ac2g flow is what a viewer draws: launch -> kernel, same id.
        assert (starts[flow]["tid"], starts[flow]["ts"]) == (launch["tid"], launch["ts"])
        assert ends[flow]["bp"] == "e" and ends[flow]["ts"] == kernel_of[flow]["ts"]
    launches = [s for s in trace.spans if s.kind == "runtime" and s.name == api]
    assert len(launches) == len(raw)
    for launch in launches:
        kernels = [s for s in trace.spans if s.kind == "kernel" and s.flow == launch.flow]
        assert len(kernels) == 1
        assert kernels[0].name == kernel_of[launch.flow]["name"]
        assert kernels[0].step == launch.step  # a kernel belongs to its launch's step


def test_names_per_step_includes_what_the_autograd_thread_ran(trace):
    names = names_per_step(trace, PHASES)
    assert "triton_red_fused__softmax_backward_data_0" in names[PHASES[1]]
    assert "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn" in names[PHASES[1]]
    assert "autograd::engine::evaluate_function: BmmBackward0" in names[PHASES[1]]
    assert "aten::_softmax" in names[PHASES[0]]
    assert not any("Backward" in n for n in names[PHASES[0]])


def test_the_timeline_colours_backward_kernels_as_the_backward(trace):
    settings = replace(DEFAULT_SETTINGS, colors=(("attention.backward", "#D55E00"),))
    _, bars, _ = layout(trace.in_step(3), settings)
    coloured = {b.span.name for b in bars if b.color == "#D55E00" and b.span.kind == "kernel"}
    assert "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn" in coloured
    assert "triton_red_fused__softmax_backward_data_0" in coloured


def test_a_range_another_thread_opened_first_keeps_its_own_work():
    # Rule 2 of `attribute`: work on another thread counts for a range when that thread's
    # outermost open range (if any) lies inside the range's window.
    def span(name, kind, lane, start, dur, *, flow=None):
        return Span(name, kind, lane, start, dur, flow=flow)

    r = span("attention.backward", "range", "CPU thread 0", 10.0, 50.0)
    orphan = span("cudaLaunchKernel", "runtime", "CPU thread 1", 20.0, 2.0, flow=1)
    nested = span("## Call CompiledFxGraph ##", "range", "CPU thread 2", 15.0, 20.0)
    nested_launch = span("cuLaunchKernel", "runtime", "CPU thread 2", 16.0, 2.0, flow=2)
    earlier = span("loader", "range", "CPU thread 3", 0.0, 100.0)
    busy_launch = span("cudaLaunchKernel", "runtime", "CPU thread 3", 30.0, 2.0, flow=3)
    kernels = [
        span(f"k{i}", "kernel", "GPU stream 7", 70.0 + 10 * i, 5.0, flow=i) for i in (1, 2, 3)
    ]
    cpu = [r, orphan, nested, nested_launch, earlier, busy_launch]
    trace = Trace(spans=(*cpu, *kernels), lanes=tuple(sorted({s.lane for s in (*cpu, *kernels)})))
    names = {s.name for s in attribute(trace, ["attention.backward"])["attention.backward"]}
    assert {"k1", "k2", "## Call CompiledFxGraph ##"} <= names
    assert "k3" not in names and "loader" not in names
    assert kernel_time_us(trace, ["attention.backward"]) == {"attention.backward": 10.0}


def test_launch_gaps_are_measured_between_kernels_per_stream_and_step(chrome, trace):
    steps = [
        (e["ts"], e["ts"] + e["dur"])
        for e in _x(chrome, "user_annotation")
        if e["name"].startswith("ProfilerStep#")
    ]
    launch = _launch_of(chrome)
    groups = defaultdict(list)
    for e in _x(chrome, *WORK_CATS):
        ts = launch[e["args"]["correlation"]]["ts"]
        step = next(i for i, (lo, hi) in enumerate(steps) if lo <= ts <= hi)
        groups[(step, e["args"]["stream"])].append(e)
    gaps = []
    for work in groups.values():
        work.sort(key=lambda e: e["ts"])
        # (b - a) - dur, not b - (a + dur): epoch microseconds keep only a quarter-µs as floats.
        gaps += [(b["ts"] - a["ts"]) - a["dur"] for a, b in itertools.pairwise(work)]
    assert min(gaps) > 0  # the fixture's streams never run two pieces of work at once
    found = launch_gaps(trace)
    assert found.count == len(gaps) == 2 * (5 - 1 + 3 - 1)
    assert found.median_us == pytest.approx(statistics.median(gaps), abs=1e-3)
    assert found.total_us == pytest.approx(sum(gaps), abs=1e-3)
    assert found.busy_us == pytest.approx(sum(e["dur"] for e in _x(chrome, *WORK_CATS)))
    assert 0 < found.idle_share < 1
    one = launch_gaps(trace.in_step(3))
    assert one.count == found.count // 2


def test_the_gpu_helpers_say_none_on_a_cpu_trace():
    q, k, v = make_qkv(1, 2, 16, 8, seed=3)
    run = profile_callable(
        lambda: naive_attention(q, k, v, causal=True), torch.device("cpu"), sched=Schedule(0, 1, 1)
    )
    assert kernel_time_us(run.trace, STEPS) is None
    assert launch_gaps(run.trace) is None
    # The CPU time stays the device time there, and a one-thread trace is attributed as before.
    times = step_span_times(run.trace, STEPS)
    assert all(t["device_us"] == t["cpu_us"] > 0 for t in times.values())
    assert all(attribute(run.trace, STEPS)[label] for label in STEPS)
