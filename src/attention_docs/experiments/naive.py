# Experiments on naive attention: the five steps profiled one forward at a time. The one
# profile of the naive forward at a shape: chapters 01 to 03 read its step shares, op table,
# timeline and dispatch trees from it. Profiled times are for shares and structure, so the
# profile records no memory and counts no FLOPs (each adds bookkeeping to every op); the
# profiler's FLOP count, a lesson of its own, comes from a separate one-forward profile. Each
# profiled forward is kept apart (the `per_forward` table) so that a share carries the spread
# between forwards. The unprofiled forward and step times are `forward_times`' (one fact, one
# number).
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import replace

from attention_docs.analytic.cost import step_costs
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments.registry import Observed, Param, Work, experiment, shape_params
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.records.trace import (
    GPU_WORK,
    Trace,
    attribute,
    kernel_time_us,
    launch_gaps,
    step_span_times,
)

CAUSAL = Param(True, help="mask the future (decoder-style attention)")
# Kept for experiments of other chapters that import it; new code calls shape_params().
SHAPE_PARAMS = shape_params()
# The one way the naive forward is profiled for shares and structure.
LIGHT = {"profile_memory": False, "with_flops": False}


def per_forward_table(chrome: Mapping, labels: Iterable[str]) -> Table:
    """Each profiled forward's time per labelled step (kernel time on a GPU, CPU time on a
    CPU), one row per forward: the spread behind a profiled share or sum."""
    labels = list(labels)
    trace = Trace.from_chrome(chrome)
    rows = []
    for i, step in enumerate(trace.steps, start=1):
        times = step_span_times(trace.in_step(step.step), labels)
        rows.append((i, *(round(times[label]["device_us"], 3) for label in labels)))
    return Table(("forward", *labels), tuple(rows), dict.fromkeys(labels, "µs"))


def with_per_forward(observed: Observed, labels: Iterable[str]) -> Observed:
    """`observed` with its `per_forward` table added (from its own Chrome trace)."""
    table = per_forward_table(observed.chrome or {}, labels)
    return replace(observed, tables={**observed.tables, "per_forward": table})


def gpu_step_work(trace: Trace, labels: Iterable[str]) -> dict[str, dict[str, float]] | None:
    """Per labelled range and per profiled forward: its GPU work on the GPU's own clock.

    `busy_us` is the summed duration of the kernels (memcpys, memsets) the range launched
    (`kernel_time_us`); `gap_us` is the idle time on the stream just before each of them —
    since the previous piece of work on that stream ended, within the same profiler step —
    which is launch overhead the GPU could not hide; `kernels` counts the pieces of work.
    Gaps and durations are both read off the GPU's clock, so they can be added and compared.

    Returns:
        Per label, per forward; None for a trace without GPU work (a CPU run), where the
        fixed cost of a call comes from a CPU timer instead (op_size_sweep's floor).
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
    "naive_steps",
    gpu_work=lambda p: Work(profiles=1, timed=1),
    summary="Naive attention's five steps under torch.profiler: share, op calls, kernels and "
    "their gaps per step, and the profiler's own FLOP count.",
    measures=(
        "attention/naive.py",
        "inputs.py",
        "analytic/cost.py",
        "profiling/profile.py",
        "experiments/_observe.py",
    ),
    **shape_params(causal=CAUSAL),
)
def naive_steps(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal) -> Observed:
    # GPU (4×16×2048², bf16): one forward moves ~3 GiB (~1 ms at 4 TB/s); 6 profiled
    # forwards, one more for the FLOP count, two profiler start-ups: about 2 s.
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)

    def forward():
        return naive_attention(q, k, v, causal=causal)

    observed = with_per_forward(
        observe_forward(
            forward,
            ctx,
            labels=STEPS,
            costs=step_costs(batch_size, num_heads, seq_len, head_dim, dtype, causal=causal),
            **LIGHT,
        ),
        STEPS,
    )
    # torch.profiler's FLOP count for every op it has a formula for, from a profile of its
    # own (with_flops=True), so that its bookkeeping stays out of the times above.
    counted = profile_callable(
        forward, ctx.device, sched=Schedule(0, 1, 1), profile_memory=False
    ).flops_by_op
    ops = tuple(replace(o, flops=counted.get(o.name)) for o in observed.ops)
    facts = {**observed.facts, "profiler_flops": dict(sorted(counted.items()))}
    trace = Trace.from_chrome(observed.chrome or {})
    gpu = gpu_step_work(trace, STEPS)
    if gpu is not None:
        # A GPU's fixed cost per step is read off the GPU clock, like its time: the gaps.
        gaps = launch_gaps(trace)
        facts["gpu_steps"] = gpu
        facts["launch_gaps"] = {
            "count": gaps.count,
            "median_us": gaps.median_us,
            "total_us": gaps.total_us / len(trace.steps),
            "busy_us": gaps.busy_us / len(trace.steps),
            "idle_share": gaps.idle_share,
        }
    return replace(observed, ops=ops, facts=facts)
