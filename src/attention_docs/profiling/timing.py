# Wall-clock timing without the profiler: timeit's loop on the CPU, CUDA events on the GPU
# (host timers would measure launch, not work). Made for a shared machine (docs/method.md):
# - Many short rounds, interleaved in a rotating order, so a slow moment hurts every callable
#   alike: twenty per callable, fewer for slow ones but never fewer than ten (the fewest
#   whose lower quartile has a 90 % interval), unless ten would pass GROUP_CAP_S.
# - Blocks sized once from the warm-up calls, after one untimed call when a call takes under
#   WARM_BELOW_S (the callable before left the caches its own; a longer one streams from
#   memory either way); blocked_autorange's resizing per call would cost more than the
#   measurement at twenty rounds.
# - A step sequence is timed as the forward runs it, a clock reading between steps: timed
#   alone, five steps summed to two thirds of their forward.
# torch is imported inside functions: the Timing record is read by torch-free renderers.
from __future__ import annotations

import statistics
import time
import timeit
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from attention_docs.records.timing import Timing

if TYPE_CHECKING:
    import torch

ROUNDS = 20
MIN_ROUNDS = 10
FEWEST_ROUNDS = 3
GROUP_CAP_S = 20.0
WARMUP_CALLS = 3
WARM_BELOW_S = 0.01


@dataclass(frozen=True)
class StepSequence:
    """Calls that run one after another as the parts of one computation (naive attention's
    steps, in order): timed together, each with its own clock, so that each part's time is
    its time in the sequence."""

    steps: Mapping[str, Callable[[], object]]

    def __call__(self) -> None:
        for step in self.steps.values():
            step()


Timed = Callable[[], object] | StepSequence


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
    fns: Mapping[str, Timed],
    device: torch.device,
    *,
    min_run_time: float = 0.2,
    cuda_runs: int = 50,
    rounds: int = ROUNDS,
) -> dict[str, Timing]:
    """Time several callables in interleaved rounds: round 1 of each, then round 2 of each...

    `min_run_time` (CPU, seconds) and `cuda_runs` (GPU, calls) are each callable's budget in
    total: each round gets its share, so more rounds cost no more time. On a CPU, callables
    too slow for `rounds` rounds within it get fewer (at least MIN_ROUNDS, or FEWEST_ROUNDS
    where MIN_ROUNDS would take over GROUP_CAP_S), each round one call. A `StepSequence`
    gives one Timing per step, under the step's name.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    cuda = device.type == "cuda"
    single = {name: _warm(fn, device) for name, fn in fns.items()}
    warm = {name: cuda or single[name] < WARM_BELOW_S for name in fns}
    # A sequence of n steps is n timings: it gets n callables' budget.
    budget = {
        n: min_run_time * len(fn.steps) if isinstance(fn, StepSequence) else min_run_time
        for n, fn in fns.items()
    }
    if cuda:
        number = {name: max(cuda_runs // rounds, 3) for name in fns}
    else:
        # As many rounds as the callables' budgets hold, each with at least one call (and
        # its warm-up call), between MIN_ROUNDS and `rounds`.
        one_round = sum(single[n] * (2 if warm[n] else 1) for n in fns)
        affordable = int(sum(budget.values()) / one_round)
        rounds = min(rounds, max(MIN_ROUNDS, affordable))
        if rounds * one_round > GROUP_CAP_S:
            rounds = min(rounds, max(FEWEST_ROUNDS, int(GROUP_CAP_S / one_round)))
        # The budget holds the warm-up call of each block too.
        number = {n: max(1, round(budget[n] / rounds / single[n]) - int(warm[n])) for n in fns}
    samples: dict[str, list[float]] = {}
    names = list(fns)
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            fn = fns[name]
            block = _cuda_block if cuda else _cpu_block
            for part, value in block(fn, number[name], warm=warm[name]).items():
                samples.setdefault(name if part is None else part, []).append(value)
    method = (
        f"CUDA events, {rounds} interleaved rounds"
        if cuda
        else f"timeit blocks, {rounds} interleaved rounds"
    )
    runs = {}
    for name, fn in fns.items():
        for part in fn.steps if isinstance(fn, StepSequence) else (name,):
            runs[part] = number[name] * rounds
    return {
        part: Timing.from_rounds(values, method, runs[part]) for part, values in samples.items()
    }


def _warm(fn: Timed, device: torch.device) -> float:
    """Call `fn` a few times (compiles, first-call work); the fastest call's seconds."""
    from attention_docs.profiling.device import synchronize

    fastest = float("inf")
    for _ in range(WARMUP_CALLS):
        started = time.perf_counter()
        fn()
        synchronize(device)
        fastest = min(fastest, time.perf_counter() - started)
    return max(fastest, 1e-9)


def _cpu_block(fn: Timed, number: int, *, warm: bool = True) -> dict[str | None, float]:
    """One round: a call to warm the caches (`warm`), then `number` calls timed, the time per
    call in µs (per step, for a sequence)."""
    if warm:
        fn()
    if not isinstance(fn, StepSequence):
        return {None: timeit.Timer(fn).timeit(number) / number * 1e6}
    totals = dict.fromkeys(fn.steps, 0.0)
    clock = time.perf_counter
    for _ in range(number):
        for name, step in fn.steps.items():
            started = clock()
            step()
            totals[name] += clock() - started
    return {name: total / number * 1e6 for name, total in totals.items()}


def _cuda_block(fn: Timed, runs: int, *, warm: bool = True) -> dict[str | None, float]:
    """One round: a call to warm the caches (`warm`), then `runs` calls between CUDA events,
    the median per call in µs."""
    import torch

    if warm:
        fn()
    parts = list(fn.steps.values()) if isinstance(fn, StepSequence) else [fn]
    events = [
        [torch.cuda.Event(enable_timing=True) for _ in range(len(parts) + 1)] for _ in range(runs)
    ]
    torch.cuda.synchronize()
    for marks in events:
        marks[0].record()
        for part, mark in zip(parts, marks[1:], strict=True):
            part()
            mark.record()
    torch.cuda.synchronize()
    per_part = [
        statistics.median(marks[i].elapsed_time(marks[i + 1]) * 1e3 for marks in events)
        for i in range(len(parts))
    ]
    if not isinstance(fn, StepSequence):
        return {None: per_part[0]}
    return dict(zip(fn.steps, per_part, strict=True))
