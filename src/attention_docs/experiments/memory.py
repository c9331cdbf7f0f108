# Experiments for the memory chapter: the allocation timeline of one naive forward, and its
# peak against seq_len, measured and predicted by analytic/memory.py, up to the length at which
# the device's free memory runs out. A length the model says will not fit in the free memory
# is not tried (on the CPU going past it gets the process killed; on a GPU a failed try
# fragments the allocator): its row says so in words.
#
# GPU sizes (one H200): memory_timeline profiles one forward at batch 4, 16 heads, bf16,
# seq_len 4096 (two 1.1 GB matrices): ~2 s with the profiler's start. memory_peak runs one
# forward per length from 1024 up to just under the free-memory limit (~22k tokens, two 62 GB
# matrices, ~0.1 s at 4 TB/s for its ~7 passes over them): ~3 s for its seven lengths.
from __future__ import annotations

from attention_docs.analytic.memory import is_matrix_sized, max_seq_len, naive_peak
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments._sweep import OUT_OF_MEMORY, TOO_LARGE, sweep
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.headroom import free_memory_bytes
from attention_docs.profiling.memory import memory_timeline, peak_memory_bytes, step_allocations

DTYPE = Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16"))
AFTER = "after the steps"  # the frees when naive_attention returns


@experiment(
    "memory_timeline",
    summary="Every allocation and free of one naive forward, attributed to the five steps.",
    measures=("attention/naive.py", "inputs.py", "analytic/memory.py", "profiling/memory.py"),
    batch_size=Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    num_heads=Param(4, gpu_default=16, minimum=1, help="attention heads"),
    seq_len=Param(512, gpu_default=4096, minimum=1, help="tokens per sequence (N)"),
    head_dim=Param(64, minimum=1, help="features per head (D)"),
    dtype=DTYPE,
    causal=Param(True, help="mask the future (decoder-style attention)"),
)
def memory_timeline_experiment(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal
) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    timeline = memory_timeline(lambda: naive_attention(q, k, v, causal=causal), ctx.device, STEPS)
    model = naive_peak(batch_size, num_heads, seq_len, head_dim, dtype, causal=causal)
    events = Table(
        columns=("t_us", "bytes", "live_bytes", "step"),
        rows=tuple(
            (e.t_us, e.bytes, e.live, step or AFTER)
            for e, step in zip(timeline.events, timeline.steps, strict=True)
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
        rows.append(
            (
                label,
                stats["allocations"],
                sum(
                    1
                    for e in in_step
                    if e.bytes > 0 and is_matrix_sized(e.bytes, model.matrix_bytes)
                ),
                stats["allocated"],
                stats["freed"],
                max((e.live for e in in_step), default=None),
                in_step[-1].live if in_step else None,
            )
        )
    steps = Table(
        columns=(
            "step",
            "allocations",
            "score_sized",
            "allocated_bytes",
            "freed_bytes",
            "peak_live_bytes",
            "live_after_bytes",
        ),
        rows=tuple(rows),
        units={"allocated_bytes": "B", "freed_bytes": "B", "peak_live_bytes": "B"},
    )
    measured_peak = max((e.live for e in timeline.events), default=0)
    return Observed(
        tables={"events": events, "bands": bands, "steps": steps},
        facts={
            "measured_peak_bytes": measured_peak,
            "predicted_peak_bytes": model.peak_bytes,
            "matrix_bytes": model.matrix_bytes,
            "mask_bytes": model.mask_bytes,
            "output_bytes": model.output_bytes,
            "inputs_bytes": model.inputs_bytes,
            "live_matrices_predicted": model.matrices,
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
    summary="Peak memory of one naive forward against seq_len: measured, predicted, and where it "
    "stops fitting.",
    measures=(
        "attention/naive.py",
        "inputs.py",
        "analytic/memory.py",
        "profiling/memory.py",
        "profiling/headroom.py",
    ),
    batch_size=Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    num_heads=Param(4, gpu_default=16, minimum=1, help="attention heads"),
    head_dim=Param(64, minimum=1, help="features per head (D)"),
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
        n = point["seq_len"]
        q, k, v = make_qkv(batch_size, num_heads, n, head_dim, dtype=dtype, device=ctx.device)
        peak = peak_memory_bytes(lambda: naive_attention(q, k, v, causal=causal), ctx.device)
        return {
            "measured_peak_bytes": peak,
            "measured_over_predicted": peak / predicted(n).peak_bytes,
        }

    columns = (
        "seq_len",
        "predicted_peak_bytes",
        "predicted_total_bytes",
        "measured_peak_bytes",
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
        units={
            "predicted_peak_bytes": "B",
            "predicted_total_bytes": "B",
            "measured_peak_bytes": "B",
        },
        estimate_bytes=lambda point: point["predicted_total_bytes"],
        device=ctx.device,
    )
    rows = list(table.rows)
    for n in points:
        if n > max_measured:
            model = predicted(n)
            status = TOO_LARGE if model.total_bytes > free else "not run: above max_measured"
            rows.append((n, model.peak_bytes, model.total_bytes, None, None, status))
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
