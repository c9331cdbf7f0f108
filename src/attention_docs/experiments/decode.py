# Experiments on KV-cache decode steps: multi-head vs grouped-query vs multi-query, the cost of a
# step as the cache grows and as the batch grows, and prefill against token-by-token decode.
#
# Timing one decode step over and over on the same cache would flatter small caches: a cache
# that fits in the chip's last-level cache (tens of MB on CPUs and GPUs alike) is then read
# from there instead of from DRAM/HBM. A model never sees that: between two visits to one
# layer's cache it reads every other layer's. So each step is timed across a stack of
# independent caches ("layers") whose total is at least `working_set_mb`, and reported per
# layer. The roofline ceilings (copy bandwidth, matmul FLOP/s) are measured here too, so
# that this chapter depends on no other chapter's experiment.
from __future__ import annotations

import math
from dataclasses import replace

import torch

from attention_docs.attention.decode import IMPLS, KVCache, decode_step, prefill
from attention_docs.attention.naive import STEPS
from attention_docs.decode_cost import decode_cost, decode_step_costs
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.registry import ExperimentError, Observed, Param, experiment
from attention_docs.inputs import dtype_name, make_qkv, resolve_dtype
from attention_docs.measurements.schema import Table
from attention_docs.profiling.timing import time_callable

MEASURES = ("attention/decode.py", "attention/naive.py", "decode_cost.py", "inputs.py")
MAX_LAYERS = 128  # tiny caches would need thousands of layers; dispatch dominates them anyway
FILL_CHUNK = 512  # tokens drawn at random once, then tiled: drawing GBs would dominate the run

SHAPE = {
    "batch_size": Param(1, gpu_default=8, minimum=1, help="sequences decoded together"),
    "num_heads": Param(16, gpu_default=32, minimum=1, help="query heads"),
    "head_dim": Param(64, gpu_default=128, minimum=1, help="features per head (D)"),
    "dtype": Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
}
WORKING_SET = Param(
    64,
    gpu_default=1024,
    minimum=1,
    help="MB one timed step reads at least, across layers (defeats the last-level cache)",
)
KV_HEADS = Param(4, gpu_default=8, minimum=1, help="k/v heads of the grouped-query variant")
IMPL = Param("sdpa", choices=IMPLS, help="how a step attends to the cache")


def _variants(num_heads: int, gqa_kv_heads: int) -> tuple[tuple[str, int], ...]:
    if num_heads % gqa_kv_heads or not 1 < gqa_kv_heads < num_heads:
        raise ExperimentError(
            f"gqa_kv_heads={gqa_kv_heads} must divide num_heads={num_heads} and lie strictly "
            "between 1 (multi-query) and num_heads (multi-head)"
        )
    return (("MHA", num_heads), ("GQA", gqa_kv_heads), ("MQA", 1))


