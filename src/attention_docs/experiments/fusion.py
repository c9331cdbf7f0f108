# Experiments on torch.compile (TorchDynamo + Inductor) applied to naive attention: which
# kernels it fuses, what compiling and recompiling cost in a fresh process, how fast the
# result runs next to eager and SDPA, and which memory fusion cannot save. Every distinct
# compiled graph costs seconds of compile time, so each experiment compiles as few as it can.
from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.nn.functional import scaled_dot_product_attention

from attention_docs.attention.compiled import compiled_attention
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.cost import itemsize, step_costs
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments.naive import SHAPE_PARAMS
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.device import synchronize
from attention_docs.profiling.kernels import (
    fused_ops,
    is_bookkeeping,
    names_per_step,
    steps_of,
    work_items,
)
from attention_docs.profiling.memory import peak_memory_bytes
from attention_docs.profiling.profile import profile_callable
from attention_docs.profiling.timing import time_callable

MEASURES = (
    "attention/naive.py",
    "attention/compiled.py",
    "inputs.py",
    "profiling/kernels.py",
    "profiling/timing.py",
    "profiling/memory.py",
)
COMPILE_PARAMS = {
    **SHAPE_PARAMS,
    "seq_len": Param(512, gpu_default=2048, minimum=1, help="tokens per sequence (N)"),
    "causal": Param(True, help="mask the future (decoder-style attention)"),
}


