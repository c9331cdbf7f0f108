# A sweep against the memory it has: points too large for the free memory are not tried, and
# a point that runs out lets go of its tensors before the allocator's cache is emptied. No GPU
# here: torch.cuda's memory queries are replaced by fakes.
from __future__ import annotations

import weakref

import pytest
import torch

from attention_docs.experiments import _sweep
from attention_docs.experiments._sweep import OUT_OF_MEMORY, TOO_LARGE, sweep
from attention_docs.profiling import headroom
from attention_docs.profiling.headroom import drop_traceback, free_memory_bytes

GIB = 2**30


@pytest.fixture
def fake_cuda(monkeypatch):
    """CUDA 'in use' with 10 GiB free at the driver and 2 GiB cached but unused; records
    each empty_cache call."""
    state = {"free": 10 * GIB, "reserved": 3 * GIB, "allocated": 1 * GIB, "emptied": []}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (state["free"], 80 * GIB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: state["reserved"])
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: state["allocated"])
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: state["emptied"].append(True))
    return state


def test_free_cuda_memory_counts_what_the_allocator_caches(fake_cuda):
    assert free_memory_bytes("cuda") == 12 * GIB
    assert free_memory_bytes(torch.device("cuda", 0)) == 12 * GIB


def test_points_too_large_for_free_memory_are_not_tried(fake_cuda):
    ran = []

    def measure(point):
        ran.append(point["n"])
        return {"time_us": 1.0}

    table, notes = sweep(
        [{"n": n} for n in (1, 8, 16, 4)],
        measure,
        columns=("n", "time_us"),
        estimate_bytes=lambda p: p["n"] * GIB,
    )
    assert ran == [1, 8, 4]  # 16 GiB > 12 GiB free; the point after it still runs
    status = table.column("status")
    assert status[:2] == ["ok", "ok"] and status[3] == "ok"
    assert status[2] == f"{TOO_LARGE} (needs 16.00 GiB, 12.00 GiB free)"
    assert table.column("time_us") == [1.0, 1.0, None, 1.0]
    assert notes == ["n=16 was not run: it needs 16.00 GiB, 12.00 GiB free."]


def test_free_memory_is_read_again_before_each_point(fake_cuda):
    def measure(point):
        fake_cuda["free"] -= 4 * GIB  # each point leaves 4 GiB behind
        return {}

    table, _ = sweep(
        [{"n": n} for n in range(4)], measure, columns=("n",), estimate_bytes=lambda p: 5 * GIB
    )
    assert [s.split(" (")[0] for s in table.column("status")] == ["ok", "ok", TOO_LARGE, TOO_LARGE]


def test_an_unknown_estimate_or_free_memory_runs_the_point(monkeypatch):
    monkeypatch.setattr(_sweep, "free_memory_bytes", lambda device: None)
    table, _ = sweep(
        [{"n": 1}], lambda p: {}, columns=("n",), estimate_bytes=lambda p: 1e30, device="cpu"
    )
    assert table.column("status") == ["ok"]
    monkeypatch.setattr(_sweep, "free_memory_bytes", lambda device: 0)
    table, _ = sweep([{"n": 1}], lambda p: {}, columns=("n",), estimate_bytes=lambda p: None)
    assert table.column("status") == ["ok"]


def test_cpu_points_are_checked_against_available_ram(monkeypatch):
    monkeypatch.setattr(headroom, "_meminfo_available", lambda: 6 * GIB)
    monkeypatch.setattr(headroom, "_cgroup_headroom", lambda: None)
    table, _ = sweep(
        [{"n": n} for n in (4, 8)],
        lambda p: {},
        columns=("n",),
        estimate_bytes=lambda p: p["n"] * GIB,
        device="cpu",
    )
    assert table.column("status") == ["ok", f"{TOO_LARGE} (needs 8.00 GiB, 6.00 GiB free)"]
    monkeypatch.setattr(headroom, "_cgroup_headroom", lambda: 2 * GIB)  # a container's limit
    assert free_memory_bytes("cpu") == 2 * GIB


