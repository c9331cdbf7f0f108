# Experiments on FlexAttention. `flex_masks`: each mask and score modification compiled and
# timed against its unfused fallback and SDPA with a dense mask; time against block sparsity;
# and one profiled step (BlockMask build, then the compiled call). `flex_block_mask_cost`:
# what create_block_mask costs as seq_len grows. Every distinct mod is a compile of seconds,
# so the sparsity sweep varies a tensor the mod closes over, never the mod (its point at the
# masks' window IS the masks table's time). Causal FlexAttention is `forward_times`' row.
from __future__ import annotations

import functools
import math
import time
import warnings

import torch
from torch.nn.attention.flex_attention import flex_attention
from torch.nn.functional import scaled_dot_product_attention
from torch.profiler import record_function

from attention_docs.attention.compiled import KERNEL_PROFILE_OPTIONS
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
from attention_docs.experiments._sweep import timed_sweep
from attention_docs.experiments.registry import (
    ExperimentError,
    Observed,
    Param,
    Work,
    experiment,
    shape_params,
)
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.device import synchronize
from attention_docs.profiling.memory import is_out_of_memory, peak_memory_bytes
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.timing import time_callables
from attention_docs.records.steps import FLEX_STEPS
from attention_docs.records.trace import attribute

MEASURES = (
    "attention/flex.py",
    "attention/compiled.py",
    "inputs.py",
    "profiling/timing.py",
    "profiling/memory.py",
)
MASKS = ("causal", "sliding_window", "alibi", "document")
# The masks whose compiled FlexAttention forward_times already times (its FlexAttention row).
TIMED_IN_FORWARD_TIMES = ("causal",)
SHAPE_PARAMS = shape_params(
    seq_len=Param(1024, gpu_default=4096, minimum=1, help="tokens per sequence (N)"),
    head_dim=Param(64, gpu_default=128, minimum=1, help="features per head (D)"),
)


def unavailable(exc: BaseException) -> str:
    """A status cell for a feature that failed to run here, in the error's own words."""
    first = (str(exc).strip().splitlines() or [""])[0][:160]
    return f"not available on this device: {type(exc).__name__}: {first}"


