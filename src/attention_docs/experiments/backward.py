# Experiments on the backward pass: forward + backward of naive attention and of SDPA's
# backends (time, peak memory, the autograd nodes the backward runs), and what each keeps
# alive between the two (saved tensors), across sequence lengths.
#
# Two clocks, each with its noise. Without the profiler, every implementation's forward
# (recording for autograd) and backward (`autograd.grad` on a graph kept with
# `retain_graph`) are timed in interleaved rounds: the backward ÷ forward ratio and the
# share of a step in the backward come from those. Under the profiler, the
# `attention.forward` and `attention.backward` ranges are read per profiled step (one
# sample per call): on a GPU that is the kernel clock, and the backward's kernels, launched
# by the autograd engine's own thread, are attributed to `attention.backward` across threads
# (records/trace.py `attribute`).
#
# GPU sizes (one H200; batch 4, 16 heads, seq_len 4096, bf16, causal): naive's forward moves
# ~15 GB (~4 ms at 4 TB/s) and its backward about twice that; per implementation ~40 steps
# (availability, 5 profiled, peaks, 3 warm-up + 10 timed per round for forward and backward)
# and one profiler start: ~1.5 s each, ~9 s for five. backward_saved_tensors runs one
# forward per implementation at seq_len 128..8192 (naive keeps 8.6 GB at 8192): ~3 s.
from __future__ import annotations

import warnings

import torch

from attention_docs.analytic.memory import naive_peak
from attention_docs.attention.backward import (
    IMPLEMENTATIONS,
    PHASES,
    forward_backward,
    implementation,
)
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.forward import unavailable
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.memory import peak_memory_bytes
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.saved import INPUT, INTERNAL, OUTPUT, saved_tensors
from attention_docs.profiling.timing import ROUNDS, time_callables
from attention_docs.records.timing import Timing
from attention_docs.records.trace import op_stats, step_span_rounds

MEASURES = (
    "attention/backward.py",
    "attention/sdpa.py",
    "attention/naive.py",
    "inputs.py",
    "profiling/saved.py",
    "profiling/timing.py",
    "analytic/memory.py",
)
SCHED = Schedule(wait=1, warmup=1, active=ROUNDS)  # one profiled step per round

SHAPE_PARAMS = {
    "batch_size": Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    "num_heads": Param(4, gpu_default=16, minimum=1, help="attention heads"),
    "seq_len": Param(512, gpu_default=4096, minimum=1, help="tokens per sequence (N)"),
    "head_dim": Param(64, minimum=1, help="features per head (D)"),
    "dtype": Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
    "causal": Param(True, help="mask the future (decoder-style attention)"),
}


def _inputs(batch_size, num_heads, seq_len, head_dim, *, dtype, device):
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=device)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    grad_out = make_qkv(
        batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=device, seed=1
    )[0]
    return q, k, v, grad_out


