# The experiment behind "Cost model first": this machine's two ceilings (a large matmul for
# FLOP/s, a large copy for bandwidth), which every chapter that sets a time against them
# reads (one fact, one number). The steps placed under them are naive_steps' (their structure:
# op calls, kernels and the gaps between them) and forward_times' (their unprofiled times).
from __future__ import annotations

from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.registry import Observed, Param, Work, count_items, experiment
from attention_docs.profiling.cache import last_level_cache
from attention_docs.profiling.ceilings import (
    COLUMNS,
    UNITS,
    ceiling_facts,
    ceiling_points,
    measure_point,
)


def past_the_cache(copy_mb: int, cache_bytes: int | None) -> int:
    """The largest copy in MiB: `copy_mb`, raised to four times a last-level cache of
    `cache_bytes` so that most of what it reads cannot already be in the cache."""
    if not cache_bytes:
        return copy_mb
    return max(copy_mb, -(-4 * cache_bytes // 2**20))


@experiment(
    "machine_ceilings",
    gpu_work=lambda p: Work(timed=count_items(p["dtypes"]) + 1, device_s=2.0),
    summary="This machine's ceilings: matmul FLOP/s per dtype and copy bandwidth, beside the spec sheet.",
    measures=("profiling/ceilings.py", "profiling/timing.py", "profiling/cache.py"),
    matmul_size=Param(2048, gpu_default=8192, minimum=16, help="largest matmul side n"),
    copy_mb=Param(
        128,
        gpu_default=2048,
        minimum=1,
        help="largest copied buffer, in MiB (raised to 4× the last-level cache: see past_cache)",
    ),
    past_cache=Param(
        True, help="raise copy_mb to 4× the last-level cache, so the bytes come from memory"
    ),
    dtypes=Param("float32", gpu_default="bfloat16,float32", help="comma-separated matmul dtypes"),
)
def machine_ceilings(ctx, *, matmul_size, copy_mb, past_cache, dtypes) -> Observed:
    """The one measurement of this device's ceilings that every chapter cites."""
    names = tuple(d.strip() for d in dtypes.split(",") if d.strip())
    # The bandwidth ceiling must come from memory, not a cache: a copy under the last-level
    # cache's size (480 MiB on some server CPUs) would measure the cache.
    cache = last_level_cache(ctx.device)
    copy_mb = past_the_cache(copy_mb, cache.size_bytes if cache and past_cache else None)
    points = ceiling_points(matmul_size=matmul_size, copy_mb=copy_mb, dtypes=names)
    # An out-of-memory copy must not skip the other kind: each kind stops on its own.
    table, notes = sweep(
        points,
        lambda point: measure_point(ctx.device, ctx.info, point),
        columns=COLUMNS,
        units=UNITS,
        stop_after_oom=False,
    )
    facts = {**ceiling_facts(table.records()), **(cache.to_facts() if cache else {})}
    return Observed(tables={"ceilings": table}, facts=facts, notes=tuple(notes))
