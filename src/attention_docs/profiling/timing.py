# Wall-clock timing without the profiler: torch.utils.benchmark on the CPU (it handles
# threads and warmup), CUDA events on the GPU (host timers would measure launch, not work).
# torch is imported inside functions: the Timing record is read by torch-free renderers.
#
# Noise is part of the measurement. One burst's interquartile range says nothing about the
# machine drifting between bursts (another process waking up, the CPU clocking down), so a
# timing is taken in separate *rounds*, and the callables being compared are interleaved
# round by round: a slow minute hurts all of them alike instead of whichever ran then. The
# reported value is the median of the round medians; the spread is the range of the round
# medians. Two timings whose ranges overlap are a tie.
from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from attention_docs.records.timing import Timing

if TYPE_CHECKING:
    import torch

ROUNDS = 3


def time_callable(
    fn: Callable[[], object],
    device: torch.device,
    *,
    min_run_time: float = 0.2,
    cuda_runs: int = 50,
    rounds: int = ROUNDS,
) -> Timing:
    """Time `fn()` on `device` in `rounds` separate rounds; `fn` is called first to warm up."""
    return time_callables(
        {"fn": fn}, device, min_run_time=min_run_time, cuda_runs=cuda_runs, rounds=rounds
    )["fn"]


def time_callables(
    fns: Mapping[str, Callable[[], object]],
    device: torch.device,
    *,
    min_run_time: float = 0.2,
    cuda_runs: int = 50,
    rounds: int = ROUNDS,
) -> dict[str, Timing]:
    """Time several callables in interleaved rounds: round 1 of each, then round 2 of each...

    `min_run_time` (CPU) and `cuda_runs` (GPU) are per callable *in total*; each round gets
    its share, so adding rounds costs no extra time.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    for fn in fns.values():
        for _ in range(3):
            fn()
    samples: dict[str, list[list[float]]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            if device.type == "cuda":
                samples[name].append(_cuda_round(fn, max(cuda_runs // rounds, 3)))
            else:
                samples[name].append(_cpu_round(fn, min_run_time / rounds))
    method = (
        f"CUDA events, {rounds} interleaved rounds"
        if device.type == "cuda"
        else f"torch.utils.benchmark.Timer.blocked_autorange, {rounds} interleaved rounds"
    )
    return {name: _summarise(per_round, method) for name, per_round in samples.items()}


def _summarise(per_round: list[list[float]], method: str) -> Timing:
    # Kept to the nanosecond: finer digits are noise, and they bloat the store.
    pooled = sorted(t for r in per_round for t in r)
    medians = tuple(round(statistics.median(r), 3) for r in per_round)
    if len(pooled) >= 2:
        q1, _, q3 = statistics.quantiles(pooled, n=4)
    else:
        q1 = q3 = pooled[0]
    return Timing(
        median_us=statistics.median(medians),
        iqr_us=round(q3 - q1, 3),
        runs=len(pooled),
        method=method,
        rounds_us=medians,
    )


def _cpu_round(fn: Callable[[], object], min_run_time: float) -> list[float]:
    import torch
    from torch.utils import benchmark

    # Timer runs on ONE thread unless told otherwise; the profiled runs use all of torch's
    # intra-op threads, and so must the timer, or the two disagree by the thread count.
    # (A compiled function also guards on the thread count: a different one recompiles it.)
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    return [t * 1e6 for t in measurement.times]


def _cuda_round(fn: Callable[[], object], runs: int) -> list[float]:
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
    return [start.elapsed_time(end) * 1e3 for start, end in pairs]
