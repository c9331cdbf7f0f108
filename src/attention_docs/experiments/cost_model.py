# Experiments for "Cost model first": this machine's two ceilings (a large matmul for FLOP/s,
# a large copy for bandwidth), and naive attention's five steps profiled so that each can be
# placed under them. The steps' unprofiled times and the forward's come from `forward_times`,
# the ceilings from `machine_ceilings` (one fact, one number); `roofline_steps` keeps what
# only a profile can tell: the structure of each step (op calls, kernels, the gaps between
# them) and, on a CPU, the fixed cost of one op call.
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import torch

from attention_docs.analytic.cost import step_costs
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.naive import SHAPE_PARAMS, with_per_forward
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
from attention_docs.records.trace import (
    GPU_WORK,
    Trace,
    attribute,
    kernel_time_us,
    launch_gaps,
)


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


def gpu_step_work(trace: Trace, labels: Iterable[str]) -> dict[str, dict[str, float]] | None:
    """Per labelled range and per profiled forward: its GPU work on the GPU's own clock.

    `busy_us` is the summed duration of the kernels (memcpys, memsets) the range launched
    (`kernel_time_us`); `gap_us` is the idle time on the stream just before each of them —
    since the previous piece of work on that stream ended, within the same profiler step —
    which is launch overhead the GPU could not hide; `kernels` counts the pieces of work.
    Gaps and durations are both read off the GPU's clock, so they can be added and compared.

    Returns:
        Per label, per forward; None for a trace without GPU work (a CPU run), where the
        fixed cost of a call must come from a CPU timer instead.
    """
    labels = list(labels)
    busy = kernel_time_us(trace, labels)
    if busy is None:
        return None
    forwards = max(len(trace.steps), 1)
    owner = {
        id(s): label
        for label, spans in attribute(trace, labels).items()
        for s in spans
        if s.kind in GPU_WORK
    }
    work: dict[str, dict[str, float]] = {
        label: {"kernels": 0.0, "busy_us": busy[label] / forwards, "gap_us": 0.0}
        for label in labels
    }
    streams: dict[tuple, list] = defaultdict(list)
    for s in trace.spans:
        if s.kind in GPU_WORK and s.step is not None:
            streams[(s.step, s.lane)].append(s)
    for spans in streams.values():
        spans.sort(key=lambda s: (s.start_us, s.end_us))
        end = None
        for s in spans:
            label = owner.get(id(s))
            if label is not None:
                work[label]["kernels"] += 1 / forwards
                if end is not None:
                    work[label]["gap_us"] += max(s.start_us - end, 0.0) / forwards
            end = s.end_us if end is None else max(end, s.end_us)
    return {label: {k: round(v, 3) for k, v in values.items()} for label, values in work.items()}


@experiment(
    "roofline_steps",
    summary="Naive attention's five steps profiled for the roofline: op calls, kernels and "
    "their gaps per step; the cheapest call on a CPU.",
    measures=(
        "attention/naive.py",
        "inputs.py",
        "analytic/cost.py",
        "profiling/profile.py",
        "profiling/timing.py",
    ),
    **{**SHAPE_PARAMS, "seq_len": Param(512, gpu_default=4096, minimum=1, help="tokens (N)")},
    causal=Param(True, help="mask the future (decoder-style attention)"),
)
def roofline_steps(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal) -> Observed:
    # GPU (4×16×4096², bf16): each N×N matrix is 2 GiB, one forward moves ~12 GiB (~3 ms at
    # 4 TB/s); 6 profiled forwards plus one for the FLOP count: under 5 s with the profiler.
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)

    def forward():
        return naive_attention(q, k, v, causal=causal)

    observed = with_per_forward(
        observe_forward(
            forward,
            ctx,
            labels=STEPS,
            costs=step_costs(batch_size, num_heads, seq_len, head_dim, dtype, causal=causal),
        ),
        STEPS,
    )
    # torch.profiler's own FLOP count for every op it has a formula for (the top-ops list
    # of a GPU run may not reach the CPU-side matmul ops that carry it).
    counted = profile_callable(forward, ctx.device, sched=Schedule(0, 1, 1)).flops_by_op
    trace = Trace.from_chrome(observed.chrome or {})
    facts = {**observed.facts, "profiler_flops": dict(sorted(counted.items()))}
    gpu = gpu_step_work(trace, STEPS)
    if gpu is not None:
        # A GPU's fixed cost is read off the GPU clock, like the steps' times: the gaps.
        gaps = launch_gaps(trace)
        facts["gpu_steps"] = gpu
        facts["launch_gaps"] = {
            "count": gaps.count,
            "median_us": gaps.median_us,
            "total_us": gaps.total_us / len(trace.steps),
            "busy_us": gaps.busy_us / len(trace.steps),
            "idle_share": gaps.idle_share,
        }
    else:
        # A CPU has no kernel clock: the fixed cost of one op call is the wall time of the
        # smallest call it makes, timed without the profiler like the steps it is set against.
        a = torch.ones(16, device=ctx.device)
        floor = time_callable(lambda: torch.add(a, a), ctx.device, min_run_time=0.1)
        facts.update(
            floor_us=floor.median_us, floor_low_us=floor.low_us, floor_high_us=floor.high_us
        )
    return Observed(
        steps=observed.steps,
        ops=observed.ops,
        timeline=observed.timeline,
        chrome=observed.chrome,
        tables=observed.tables,
        facts=facts,
    )
