# Experiments on the backward pass: forward + backward of naive attention and of SDPA's
# backends (time, FLOPs, matmuls, peak memory, the autograd nodes the backward runs), and
# what each keeps alive between the two (saved tensors), across sequence lengths.
from __future__ import annotations

import warnings

import torch
from torch.utils.flop_counter import FlopCounterMode

from attention_docs.analytic.memory import naive_peak
from attention_docs.attention.backward import (
    IMPLEMENTATIONS,
    forward_backward,
    implementation,
)
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.forward import unavailable
from attention_docs.experiments.registry import Observed, Param, Work, experiment, shape_params
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.memory import peak_memory_bytes
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.saved import INPUT, INTERNAL, OUTPUT, saved_tensors
from attention_docs.profiling.timing import time_callables
from attention_docs.records.steps import PHASES
from attention_docs.records.timing import Timing
from attention_docs.records.trace import attribute, op_stats

MEASURES = (
    "attention/backward.py",
    "attention/sdpa.py",
    "attention/naive.py",
    "inputs.py",
    "profiling/saved.py",
    "profiling/timing.py",
    "analytic/memory.py",
)
SCHED = Schedule(wait=1, warmup=1, active=3)  # three profiled steps: their shares' range
# The ATen ops a matmul reaches (`aten::matmul` is a wrapper around one of them).
MATMUL_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm")
# `backward_compare`'s table "compare", one row per implementation (chapter 12 reads it too):
# forward and backward Timings (the forward records for autograd; the backward is
# `autograd.grad` on a kept graph), matmul ops and FLOPs per pass (torch's flop counter; None
# where it knows no formula), the peaks of the forward and of both passes, what autograd
# keeps beyond q, k, v and the output (and the output when kept), and `status`.
COLUMNS = (
    "implementation",
    "forward",
    "backward",
    "forward_matmuls",
    "backward_matmuls",
    "forward_flops",
    "backward_flops",
    "forward_peak_bytes",
    "step_peak_bytes",
    "saved_internal_bytes",
    "saved_output_bytes",
    "status",
)
SHAPE_PARAMS = shape_params(
    seq_len=Param(512, gpu_default=4096, minimum=1, help="tokens per sequence (N)"),
    head_dim=Param(64, gpu_default=128, minimum=1, help="features per head (D)"),
    causal=Param(True, help="mask the future (decoder-style attention)"),
)


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


def _matmuls(trace, per: int) -> list[float]:
    """Matmul ops per call in each labelled pass, counted on every thread that ran it."""
    found = attribute(trace, PHASES)
    return [sum(s.name in MATMUL_OPS for s in found[phase]) / per for phase in PHASES]


def _counted_flops(attend, q, k, v, grad_out) -> tuple[float | None, float | None]:
    """FLOPs of the forward and of the backward as torch's FLOP counter counts them; None for
    a pass that ran an op the counter has no formula for (it would count it as zero)."""

    def counted(fn) -> float | None:
        with FlopCounterMode(display=False) as counter:
            ran = _ops(fn)
        known = {str(op) for op in counter.flop_registry}
        missing = {op for op in ran if op not in known and _is_attention(op)}
        return None if missing else float(counter.get_total_flops())

    out = None

    def forward():
        nonlocal out
        out = attend(q, k, v)

    forward_flops = counted(forward)
    backward_flops = counted(lambda: torch.autograd.grad(out, (q, k, v), grad_out))
    return forward_flops, backward_flops


def _is_attention(op: str) -> bool:
    return "attention" in op


def _ops(fn) -> set[str]:
    """The ATen overload packets `fn` dispatched (what the FLOP counter looks up)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: set[str] = set()

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.add(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    with Seen():
        fn()
    return seen


@experiment(
    "backward_compare",
    gpu_work=lambda p: Work(profiles=5, timed=10, device_s=4.0),
    summary="Forward + backward of naive attention and SDPA's backends: time, FLOPs, matmuls, "
    "peak memory, autograd nodes.",
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

        run = profile_callable(
            step, ctx.device, sched=SCHED, profile_memory=False, with_flops=False
        )
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
            *_matmuls(run.trace, SCHED.active),
            *_counted_flops(attend, q, k, v, grad_out),
            peak_memory_bytes(forward, ctx.device),
            peak_memory_bytes(step, ctx.device),
            sum(s.bytes for s in saved if s.role == INTERNAL),
            sum(s.bytes for s in saved if s.role == OUTPUT),
        )
        if profiled is None or name == "sdpa-flash":
            profiled = (name, run)  # FlashAttention's step when it runs, else the first
    # Forward and backward of every implementation, interleaved round by round.
    timings: dict[str, Timing] = time_callables(timed, ctx.device, min_run_time=0.3, cuda_runs=30)
    timed.clear()
    rows = []
    for name, values in measured.items():
        if values is None:
            rows.append((name, *(None,) * (len(COLUMNS) - 2), "not available"))
            continue
        rows.append((name, timings[f"{name} forward"], timings[f"{name} backward"], *values, "ok"))
    trace = profiled[1].trace
    byte_columns = COLUMNS[7:11]
    table = Table(
        columns=COLUMNS,
        rows=tuple(rows),
        units={"forward": "µs", "backward": "µs", **dict.fromkeys(byte_columns, "B")}
        | {"forward_flops": "FLOP", "backward_flops": "FLOP"},
    )
    nodes = Table(
        columns=("implementation", "node", "calls", "total_us"),
        rows=tuple(node_rows),
        units={"total_us": "µs"},
    )
    return Observed(
        timeline=trace.in_step(trace.steps[-1].step),
        chrome=profiled[1].chrome,
        tables={"compare": table, "autograd_nodes": nodes},
        facts={
            "profiled": profiled[0],
            "profile_schedule": f"wait={SCHED.wait}, warmup={SCHED.warmup}, active={SCHED.active}",
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
    gpu_work=lambda p: Work(device_s=3.0),
    summary="What autograd saves between forward and backward, per implementation, across seq_len.",
    measures=MEASURES,
    **{n: p for n, p in SHAPE_PARAMS.items() if n != "seq_len"},
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
