# Experiments on KV-cache decode steps: multi-head vs grouped-query vs multi-query, the cost of a
# step as the cache grows and as the batch grows, and prefill against token-by-token decode.
#
# Timing one decode step over and over on the same cache would flatter small caches: a cache
# that fits in the chip's last-level cache (tens of MB on CPUs and GPUs alike) is then read
# from there instead of from DRAM/HBM. A model never sees that: between two visits to one
# layer's cache it reads every other layer's. So each step is timed across a stack of
# independent caches ("layers") whose total is at least `working_set_mb`, and reported per
# layer. The roofline ceilings (copy bandwidth, matmul FLOP/s) are `machine_ceilings`' (the
# numbers chapter 03 states): the renderers take that entry beside these.
#
# GPU sizes (one H200: ~4 TB/s HBM, 50 MB of L2; one eager decode step is ~5 ops, ~30-50 us
# of host time per layer, so a step that reads less than ~200 MB measures the launches):
#   decode_mha_gqa_mqa (batch 16, 32 heads, GQA 8 / MQA 1 k/v heads, 32768 tokens, D 128,
#     bf16): MHA reads 8.6 GB a layer (~2.2 ms), GQA 2.1 GB, MQA 268 MB (~70 us): every row
#     reads for longer than its launches take, so the table measures bytes. 8 rows of ~53
#     timed steps, the repeat_kv rows touching up to ~20 GB each: ~10 s.
#   decode_cache_sweep (batch 8, 32/8/1 heads, D 128, 512..65536 tokens): the short caches are
#     launch-bound on purpose (the page says so); up to 128 layers of ~40 us: 24 points of
#     <= 0.4 s: ~10 s.
#   decode_batch_sweep (32/8 heads, 8192 tokens, batch 1..64): 33.5 MB per sequence, 2.1 GB at
#     64: from launch-bound to bandwidth-bound: ~3 s.
#   decode_prefill_vs_decode (batch 8, 32/8 heads, 2048 tokens): 2048 decode steps (~80 ms of
#     launches, ~17 ms of bytes) per run, 12 runs: ~2 s.
from __future__ import annotations

import math
from dataclasses import replace

from torch.profiler import profile

from attention_docs.analytic.decode import decode_cost, decode_step_costs
from attention_docs.attention.decode import IMPLS, KVCache, decode_step, prefill
from attention_docs.attention.naive import STEPS
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.registry import ExperimentError, Observed, Param, experiment
from attention_docs.inputs import dtype_name, make_qkv, resolve_dtype
from attention_docs.measurements.schema import Table
from attention_docs.profiling.timing import ROUNDS, time_callable, time_callables

MEASURES = ("attention/decode.py", "attention/naive.py", "analytic/decode.py", "inputs.py")
MAX_LAYERS = 128  # tiny caches would need thousands of layers; dispatch dominates them anyway
FILL_CHUNK = 512  # tokens drawn at random once, then tiled: drawing GBs would dominate the run

SHAPE = {
    "batch_size": Param(1, gpu_default=8, minimum=1, help="sequences decoded together"),
    "num_heads": Param(16, gpu_default=32, minimum=1, help="query heads"),
    "head_dim": Param(64, gpu_default=128, minimum=1, help="features per head (D)"),
    "dtype": Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
}
# 256 MB is five times an H200's L2 (and far more than a CPU's last-level cache).
WORKING_SET = Param(
    64,
    gpu_default=256,
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


TELLING_OPS = ("aten::_scaled_dot_product", "aten::_flash_attention", "aten::_efficient_attention")


def sdpa_ops(fn) -> list[str]:
    """The ATen ops one call of an SDPA path ran that say how it attended: the backend's own op
    (`aten::_scaled_dot_product_flash_attention...`, `..._attention_math`...) and any copy of
    k/v it made for grouped heads (`aten::repeat_interleave`), in the order first seen."""
    with profile() as prof:
        fn()
    names = []
    for event in prof.events():
        name = event.name
        telling = name.startswith(TELLING_OPS) or name == "aten::repeat_interleave"
        if telling and name not in names:
            names.append(name)
    return names


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
    record_ops: bool = False,
) -> dict:
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

    t = time_callable(step, ctx.device, min_run_time=0.1)
    result = {
        "layers": layers,
        "cache_mb": cost.cache_bytes / 1e6,
        "time_us": t.median_us / layers,
        "low_us": t.low_us / layers,
        "high_us": t.high_us / layers,
        "gbs": cost.bytes / (t.median_us / layers) / 1e3,
        "gflops": cost.flops / (t.median_us / layers) / 1e3,
        "intensity": cost.intensity,
        "bytes": cost.bytes,
        "flops": cost.flops,
    }
    if record_ops:
        cache = caches[0]
        cache.truncate(cache_len - 1)
        result["ops"] = sdpa_ops(lambda: decode_step(q, k_new, v_new, cache, impl=impl))
    return result


