# Experiments on FlexAttention: each mask and score modification compiled and timed against
# the unfused fallback and SDPA with a dense mask; how time follows block sparsity; what a
# BlockMask costs to build. Every distinct mod is a distinct compiled kernel (seconds of
# compile time each), so the sweeps vary tensors the mods close over, never the mods.
# Compiled FlexAttention with the plain causal mask is one of `forward_times`' rows: it is
# not timed here (one fact, one number); the chapter reads it there.
#
# GPU sizes, estimated on an H200 (bfloat16, batch 4, 16 heads, head_dim 64). flex_masks at
# seq_len 4096: four flex_attention compiles (~5-15 s each) dominate; each forward is ~0.1-1
# ms fused and a few ms for the fallback (its N×N scores are 2 GiB), timed in 3 rounds of
# ~16 runs: ~50 s in all. flex_sparsity_sweep at seq_len 16384: one compile (~10 s) and 8
# windows of ≤ 5 ms forwards (causal: ~2.2 TFLOP at several hundred TFLOP/s): ~15 s.
# flex_block_mask_cost up to 32768: each build evaluates the mask on up to 1 G pairs (~1 GB
# of booleans, a few ms): ~5 s. About 70 s in all, process starts included.
from __future__ import annotations

import math
import time
import warnings

import torch
from torch.nn.attention.flex_attention import flex_attention
from torch.nn.functional import scaled_dot_product_attention

from attention_docs.attention.flex import (
    alibi,
    alibi_slopes,
    block_counts,
    block_mask_for,
    causal,
    compiled_flex_attention,
    document,
    document_ids,
    explicit_alibi_bias,
    explicit_mask,
    sliding_window,
    split_lengths,
)
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.device import synchronize
from attention_docs.profiling.memory import is_out_of_memory, peak_memory_bytes
from attention_docs.profiling.timing import time_callable, time_callables

MEASURES = ("attention/flex.py", "inputs.py", "profiling/timing.py", "profiling/memory.py")
MASKS = ("causal", "sliding_window", "alibi", "document")
# The masks whose compiled FlexAttention forward_times already times (its FlexAttention row).
TIMED_IN_FORWARD_TIMES = ("causal",)
TIMED = ("compiled", "eager", "sdpa_dense")  # compiled flex, its unfused fallback, SDPA + mask
SHAPE_PARAMS = {
    "batch_size": Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    "num_heads": Param(4, gpu_default=16, minimum=1, help="attention heads"),
    "head_dim": Param(64, minimum=1, help="features per head (D)"),
    "dtype": Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
}


def unavailable(exc: BaseException) -> str:
    """A status cell for a feature that failed to run here, in the error's own words."""
    first = (str(exc).strip().splitlines() or [""])[0][:160]
    return f"not available on this device: {type(exc).__name__}: {first}"


def _mods(kind: str, seq_len: int, num_heads: int, *, window: int, documents: int, device):
    """(mask_mod, score_mod, explicit mask, explicit bias or None) for one mask kind."""
    if kind == "causal":
        return causal, None, explicit_mask("causal", seq_len), None
    if kind == "sliding_window":
        mod = sliding_window(torch.tensor(window, device=device))
        return mod, None, explicit_mask("sliding_window", seq_len, window=window), None
    if kind == "alibi":
        slopes = alibi_slopes(num_heads, device=device)
        bias = explicit_alibi_bias(slopes, seq_len)
        return causal, alibi(slopes), explicit_mask("alibi", seq_len), bias
    ids = document_ids(split_lengths(seq_len, documents), device=device)
    return document(ids), None, explicit_mask("document", seq_len, doc_ids=ids.cpu()), None