def _mods(
    kind: str, seq_len: int, num_heads: int, *, window: int, documents: int, device, sliding=None
):
    """(mask_mod, score_mod, explicit mask, explicit bias or None) for one mask kind;
    `sliding`: the sliding-window mod to use (its kernel shared with a sweep), of `window`."""
    if kind == "causal":
        return causal, None, explicit_mask("causal", seq_len), None
    if kind == "sliding_window":
        mod = sliding or sliding_window(torch.tensor(window, device=device))
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
    # Every mod is a kernel of its own.
    gpu_work=lambda p: Work(flex_compiles=4, timed=12, device_s=5.0),
    summary="FlexAttention's masks and score mods: compiled kernel vs unfused fallback vs SDPA "
    "with a dense mask; time against block sparsity; one profiled step.",
    measures=MEASURES,
    **SHAPE_PARAMS,
    window=Param(256, gpu_default=1024, minimum=1, help="sliding-window width in tokens"),
    documents=Param(4, minimum=1, help="documents packed into each sequence"),
    min_window=Param(64, gpu_default=128, minimum=1, help="narrowest window of the sweep"),
    masks=Param(
        ",".join(MASKS),
        help=f"comma-separated masks to compile, of {', '.join(MASKS)}; sliding_window "
        "always (the sparsity sweep times its kernel)",
    ),
)
def flex_masks(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, window, documents, min_window, masks
) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    flex = compiled_flex_attention()
    # The masks forward_times times are compiled here for their row (compile time, error)
    # with kernel profiling, and the profiled step below reuses that kernel: a CPU's
    # generated kernel then shows by name, and the causal kernel is compiled once, not twice.
    profiled_flex = torch.compile(flex_attention, options=KERNEL_PROFILE_OPTIONS)
    width = torch.tensor(window, device=ctx.device)
    sliding = sliding_window(width)  # one mod, one kernel: the sweep only changes `width`
    rows, notes, fallback_warnings = [], [], []
    for kind in _chosen(masks):
        mask_mod, score_mod, allowed, bias = _mods(
            kind,
            seq_len,
            num_heads,
            window=window,
            documents=documents,
            device=ctx.device,
            sliding=sliding,
        )
        started = time.perf_counter()
        block_mask = block_mask_for(mask_mod, seq_len, ctx.device)
        first_build_us = (time.perf_counter() - started) * 1e6
        counts = block_counts(block_mask)
        row = {
            "mask": kind,
            "score_mod": "alibi" if score_mod else "—",
            "first_build_us": first_build_us,
            "skipped_fraction": counts["skipped"] / counts["total"],
            "partial_blocks": counts["partial"],
            "full_blocks": counts["full"],
            "total_blocks": counts["total"],
            "status": "ok",
        }
        fns = {}
        try:
            run = functools.partial(
                profiled_flex if kind in TIMED_IN_FORWARD_TIMES else flex,
                q,
                k,
                v,
                score_mod=score_mod,
                block_mask=block_mask,
            )
            hits, misses = _fx_cache()
            started = time.perf_counter()
            out = run()
            synchronize(ctx.device)
            row["compile_s"] = time.perf_counter() - started
            new_hits, new_misses = _fx_cache()
            row["fx_cache"] = "hit" if new_hits > hits and new_misses == misses else "miss"
            row["rel_err_vs_float64"] = _rel_err(out, reference(q, k, v, allowed, bias))
            if kind not in (*TIMED_IN_FORWARD_TIMES, "sliding_window"):
                fns["compiled"] = run  # the sliding window's is the sweep's point below
        except Exception as exc:  # a backend this device lacks becomes a row, not a crash
            if is_out_of_memory(exc):
                raise
            row["status"] = unavailable(exc)
            notes.append(f"compiled flex_attention, mask {kind}: {row['status']}")

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
            timings = time_callables(
                fns, ctx.device, min_run_time=0.3 if ctx.device.type == "cpu" else 0.1, cuda_runs=48
            )
        fallback_warnings.extend(
            str(w.message) for w in caught if "without torch.compile" in str(w.message)
        )
        row |= timings
        rows.append(row)
    sliding_row = next(r for r in rows if r["mask"] == "sliding_window")
    swept, swept_notes = _sparsity(
        flex,
        sliding,
        width,
        qkv=(q, k, v),
        ctx=ctx,
        min_window=min_window,
        ok=sliding_row["status"] == "ok",
    )
    if sliding_row["status"] == "ok":
        sliding_row["compiled"] = next(r["time"] for r in swept.records() if r["window"] == window)
    columns = (
        "mask",
        "score_mod",
        "compile_s",
        "fx_cache",
        "compiled",
        "eager",
        "sdpa_dense",
        "first_build_us",
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
        units={"compile_s": "s", "first_build_us": "µs"}
        | dict.fromkeys(("compiled", "eager", "sdpa_dense"), "µs"),
    )
    profiled = _profile(profiled_flex, (q, k, v), ctx)
    return Observed(
        tables={"masks": table, "sweep": swept},
        timeline=profiled["timeline"],
        chrome=profiled["chrome"],
        facts={
            "fallback_warning": fallback_warnings[0] if fallback_warnings else None,
            "fallback_warnings": len(fallback_warnings),
            "block_size": list(block_mask.BLOCK_SIZE),
            "document_lengths": split_lengths(seq_len, documents),
            "compiled_timed_in_forward_times": list(TIMED_IN_FORWARD_TIMES),
            "timing_method": next(iter(timings.values())).method,
            "compiled_ran": profiled["ran"],
        },
        notes=tuple(notes + swept_notes),
    )


def _chosen(masks: str) -> tuple[str, ...]:
    """The masks `masks` names, in MASKS' order; an unknown one, or a list without the
    sliding window, is refused. (Without causal, the profiled step compiles its own.)"""
    names = {m.strip() for m in masks.split(",") if m.strip()}
    if unknown := sorted(names - set(MASKS)):
        raise ExperimentError(f"unknown mask {unknown[0]!r}; masks are {', '.join(MASKS)}")
    if "sliding_window" not in names:
        raise ExperimentError(
            "masks must include sliding_window: the sparsity sweep times its kernel"
        )
    return tuple(m for m in MASKS if m in names)