def _available(attend, q, k, v) -> str | None:
    """None if `attend` runs forward and backward here, else why not, in the site's words."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = attend(q, k, v)
        except RuntimeError as exc:
            return unavailable(exc)
        try:
            torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
        except RuntimeError as exc:
            return f"its backward is {unavailable(exc)}"
    return None


def _spread(samples: list[float]) -> tuple[float, float, float]:
    """(median, low, high) of a list of per-call samples."""
    ordered = sorted(samples)
    return ordered[len(ordered) // 2], ordered[0], ordered[-1]


def _autograd_nodes(trace, per: float, limit: int = 8) -> list[dict]:
    """The backward's autograd nodes (`...Backward0` ranges), by total time per call.

    Eight is every node naive attention's backward runs, so the list does not depend on timing.
    """
    nodes = [o for o in op_stats(trace) if o["where"] == "CPU" and "Backward" in o["name"]]
    nodes.sort(key=lambda o: -o["total_us"])
    return [
        {"name": o["name"], "calls": o["calls"] / per, "total_us": o["total_us"] / per}
        for o in nodes
        if not o["name"].startswith("autograd::engine")
    ][:limit]


@experiment(
    "backward_compare",
    summary="Forward + backward of naive attention and SDPA's backends: time, peak memory, autograd nodes.",
    measures=MEASURES,
    **SHAPE_PARAMS,
)
def backward_compare(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal) -> Observed:
    q, k, v, grad_out = _inputs(
        batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device
    )
    measured, node_rows, notes = {}, [], []
    timed = {}
    profiled = None
    for name in IMPLEMENTATIONS:
        attend = implementation(name, causal=causal)
        missing = _available(attend, q, k, v)
        if missing is not None:
            if name in ("naive", "sdpa-math"):
                raise RuntimeError(f"{name} cannot run forward and backward here: {missing}")
            measured[name] = None
            notes.append(f"{name}: {missing}")
            continue

        def forward(a=attend):
            return a(q, k, v)

        def step(a=attend):
            return forward_backward(a, q, k, v, grad_out)

        run = profile_callable(step, ctx.device, sched=SCHED, profile_memory=False)
        phases = step_span_rounds(run.trace, PHASES)
        node_rows.extend(
            (name, n["name"], n["calls"], n["total_us"])
            for n in _autograd_nodes(run.trace, SCHED.active)
        )
        saved = saved_tensors(forward, (q, k, v))
        graph = forward()  # kept for the backward timed alone, with retain_graph

        def backward(out=graph):
            return torch.autograd.grad(out, (q, k, v), grad_out, retain_graph=True)

        timed[f"{name} forward"] = forward
        timed[f"{name} backward"] = backward
        measured[name] = (
            *_spread(phases["attention.forward"]),
            *_spread(phases["attention.backward"]),
            peak_memory_bytes(forward, ctx.device),
            peak_memory_bytes(step, ctx.device),
            sum(s.bytes for s in saved if s.role == INTERNAL),
            sum(s.bytes for s in saved if s.role == OUTPUT),
        )
        if profiled is None or name == "sdpa-flash":
            profiled = (name, step)  # FlashAttention's step when it runs, else the first
    # Forward and backward of every implementation, interleaved round by round.
    timings: dict[str, Timing] = time_callables(timed, ctx.device, min_run_time=0.3, cuda_runs=30)
    timed.clear()
    rows = []
    for name, values in measured.items():
        if values is None:
            rows.append((name, *(None,) * 16, "not available"))
            continue
        f, b = timings[f"{name} forward"], timings[f"{name} backward"]
        rows.append(
            (
                name,
                f.median_us,
                f.low_us,
                f.high_us,
                b.median_us,
                b.low_us,
                b.high_us,
                *values,
                "ok",
            )
        )
    observed = observe_forward(profiled[1], ctx, labels=PHASES, top_ops=14)
    time_columns = (
        "forward_us",
        "forward_low_us",
        "forward_high_us",
        "backward_us",
        "backward_low_us",
        "backward_high_us",
        "profiled_forward_us",
        "profiled_forward_low_us",
        "profiled_forward_high_us",
        "profiled_backward_us",
        "profiled_backward_low_us",
        "profiled_backward_high_us",
    )
    byte_columns = (
        "forward_peak_bytes",
        "step_peak_bytes",
        "saved_internal_bytes",
        "saved_output_bytes",
    )
    table = Table(
        columns=("implementation", *time_columns, *byte_columns, "status"),
        rows=tuple(rows),
        units={**dict.fromkeys(time_columns, "µs"), **dict.fromkeys(byte_columns, "B")},
    )
    nodes = Table(
        columns=("implementation", "node", "calls", "total_us"),
        rows=tuple(node_rows),
        units={"total_us": "µs"},
    )
    return Observed(
        steps=observed.steps,
        ops=observed.ops,
        timeline=observed.timeline,
        chrome=observed.chrome,
        tables={"compare": table, "autograd_nodes": nodes},
        facts={
            **observed.facts,
            "profiled": profiled[0],
            "rounds": ROUNDS,
            "timing_method": "forward (recording for autograd) and backward (retain_graph) "
            "of every implementation in interleaved rounds, no profiler",
            "profiled_clock": "GPU kernel time, attributed across threads"
            if ctx.device.type == "cuda"
            else "CPU time of the labelled ranges",
        },
        notes=tuple(notes),
    )


@experiment(
    "backward_saved_tensors",
    summary="What autograd saves between forward and backward, per implementation, across seq_len.",
    measures=MEASURES,
    batch_size=Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    num_heads=Param(4, gpu_default=16, minimum=1, help="attention heads"),
    head_dim=Param(64, minimum=1, help="features per head (D)"),
    dtype=Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
    causal=Param(True, help="mask the future (decoder-style attention)"),
    max_seq_len=Param(1024, gpu_default=8192, minimum=16, help="longest seq_len of the sweep"),
)
def backward_saved_tensors(
    ctx, *, batch_size, num_heads, head_dim, dtype, causal, max_seq_len
) -> Observed:
    names = ("naive", "sdpa-math", "sdpa-flash")
    lengths = [n for n in (128, 256, 512, 1024, 2048, 4096, 8192) if n <= max_seq_len] or [
        max_seq_len
    ]
    details = []

    def measure(point):
        n = point["seq_len"]
        q, k, v, _ = _inputs(batch_size, num_heads, n, head_dim, dtype=dtype, device=ctx.device)
        result = {}
        for name in names:
            attend = implementation(name, causal=causal)
            saved = saved_tensors(lambda a=attend: a(q, k, v), (q, k, v))
            result[name] = sum(s.bytes for s in saved if s.role != INPUT)
            if n == lengths[0]:
                details.extend(
                    (name, "×".join(map(str, s.shape)), s.dtype, s.bytes, s.role) for s in saved
                )
        return result

    def estimate(point) -> int:
        """Naive attention's forward peak and inputs, plus the probabilities it keeps."""
        model = naive_peak(batch_size, num_heads, point["seq_len"], head_dim, dtype, causal=causal)
        return model.total_bytes + model.matrix_bytes

    table, notes = sweep(
        ({"seq_len": n} for n in lengths),
        measure,
        columns=("seq_len", *names),
        units=dict.fromkeys(names, "B"),
        estimate_bytes=estimate,
        device=ctx.device,
    )
    detail = Table(
        columns=("implementation", "shape", "dtype", "bytes", "role"),
        rows=tuple(details),
        units={"bytes": "B"},
    )
    return Observed(
        tables={"saved": table, "detail": detail},
        facts={"detail_seq_len": lengths[0]},
        notes=tuple(notes),
    )
