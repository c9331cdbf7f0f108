# Shared by experiments that profile one forward pass: profile it and reduce the trace to
# per-step and per-op statistics per forward. It does not time the forward without the
# profiler: that is `forward_times`' one job (one fact, one number), and pages read it there.
from __future__ import annotations

from collections.abc import Callable, Iterable

from attention_docs.analytic.cost import StepCost
from attention_docs.experiments.registry import Observed
from attention_docs.measurements.schema import OpStat, StepStat
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.records.trace import op_stats, step_span_times


def observe_forward(
    fn: Callable[[], object],
    ctx,
    *,
    labels: Iterable[str] = (),
    costs: Iterable[StepCost] = (),
    sched: Schedule | None = None,
    top_ops: int = 12,
    profile_memory: bool = True,
    with_flops: bool = True,
) -> Observed:
    """Profile `fn` (one forward per profiler step) and summarise per forward.

    A profile taken for shares and structure passes `profile_memory=False, with_flops=False`:
    each option adds bookkeeping to every op it records."""
    sched = sched or Schedule()
    run = profile_callable(
        fn, ctx.device, sched=sched, profile_memory=profile_memory, with_flops=with_flops
    )
    per = float(sched.active)
    cost_of = {c.label: c for c in costs}
    spans = step_span_times(run.trace, labels)
    steps = tuple(
        StepStat(
            label=label,
            calls=round(s["calls"] / per),
            time_us=s["device_us"] / per,
            cpu_us=s["cpu_us"] / per,
            flops=cost_of[label].flops if label in cost_of else 0.0,
            bytes=cost_of[label].bytes if label in cost_of else 0.0,
        )
        for label, s in spans.items()
    )
    ops = tuple(
        OpStat(
            name=o["name"],
            where=o["where"],
            calls=o["calls"] / per,
            self_us=o["self_us"] / per,
            total_us=o["total_us"] / per,
            flops=run.flops_by_op.get(o["name"]),
        )
        for o in op_stats(run.trace)[:top_ops]
    )
    last = run.trace.steps[-1].step
    return Observed(
        steps=steps,
        ops=ops,
        timeline=run.trace.in_step(last),
        chrome=run.chrome,
        facts={
            "profiled_steps": sched.active,
            "profile_schedule": f"wait={sched.wait}, warmup={sched.warmup}, active={sched.active}",
            "page_faults_per_forward": run.page_faults,
        },
    )