def _sparsity(flex, mod, width, *, qkv, ctx, min_window, ok):
    """Compiled sliding-window FlexAttention at widths from `min_window`, doubling, to the
    whole sequence: each width's BlockMask and its tiles, every width timed in the same
    interleaved rounds (`ok`: the kernel compiled; else no width is timed). One compiled
    kernel and one `mask_mod` serve every width: a width's call sets the window tensor only
    when the width before it was another, which is its round's first (warm-up) call. The
    masks table's window is one of the widths: its compiled time is this sweep's point."""
    q, k, v = qkv
    seq_len, window = q.size(-2), int(width)
    widths = sorted(
        {*(min_window * 2**i for i in range(32) if min_window * 2**i < seq_len), window, seq_len}
    )
    current = [None]

    def prepare(point):
        w = point["window"]
        width.fill_(w)
        block_mask = block_mask_for(mod, seq_len, ctx.device)
        counts = block_counts(block_mask)

        def call():
            if current[0] != w:
                width.fill_(w)
                current[0] = w
            return flex(q, k, v, block_mask=block_mask)

        fields = {
            "computed_fraction": 1 - counts["skipped"] / counts["total"],
            "partial_blocks": counts["partial"],
            "full_blocks": counts["full"],
        }
        return fields, call if ok else None

    table, notes = timed_sweep(
        [{"window": w} for w in widths],
        prepare,
        columns=("window", "computed_fraction", "partial_blocks", "full_blocks"),
        device=ctx.device,
        min_run_time=0.3 if ctx.device.type == "cpu" else 0.1,
        cuda_runs=48,
    )
    width.fill_(window)
    # If time were proportional to the tiles computed: the whole sequence's time, scaled.
    last = next((r for r in reversed(table.records()) if r["time"] is not None), None)
    ideal = [
        last["time"].time_us * r["computed_fraction"] / last["computed_fraction"]
        if last and r["computed_fraction"] is not None
        else None
        for r in table.records()
    ]
    table = Table(
        columns=(*table.columns, "proportional_us"),
        rows=tuple((*row, i) for row, i in zip(table.rows, ideal, strict=True)),
        units={**table.units, "proportional_us": "µs"},
    )
    return table, notes


def _profile(flex, qkv, ctx) -> dict:
    """One profiled step: build the causal BlockMask, then call `flex`, FlexAttention
    compiled with kernel profiling (so that a CPU's generated kernel shows by name), with it.
    `ran`: the ops and kernels the compiled call ran, by name."""
    q, k, v = qkv
    seq_len = q.size(-2)

    def step():
        with record_function(FLEX_STEPS[0]):
            block_mask = block_mask_for(causal, seq_len, ctx.device)
        with record_function(FLEX_STEPS[1]):
            flex(q, k, v, block_mask=block_mask)

    step()  # compiles outside the profile, if the causal row did not
    run = profile_callable(
        step, ctx.device, sched=Schedule(1, 1, 1), profile_memory=False, with_flops=False
    )
    trace = run.trace.in_step(run.trace.steps[-1].step)
    spans = attribute(trace, FLEX_STEPS[1:])[FLEX_STEPS[1]]
    ran = sorted({s.name for s in spans if s.kind in ("op", "kernel")})
    return {"timeline": trace, "chrome": run.chrome, "ran": ran}


@experiment(
    "flex_block_mask_cost",
    gpu_work=lambda p: Work(device_s=3.0),
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

    def prepare(point):
        n = point["seq_len"]
        mask_mod, *_ = _mods(mask, n, 1, window=max(n // 8, 1), documents=4, device=ctx.device)
        build = lambda: block_mask_for(mask_mod, n, ctx.device)  # noqa: E731
        block_mask = build()
        mask_bytes = sum(
            t.numel() * t.element_size()
            for t in block_mask.as_tuple(flatten=True)
            if isinstance(t, torch.Tensor)
        )
        counts = block_counts(block_mask)
        fields = {
            "peak_bytes": peak_memory_bytes(build, ctx.device),
            "block_mask_bytes": mask_bytes,
            "dense_mask_bytes": n * n,
            "skipped_fraction": counts["skipped"] / counts["total"],
        }
        return fields, build

    # Every length's build in the same interleaved rounds: the page fits a slope to them.
    columns = ("seq_len", "peak_bytes", "block_mask_bytes", "dense_mask_bytes", "skipped_fraction")
    table, notes = timed_sweep(
        [{"seq_len": n} for n in seq_lens],
        prepare,
        columns=columns,
        device=ctx.device,
        units=dict.fromkeys(("peak_bytes", "block_mask_bytes", "dense_mask_bytes"), "B"),
        time_column="build",
        min_run_time=0.1,
    )
    return Observed(tables={"cost": table}, notes=tuple(notes))
