# Experiments on KV-cache decode steps. `decode_steps` is the one experiment that times a
# decode step: multi-head, grouped-query and multi-query attention on every path at one base
# point, the cache growing and the batch growing, every point interleaved round by round so
# that the chapter's table, sweeps and roofline state one value per point.
# `decode_prefill_vs_decode` runs the same tokens all at once and one at a time.
#
# Timing one step over and over on one cache would flatter small caches: a cache that fits
# the last-level cache is read from there, which a model never sees (it reads every other
# layer's cache in between). So each point is timed across a stack of independent caches
# ("layers") of at least `working_set_mb` in all, and reported per layer. The roofline's
# ceilings are `machine_ceilings`'.
from __future__ import annotations

import functools
import math
from dataclasses import replace

from torch.profiler import profile

from attention_docs.analytic.decode import decode_step_costs
from attention_docs.attention.decode import IMPLS, KVCache, decode_step, prefill
from attention_docs.attention.naive import STEPS
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments.forward import unavailable
from attention_docs.experiments.naive import with_per_forward
from attention_docs.experiments.registry import ExperimentError, Observed, Param, Work, experiment
from attention_docs.inputs import dtype_name, make_qkv, resolve_dtype
from attention_docs.measurements.schema import Table
from attention_docs.profiling.timing import time_callables
from attention_docs.records.timing import Timing

MEASURES = ("attention/decode.py", "attention/naive.py", "analytic/decode.py", "inputs.py")
MAX_LAYERS = 128  # tiny caches would need thousands of layers; dispatch dominates them anyway
FILL_CHUNK = 512  # tokens drawn at random once, then tiled: drawing GBs would dominate the run
VARIANTS = ("MHA", "GQA", "MQA")
STEP_COLUMNS = ("variant", "impl", "batch_size", "num_kv_heads", "cache_len", "layers", "time")

SHAPE = {
    "num_heads": Param(16, gpu_default=32, minimum=1, help="query heads"),
    "head_dim": Param(64, gpu_default=128, minimum=1, help="features per head (D)"),
    "dtype": Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
}
KV_HEADS = Param(4, gpu_default=8, minimum=1, help="k/v heads of the grouped-query variant")


def _bytes_per(dtype: str) -> int:
    return resolve_dtype(dtype).itemsize


def _cache_bytes(batch_size, num_kv_heads, cache_len, head_dim, dtype) -> float:
    return 2.0 * batch_size * num_kv_heads * cache_len * head_dim * _bytes_per(dtype)


def _layers_for(cache_bytes: float, working_set_mb: int) -> int:
    return max(1, min(MAX_LAYERS, math.ceil(working_set_mb * 1e6 / cache_bytes)))


def _kv_heads(num_heads: int, gqa_kv_heads: int) -> dict[str, int]:
    if num_heads % gqa_kv_heads or not 1 < gqa_kv_heads < num_heads:
        raise ExperimentError(
            f"gqa_kv_heads={gqa_kv_heads} must divide num_heads={num_heads} and lie strictly "
            "between 1 (multi-query) and num_heads (multi-head)"
        )
    return dict(zip(VARIANTS, (num_heads, gqa_kv_heads, 1), strict=True))


def _doublings(low: int, high: int) -> list[int]:
    return [low * 2**i for i in range(int(math.log2(high / low)) + 1)] if high >= low else []


def step_points(params) -> list[tuple[str, str, int, int]]:
    """Every (variant, impl, batch_size, cache_len) the experiment times, each once: every
    path at the base point, the three variants on SDPA as the cache grows at batch 1, and
    grouped-query on SDPA as the batch grows at the base cache."""
    p = params
    base = [
        (v, impl, p["batch_size"], p["cache_len"])
        for v in VARIANTS
        for impl in IMPLS
        if not (impl == "naive_repeat_kv" and v == "MHA")  # nothing to repeat
    ]
    caches = [
        (v, "sdpa", 1, m)
        for m in _doublings(p["min_cache_len"], p["max_cache_len"])
        for v in VARIANTS
    ]
    batches = [("GQA", "sdpa", b, p["cache_len"]) for b in _doublings(1, p["max_batch_size"])]
    return list(dict.fromkeys(base + caches + batches))


def _estimate_bytes(params) -> float:
    """The caches every point holds at once (each at least the working set)."""
    heads = _kv_heads(params["num_heads"], params["gqa_kv_heads"])
    sets = {(b, heads[v], m) for v, _, b, m in step_points(params)}
    floor = params["working_set_mb"] * 1e6
    return sum(
        max(floor, _cache_bytes(b, h, m, params["head_dim"], params["dtype"])) for b, h, m in sets
    )


def _filled_caches(layers, batch_size, num_kv_heads, length, head_dim, *, dtype, device):
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


def _step(caches: list[KVCache], q, k_new, v_new, *, impl: str = "sdpa") -> None:
    """One decode step of every layer: forget the last token, append it again, attend."""
    for cache in caches:
        cache.truncate(cache.max_seq_len - 1)
        decode_step(q, k_new, v_new, cache, impl=impl)


def per_layer(t: Timing, layers: int) -> Timing:
    """A timing of `layers` steps, one after another, as the time of one: every round divided."""
    return t.scaled(1 / layers)


