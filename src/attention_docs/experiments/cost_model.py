# Experiments for "Cost model first": this machine's two ceilings (a large matmul for FLOP/s,
# a large copy for bandwidth), and naive attention's five steps measured next to them so that
# each step can be placed on the roofline. Each experiment measures everything it needs:
# a stored entry must stand on its own.
from __future__ import annotations

import torch

from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.cost import itemsize, step_costs
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.naive import SHAPE_PARAMS
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv, resolve_dtype
from attention_docs.measurements.schema import Table
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.timing import time_callable

# Spec-sheet keys (profiling/device.py SPEC_SHEETS) for the matmul ceiling of each dtype.
SPEC_KEYS = {"bfloat16": "bf16_tflops", "float16": "fp16_tflops", "float32": "fp32_tflops"}
CEILING_COLUMNS = (
    "kind",
    "dtype",
    "size",
    "flops",
    "bytes",
    "time_us",
    "flop_per_s",
    "bytes_per_s",
    "spec_per_s",
)
CEILING_UNITS = {
    "bytes": "B",
    "time_us": "µs",
    "flop_per_s": "FLOP/s",
    "bytes_per_s": "B/s",
    "spec_per_s": "/s",
}


def _spec(ctx, key: str, scale: float) -> float | None:
    spec = ctx.info.spec or {}
    return spec[key] * scale if key in spec else None


# --8<-- [start:ceilings]
def matmul_ceiling(ctx, n: int, dtype: str) -> dict:
    """FLOP/s of an n×n by n×n matmul: 2·n³ FLOPs (a multiply and an add per term)."""
    a = torch.randn(n, n, device=ctx.device).to(resolve_dtype(dtype))
    b = torch.randn(n, n, device=ctx.device).to(resolve_dtype(dtype))
    t = time_callable(lambda: a @ b, ctx.device, min_run_time=0.2)
    flops = 2.0 * n**3
    return {"flops": flops, "time_us": t.median_us, "flop_per_s": flops / t.median_us * 1e6}