@experiment(
    "decode_mha_gqa_mqa",
    summary="One decode step with multi-head, grouped-query and multi-query attention: cache "
    "size, time per token with its spread, achieved bandwidth and FLOP rate, and the ops "
    "SDPA ran. The ceilings they are placed under are machine_ceilings'.",
    measures=MEASURES,
    **{
        **SHAPE,
        "batch_size": Param(1, gpu_default=16, minimum=1, help="sequences decoded together"),
    },
    gqa_kv_heads=KV_HEADS,
    cache_len=Param(2048, gpu_default=32768, minimum=1, help="tokens in the cache (M)"),
    working_set_mb=WORKING_SET,
)
def decode_mha_gqa_mqa(
    ctx, *, batch_size, num_heads, head_dim, dtype, gqa_kv_heads, cache_len, working_set_mb
) -> Observed:
    points = [
        {"variant": name, "impl": impl, "num_kv_heads": kv_heads}
        for name, kv_heads in _variants(num_heads, gqa_kv_heads)
        for impl in IMPLS
        if not (impl == "naive_repeat_kv" and kv_heads == num_heads)  # nothing to repeat
    ]
    ops: dict[str, list[str]] = {}

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
            record_ops=point["impl"] == "sdpa",
        )
        if "ops" in r:
            ops[point["variant"]] = r.pop("ops")
        return {**r, "label": f"{point['variant']} · {point['impl']}"}

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
            "low_us",
            "high_us",
            "gbs",
            "gflops",
        ),
        units={
            "cache_mb": "MB",
            "intensity": "FLOP/B",
            "time_us": "µs",
            "low_us": "µs",
            "high_us": "µs",
            "gbs": "GB/s",
            "gflops": "GFLOP/s",
        },
    )
    return Observed(
        tables={"variants": table},
        facts={"dtype": dtype_name(resolve_dtype(dtype)), "sdpa_ops": ops, "rounds": ROUNDS},
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
            row[f"{name} low"] = r["low_us"]
            row[f"{name} high"] = r["high_us"]
            row[f"{name} GB/s"] = r["gbs"]
            row[f"{name} layers"] = r["layers"]
        return row

    names = [n for n, _ in variants]
    table, notes = sweep(
        [{"cache_len": n} for n in lengths],
        measure,
        columns=(
            "cache_len",
            *names,
            *(f"{n} {part}" for n in names for part in ("low", "high", "GB/s", "layers")),
        ),
        units={
            "cache_len": "tokens",
            **{f"{n}{part}": "µs" for n in names for part in ("", " low", " high")},
            **{f"{n} GB/s": "GB/s" for n in names},
        },
    )
    facts = {f"{n}_kv_heads": h for n, h in variants}
    return Observed(tables={"cache_sweep": table}, facts=facts, notes=tuple(notes))


@experiment(
    "decode_batch_sweep",
    summary="Decode steps for growing batches: time per step with its spread, per token, and "
    "tokens per second.",
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
            "step_low_us": r["low_us"],
            "step_high_us": r["high_us"],
            "token_us": per_token,
            "tokens_per_s": 1e6 / per_token,
            "bytes_mb": r["bytes"] / 1e6,
            "gbs": r["gbs"],
            "layers": r["layers"],
        }

    table, notes = sweep(
        [{"batch_size": b} for b in sizes],
        measure,
        columns=(
            "batch_size",
            "step_us",
            "step_low_us",
            "step_high_us",
            "token_us",
            "tokens_per_s",
            "bytes_mb",
            "gbs",
            "layers",
        ),
        units={
            "step_us": "µs",
            "step_low_us": "µs",
            "step_high_us": "µs",
            "token_us": "µs",
            "tokens_per_s": "per layer",
            "bytes_mb": "MB",
            "gbs": "GB/s",
        },
    )
    return Observed(tables={"batch_sweep": table}, facts={"rounds": ROUNDS}, notes=tuple(notes))


@experiment(
    "decode_prefill_vs_decode",
    summary="The same tokens processed all at once (prefill) and one at a time (decode), timed "
    "in interleaved rounds with a decode step on a one-token cache (the per-step floor), and "
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
    target = resolve_dtype(dtype)

    def empty_cache(length: int) -> KVCache:
        return KVCache.empty(
            batch_size, num_kv_heads, length, head_dim, dtype=target, device=ctx.device
        )

    cache, tiny, full = empty_cache(n), empty_cache(1), empty_cache(n)
    prefill(q, k, v, full, impl=impl)
    last = slice(n - 1, n)

    def all_at_once() -> None:
        cache.truncate(0)
        prefill(q, k, v, cache, impl=impl)

    def one_at_a_time() -> None:
        cache.truncate(0)
        for t in range(n):
            s = slice(t, t + 1)
            decode_step(q[:, :, s], k[:, :, s], v[:, :, s], cache, impl=impl)

    def floor_step() -> None:  # a decode step with (almost) nothing to read: one cached token
        tiny.truncate(0)
        decode_step(q[:, :, :1], k[:, :, :1], v[:, :, :1], tiny, impl=impl)

    def profiled_step() -> None:  # the step profiled below, at the full cache, naive path
        full.truncate(n - 1)
        decode_step(q[:, :, last], k[:, :, last], v[:, :, last], full, impl="naive")

    # Causal attention does the same useful work either way: query t meets keys 0..t.
    useful_flops = 4.0 * batch_size * num_heads * head_dim * n * (n + 1) / 2
    e = decode_cost(1, 1, 1, 1, dtype).cache_bytes / 2  # bytes per element
    kv_token = 2.0 * batch_size * num_kv_heads * head_dim * e
    q_and_out = 2.0 * batch_size * num_heads * n * head_dim * e
    modes = {
        "prefill (all at once)": (all_at_once, kv_token * n + q_and_out),  # the cache read once
        # ... and re-read at every step
        "decode (one at a time)": (one_at_a_time, kv_token * n * (n + 1) / 2 + q_and_out),
    }
    timings = time_callables(
        {
            **{mode: fn for mode, (fn, _) in modes.items()},
            "floor": floor_step,
            "profiled": profiled_step,
        },
        ctx.device,
        min_run_time=0.6,
        cuda_runs=9,  # the decode loop is thousands of launches on a GPU: 3 runs per round
    )
    rows = []
    for mode, (_, moved) in modes.items():
        t = timings[mode]
        rows.append(
            (
                mode,
                n,
                t.median_us / 1e3,
                t.low_us / 1e3,
                t.high_us / 1e3,
                t.median_us / n,
                useful_flops / t.median_us / 1e3,
                moved / 1e6,
                moved / t.median_us / 1e3,
                useful_flops / moved,
            )
        )
    table = Table(
        columns=(
            "mode",
            "tokens",
            "total_ms",
            "low_ms",
            "high_ms",
            "token_us",
            "gflops",
            "bytes_mb",
            "gbs",
            "intensity",
        ),
        rows=tuple(rows),
        units={
            "total_ms": "ms",
            "low_ms": "ms",
            "high_ms": "ms",
            "token_us": "µs",
            "gflops": "GFLOP/s",
            "bytes_mb": "MB",
            "gbs": "GB/s",
            "intensity": "FLOP/B",
        },
    )
    # One decode step at the full cache, through the five labelled steps, under the profiler.
    observed = observe_forward(
        profiled_step,
        ctx,
        labels=("decode.append", *STEPS),
        costs=decode_step_costs(
            batch_size, num_heads, n, head_dim, dtype, num_kv_heads=num_kv_heads
        ),
    )
    floor, step = timings["floor"], timings["profiled"]
    return replace(
        observed,
        tables={"prefill_vs_decode": table},
        facts={
            **observed.facts,
            "profiled_impl": "naive",
            "profiled_cache_len": n,
            "rounds": ROUNDS,
            "floor_us": floor.median_us,
            "floor_low_us": floor.low_us,
            "floor_high_us": floor.high_us,
            "profiled_step_us": step.median_us,
            "profiled_step_low_us": step.low_us,
            "profiled_step_high_us": step.high_us,
        },
    )
