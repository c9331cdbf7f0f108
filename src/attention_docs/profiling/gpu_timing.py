# Kernel times on a CUDA GPU, per call, without the host in the way: Triton's do_bench when
# triton is installed (it flushes L2 between calls and times each call with CUDA events),
# else the same method written out here. Per-call times, not a summary: the caller decides
# how to report spread. The CPU has its own timer (profiling/timing.py); asking this module
# to time CPU code is an error, not a silent fallback.
from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch

# Larger than any GPU's L2 (50 MB on an H100 or H200; Triton's benchmark writes 256 MB
# too): writing it evicts whatever the last call left behind.
L2_FLUSH_BYTES = 256 * 2**20


def time_kernel_us(
    fn: Callable[[], object],
    *,
    warmup_ms: float = 25,
    rep_ms: float = 100,
    device: torch.device | str | None = None,
) -> list[float]:
    """Per-call GPU times of `fn()`, in microseconds, each from a cold L2 cache.

    Runs `fn` for about `warmup_ms` first, then as many timed calls as fit in about `rep_ms`
    (at least one). With triton installed this is `triton.testing.do_bench(fn, warmup=,
    rep=, return_mode="all")`; without it, CUDA events around each call, with a 256 MB
    buffer written between calls to flush L2.

    Args:
        fn: launches the work to time; everything it does on the host is timed too only as
            far as it delays the GPU, so prepare inputs and launch settings outside it.
        device: the CUDA device `fn` runs on (default: the current one). A CPU device raises.

    Raises:
        ValueError: there is no CUDA device to time on, or `device` is not a CUDA device.
    """
    if device is not None and torch.device(device).type != "cuda":
        raise ValueError(
            f"time_kernel_us times CUDA kernels; {device} is not a CUDA device. "
            "Time CPU code with attention_docs.profiling.timing.time_callable"
        )
    if not torch.cuda.is_available():
        raise ValueError(
            "time_kernel_us times CUDA kernels, and this machine has no CUDA device. "
            "Time CPU code with attention_docs.profiling.timing.time_callable"
        )
    if warmup_ms < 0 or rep_ms <= 0:
        raise ValueError(f"warmup_ms must be >= 0 and rep_ms > 0, got {warmup_ms}, {rep_ms}")
    # The device's own context only when one is named: entering it initialises CUDA.
    with torch.cuda.device(device) if device is not None else contextlib.nullcontext():
        try:
            from triton.testing import do_bench
        except ImportError:
            times_ms = _event_times_ms(fn, warmup_ms, rep_ms)
        else:
            # quantiles=None: when given, do_bench returns them instead of return_mode's.
            times_ms = do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=None, return_mode="all")
    return [float(t) * 1000.0 for t in times_ms]


def _event_times_ms(fn: Callable[[], object], warmup_ms: float, rep_ms: float) -> list[float]:
    """do_bench's method: estimate a call's time, warm up, then time each call between L2
    flushes with a pair of CUDA events."""
    flush = _flush_buffer()
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate_ms = max(start.elapsed_time(end) / 5, 1e-6)
    warmups = int(warmup_ms / estimate_ms)
    repeats = max(1, int(rep_ms / estimate_ms))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for _ in range(warmups):
        fn()
    for s, e in zip(starts, ends, strict=True):
        flush.zero_()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]


def _flush_buffer() -> torch.Tensor:
    return torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
