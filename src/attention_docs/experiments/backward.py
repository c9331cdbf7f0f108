# Experiments on the backward pass: forward + backward of naive attention and of SDPA's
# backends (time, peak memory, the autograd nodes the backward runs), and what each keeps
# alive between the two (saved tensors), across sequence lengths.
from __future__ import annotations

import warnings

import torch

from attention_docs.attention.backward import (
    IMPLEMENTATIONS,
    PHASES,
    forward_backward,
    implementation,
)
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.memory import peak_memory_bytes
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.saved import INPUT, INTERNAL, OUTPUT, saved_tensors
from attention_docs.profiling.timing import time_callable
from attention_docs.profiling.trace import op_stats, step_span_times

MEASURES = (
    "attention/backward.py",
    "attention/sdpa.py",
    "attention/naive.py",
    "inputs.py",
    "profiling/saved.py",
)
SCHED = Schedule(wait=1, warmup=1, active=2)

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
    """None if `attend` runs forward and backward here, else torch's reason in one line."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = attend(q, k, v)
            torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
        except RuntimeError as exc:
            return str(exc).splitlines()[0].split(". ")[0].rstrip(".") + "."
    return None


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
    rows, node_rows, notes = [], [], []
    profiled = None
    for name in IMPLEMENTATIONS:
        attend = implementation(name, causal=causal)
        missing = _available(attend, q, k, v)
        if missing is not None:
            if name in ("naive", "sdpa-math"):
                raise RuntimeError(f"{name} cannot run forward and backward here: {missing}")
            rows.append((name, *(None,) * 8, "not available"))
            notes.append(f"{name}: not available on this device: {missing}")
            continue

        def forward(a=attend):
            return a(q, k, v)

        def step(a=attend):
            return forward_backward(a, q, k, v, grad_out)

        # Forward and backward are timed as the two halves of the same profiled steps, so
        # their ratio does not depend on two separate timings agreeing.
        run = profile_callable(step, ctx.device, sched=SCHED, profile_memory=False)
        phases = step_span_times(run.trace, PHASES)
        fwd = phases["attention.forward"]["device_us"] / SCHED.active
        bwd = phases["attention.backward"]["device_us"] / SCHED.active
        node_rows.extend(
            (name, n["name"], n["calls"], n["total_us"])
            for n in _autograd_nodes(run.trace, SCHED.active)
        )
        saved = saved_tensors(forward, (q, k, v))
        rows.append(
            (
                name,
                fwd,
                bwd,
                bwd / fwd if fwd else None,
                time_callable(step, ctx.device, min_run_time=0.1).median_us,
                peak_memory_bytes(forward, ctx.device),
                peak_memory_bytes(step, ctx.device),
                sum(s.bytes for s in saved if s.role == INTERNAL),
                sum(s.bytes for s in saved if s.role == OUTPUT),
                "ok",
            )
        )
        if profiled is None or name == "sdpa-flash":
            profiled = (name, step)  # FlashAttention's step when it runs, else the first
    observed = observe_forward(profiled[1], ctx, labels=PHASES, top_ops=14)
    table = Table(
        columns=(
            "implementation",
            "forward_us",
            "backward_us",
            "backward_per_forward",
            "step_us",
            "forward_peak_bytes",
            "step_peak_bytes",
            "saved_internal_bytes",
            "saved_output_bytes",
            "status",
        ),
        rows=tuple(rows),
        units={
            "forward_us": "µs",
            "backward_us": "µs",
            "step_us": "µs",
            "forward_peak_bytes": "B",
            "step_peak_bytes": "B",
            "saved_internal_bytes": "B",
            "saved_output_bytes": "B",
        },
    )
    nodes = Table(
        columns=("implementation", "node", "calls", "total_us"),
        rows=tuple(node_rows),
        units={"total_us": "µs"},
    )
    return Observed(
        steps=observed.steps,
        ops=observed.ops,
        timing=observed.timing,
        timeline=observed.timeline,
        chrome=observed.chrome,
        tables={"compare": table, "autograd_nodes": nodes},
        facts={**observed.facts, "profiled": profiled[0]},
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

    table, notes = sweep(
        ({"seq_len": n} for n in lengths),
        measure,
        columns=("seq_len", *names),
        units=dict.fromkeys(names, "B"),
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