def test_meminfo_and_cgroup_files_are_read(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       32000000 kB\nMemAvailable:   24134952 kB\n")
    assert headroom._meminfo_available(meminfo) == 24134952 * 1024
    assert headroom._meminfo_available(tmp_path / "missing") is None
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.max").write_text("8589934592\n")
    (v2 / "memory.current").write_text(str(5 * GIB))
    (v2 / "memory.stat").write_text(f"anon 123\ninactive_file {1 * GIB}\nactive_file 7\n")
    assert headroom._cgroup_headroom(v2) == 4 * GIB
    (v2 / "memory.max").write_text("max\n")
    assert headroom._cgroup_headroom(v2) is None
    v1 = tmp_path / "v1" / "memory"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # no limit
    (v1 / "memory.usage_in_bytes").write_text("3089485824\n")
    assert headroom._cgroup_headroom(v1.parent) is None
    (v1 / "memory.limit_in_bytes").write_text(str(4 * GIB))
    assert headroom._cgroup_headroom(v1.parent) == 4 * GIB - 3089485824
    assert headroom._cgroup_headroom(tmp_path / "none") is None


def _oom_sweep(fake_cuda, measure, points=(1, 2, 3)):
    """Run a sweep; record, at each empty_cache, whether every failed point's tensor is gone."""
    refs = []
    gone_at_empty = []
    fake_cuda["emptied"] = _Recorder(lambda: gone_at_empty.append(all(r() is None for r in refs)))
    table, notes = sweep(
        [{"n": n} for n in points],
        lambda p: measure(p, refs),
        columns=("n", "x"),
        stop_after_oom=False,
    )
    return table, notes, refs, gone_at_empty


class _Recorder(list):
    def __init__(self, on_append):
        super().__init__()
        self.on_append = on_append

    def append(self, item):
        self.on_append()
        super().append(item)


def test_a_failed_points_tensors_are_freed_before_the_cache_is_emptied(fake_cuda):
    kept_errors = []  # something outside holds on to the exception, as a logger might

    def measure(point, refs):
        big = torch.empty(1024)  # stands for the tensors the failing point allocated
        refs.append(weakref.ref(big))
        if point["n"] == 2:
            try:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
            except torch.OutOfMemoryError as e:
                kept_errors.append(e)
                raise
        return {"x": float(big.numel())}

    table, notes, _, gone = _oom_sweep(fake_cuda, measure)
    assert table.column("status") == ["ok", OUT_OF_MEMORY, "ok"]  # the point after still runs
    assert table.column("x") == [1024.0, None, 1024.0]
    assert notes == ["n=2 ran out of memory on this device."]
    assert gone == [True]  # the failed point's tensor was gone when empty_cache ran
    assert kept_errors[0].__traceback__ is None


def test_a_failed_point_in_a_reference_cycle_is_freed_too(fake_cuda):
    def measure(point, refs):
        big = torch.empty(1024)
        refs.append(weakref.ref(big))
        try:
            raise RuntimeError("CUDA out of memory while allocating")
        except RuntimeError as e:
            error = e  # the frame holds its own exception: a cycle only gc breaks
            raise error from None

    table, _, _, gone = _oom_sweep(fake_cuda, measure, points=(1,))
    assert table.column("status") == [OUT_OF_MEMORY]
    assert gone == [True]


def test_drop_traceback_clears_chained_exceptions():
    holder = []

    def inner():
        big = torch.empty(16)
        holder.append(weakref.ref(big))
        raise ValueError("inner")

    def outer():
        try:
            inner()
        except ValueError as e:
            raise RuntimeError("outer") from e

    with pytest.raises(RuntimeError, match="outer") as info:
        outer()
    exc = info.value  # pytest's ExceptionInfo keeps the traceback object alive, too
    drop_traceback(exc)
    assert exc.__traceback__ is None and exc.__cause__.__traceback__ is None
    assert holder[0]() is None  # the frames themselves were cleared
