# Wall-clock timing without the profiler: torch.utils.benchmark on the CPU (it handles
# threads and warmup), CUDA events on the GPU (host timers would measure launch, not work).
# torch is imported inside functions: the Timing record is read by torch-free renderers.
# Results are medians with the interquartile range, never a single run.
from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Timing:
    """Median and interquartile range of one callable, in microseconds."""

    median_us: float
    iqr_us: float
    runs: int
    method: str

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Timing:
        return cls(**data)


def time_callable(
    fn: Callable[[], object],
    device: torch.device,
    *,
    min_run_time: float = 0.2,
    cuda_runs: int = 50,
) -> Timing:
    """Time `fn()` on `device`; `fn` is called a few times first to warm caches."""
    for _ in range(3):
        fn()
    if device.type == "cuda":
        return _time_cuda(fn, cuda_runs)
    import torch
    from torch.utils import benchmark

    # Timer runs on ONE thread unless told otherwise; the profiled runs use all of torch's
    # intra-op threads, and so must the timer, or the two disagree by the thread count.
    # (A compiled function also guards on the thread count: a different one recompiles it.)
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    times = [t * 1e6 for t in measurement.times]
    return Timing(
        median_us=measurement.median * 1e6,
        iqr_us=measurement.iqr * 1e6,
        runs=len(times) * measurement.number_per_run,
        method="torch.utils.benchmark.Timer.blocked_autorange",
    )


def _time_cuda(fn: Callable[[], object], runs: int) -> Timing:
    import torch

    pairs = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(runs)
    ]
    torch.cuda.synchronize()
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    times = sorted(start.elapsed_time(end) * 1e3 for start, end in pairs)
    q1, _, q3 = statistics.quantiles(times, n=4)
    return Timing(
        median_us=statistics.median(times), iqr_us=q3 - q1, runs=runs, method="CUDA events"
    )
