# `timing_method`: the measurements behind docs/method.md, the page every caption links to.
# Two choices of profiling/ are measured here rather than asserted: that naive attention's
# steps are timed one after another as the forward runs them (each timed alone, in a loop,
# rewrites one buffer from inputs hot in the core's cache), and that a worker gives torch
# half the cores (with a thread on every core, another busy process stalls one of them at
# every barrier). The page states ratios within this one run, never a forward time: those
# are forward_times' facts.
from __future__ import annotations

import subprocess
import sys

import torch

from attention_docs.attention.naive import naive_attention, naive_step_calls
from attention_docs.experiments.registry import Observed, Work, experiment, shape_params
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.load import cores_available
from attention_docs.profiling.timing import StepSequence, time_callable, time_callables

BUSY_LOOP = "while True: pass"


@experiment(
    "timing_method",
    # The forward and the five steps alone and in sequence (no threads on a GPU).
    gpu_work=lambda p: Work(timed=11, device_s=1.0),
    summary="Why steps are timed in the forward's order and why torch gets half the cores: each "
    "naive step timed alone and in sequence beside the forward, and the forward with half and "
    "all of the cores' threads, alone and beside one CPU-bound process.",
    measures=("attention/naive.py", "inputs.py"),
    **shape_params(),
)
def timing_method(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    steps = naive_step_calls(q, k, v, causal=True)

    def forward():
        return naive_attention(q, k, v, causal=True)

    calls = {
        "forward": forward,
        "in sequence": StepSequence({f"in sequence|{s}": c for s, c in steps.items()}),
        **{f"alone|{s}": c for s, c in steps.items()},
    }
    timed = time_callables(calls, ctx.device)
    tables = {
        "steps": Table(
            ("step", "alone", "in_sequence"),
            tuple((s, timed[f"alone|{s}"], timed[f"in sequence|{s}"]) for s in steps),
            {"alone": "µs", "in_sequence": "µs"},
        ),
        "forward": Table(("what", "time"), (("forward", timed["forward"]),), {"time": "µs"}),
    }
    cores = cores_available()
    if ctx.device.type == "cpu" and cores >= 2:
        tables["threads"] = Table(
            ("threads", "other_process", "forward"), _threads(forward, ctx.device, cores)
        )
    return Observed(tables=tables, facts={"cores": cores, "shape_causal": True})


def _threads(forward, device: torch.device, cores: int) -> tuple[tuple, ...]:
    """The forward with the worker's threads (half the cores) and with one per core, alone
    and beside one CPU-bound process of this worker's own (so not counted as other work)."""
    half = torch.get_num_threads()
    rows = []
    for other in (False, True):
        burner = subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) if other else None
        try:
            for threads in dict.fromkeys((half, cores)):
                torch.set_num_threads(threads)
                rows.append((threads, other, time_callable(forward, device)))
        finally:
            torch.set_num_threads(half)
            if burner is not None:
                burner.kill()
                burner.wait()
    return tuple(rows)
