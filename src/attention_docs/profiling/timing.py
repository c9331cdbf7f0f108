# Wall-clock timing without the profiler: Python's timeit loop on the CPU, CUDA events on the
# GPU (host timers would measure launch, not work). The method is made for a shared machine,
# and chosen from measurements (docs/method.md gives them to readers):
#
# - Many short rounds, interleaved. The callables being compared are timed round by round, in
#   an order that rotates each round, so a slow moment of the machine hurts all of them alike
#   instead of whichever ran then. Twenty rounds share each callable's budget: with three, one
#   shifted round moved the median (the site once said 1.29 ms for a forward whose steps,
#   timed alone, summed to 881 µs). Callables too slow for twenty rounds within their budget
#   get fewer, never fewer than ten (the fewest whose lower quartile has a 90 % interval) —
#   unless ten rounds would take over GROUP_CAP_S (a bfloat16 forward of seconds on a CPU
#   without bfloat16 arithmetic): then as many as that holds, at least three, and their
#   interval is their whole range (records/timing.py).
# - Blocks calibrated once. A round times one block of calls, as many as a twentieth of the
#   budget holds, sized from the warm-up calls, after one call that is not timed when calls
#   are short: the callable timed before it left the caches its own (a 3.4 ms forward timed
#   among others without that call read 2.7 ms alone). A call of WARM_BELOW_S or more
#   streams its working set from memory either way, and is not worth twice its time. torch.utils.benchmark's blocked_autorange sizes its
#   block anew in every call (at least two extra blocks), which at twenty rounds cost more
#   than the measurement; its Timer runs this same timeit loop inside.
# - What a timing states is derived from its rounds in records/timing.py: their lower
#   quartile and its confidence interval, which contention (it only ever adds time) cannot
#   drag.
# - A step sequence (`StepSequence`: naive attention's five steps) is timed as the forward
#   runs it, one step after another, with a clock reading between steps: each step's time is
#   its time in context. Timed alone in a loop, a step rewrites the same buffer from inputs
#   hot in the core's cache, and five such times summed to two thirds of the forward they
#   come from.
#
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
