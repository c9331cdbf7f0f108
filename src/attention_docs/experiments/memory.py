# Experiments for the memory chapter: the allocation timeline of one naive forward, and its
# peak against seq_len, measured and predicted by analytic/memory.py. A length the model says
# will not fit in the free memory is not tried (on a CPU the process would be killed, on a
# GPU the allocator fragmented): its row says so. Every allocation is attributed to its op,
# so a backend's scratch (oneDNN's bf16 matmul, cuBLAS's workspace) is told apart from the
# tensors the model counts, in both dtypes.
from __future__ import annotations

import os

import torch

from attention_docs.analytic.memory import is_matrix_sized, max_seq_len, naive_peak
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments._sweep import OUT_OF_MEMORY, TOO_LARGE, sweep
from attention_docs.experiments.registry import Observed, Param, Work, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.headroom import free_memory_bytes
from attention_docs.profiling.memory import step_allocations
from attention_docs.profiling.onednn import onednn_matmul
from attention_docs.profiling.scratch import op_timeline, scratch_by_op, tensor_peak

DTYPE = Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16"))
AFTER = "after the steps"  # the frees when naive_attention returns
DTYPES = ("float32", "bfloat16")  # the timeline profiles both: the backends differ
MEASURES = (
    "attention/naive.py",
    "inputs.py",
    "analytic/memory.py",
    "profiling/memory.py",
    "profiling/scratch.py",
    "profiling/onednn.py",
)


def _profile(shape: dict, dtype: str, causal: bool, device: torch.device):
    q, k, v = make_qkv(*shape.values(), dtype=dtype, device=device)
    return op_timeline(lambda: naive_attention(q, k, v, causal=causal), device, STEPS)


def _backend(shape: dict, dtype: str, device: torch.device) -> dict:
    """Which library ran the score matmul in `dtype`, and on what instruction set."""
    if device.type == "cuda":
        return {"backend": "cuBLAS", "kernel": None, "isa": None, "user_scratchpad": None}
    b, h, n, d = shape.values()
    q, k, _ = make_qkv(b, h, n, d, dtype=dtype)
    found = onednn_matmul(q.reshape(b * h, n, d), k.reshape(b * h, n, d).transpose(1, 2))
    return {
        "backend": "oneDNN" if found.kernel else "ATen",
        "kernel": found.kernel,
        "isa": found.isa,
        "user_scratchpad": found.user_scratchpad,
    }


@experiment(
    "memory_timeline",
    gpu_work=lambda p: Work(profiles=1, device_s=0.5),
    summary="Every allocation and free of one naive forward, attributed to the five steps and "
    "to the op that made it; scratch told apart from tensors, in float32 and bfloat16.",
    measures=MEASURES,
    batch_size=Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    num_heads=Param(4, gpu_default=16, minimum=1, help="attention heads"),
    seq_len=Param(512, gpu_default=4096, minimum=1, help="tokens per sequence (N)"),
    head_dim=Param(64, gpu_default=128, minimum=1, help="features per head (D)"),
    dtype=DTYPE,
    causal=Param(True, help="mask the future (decoder-style attention)"),
)
def memory_timeline_experiment(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal
) -> Observed:
    shape = {
        "batch_size": batch_size,
        "num_heads": num_heads,
        "seq_len": seq_len,
        "head_dim": head_dim,
    }
    timelines = {dtype: _profile(shape, dtype, causal, ctx.device)}
    for other in DTYPES:
        if other not in timelines:
            timelines[other] = _profile(shape, other, causal, ctx.device)
    ops = timelines[dtype]
    timeline = ops.timeline
    model = naive_peak(*shape.values(), dtype, causal=causal)
    events = Table(
        columns=("t_us", "bytes", "live_bytes", "step", "op", "scratch"),
        rows=tuple(
            (e.t_us, e.bytes, e.live, step or AFTER, op, scratch)
            for e, step, op, scratch in zip(
                timeline.events, timeline.steps, ops.ops, ops.scratch, strict=True
            )
        ),
        units={"t_us": "µs", "bytes": "B", "live_bytes": "B"},
    )
    bands = Table(
        columns=("step", "start_us", "end_us"),
        rows=tuple((b.label, b.start_us, b.end_us) for b in timeline.bands),
        units={"start_us": "µs", "end_us": "µs"},
    )
    per_step = step_allocations(timeline, STEPS)
    rows = []
    for label in STEPS:
        in_step = [e for e, s in zip(timeline.events, timeline.steps, strict=True) if s == label]
        stats = per_step[label]
        sized = sum(
            1 for e in in_step if e.bytes > 0 and is_matrix_sized(e.bytes, model.matrix_bytes)
        )
        live_after = in_step[-1].live if in_step else None
        rows.append(
            (label, stats["allocations"], sized, stats["allocated"], stats["freed"], live_after)
        )
    steps = Table(
        columns=(
            "step",
            "allocations",
            "score_sized",
            "allocated_bytes",
            "freed_bytes",
            "live_after_bytes",
        ),
        rows=tuple(rows),
        units={"allocated_bytes": "B", "freed_bytes": "B", "live_after_bytes": "B"},
    )
    dtype_rows, scratch_rows = [], []
    for name in DTYPES:
        tl = timelines[name]
        backend = _backend(shape, name, ctx.device)
        dtype_rows.append(
            (
                name,
                max((e.live for e in tl.timeline.events), default=0),
                tensor_peak(tl),
                naive_peak(*shape.values(), name, causal=causal).peak_bytes,
                backend["backend"],
                backend["kernel"],
                backend["isa"],
                backend["user_scratchpad"],
            )
        )
        for (step, op), (count, largest) in scratch_by_op(tl).items():
            scratch_rows.append((name, step or AFTER, op, count, largest))
    units = {"measured_peak_bytes": "B", "tensor_peak_bytes": "B", "model_peak_bytes": "B"}
    dtypes = Table(
        columns=(
            "dtype",
            "measured_peak_bytes",
            "tensor_peak_bytes",
            "model_peak_bytes",
            "backend",
            "kernel",
            "isa",
            "user_scratchpad",
        ),
        rows=tuple(dtype_rows),
        units=units,
    )
    scratch = Table(
        columns=("dtype", "step", "op", "allocations", "largest_bytes"),
        rows=tuple(scratch_rows),
        units={"largest_bytes": "B"},
    )
    return Observed(
        tables={
            "events": events,
            "bands": bands,
            "steps": steps,
            "dtypes": dtypes,
            "scratch": scratch,
        },
        facts={
            "measured_peak_bytes": max((e.live for e in timeline.events), default=0),
            "tensor_peak_bytes": tensor_peak(ops),
            "predicted_peak_bytes": model.peak_bytes,
            "matrix_bytes": model.matrix_bytes,
            "mask_bytes": model.mask_bytes,
            "output_bytes": model.output_bytes,
            "inputs_bytes": model.inputs_bytes,
            "live_matrices_predicted": model.matrices,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"),
        },
    )


