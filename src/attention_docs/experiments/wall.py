# Experiments for the quadratic-wall chapter: naive attention swept over seq_len, over how
# the same tokens are split into sequences and heads, and over head_dim. Each point is timed
# without the profiler, its peak memory taken from the allocator, and (where the chapter
# shows shares) its five steps profiled briefly. Out-of-memory becomes a row, never a crash.
from __future__ import annotations

from collections.abc import Mapping

from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.cost import attention_flops
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.profiling.memory import peak_memory_bytes
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.timing import time_callable
from attention_docs.profiling.trace import step_span_times

MEASURES = ("attention/naive.py", "inputs.py", "cost.py", "profiling/memory.py")
DTYPE = Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16"))
BRIEF = Schedule(wait=1, warmup=1, active=2)
STEP_UNITS = dict.fromkeys(STEPS, "µs")


def _point(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal, steps: bool) -> dict:
    """Time, peak memory and (with `steps`) per-step time of one naive forward."""
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)

    def fn():
        return naive_attention(q, k, v, causal=causal)

    result: dict = {
        "peak_bytes": peak_memory_bytes(fn, ctx.device),
        "time_us": time_callable(fn, ctx.device, min_run_time=0.1).median_us,
        "flops": attention_flops(batch_size, num_heads, seq_len, head_dim),
    }
    if steps:
        run = profile_callable(fn, ctx.device, sched=BRIEF, record_shapes=False, with_flops=False)
        times = step_span_times(run.trace, STEPS)
        result.update({label: t["device_us"] / BRIEF.active for label, t in times.items()})
    return result


def _doubling(lo: int, hi: int) -> list[int]:
    points = []
    n = lo
    while n <= hi:
        points.append(n)
        n *= 2
    return points


@experiment(
    "wall_seq_len",
    summary="Naive attention's time, peak memory and step shares as seq_len doubles.",
    measures=MEASURES,
    batch_size=Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    num_heads=Param(4, gpu_default=16, minimum=1, help="attention heads"),
    head_dim=Param(64, minimum=1, help="features per head (D)"),
    dtype=DTYPE,
    causal=Param(True, help="mask the future (decoder-style attention)"),
    min_seq_len=Param(16, gpu_default=128, minimum=1, help="the shortest sequence"),
    max_seq_len=Param(2048, gpu_default=16384, minimum=1, help="the longest sequence"),
)
def wall_seq_len(
    ctx, *, batch_size, num_heads, head_dim, dtype, causal, min_seq_len, max_seq_len
) -> Observed:
    def measure(point: Mapping) -> dict:
        return _point(
            ctx,
            batch_size=batch_size,
            num_heads=num_heads,
            seq_len=point["seq_len"],
            head_dim=head_dim,
            dtype=dtype,
            causal=causal,
            steps=True,
        )

    table, notes = sweep(
        [{"seq_len": n} for n in _doubling(min_seq_len, max_seq_len)],
        measure,
        columns=("seq_len", "time_us", "peak_bytes", "flops", *STEPS),
        units={"time_us": "µs", "peak_bytes": "B", **STEP_UNITS},
    )
    return Observed(tables={"seq_len": table}, notes=tuple(notes))


@experiment(
    "wall_batch_heads",
    summary="The same tokens split into more, shorter sequences; the same width split into more heads.",
    measures=MEASURES,
    tokens=Param(2048, gpu_default=32768, minimum=1, help="batch_size × seq_len, held fixed"),
    num_heads=Param(4, gpu_default=16, minimum=1, help="heads in the tokens sweep"),
    head_dim=Param(64, minimum=1, help="head_dim in the tokens sweep"),
    model_dim=Param(
        256, gpu_default=2048, minimum=1, help="num_heads × head_dim in the heads sweep"
    ),
    seq_len=Param(512, gpu_default=4096, minimum=1, help="seq_len in the heads sweep"),
    dtype=DTYPE,
    causal=Param(True, help="mask the future (decoder-style attention)"),
)
def wall_batch_heads(
    ctx, *, tokens, num_heads, head_dim, model_dim, seq_len, dtype, causal
) -> Observed:
    batches = [b for b in _doubling(1, 64) if tokens % b == 0 and tokens // b >= 16]

    def by_batch(point: Mapping) -> dict:
        return _point(
            ctx,
            batch_size=point["batch_size"],
            num_heads=num_heads,
            seq_len=point["seq_len"],
            head_dim=head_dim,
            dtype=dtype,
            causal=causal,
            steps=False,
        )

    tokens_table, notes = sweep(
        [{"batch_size": b, "seq_len": tokens // b} for b in batches],
        by_batch,
        columns=("batch_size", "seq_len", "time_us", "peak_bytes", "flops"),
        units={"time_us": "µs", "peak_bytes": "B"},
    )
    heads = [h for h in _doubling(1, 64) if model_dim % h == 0 and model_dim // h >= 8]

    def by_heads(point: Mapping) -> dict:
        return _point(
            ctx,
            batch_size=1,
            num_heads=point["num_heads"],
            seq_len=seq_len,
            head_dim=point["head_dim"],
            dtype=dtype,
            causal=causal,
            steps=False,
        )

    heads_table, more = sweep(
        [{"num_heads": h, "head_dim": model_dim // h} for h in heads],
        by_heads,
        columns=("num_heads", "head_dim", "time_us", "peak_bytes", "flops"),
        units={"time_us": "µs", "peak_bytes": "B"},
    )
    return Observed(tables={"tokens": tokens_table, "heads": heads_table}, notes=(*notes, *more))


@experiment(
    "wall_head_dim",
    summary="Naive attention's time and step shares as head_dim grows at a fixed seq_len.",
    measures=MEASURES,
    batch_size=Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    num_heads=Param(4, gpu_default=16, minimum=1, help="attention heads"),
    seq_len=Param(512, gpu_default=4096, minimum=1, help="tokens per sequence (N)"),
    dtype=DTYPE,
    causal=Param(True, help="mask the future (decoder-style attention)"),
    min_head_dim=Param(16, minimum=1, help="the smallest head_dim"),
    max_head_dim=Param(256, minimum=1, help="the largest head_dim"),
)
def wall_head_dim(
    ctx, *, batch_size, num_heads, seq_len, dtype, causal, min_head_dim, max_head_dim
) -> Observed:
    def measure(point: Mapping) -> dict:
        return _point(
            ctx,
            batch_size=batch_size,
            num_heads=num_heads,
            seq_len=seq_len,
            head_dim=point["head_dim"],
            dtype=dtype,
            causal=causal,
            steps=True,
        )

    table, notes = sweep(
        [{"head_dim": d} for d in _doubling(min_head_dim, max_head_dim)],
        measure,
        columns=("head_dim", "time_us", "peak_bytes", "flops", *STEPS),
        units={"time_us": "µs", "peak_bytes": "B", **STEP_UNITS},
    )
    return Observed(tables={"head_dim": table}, notes=tuple(notes))