def _ceilings(device: torch.device, dtype: torch.dtype, copy_mb: int) -> dict[str, float]:
    """This device's copy bandwidth and matmul throughput, measured now."""
    src = torch.ones(copy_mb * 2**20 // 4, device=device)  # float32 elements
    dst = torch.empty_like(src)
    copy = time_callable(lambda: dst.copy_(src), device)
    n = 8192 if device.type == "cuda" else 1024
    a = torch.randn(n, n, device=device).to(dtype)
    mm = time_callable(lambda: a @ a, device)
    return {
        "copy_gbs": 2 * src.numel() * 4 / copy.median_us / 1e3,  # read + write, as STREAM counts
        "copy_mb": src.numel() * 4 / 1e6,
        "matmul_gflops": 2 * n**3 / mm.median_us / 1e3,
        "matmul_n": n,
    }


def _filled_caches(
    layers: int, batch_size: int, num_kv_heads: int, length: int, head_dim: int, *, dtype, device
) -> list[KVCache]:
    """`layers` caches of `length` tokens, room for no more, filled with seeded values."""
    chunk = min(length, FILL_CHUNK)
    _, k, v = make_qkv(
        batch_size, 1, 1, head_dim, kv_seq_len=chunk, num_kv_heads=num_kv_heads, device=device
    )
    k, v = k.to(dtype), v.to(dtype)
    caches = []
    for _ in range(layers):
        cache = KVCache.empty(
            batch_size, num_kv_heads, length, head_dim, dtype=dtype, device=device
        )
        while cache.length < length:
            take = min(chunk, length - cache.length)
            cache.append(k[:, :, :take], v[:, :, :take])
        caches.append(cache)
    return caches


def _layers_for(touched_bytes: float, working_set_mb: int) -> int:
    return max(1, min(MAX_LAYERS, math.ceil(working_set_mb * 1e6 / touched_bytes)))


def _time_decode(
    ctx,
    *,
    batch_size: int,
    num_heads: int,
    num_kv_heads: int,
    cache_len: int,
    head_dim: int,
    dtype: str,
    impl: str,
    working_set_mb: int,
) -> dict[str, float]:
    """Time one decode step (append + attend) at `cache_len`, per layer, and what it moved."""
    cost = decode_cost(batch_size, num_heads, cache_len, head_dim, dtype, num_kv_heads=num_kv_heads)
    # repeat_kv writes and reads a copy of the cache per query head: memory touched too.
    groups = num_heads // num_kv_heads
    touched = cost.cache_bytes * (1 + 2 * groups if impl == "naive_repeat_kv" else 1)
    layers = _layers_for(touched, working_set_mb)
    target = resolve_dtype(dtype)
    caches = _filled_caches(
        layers, batch_size, num_kv_heads, cache_len, head_dim, dtype=target, device=ctx.device
    )
    q, k_new, v_new = make_qkv(
        batch_size,
        num_heads,
        1,
        head_dim,
        num_kv_heads=num_kv_heads,
        dtype=dtype,
        device=ctx.device,
    )

    def step() -> None:
        for cache in caches:
            cache.truncate(cache_len - 1)
            decode_step(q, k_new, v_new, cache, impl=impl)

    per_layer_us = time_callable(step, ctx.device, min_run_time=0.1).median_us / layers
    return {
        "layers": layers,
        "cache_mb": cost.cache_bytes / 1e6,
        "time_us": per_layer_us,
        "gbs": cost.bytes / per_layer_us / 1e3,
        "gflops": cost.flops / per_layer_us / 1e3,
        "intensity": cost.intensity,
        "bytes": cost.bytes,
        "flops": cost.flops,
    }


@experiment(
    "decode_mha_gqa_mqa",
    summary="One decode step with multi-head, grouped-query and multi-query attention: cache "
    "size, time per token, achieved bandwidth, and the roofline they sit on.",
    measures=MEASURES,
    **SHAPE,
    gqa_kv_heads=KV_HEADS,
    cache_len=Param(2048, gpu_default=8192, minimum=1, help="tokens in the cache (M)"),
    working_set_mb=WORKING_SET,
)
def decode_mha_gqa_mqa(
    ctx, *, batch_size, num_heads, head_dim, dtype, gqa_kv_heads, cache_len, working_set_mb
) -> Observed:
    ceilings = _ceilings(ctx.device, resolve_dtype(dtype), working_set_mb)
    points = [
        {"variant": name, "impl": impl, "num_kv_heads": kv_heads}
        for name, kv_heads in _variants(num_heads, gqa_kv_heads)
        for impl in IMPLS
        if not (impl == "naive_repeat_kv" and kv_heads == num_heads)  # nothing to repeat
    ]

    def measure(point):
        r = _time_decode(
            ctx,
            batch_size=batch_size,
            num_heads=num_heads,
            num_kv_heads=point["num_kv_heads"],
            cache_len=cache_len,
            head_dim=head_dim,
            dtype=dtype,
            impl=point["impl"],
            working_set_mb=working_set_mb,
        )
        return {
            **r,
            "label": f"{point['variant']} · {point['impl']}",
            "pct_copy": 100 * r["gbs"] / ceilings["copy_gbs"],
        }

    table, notes = sweep(
        points,
        measure,
        columns=(
            "label",
            "variant",
            "impl",
            "num_kv_heads",
            "layers",
            "cache_mb",
            "intensity",
            "time_us",
            "gbs",
            "pct_copy",
            "gflops",
        ),
        units={
            "cache_mb": "MB",
            "intensity": "FLOP/B",
            "time_us": "µs",
            "gbs": "GB/s",
            "pct_copy": "% of copy",
            "gflops": "GFLOP/s",
        },
    )
    return Observed(
        tables={"variants": table},
        facts={**ceilings, "dtype": dtype_name(resolve_dtype(dtype))},
        notes=tuple(notes),
    )


@experiment(
    "decode_cache_sweep",
    summary="Time of one decode step as the cache grows, for multi-head, grouped-query and "
    "multi-query attention.",
    measures=MEASURES,
    **SHAPE,
    gqa_kv_heads=KV_HEADS,
    min_cache_len=Param(512, gpu_default=512, minimum=1, help="shortest cache (tokens)"),
    max_cache_len=Param(8192, gpu_default=65536, minimum=1, help="longest cache (tokens)"),
    impl=IMPL,
    working_set_mb=WORKING_SET,
)
def decode_cache_sweep(
    ctx,
    *,
    batch_size,
    num_heads,
    head_dim,
    dtype,
    gqa_kv_heads,
    min_cache_len,
    max_cache_len,
    impl,
    working_set_mb,
) -> Observed:
    variants = _variants(num_heads, gqa_kv_heads)
    ceilings = _ceilings(ctx.device, resolve_dtype(dtype), working_set_mb)
    lengths = []
    length = min_cache_len
    while length <= max_cache_len:
        lengths.append(length)
        length *= 2

    def measure(point):
        row = {}
        for name, kv_heads in variants:
            r = _time_decode(
                ctx,
                batch_size=batch_size,
                num_heads=num_heads,
                num_kv_heads=kv_heads,
                cache_len=point["cache_len"],
                head_dim=head_dim,
                dtype=dtype,
                impl=impl,
                working_set_mb=working_set_mb,
            )
            row[name] = r["time_us"]
            row[f"{name} GB/s"] = r["gbs"]
        return row

    names = [n for n, _ in variants]
    table, notes = sweep(
        [{"cache_len": n} for n in lengths],
        measure,
        columns=("cache_len", *names, *(f"{n} GB/s" for n in names)),
        units={"cache_len": "tokens", **dict.fromkeys(names, "µs")},
    )
    facts = {**ceilings, **{f"{n}_kv_heads": h for n, h in variants}}
    return Observed(tables={"cache_sweep": table}, facts=facts, notes=tuple(notes))


@experiment(
    "decode_batch_sweep",
    summary="Decode steps for growing batches: time per step, per token, and tokens per second.",
    measures=MEASURES,
    num_heads=SHAPE["num_heads"],
    num_kv_heads=KV_HEADS,
    head_dim=SHAPE["head_dim"],
    dtype=SHAPE["dtype"],
    cache_len=Param(2048, gpu_default=8192, minimum=1, help="tokens in each sequence's cache"),
    max_batch_size=Param(16, gpu_default=64, minimum=1, help="largest batch (powers of two)"),
    impl=IMPL,
    working_set_mb=WORKING_SET,
)
def decode_batch_sweep(
    ctx,
    *,
    num_heads,
    num_kv_heads,
    head_dim,
    dtype,
    cache_len,
    max_batch_size,
    impl,
    working_set_mb,
) -> Observed:
    if num_heads % num_kv_heads:
        raise ExperimentError(f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}")
    ceilings = _ceilings(ctx.device, resolve_dtype(dtype), working_set_mb)
    sizes = [2**i for i in range(int(math.log2(max_batch_size)) + 1)]

    def measure(point):
        r = _time_decode(
            ctx,
            batch_size=point["batch_size"],
            num_heads=num_heads,
            num_kv_heads=num_kv_heads,
            cache_len=cache_len,
            head_dim=head_dim,
            dtype=dtype,
            impl=impl,
            working_set_mb=working_set_mb,
        )
        per_token = r["time_us"] / point["batch_size"]
        return {
            "step_us": r["time_us"],
            "token_us": per_token,
            "tokens_per_s": 1e6 / per_token,
            "bytes_mb": r["bytes"] / 1e6,
            "gbs": r["gbs"],
            "pct_copy": 100 * r["gbs"] / ceilings["copy_gbs"],
        }

    table, notes = sweep(
        [{"batch_size": b} for b in sizes],
        measure,
        columns=(
            "batch_size",
            "step_us",
            "token_us",
            "tokens_per_s",
            "bytes_mb",
            "gbs",
            "pct_copy",
        ),
        units={
            "step_us": "µs",
            "token_us": "µs",
            "tokens_per_s": "per layer",
            "bytes_mb": "MB",
            "gbs": "GB/s",
            "pct_copy": "% of copy",
        },
    )
    return Observed(tables={"batch_sweep": table}, facts=ceilings, notes=tuple(notes))


@experiment(
    "decode_prefill_vs_decode",
    summary="The same tokens processed all at once (prefill) and one at a time (decode), and "
    "the profile of one decode step.",
    measures=MEASURES,
    **SHAPE,
    num_kv_heads=KV_HEADS,
    prompt_len=Param(256, gpu_default=2048, minimum=2, help="tokens processed (N)"),
    impl=IMPL,
)
def decode_prefill_vs_decode(
    ctx, *, batch_size, num_heads, head_dim, dtype, num_kv_heads, prompt_len, impl
) -> Observed:
    if num_heads % num_kv_heads:
        raise ExperimentError(f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}")
    n = prompt_len
    q, k, v = make_qkv(
        batch_size,
        num_heads,
        n,
        head_dim,
        num_kv_heads=num_kv_heads,
        dtype=dtype,
        device=ctx.device,
    )
    cache = KVCache.empty(
        batch_size, num_kv_heads, n, head_dim, dtype=resolve_dtype(dtype), device=ctx.device
    )

    def all_at_once() -> None:
        cache.truncate(0)
        prefill(q, k, v, cache, impl=impl)

    def one_at_a_time() -> None:
        cache.truncate(0)
        for t in range(n):
            s = slice(t, t + 1)
            decode_step(q[:, :, s], k[:, :, s], v[:, :, s], cache, impl=impl)

    # Causal attention does the same useful work either way: query t meets keys 0..t.
    useful_flops = 4.0 * batch_size * num_heads * head_dim * n * (n + 1) / 2
    e = decode_cost(1, 1, 1, 1, dtype).cache_bytes / 2  # bytes per element
    kv_token = 2.0 * batch_size * num_kv_heads * head_dim * e
    q_and_out = 2.0 * batch_size * num_heads * n * head_dim * e
    moved = {
        "prefill (all at once)": kv_token * n + q_and_out,  # the cache read once
        "decode (one at a time)": kv_token * n * (n + 1) / 2 + q_and_out,  # re-read every step
    }
    rows = []
    for mode, fn in (
        ("prefill (all at once)", all_at_once),
        ("decode (one at a time)", one_at_a_time),
    ):
        total_us = time_callable(fn, ctx.device).median_us
        rows.append(
            (
                mode,
                n,
                total_us / 1e3,
                total_us / n,
                useful_flops / total_us / 1e3,
                moved[mode] / 1e6,
                moved[mode] / total_us / 1e3,
                useful_flops / moved[mode],
            )
        )
    table = Table(
        columns=(
            "mode",
            "tokens",
            "total_ms",
            "token_us",
            "gflops",
            "bytes_mb",
            "gbs",
            "intensity",
        ),
        rows=tuple(rows),
        units={
            "total_ms": "ms",
            "token_us": "µs",
            "gflops": "GFLOP/s",
            "bytes_mb": "MB",
            "gbs": "GB/s",
            "intensity": "FLOP/B",
        },
    )
    # One decode step at the full cache, through the five labelled steps, under the profiler.
    last = slice(n - 1, n)

    def one_step() -> None:
        cache.truncate(n - 1)
        decode_step(q[:, :, last], k[:, :, last], v[:, :, last], cache, impl="naive")

    cache.truncate(0)
    prefill(q, k, v, cache, impl=impl)
    observed = observe_forward(
        one_step,
        ctx,
        labels=("decode.append", *STEPS),
        costs=decode_step_costs(
            batch_size, num_heads, n, head_dim, dtype, num_kv_heads=num_kv_heads
        ),
    )
    return replace(
        observed,
        tables={"prefill_vs_decode": table},
        facts={**observed.facts, "profiled_impl": "naive", "profiled_cache_len": n},
    )