def _points(start: int, limit: int) -> list[int]:
    """Powers of two from `start` below `limit`, then just under and just over `limit`."""
    points = []
    n = start
    while n < limit * 0.95:
        points.append(n)
        n *= 2
    under = max(int(limit * 0.95) // 128 * 128, 1)
    over = -(-int(limit * 1.05) // 128) * 128
    return sorted({*points, under, over} - {0})


@experiment(
    "memory_peak",
    gpu_work=lambda p: Work(device_s=2.0),
    summary="Peak memory of one naive forward against seq_len: measured, predicted, and where it "
    "stops fitting.",
    measures=(*MEASURES, "profiling/headroom.py"),
    batch_size=Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    num_heads=Param(4, gpu_default=16, minimum=1, help="attention heads"),
    head_dim=Param(64, gpu_default=128, minimum=1, help="features per head (D)"),
    dtype=DTYPE,
    causal=Param(True, help="mask the future (decoder-style attention)"),
    start=Param(128, gpu_default=1024, minimum=1, help="the shortest seq_len measured"),
    max_measured=Param(
        2048,
        gpu_default=1 << 30,
        minimum=1,
        help="longer sequences are predicted, not run (keeps a CPU build from exhausting RAM)",
    ),
)
def memory_peak(
    ctx, *, batch_size, num_heads, head_dim, dtype, causal, start, max_measured
) -> Observed:
    memory = ctx.info.memory_bytes or 0
    free = free_memory_bytes(ctx.device) or memory
    limit = max_seq_len(memory, batch_size, num_heads, head_dim, dtype, causal=causal)
    limit_free = max_seq_len(free, batch_size, num_heads, head_dim, dtype, causal=causal)
    points = _points(start, limit_free) if limit_free else [start]

    def predicted(n: int):
        return naive_peak(batch_size, num_heads, n, head_dim, dtype, causal=causal)

    def measure(point) -> dict:
        # The timeline's method (two warm-up calls, then one profiled), so that a length
        # both experiments measure has one peak.
        shape = {
            "batch_size": batch_size,
            "num_heads": num_heads,
            "seq_len": point["seq_len"],
            "head_dim": head_dim,
        }
        tl = _profile(shape, dtype, causal, ctx.device)
        peak = max((e.live for e in tl.timeline.events), default=0)
        return {
            "measured_peak_bytes": peak,
            "scratch_at_peak_bytes": peak - tensor_peak(tl),
            "measured_over_predicted": peak / predicted(point["seq_len"]).peak_bytes,
        }

    columns = (
        "seq_len",
        "predicted_peak_bytes",
        "predicted_total_bytes",
        "measured_peak_bytes",
        "scratch_at_peak_bytes",
        "measured_over_predicted",
    )
    runnable = [n for n in points if n <= max_measured]
    table, notes = sweep(
        [
            {
                "seq_len": n,
                "predicted_peak_bytes": predicted(n).peak_bytes,
                "predicted_total_bytes": predicted(n).total_bytes,
            }
            for n in runnable
        ],
        measure,
        columns=columns,
        units={c: "B" for c in columns if c.endswith("_bytes")},
        estimate_bytes=lambda point: point["predicted_total_bytes"],
        device=ctx.device,
    )
    rows = list(table.rows)
    for n in points:
        if n > max_measured:
            model = predicted(n)
            status = TOO_LARGE if model.total_bytes > free else "not run: above max_measured"
            rows.append((n, model.peak_bytes, model.total_bytes, None, None, None, status))
    measured_ok = [r[0] for r in rows if r[-1] == "ok"]
    failed = [r[0] for r in rows if r[-1] == OUT_OF_MEMORY]
    return Observed(
        tables={"peak": Table(columns=table.columns, rows=tuple(rows), units=table.units)},
        facts={
            "memory_bytes": memory,
            "free_bytes": free,
            "memory_kind": "GPU memory" if ctx.device.type == "cuda" else "system RAM",
            "predicted_max_seq_len": limit,
            "predicted_max_seq_len_free": limit_free,
            "largest_measured_seq_len": max(measured_ok, default=None),
            "first_out_of_memory_seq_len": min(failed, default=None),
        },
        notes=tuple(notes),
    )
