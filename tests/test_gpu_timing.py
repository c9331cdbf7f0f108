# GPU kernel timing without a GPU: torch.cuda's availability, events and synchronize, and
# triton.testing.do_bench, are replaced by fakes, so these tests check how time_kernel_us
# drives them (warmup, flushes, units), not the hardware.
from __future__ import annotations

import sys
import types

import pytest
import torch

from attention_docs.profiling import gpu_timing
from attention_docs.profiling.gpu_timing import time_kernel_us


def test_on_the_cpu_it_says_to_use_the_cpu_timer(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"no CUDA device.*time_callable"):
        time_kernel_us(lambda: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ValueError, match="cpu is not a CUDA device"):
        time_kernel_us(lambda: None, device="cpu")
    with pytest.raises(ValueError, match="rep_ms > 0"):
        time_kernel_us(lambda: None, rep_ms=0)


def test_with_triton_it_is_do_bench_in_microseconds(monkeypatch):
    calls = []

    def do_bench(fn, **kwargs):  # Triton 3.5 and 3.6: fn, warmup, rep, grad_to_none, ...
        calls.append(kwargs)
        fn()
        return [0.5, 0.25, 0.125]

    triton = types.ModuleType("triton")
    testing = types.ModuleType("triton.testing")
    testing.do_bench = do_bench
    triton.testing = testing
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.testing", testing)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    ran = []
    assert time_kernel_us(lambda: ran.append(1)) == [500.0, 250.0, 125.0]
    assert calls == [{"warmup": 25, "rep": 100, "quantiles": None, "return_mode": "all"}]
    assert ran == [1]
    time_kernel_us(lambda: None, warmup_ms=5, rep_ms=40)
    assert calls[-1]["warmup"] == 5 and calls[-1]["rep"] == 40


class FakeGPU:
    """A GPU clock that only `fn` advances, CUDA events that read it, and an L2 flush that
    is logged, so the order of flushes, events and calls can be checked."""

    def __init__(self, call_ms: float):
        self.now = 0.0
        self.call_ms = call_ms
        self.log: list[str] = []
        gpu = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.t = None

            def record(self):
                self.t = gpu.now
                gpu.log.append("record")

            def elapsed_time(self, end):
                return end.t - self.t

        class Flush:
            def zero_(self):
                gpu.log.append("flush")

        self.Event = Event
        self.Flush = Flush

    def fn(self):
        self.now += self.call_ms
        self.log.append("fn")


def test_without_triton_it_times_each_call_with_events_after_a_flush(monkeypatch):
    gpu = FakeGPU(call_ms=0.02)
    # As if triton were not installed: importing it (or, once imported, triton.testing) fails.
    monkeypatch.setitem(sys.modules, "triton", None)
    monkeypatch.setitem(sys.modules, "triton.testing", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "Event", gpu.Event)
    monkeypatch.setattr(gpu_timing, "_flush_buffer", gpu.Flush)
    times = time_kernel_us(gpu.fn, warmup_ms=0.1, rep_ms=1.0)
    assert len(times) == 50  # 1 ms of 0.02 ms calls
    assert times == pytest.approx([20.0] * 50)
    timed = gpu.log[-200:]  # the timed calls: flush, start event, call, end event
    assert timed == ["flush", "record", "fn", "record"] * 50
    warm = gpu.log[:-200]
    # One call, then five flushed calls to estimate, then 0.1 ms / 0.02 ms = 5 warmup calls.
    assert warm.count("fn") == 1 + 5 + 5 and warm.count("flush") == 5


def test_a_slow_kernel_is_still_timed_once(monkeypatch):
    gpu = FakeGPU(call_ms=500.0)
    monkeypatch.setitem(sys.modules, "triton", None)
    monkeypatch.setitem(sys.modules, "triton.testing", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "Event", gpu.Event)
    monkeypatch.setattr(gpu_timing, "_flush_buffer", gpu.Flush)
    assert time_kernel_us(gpu.fn) == [500_000.0]


@pytest.mark.gpu
def test_times_a_matmul_on_the_gpu():
    a = torch.randn(1024, 1024, device="cuda")
    times = time_kernel_us(lambda: a @ a, warmup_ms=5, rep_ms=20)
    assert times and all(t > 0 for t in times)
