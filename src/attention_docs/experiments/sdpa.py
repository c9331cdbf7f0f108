# Experiments on scaled_dot_product_attention: each backend pinned and measured, why SDPA
# picks the backend it picks for a set of input variants, and what each way of masking costs.
# A backend this device does not have becomes a row that says so, never an exception.
from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from attention_docs.attention.naive import causal_mask, naive_attention
from attention_docs.attention.sdpa import (
    BACKENDS,
    CHOSEN,
    additive_mask,
    backend_of_op,
    chosen_backend,
    keep_mask,
    sdpa_attention,
    why_backend,
)
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.memory import peak_memory_bytes
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.timing import time_callable
from attention_docs.profiling.trace import op_stats, step_span_times

MEASURES = ("attention/sdpa.py", "attention/naive.py", "inputs.py")
LABEL = "attention.sdpa"
SCHED = Schedule(wait=1, warmup=1, active=2)

SHAPE_PARAMS = {
    "batch_size": Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    "num_heads": Param(4, gpu_default=16, minimum=1, help="attention heads"),
    "seq_len": Param(512, gpu_default=4096, minimum=1, help="tokens per sequence (N)"),
    "head_dim": Param(64, minimum=1, help="features per head (D)"),
    "dtype": Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
}


def _runs(fn: Callable[[], object]) -> bool:
    """True if `fn` runs; a backend that cannot run these inputs raises RuntimeError."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn()
        except RuntimeError:
            return False
    return True


def _profiled_call(fn: Callable[[], object], device: torch.device) -> dict:
    """Per call: ATen ops dispatched, GPU kernels, CPU-side and device time, top ops/kernels."""
    run = profile_callable(fn, device, sched=SCHED, profile_memory=False, with_flops=False)
    stats = op_stats(run.trace)
    per = float(SCHED.active)
    span = step_span_times(run.trace, [LABEL])[LABEL]
    return {
        "ops_per_call": sum(s["calls"] for s in stats if s["where"] == "CPU") / per,
        "kernels_per_call": sum(s["calls"] for s in stats if s["where"] == "GPU") / per,
        "cpu_us": span["cpu_us"] / per,
        "device_us": span["device_us"] / per,
        "top": stats[:4],
        "entry_op": next(
            (s["name"] for s in stats if s["where"] == "CPU" and backend_of_op(s["name"])), None
        ),
    }


@experiment(
    "sdpa_backends",
    summary="scaled_dot_product_attention with each backend pinned: ops, kernels, time, memory.",
    measures=MEASURES,
    **SHAPE_PARAMS,
    causal=Param(True, help="mask the future with is_causal"),
)
def sdpa_backends(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    verdicts = {x.backend: x for x in why_backend(q, k, v, causal=causal)}
    rows, op_rows, notes = [], [], []
    with torch.no_grad():
        for backend in BACKENDS:
            verdict = verdicts[backend]

            def call(b=backend):
                return sdpa_attention(q, k, v, causal=causal, backend=b)

            if not verdict.runs or not _runs(call):
                rows.append((backend, verdict.status, None, None, None, None, None, None, None))
                notes.append(f"{backend}: {verdict.reason}")
                continue
            seen = _profiled_call(call, ctx.device)
            timing = time_callable(call, ctx.device, min_run_time=0.1)
            peak = peak_memory_bytes(call, ctx.device)
            rows.append(
                (
                    backend,
                    verdict.status,
                    seen["entry_op"],
                    seen["ops_per_call"],
                    seen["kernels_per_call"],
                    timing.median_us,
                    seen["cpu_us"],
                    seen["device_us"],
                    peak,
                )
            )
            op_rows.extend(
                (
                    backend,
                    s["name"],
                    s["where"],
                    s["calls"] / SCHED.active,
                    s["self_us"] / SCHED.active,
                )
                for s in seen["top"]
            )
        observed = observe_forward(
            lambda: sdpa_attention(q, k, v, causal=causal), ctx, labels=(LABEL,)
        )
    table = Table(
        columns=(
            "backend",
            "status",
            "op",
            "ops_per_call",
            "kernels_per_call",
            "time_us",
            "cpu_us",
            "device_us",
            "peak_bytes",
        ),
        rows=tuple(rows),
        units={"time_us": "µs", "cpu_us": "µs", "device_us": "µs", "peak_bytes": "B"},
    )
    ops_table = Table(
        columns=("backend", "name", "where", "calls", "self_us"),
        rows=tuple(op_rows),
        units={"self_us": "µs"},
    )
    return Observed(
        steps=observed.steps,
        ops=observed.ops,
        timing=observed.timing,
        timeline=observed.timeline,
        chrome=observed.chrome,
        tables={"backends": table, "backend_ops": ops_table},
        facts={
            **observed.facts,
            "chosen": chosen_backend(list(verdicts.values())),
            "chosen_op": next((x.op for x in verdicts.values() if x.status == CHOSEN), None),
        },
        notes=tuple(notes),
    )


def _why_variants(dtype: str, head_dim: int, big_head_dim: int):
    """(name, dtype, head_dim, mask kind, dropout_p) for each input variant."""
    other = "float32" if dtype != "float32" else "bfloat16"
    return (
        ("baseline", dtype, head_dim, "none", 0.0),
        (other, other, head_dim, "none", 0.0),
        ("float64", "float64", head_dim, "none", 0.0),
        ("is_causal", dtype, head_dim, "is_causal", 0.0),
        ("bool mask", dtype, head_dim, "bool", 0.0),
        ("float mask", dtype, head_dim, "float", 0.0),
        (f"head_dim {big_head_dim}", dtype, big_head_dim, "none", 0.0),
        ("dropout 0.1", dtype, head_dim, "none", 0.1),
    )


def _mask_kwargs(kind: str, seq_len: int, dtype: torch.dtype, device) -> dict:
    if kind == "is_causal":
        return {"causal": True}
    if kind == "bool":
        return {"attn_mask": keep_mask(seq_len, device=device)}
    if kind == "float":
        return {"attn_mask": additive_mask(seq_len, dtype=dtype, device=device)}
    return {}


@experiment(
    "sdpa_why",
    summary="Why SDPA picks its backend: each backend pinned over input variants, torch's reasons kept.",
    measures=MEASURES,
    batch_size=Param(1, minimum=1, help="sequences per batch"),
    num_heads=Param(2, minimum=1, help="attention heads"),
    seq_len=Param(128, gpu_default=1024, minimum=1, help="tokens per sequence (N)"),
    head_dim=Param(64, minimum=1, help="features per head (D) of the baseline"),
    big_head_dim=Param(512, minimum=1, help="head_dim of the large-head variant"),
    dtype=Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
)
def sdpa_why(ctx, *, batch_size, num_heads, seq_len, head_dim, big_head_dim, dtype) -> Observed:
    rows = []
    for name, vdtype, d, mask, dropout_p in _why_variants(dtype, head_dim, big_head_dim):
        q, k, v = make_qkv(batch_size, num_heads, seq_len, d, dtype=vdtype, device=ctx.device)
        kwargs = _mask_kwargs(mask, seq_len, q.dtype, ctx.device)
        with torch.no_grad():
            verdicts = why_backend(q, k, v, dropout_p=dropout_p, **kwargs)
        rows.extend(
            (name, vdtype, d, mask, dropout_p, x.backend, x.status, x.op, x.reason)
            for x in verdicts
        )
    table = Table(
        columns=(
            "variant",
            "dtype",
            "head_dim",
            "mask",
            "dropout_p",
            "backend",
            "status",
            "op",
            "reason",
        ),
        rows=tuple(rows),
    )
    return Observed(tables={"verdicts": table})


def _mask_variants(seq_len: int, dtype: torch.dtype, device) -> tuple:
    """(name, sdpa kwargs, mask tensor or None) for each way of asking for causal attention."""
    wrong = causal_mask(seq_len, device=device)  # masked_fill's convention: True = hide
    keep = keep_mask(seq_len, device=device)
    add = additive_mask(seq_len, dtype=dtype, device=device)
    return (
        ("is_causal=True", {"causal": True}, None),
        ("bool, True = take part", {"attn_mask": keep}, keep),
        ("float, 0 / −inf", {"attn_mask": add}, add),
        ("bool, masked_fill polarity", {"attn_mask": wrong}, wrong),
    )


@experiment(
    "sdpa_masks",
    summary="Causal attention three ways (is_causal, bool mask, float mask) and one wrong way.",
    measures=MEASURES,
    **SHAPE_PARAMS,
)
def sdpa_masks(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    reference = naive_attention(q.double(), k.double(), v.double(), causal=True)
    rows = []
    with torch.no_grad():
        for name, kwargs, mask in _mask_variants(seq_len, q.dtype, ctx.device):

            def call(kw=kwargs):
                return sdpa_attention(q, k, v, **kw)

            out = call().double()
            bad_rows = int(torch.isnan(out).any(dim=-1).sum())
            err = (out - reference).abs().nan_to_num(nan=float("inf")).max().item()
            seen = _profiled_call(call, ctx.device)
            timing = time_callable(call, ctx.device, min_run_time=0.1)
            rows.append(
                (
                    name,
                    backend_of_op(seen["entry_op"] or ""),
                    mask.numel() * mask.element_size() if mask is not None else 0,
                    peak_memory_bytes(call, ctx.device),
                    timing.median_us,
                    seen["ops_per_call"],
                    err if err != float("inf") else None,
                    bad_rows,
                    _prep_ops(call),
                )
            )
    table = Table(
        columns=(
            "mask",
            "backend",
            "mask_bytes",
            "peak_bytes",
            "time_us",
            "ops_per_call",
            "max_abs_error",
            "nan_rows",
            "prep_ops",
        ),
        rows=tuple(rows),
        units={"mask_bytes": "B", "peak_bytes": "B", "time_us": "µs"},
    )
    return Observed(tables={"masks": table}, facts={"reference": "naive attention in float64"})


def _prep_ops(fn: Callable[[], object]) -> str:
    """The ops SDPA dispatches before its backend op (e.g. turning a bool mask into a float one)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    names: list[str] = []
    for event in prof.events():
        if event.name == "aten::scaled_dot_product_attention":
            names.extend(c.name for c in event.cpu_children if not backend_of_op(c.name))
            break
    return ", ".join(dict.fromkeys(names)) or "none"
