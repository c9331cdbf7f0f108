# Experiments that exist only for the tests: a quick one, one that raises and one that dies.
# Registered through ATTENTION_DOCS_EXPERIMENTS so that worker processes see them too.
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from attention_docs.analytic.cost import step_costs
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments.registry import PRELOAD, Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.profiling.profile import Schedule
from attention_docs.profiling.timing import time_callable

# What these experiments import before they start (registry.PRELOAD): torch alone, or torch
# and what a profile needs; none compiles. Their workers start seconds sooner for it.
TORCH = ("torch",)
PROFILES = ("torch", "torch._dynamo")


@experiment(
    "_test_quick",
    summary="tiny naive attention",
    measures=("attention/naive.py",),
    imports=PROFILES,
    seq_len=Param(16, minimum=1),
    causal=Param(True),
)
def quick(ctx, *, seq_len, causal) -> Observed:
    q, k, v = make_qkv(1, 1, seq_len, 8, device=ctx.device)
    return observe_forward(
        lambda: naive_attention(q, k, v, causal=causal),
        ctx,
        labels=STEPS,
        costs=step_costs(1, 1, seq_len, 8, causal=causal),
        sched=Schedule(wait=0, warmup=1, active=1),
    )


@experiment(
    "_test_timed",
    summary="times a small matmul for a fifth of a second, as forward_times times each call",
    measures=("attention/naive.py",),
    imports=TORCH,
    size=Param(64, minimum=1),
)
def timed(ctx, *, size) -> Observed:
    q, k, _ = make_qkv(1, 1, size, size, device=ctx.device)
    return Observed(
        timing=time_callable(lambda: q @ k.transpose(-2, -1), ctx.device, min_run_time=0.2)
    )


@experiment("_test_raises", summary="raises", imports=TORCH, value=Param(1))
def raises(ctx, *, value) -> Observed:
    raise ValueError(f"deliberate failure with value={value}")


@experiment("_test_killed", summary="dies as the out-of-memory killer would kill it", imports=TORCH)
def killed(ctx) -> Observed:
    os.kill(os.getpid(), signal.SIGKILL)
    return Observed()


@experiment(
    "_test_sleeps",
    summary="takes as long as it is told",
    imports=TORCH,
    seconds=Param(0.1, minimum=0.0),
)
def sleeps(ctx, *, seconds) -> Observed:
    time.sleep(seconds)
    return Observed(notes=(f"slept {seconds} s",))


@experiment(
    "_test_marks",
    summary="writes its pid into a file, then takes as long as it is told",
    imports=TORCH,
    mark=Param(""),
    seconds=Param(0.1, minimum=0.0),
)
def marks(ctx, *, mark, seconds) -> Observed:
    Path(mark).write_text(str(os.getpid()))
    time.sleep(seconds)
    return Observed(notes=(f"slept {seconds} s",))


@experiment(
    "_test_environment",
    summary="what a worker process was given; `late`: a module it imports while it runs",
    imports=TORCH,
    late=Param(""),
)
def environment(ctx, *, late) -> Observed:
    import importlib
    import sys

    import torch

    imported = [name for name in PRELOAD if name in sys.modules]
    if late:
        importlib.import_module(late)
    return Observed(
        facts={
            "imported": imported,
            "mark": os.environ.get("ATTENTION_DOCS_TEST_MARK"),
            "cwd": str(Path.cwd()),
            "threads": torch.get_num_threads(),
            "pid": os.getpid(),
            "argv": sys.argv[1:3],
        }
    )


@experiment(
    "_test_mimics", summary="prints what a refusal once looked like, then exits 2", imports=TORCH
)
def mimics(ctx) -> Observed:
    import sys

    print("attention_docs worker: refused: no such device", file=sys.stderr)
    raise SystemExit(2)
