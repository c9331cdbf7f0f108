# Experiments for "Cost model first": this machine's two ceilings (a large matmul for FLOP/s,
# a large copy for bandwidth), and naive attention's five steps measured next to them so that
# each step can be placed on the roofline. Each experiment measures everything it needs:
# a stored entry must stand on its own.
from __future__ import annotations

import torch

from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.cost import step_costs
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.naive import SHAPE_PARAMS
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.profiling.ceilings import (
    COLUMNS,
    UNITS,
    ceiling_facts,
    ceiling_points,
    measure_point,
)
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.timing import time_callable


@experiment(
    "machine_ceilings",
    summary="This machine's ceilings: matmul FLOP/s per dtype and copy bandwidth, beside the spec sheet.",
    measures=("profiling/ceilings.py", "profiling/timing.py"),
    matmul_size=Param(2048, gpu_default=8192, minimum=16, help="largest matmul side n"),
    copy_mb=Param(128, gpu_default=2048, minimum=1, help="largest copied buffer, in MiB"),
    dtypes=Param("float32", gpu_default="bfloat16,float32", help="comma-separated matmul dtypes"),
)
def machine_ceilings(ctx, *, matmul_size, copy_mb, dtypes) -> Observed:
    """The one measurement of this device's ceilings that every chapter cites."""
    names = tuple(d.strip() for d in dtypes.split(",") if d.strip())
    points = ceiling_points(matmul_size=matmul_size, copy_mb=copy_mb, dtypes=names)
    # An out-of-memory copy must not skip the other kind: each kind stops on its own.
    table, notes = sweep(
        points,
        lambda point: measure_point(ctx.device, ctx.info, point),
        columns=COLUMNS,
        units=UNITS,
        stop_after_oom=False,
    )
    return Observed(
        tables={"ceilings": table}, facts=ceiling_facts(table.records()), notes=tuple(notes)
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
    # The smallest call this machine makes: the fixed cost every op pays, whatever its size.
    a = torch.ones(16, device=ctx.device)
    floor = time_callable(lambda: torch.add(a, a), ctx.device, min_run_time=0.05)
    return Observed(
        steps=observed.steps,
        ops=observed.ops,
        timing=observed.timing,
        timeline=observed.timeline,
        chrome=observed.chrome,
        facts={
            **observed.facts,
            "floor_us": floor.median_us,
            "profiler_flops": dict(sorted(counted.items())),
        },
    )