@contextmanager
def _captured_torch_logs() -> Iterator[list[str]]:
    """Collect the warnings torch logs (Dynamo's notes on what it ignored, for instance)."""
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Collect(level=logging.WARNING)
    # torch's loggers do not propagate past these two: each has its own stderr handler.
    loggers = [logging.getLogger(name) for name in ("torch", "torch._dynamo")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield messages
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def _inductor_counters() -> dict[str, int]:
    from torch._dynamo.utils import counters

    return {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "cache_hits": int(counters["inductor"]["fxgraph_cache_hit"]),
        "cache_misses": int(counters["inductor"]["fxgraph_cache_miss"]),
    }


def _timed_call(fn, device) -> tuple[float, object]:
    synchronize(device)
    started = time.perf_counter()
    out = fn()
    synchronize(device)
    return time.perf_counter() - started, out


@experiment(
    "fusion_kernels",
    summary="What Inductor fuses in naive attention: eager ops against compiled kernels, and compile cost.",
    measures=MEASURES,
    **COMPILE_PARAMS,
)
def fusion_kernels(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    eager = observe_forward(
        lambda: naive_attention(q, k, v, causal=causal),
        ctx,
        labels=STEPS,
        costs=step_costs(batch_size, num_heads, seq_len, head_dim, dtype, causal=causal),
    )
    compiled = compiled_attention()
    with _captured_torch_logs() as logs:
        compile_s, _ = _timed_call(lambda: compiled(q, k, v, causal=causal), ctx.device)
    counters = _inductor_counters()
    observed = observe_forward(lambda: compiled(q, k, v, causal=causal), ctx)

    step_names = names_per_step(eager.timeline, STEPS)
    eager_rows = []
    for item in work_items(eager.timeline):
        steps = [s for s, names in step_names.items() if item.name in names]
        eager_rows.append((item.name, ", ".join(steps) or "—", item.calls, item.time_us))
    compiled_rows = []
    for item in work_items(observed.timeline):
        kind = "fused kernel" if item.fused else "library call"
        steps = steps_of(item.name, step_names)
        compiled_rows.append(
            (
                item.name,
                kind,
                ", ".join(steps) or "—",
                item.calls,
                item.time_us,
                fused_ops(item.name),
            )
        )
    ranges_kept = sum(1 for s in observed.timeline.spans if s.kind == "range" and s.name in STEPS)
    wrappers = sorted(
        {s.name.split(" fq")[0] for s in observed.timeline.spans if is_bookkeeping(s.name)}
        - {s.name for s in observed.timeline.spans if s.name.startswith("aten::")}
    )
    dropped = [m for m in logs if "record function" in m.lower() or "record_function" in m]
    return Observed(
        steps=eager.steps,
        ops=observed.ops,
        timing=observed.timing,
        timeline=observed.timeline,
        chrome=observed.chrome,
        tables={
            "eager_work": Table(
                columns=("name", "step", "calls", "time_us"),
                rows=tuple(eager_rows),
                units={"time_us": "µs"},
            ),
            "compiled_work": Table(
                columns=("name", "kind", "steps", "calls", "time_us", "fused_ops"),
                rows=tuple(compiled_rows),
                units={"time_us": "µs"},
            ),
        },
        facts={
            "cold_compile_s": round(compile_s, 3),
            **{f"compile_{k}": v for k, v in counters.items()},
            "eager_time_us": eager.timing.median_us,
            "compiled_time_us": observed.timing.median_us,
            "eager_work_calls": sum(r[2] for r in eager_rows),
            "compiled_work_calls": sum(r[3] for r in compiled_rows),
            "fused_kernels": sum(r[3] for r in compiled_rows if r[1] == "fused kernel"),
            "step_ranges_in_compiled_trace": ranges_kept,
            "record_function_warning": dropped[0] if dropped else None,
            "compiled_wrappers": wrappers,
            "torch_version": torch.__version__,
        },
    )


def _sdpa_op_name(fn, device) -> str | None:
    run = profile_callable(fn, device, record_shapes=False, profile_memory=False, with_flops=False)
    spans = [s for s in run.trace.spans if s.kind == "op" and "scaled_dot_product" in s.name]
    return max(spans, key=lambda s: s.depth).name if spans else None  # the backend's own op


@experiment(
    "fusion_speed_memory",
    summary="Eager, compiled and SDPA attention side by side: time per forward and peak memory.",
    measures=MEASURES,
    **COMPILE_PARAMS,
)
def fusion_speed_memory(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal
) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    compiled = compiled_attention()
    compile_s, _ = _timed_call(lambda: compiled(q, k, v, causal=causal), ctx.device)
    variants = {
        "eager (naive)": lambda: naive_attention(q, k, v, causal=causal),
        "torch.compile (naive)": lambda: compiled(q, k, v, causal=causal),
        "SDPA": lambda: scaled_dot_product_attention(q, k, v, is_causal=causal),
    }
    matrix_bytes = batch_size * num_heads * seq_len * seq_len * itemsize(dtype)
    timings = {name: time_callable(fn, ctx.device) for name, fn in variants.items()}
    eager_us = timings["eager (naive)"].median_us
    rows = []
    for name, fn in variants.items():
        peak = peak_memory_bytes(fn, ctx.device)
        t = timings[name]
        rows.append(
            (name, t.median_us, t.iqr_us, eager_us / t.median_us, peak, peak / matrix_bytes)
        )
    return Observed(
        timing=timings["torch.compile (naive)"],
        tables={
            "variants": Table(
                columns=(
                    "variant",
                    "time_us",
                    "iqr_us",
                    "speedup_vs_eager",
                    "peak_bytes",
                    "peak_in_matrices",
                ),
                rows=tuple(rows),
                units={"time_us": "µs", "iqr_us": "µs", "peak_bytes": "B"},
            )
        },
        facts={
            "cold_compile_s": round(compile_s, 3),
            **{f"compile_{k}": v for k, v in _inductor_counters().items()},
            "score_matrix_bytes": matrix_bytes,
            "output_bytes": batch_size * num_heads * seq_len * head_dim * itemsize(dtype),
            "sdpa_op": _sdpa_op_name(variants["SDPA"], ctx.device),
        },
    )


@experiment(
    "fusion_recompile",
    summary="What a new shape costs a torch.compile'd function with dynamic=False: guards, recompiles.",
    measures=MEASURES,
    **COMPILE_PARAMS,
    new_seq_len=Param(0, minimum=0, help="the second shape's seq_len (0: seq_len + seq_len // 2)"),
)
def fusion_recompile(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal, new_seq_len
) -> Observed:
    from torch._dynamo import config as dynamo_config
    from torch._dynamo.utils import guard_failures

    other = new_seq_len or seq_len + seq_len // 2
    inputs = {
        n: make_qkv(batch_size, num_heads, n, head_dim, dtype=dtype, device=ctx.device)
        for n in (seq_len, other)
    }
    compiled = compiled_attention()
    calls = [
        (seq_len, "first call: trace, compile, run"),
        (seq_len, "same shape: guards pass, cached graph runs"),
        (other, "new seq_len: a guard fails, recompile"),
        (other, "new shape again: second cached graph"),
        (seq_len, "first shape again: first graph still cached"),
    ]
    rows = []
    code = naive_attention.__code__  # guard failures are recorded per code object
    seen = len(guard_failures.get(code, []))
    before = _inductor_counters()
    for n, what in calls:
        q, k, v = inputs[n]
        seconds, _ = _timed_call(lambda q=q, k=k, v=v: compiled(q, k, v, causal=causal), ctx.device)
        after = _inductor_counters()
        rows.append(
            (
                what,
                n,
                seconds,
                after["graphs"] - before["graphs"],
                after["cache_hits"] - before["cache_hits"],
                after["cache_misses"] - before["cache_misses"],
            )
        )
        before = after
    q, k, v = inputs[seq_len]
    reasons = list(guard_failures.get(code, []))[seen:]
    limit = getattr(dynamo_config, "recompile_limit", None) or getattr(
        dynamo_config, "cache_size_limit", None
    )
    return Observed(
        timing=time_callable(lambda: compiled(q, k, v, causal=causal), ctx.device),
        tables={
            "calls": Table(
                columns=(
                    "call",
                    "seq_len",
                    "seconds",
                    "new_graphs",
                    "fx_cache_hits",
                    "fx_cache_misses",
                ),
                rows=tuple(rows),
                units={"seconds": "s"},
            )
        },
        facts={
            "first_seq_len": seq_len,
            "second_seq_len": other,
            "guard_failures": reasons,
            "recompile_limit": limit,
            "eager_time_us": time_callable(
                lambda: naive_attention(q, k, v, causal=causal), ctx.device
            ).median_us,
        },
    )