def copy_ceiling(ctx, nbytes: int) -> dict:
    """Bytes/s of a copy far larger than any cache: each byte read once, written once."""
    src = torch.randn(nbytes // 4, device=ctx.device)
    dst = torch.empty_like(src)
    t = time_callable(lambda: dst.copy_(src), ctx.device, min_run_time=0.2)
    moved = 2.0 * src.nbytes
    return {"bytes": moved, "time_us": t.median_us, "bytes_per_s": moved / t.median_us * 1e6}


# --8<-- [end:ceilings]


def measure_ceilings(
    ctx, *, matmul_size: int, copy_mb: int, dtypes: tuple[str, ...]
) -> tuple[Table, list[str]]:
    """Matmuls at n/4, n/2 and n per dtype, and copies of copy_mb/64 (cache) and copy_mb."""
    points = [
        {"kind": "matmul", "dtype": dtype, "size": size}
        for dtype in dtypes
        for size in sorted({max(matmul_size // 4, 1), max(matmul_size // 2, 1), matmul_size})
    ]
    points += [
        {"kind": "copy", "dtype": "float32", "size": mb * 2**20}
        for mb in sorted({max(copy_mb // 64, 1), copy_mb})
    ]

    def measure(point):
        if point["kind"] == "matmul":
            n, dtype = point["size"], point["dtype"]
            result = matmul_ceiling(ctx, n, dtype)
            result["bytes"] = 3.0 * n * n * itemsize(dtype)
            result["spec_per_s"] = _spec(ctx, SPEC_KEYS[dtype], 1e12)
        else:
            result = copy_ceiling(ctx, point["size"])
            result["flops"] = 0.0
            result["spec_per_s"] = _spec(ctx, "hbm_gbs", 1e9)
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}

    # An out-of-memory copy must not skip the other kind: each kind stops on its own.
    return sweep(
        points,
        measure,
        columns=CEILING_COLUMNS,
        units=CEILING_UNITS,
        stop_after_oom=False,
    )


def ceiling_facts(table: Table, step_dtype: str | None = None) -> dict[str, float]:
    """The ceilings as facts: best matmul FLOP/s per dtype, and the largest copy's bytes/s."""
    facts: dict[str, float] = {}
    rows = [r for r in table.records() if r["time_us"] is not None]
    for r in rows:
        if r["kind"] == "matmul":
            key = f"peak_flops_{r['dtype']}"
            facts[key] = max(facts.get(key, 0.0), r["flop_per_s"])
    copies = [r for r in rows if r["kind"] == "copy"]
    if copies:
        facts["bandwidth_bs"] = max(copies, key=lambda r: r["size"])["bytes_per_s"]
        facts["cache_bandwidth_bs"] = min(copies, key=lambda r: r["size"])["bytes_per_s"]
    if step_dtype and f"peak_flops_{step_dtype}" in facts:
        facts["peak_flops"] = facts[f"peak_flops_{step_dtype}"]
    return facts


@experiment(
    "machine_ceilings",
    summary="This machine's ceilings: matmul FLOP/s per dtype and copy bandwidth, beside the spec sheet.",
    measures=("profiling/timing.py",),
    matmul_size=Param(2048, gpu_default=8192, minimum=16, help="largest matmul side n"),
    copy_mb=Param(128, gpu_default=2048, minimum=1, help="largest copied buffer, in MiB"),
    dtypes=Param("float32", gpu_default="bfloat16,float32", help="comma-separated matmul dtypes"),
)
def machine_ceilings(ctx, *, matmul_size, copy_mb, dtypes) -> Observed:
    names = tuple(d.strip() for d in dtypes.split(",") if d.strip())
    for name in names:
        if name not in SPEC_KEYS:
            raise ValueError(f"dtype {name!r} is not one of: {', '.join(SPEC_KEYS)}")
    table, notes = measure_ceilings(ctx, matmul_size=matmul_size, copy_mb=copy_mb, dtypes=names)
    return Observed(
        tables={"ceilings": table},
        facts=ceiling_facts(table, names[0] if names else None),
        notes=tuple(notes),
    )


@experiment(
    "roofline_steps",
    summary="Naive attention's five steps with this machine's ceilings: each step on the roofline.",
    measures=(
        "attention/naive.py",
        "inputs.py",
        "cost.py",
        "profiling/profile.py",
        "profiling/timing.py",
    ),
    **{**SHAPE_PARAMS, "seq_len": Param(512, gpu_default=4096, minimum=1, help="tokens (N)")},
    causal=Param(True, help="mask the future (decoder-style attention)"),
    matmul_size=Param(2048, gpu_default=8192, minimum=16, help="largest ceiling matmul side n"),
    copy_mb=Param(128, gpu_default=2048, minimum=1, help="largest ceiling copy, in MiB"),
)
def roofline_steps(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal, matmul_size, copy_mb
) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)

    def forward():
        return naive_attention(q, k, v, causal=causal)

    observed = observe_forward(
        forward,
        ctx,
        labels=STEPS,
        costs=step_costs(batch_size, num_heads, seq_len, head_dim, dtype, causal=causal),
    )
    # torch.profiler's own FLOP count for every op it has a formula for (the top-ops list
    # of a GPU run may not reach the CPU-side matmul ops that carry it).
    counted = profile_callable(forward, ctx.device, sched=Schedule(0, 1, 1)).flops_by_op
    table, notes = measure_ceilings(ctx, matmul_size=matmul_size, copy_mb=copy_mb, dtypes=(dtype,))
    # The smallest call this machine makes: the fixed cost every op pays, whatever its size.
    a = torch.ones(16, device=ctx.device)
    floor = time_callable(lambda: torch.add(a, a), ctx.device, min_run_time=0.05)
    return Observed(
        steps=observed.steps,
        ops=observed.ops,
        timing=observed.timing,
        timeline=observed.timeline,
        chrome=observed.chrome,
        tables={"ceilings": table},
        facts={
            **observed.facts,
            **ceiling_facts(table, dtype),
            "floor_us": floor.median_us,
            "profiler_flops": dict(sorted(counted.items())),
        },
        notes=tuple(notes),
    )
