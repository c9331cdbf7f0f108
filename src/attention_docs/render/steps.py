# The steps and ops of a profiled forward as tables (findings/steps.py): every number a fact,
# every header naming its clock.
from __future__ import annotations

from attention_docs.findings import steps as fs
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import words
from attention_docs.render.tables import captioned_table, measurement_of


def step_table(
    sourced: Sourced, total_label: str = "all five", times: Sourced | Measurement | None = None
) -> str:
    """Per step: calls, profiled time and share (ranges over the profiled forwards); with
    `times` (forward_times), each step's time in the forward without the profiler and the
    FLOP/s (a matmul) or bytes/s (an element-wise step) that reaches; without it, the cost
    model's."""
    m = sourced.measurement
    t = measurement_of(times)
    found = fs.steps(m, t)
    clock = "GPU kernel time, profiled" if m.device_kind == "cuda" else "profiled"
    header = f"Step | Time per forward ({clock}) | Share ({clock}) | "
    alone = t is not None and any(s.alone for s in found.steps)
    header += (
        "In the forward (unprofiled) | Achieved (unprofiled)"
        if alone
        else "FLOPs (cost model) | Bytes (cost model, minimum)"
    )
    rows = [
        (f"`{s.label}`", s.profiled, s.share, *((s.alone, s.rate) if alone else (s.flops, s.bytes)))
        for s in found.steps
    ]
    total = f"**{words.fact(found.summed)}**"
    rows.append((f"**{total_label}**", total, "", "", ""))
    over = words.plural(found.forwards, "profiled forward")
    what = (
        f"Per step over {over}: the time is their lower quartile (as every timing states), "
        f"the share their median, each with their range"
    ) + (
        "; unprofiled: the five steps timed one after another as the forward runs them, in "
        "interleaved rounds, achieving FLOP/s (a matmul) or bytes/s (an element-wise step)."
        if alone
        else "."
    )
    return captioned_table(header, rows, "lrrrr", sourced, what)


def op_table(sourced: Sourced, limit: int = 10, subject: str | None = None) -> str:
    """The most expensive ops (CPU, by self time) and kernels (GPU), per forward; FLOPs as
    torch.profiler counts them (`with_flops`, in a profile of its own), where it has a formula."""
    rows = [
        (f"`{o.name[:57]}`", o.where, words.number(o.calls), o.own, o.share, o.total, o.flops)
        for o in fs.ops(sourced.measurement, subject, limit)
    ]
    header = (
        "Op or kernel | Where | Calls | Self time (profiled) | Share of self | "
        "Total time (profiled) | FLOPs (profiler's count)"
    )
    return captioned_table(header, rows, "llrrrrr", sourced, "Top ops.")