def reference(q, k, v, allowed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """float64 attention with an explicit boolean mask and additive bias, on q's device (a
    GPU-sized reference would take minutes on the host)."""
    q, k, v = (t.double() for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if bias is not None:
        scores = scores + bias.to(q.device)
    return torch.softmax(scores.masked_fill(~allowed.to(q.device), -math.inf), dim=-1) @ v


def _fx_cache() -> tuple[int, int]:
    from torch._dynamo.utils import counters

    return counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]


def _rel_err(out: torch.Tensor, expected: torch.Tensor) -> float:
    return float((out.double() - expected).norm() / expected.norm())


@experiment(
    "flex_masks",
    summary="FlexAttention's masks and score mods: compiled kernel vs unfused fallback vs SDPA with a dense mask.",
    measures=MEASURES,
    **SHAPE_PARAMS,
    seq_len=Param(1024, gpu_default=4096, minimum=1, help="tokens per sequence (N)"),
    window=Param(256, gpu_default=1024, minimum=1, help="sliding-window width in tokens"),
    documents=Param(4, minimum=1, help="documents packed into each sequence"),
)
def flex_masks(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, window, documents
) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    flex = compiled_flex_attention()
    min_run = 0.3 if ctx.device.type == "cpu" else 0.1
    rows = []
    fallback_warnings: list[str] = []
    notes = []
    for kind in MASKS:
        mask_mod, score_mod, allowed, bias = _mods(
            kind, seq_len, num_heads, window=window, documents=documents, device=ctx.device
        )
        started = time.perf_counter()
        block_mask = block_mask_for(mask_mod, seq_len, ctx.device)
        build_s = time.perf_counter() - started
        counts = block_counts(block_mask)
        row = {
            "mask": kind,
            "score_mod": "alibi" if score_mod else "—",
            "block_mask_ms": build_s * 1e3,
            "skipped_fraction": counts["skipped"] / counts["total"],
            "partial_blocks": counts["partial"],
            "full_blocks": counts["full"],
            "total_blocks": counts["total"],
        }
        status = "ok"
        fns = {}
        try:
            run = lambda sm=score_mod, bm=block_mask: flex(q, k, v, score_mod=sm, block_mask=bm)  # noqa: E731
            hits, misses = _fx_cache()
            started = time.perf_counter()
            out = run()
            synchronize(ctx.device)
            row["compile_s"] = time.perf_counter() - started
            new_hits, new_misses = _fx_cache()
            row["fx_cache"] = "hit" if new_hits > hits and new_misses == misses else "miss"
            row["rel_err_vs_float64"] = _rel_err(out, reference(q, k, v, allowed, bias))
            if kind not in TIMED_IN_FORWARD_TIMES:
                fns["compiled"] = run
        except Exception as exc:  # a backend this device lacks becomes a row, not a crash
            if is_out_of_memory(exc):
                raise
            status = unavailable(exc)
            notes.append(f"compiled flex_attention, mask {kind}: {status}")

        def fallback(score_mod=score_mod, block_mask=block_mask):
            return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)

        dense = allowed.to(ctx.device)
        if bias is not None:
            dense = torch.zeros(bias.shape, dtype=q.dtype).masked_fill(~allowed, -math.inf)
            dense = (dense + bias.to(q.dtype)).to(ctx.device)
        fns["eager"] = fallback
        fns["sdpa_dense"] = lambda dense=dense: scaled_dot_product_attention(
            q, k, v, attn_mask=dense
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # Interleaved rounds: a slow moment of the machine hurts all three alike.
            timings = time_callables(fns, ctx.device, min_run_time=min_run, cuda_runs=48)
        fallback_warnings.extend(
            str(w.message) for w in caught if "without torch.compile" in str(w.message)
        )
        for name, t in timings.items():
            row[f"{name}_us"] = t.median_us
            row[f"{name}_low_us"] = t.low_us
            row[f"{name}_high_us"] = t.high_us
        row["status"] = status
        rows.append(row)
    columns = (
        "mask",
        "score_mod",
        "compile_s",
        "fx_cache",
        *(f"{name}{part}_us" for name in TIMED for part in ("", "_low", "_high")),
        "block_mask_ms",
        "skipped_fraction",
        "partial_blocks",
        "full_blocks",
        "total_blocks",
        "rel_err_vs_float64",
        "status",
    )
    table = Table(
        columns=columns,
        rows=tuple(tuple(r.get(c) for c in columns) for r in rows),
        units={
            "compile_s": "s",
            "block_mask_ms": "ms",
            **{c: "µs" for c in columns if c.endswith("_us")},
        },
    )
    return Observed(
        tables={"masks": table},
        facts={
            "fallback_warning": fallback_warnings[0] if fallback_warnings else None,
            "fallback_warnings": len(fallback_warnings),
            "block_size": list(block_mask.BLOCK_SIZE),
            "document_lengths": split_lengths(seq_len, documents),
            "dense_mask_bytes": seq_len * seq_len,
            "compiled_timed_in_forward_times": list(TIMED_IN_FORWARD_TIMES),
            "timing_method": next(iter(timings.values())).method,
        },
        notes=tuple(notes),
    )


@experiment(
    "flex_sparsity_sweep",
    summary="Compiled FlexAttention with a sliding window: time against the fraction of tiles skipped.",
    measures=MEASURES,
    **SHAPE_PARAMS,
    # The same seq_len as flex_masks: its sliding-window kernel is then a hit in Inductor's
    # on-disk cache, and the sweep costs no second cold compile.
    seq_len=Param(1024, gpu_default=16384, minimum=1, help="tokens per sequence (N)"),
    min_window=Param(
        64, gpu_default=128, minimum=1, help="narrowest window; doubled up to seq_len"
    ),
)
def flex_sparsity_sweep(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, min_window
) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    flex = compiled_flex_attention()
    window = torch.tensor(min_window, device=ctx.device)
    mask_mod = sliding_window(window)  # one mod, one kernel: only the tensor changes
    widths = []
    w = min_window
    while w < seq_len:
        widths.append(w)
        w *= 2
    widths.append(seq_len)
    compile_s = None

    def measure(point):
        nonlocal compile_s
        window.fill_(point["window"])
        block_mask = block_mask_for(mask_mod, seq_len, ctx.device)
        counts = block_counts(block_mask)
        run = lambda: flex(q, k, v, block_mask=block_mask)  # noqa: E731
        if compile_s is None:
            started = time.perf_counter()
            run()
            synchronize(ctx.device)
            compile_s = time.perf_counter() - started
        t = time_callable(run, ctx.device)  # rounds: each width's spread is kept
        return {
            "computed_fraction": 1 - counts["skipped"] / counts["total"],
            "skipped_fraction": counts["skipped"] / counts["total"],
            "partial_blocks": counts["partial"],
            "full_blocks": counts["full"],
            "time_us": t.median_us,
            "time_low_us": t.low_us,
            "time_high_us": t.high_us,
        }

    table, notes = sweep(
        [{"window": w} for w in widths],
        measure,
        columns=(
            "window",
            "computed_fraction",
            "skipped_fraction",
            "partial_blocks",
            "full_blocks",
            "time_us",
            "time_low_us",
            "time_high_us",
        ),
        units={"time_us": "µs", "time_low_us": "µs", "time_high_us": "µs"},
    )
    # If time were proportional to tiles computed: the widest window's time, scaled down.
    records = table.records()
    last = next((r for r in reversed(records) if r["time_us"]), None)
    ideal = [
        last["time_us"] * r["computed_fraction"] / last["computed_fraction"]
        if last and r["computed_fraction"] is not None
        else None
        for r in records
    ]
    table = Table(
        columns=(*table.columns, "proportional_us"),
        rows=tuple((*row, i) for row, i in zip(table.rows, ideal, strict=True)),
        units={**table.units, "proportional_us": "µs"},
    )
    return Observed(
        tables={"sweep": table},
        facts={"compile_s": round(compile_s or 0.0, 3), "widths": widths},
        notes=tuple(notes),
    )


@experiment(
    "flex_block_mask_cost",
    summary="What create_block_mask costs as seq_len grows: time, peak memory, and BlockMask size.",
    measures=MEASURES,
    max_seq_len=Param(
        4096, gpu_default=32768, minimum=128, help="largest seq_len (from 256, doubling)"
    ),
    mask=Param("causal", choices=("causal", "sliding_window", "document"), help="which mask_mod"),
)
def flex_block_mask_cost(ctx, *, max_seq_len, mask) -> Observed:
    seq_lens = []
    n = 256
    while n <= max_seq_len:
        seq_lens.append(n)
        n *= 2

    def measure(point):
        n = point["seq_len"]
        mask_mod, *_ = _mods(mask, n, 1, window=max(n // 8, 1), documents=4, device=ctx.device)
        build = lambda: block_mask_for(mask_mod, n, ctx.device)  # noqa: E731
        block_mask = build()
        mask_bytes = sum(
            t.numel() * t.element_size()
            for t in block_mask.as_tuple(flatten=True)
            if isinstance(t, torch.Tensor)
        )
        return {
            "build_us": time_callable(build, ctx.device, min_run_time=0.1).median_us,
            "peak_bytes": peak_memory_bytes(build, ctx.device),
            "block_mask_bytes": mask_bytes,
            "dense_mask_bytes": n * n,
            "skipped_fraction": block_counts(block_mask)["skipped"]
            / block_counts(block_mask)["total"],
        }

    table, notes = sweep(
        [{"seq_len": n} for n in seq_lens],
        measure,
        columns=(
            "seq_len",
            "build_us",
            "peak_bytes",
            "block_mask_bytes",
            "dense_mask_bytes",
            "skipped_fraction",
        ),
        units={
            "build_us": "µs",
            "peak_bytes": "B",
            "block_mask_bytes": "B",
            "dense_mask_bytes": "B",
        },
    )
    return Observed(tables={"cost": table}, notes=tuple(notes))