@experiment(
    "decode_steps",
    # Bytes and launches, no compiles: one timed call per point.
    gpu_work=lambda p: Work(timed=(n := len(step_points(p))), device_s=0.3 * n),
    summary="One decode step (append + attend), per layer: MHA, GQA and MQA on every path at "
    "a base point, the cache growing at batch 1, the batch growing for GQA — each point timed "
    "once, all interleaved; plus the ops SDPA ran.",
    measures=MEASURES,
    estimate_bytes=_estimate_bytes,
    **SHAPE,
    gqa_kv_heads=KV_HEADS,
    batch_size=Param(1, gpu_default=8, minimum=1, help="sequences at the base point"),
    cache_len=Param(2048, gpu_default=16384, minimum=1, help="cached tokens at the base point"),
    min_cache_len=Param(512, minimum=1, help="shortest cache of the cache sweep (batch 1)"),
    max_cache_len=Param(8192, gpu_default=65536, minimum=1, help="longest cache of the sweep"),
    max_batch_size=Param(16, gpu_default=64, minimum=1, help="largest batch (powers of two)"),
    working_set_mb=Param(
        64,
        gpu_default=256,  # five times an H200's L2 (and far more than a CPU's last-level cache)
        minimum=1,
        help="MB one timed step reads at least, across layers (defeats the last-level cache)",
    ),
)
def decode_steps(ctx, **p) -> Observed:
    heads = _kv_heads(p["num_heads"], p["gqa_kv_heads"])
    dtype, d = p["dtype"], p["head_dim"]
    points = step_points(p)
    caches, calls, rows, ops = {}, {}, {}, {}
    for variant, impl, b, m in points:
        key = (b, heads[variant], m)
        if key not in caches:
            layers = _layers_for(_cache_bytes(*key, d, dtype), p["working_set_mb"])
            caches[key] = _filled_caches(
                layers, *key[:2], m, d, dtype=resolve_dtype(dtype), device=ctx.device
            )
        q, k_new, v_new = make_qkv(
            b, p["num_heads"], 1, d, num_kv_heads=heads[variant], dtype=dtype, device=ctx.device
        )

        step = functools.partial(_step, caches[key], q, k_new, v_new, impl=impl)
        row = (variant, impl, b, heads[variant], m, len(caches[key]))
        try:
            step()
        except Exception as exc:  # a path this device cannot run: say why, time the rest
            rows[row] = unavailable(exc)
            continue
        rows[row] = "ok"
        calls[row] = step
        if impl == "sdpa" and (b, m) == (p["batch_size"], p["cache_len"]):
            ops[variant] = sdpa_ops(functools.partial(_step, caches[key][:1], q, k_new, v_new))
    timings = time_callables(calls, ctx.device, min_run_time=0.1)
    table = Table(
        (*STEP_COLUMNS, "status"),
        tuple(
            (*row, per_layer(timings[row], row[-1]) if row in timings else None, status)
            for row, status in rows.items()
        ),
        {"time": "µs", "cache_len": "tokens"},
    )
    return Observed(
        tables={"steps": table},
        facts={
            "dtype": dtype_name(resolve_dtype(dtype)),
            "kv_heads": heads,
            "sdpa_ops": ops,
        },
    )


# Modes of decode_prefill_vs_decode's `times` table.
PREFILL, DECODE = "prefill (all at once)", "decode (one at a time)"
FLOOR, PROFILED = "decode step, one cached token", "decode step at the full cache (naive)"


@experiment(
    "decode_prefill_vs_decode",
    gpu_work=lambda p: Work(timed=2, device_s=1.5),
    summary="The same tokens processed all at once (prefill) and one at a time (decode), timed "
    "in interleaved rounds with a decode step on a one-token cache (the per-step floor) and "
    "the profiled step unprofiled; the profile of one decode step.",
    measures=MEASURES,
    estimate_bytes=None,
    batch_size=Param(1, gpu_default=8, minimum=1, help="sequences decoded together"),
    **SHAPE,
    num_kv_heads=KV_HEADS,
    prompt_len=Param(256, gpu_default=2048, minimum=2, help="tokens processed (N)"),
    impl=Param("sdpa", choices=IMPLS, help="how a step attends to the cache"),
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

    def empty_cache(length: int) -> KVCache:
        return KVCache.empty(
            batch_size,
            num_kv_heads,
            length,
            head_dim,
            dtype=resolve_dtype(dtype),
            device=ctx.device,
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

    modes = {PREFILL: (all_at_once, n), DECODE: (one_at_a_time, n), FLOOR: (floor_step, 1)}
    modes[PROFILED] = (profiled_step, n)
    timings = time_callables(
        {mode: fn for mode, (fn, _) in modes.items()},
        ctx.device,
        min_run_time=0.6,
        cuda_runs=9,  # the decode loop is thousands of launches on a GPU: 3 runs per round
    )
    table = Table(
        ("mode", "tokens", "cache_len", "time"),
        tuple(
            (mode, n if mode in (PREFILL, DECODE) else 1, cache_len, timings[mode])
            for mode, (_, cache_len) in modes.items()
        ),
        {"time": "µs"},
    )
    # One decode step at the full cache, through the five labelled steps, under the profiler
    # (for shares: no memory or FLOP counting, which would inflate the small ops).
    observed = observe_forward(
        profiled_step,
        ctx,
        labels=("decode.append", *STEPS),
        costs=decode_step_costs(
            batch_size, num_heads, n, head_dim, dtype, num_kv_heads=num_kv_heads
        ),
        profile_memory=False,
        with_flops=False,
    )
    observed = with_per_forward(observed, ("decode.append", *STEPS))
    return replace(
        observed,
        tables={"times": table, **observed.tables},
        facts={**observed.facts, "profiled_impl": "naive"},
    )
