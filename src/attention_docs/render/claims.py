# Sentences whose numbers come from a Measurement, so that prose cannot go stale. Each
# function returns Markdown; chapters print it from an executed block.
from __future__ import annotations

from attention_docs.measurements.schema import Measurement, StepStat
from attention_docs.render import _format as fmt
from attention_docs.render.tables import step_total_us


def ranked_steps(m: Measurement) -> list[StepStat]:
    return sorted(m.steps, key=lambda s: s.time_us, reverse=True)


def share(m: Measurement, label: str) -> float:
    total = step_total_us(m)
    return m.step(label).time_us / total if total else 0.0


def dominant_step(m: Measurement) -> str:
    """'`attention.scores` dominates: 41.2% of the five steps (…).'"""
    first, second = ranked_steps(m)[:2]
    total = step_total_us(m)
    where = "of GPU time" if m.device_kind == "cuda" else "of the time"
    return (
        f"`{first.label}` takes the largest share: **{fmt.percent(first.time_us / total)}** {where} "
        f"spent in the five steps ({fmt.time_us(first.time_us)} of {fmt.time_us(total)} per forward), "
        f"ahead of `{second.label}` at {fmt.percent(second.time_us / total)}."
    )


def matmul_vs_elementwise(m: Measurement) -> str:
    """How the two matmuls compare with the three N×N element-wise passes, in FLOPs and time."""
    matmuls = [m.step("attention.scores"), m.step("attention.weighted_sum")]
    passes = [m.step(label) for label in ("attention.scale", "attention.mask", "attention.softmax")]
    flops_mm = sum(s.flops for s in matmuls)
    flops_all = flops_mm + sum(s.flops for s in passes)
    time_mm = sum(s.time_us for s in matmuls)
    time_all = time_mm + sum(s.time_us for s in passes)
    return (
        f"The two matmuls do **{fmt.percent(flops_mm / flops_all)}** of the FLOPs but take "
        f"**{fmt.percent(time_mm / time_all)}** of the time; the three element-wise passes over "
        f"the N×N matrix do {fmt.percent(1 - flops_mm / flops_all)} of the FLOPs in "
        f"{fmt.percent(1 - time_mm / time_all)} of the time."
    )


def forward_time(m: Measurement) -> str:
    """The unprofiled forward time, with its spread and method."""
    t = m.timing
    if t is None:
        return ""
    return (
        f"Without the profiler, one forward takes **{fmt.time_us(t.median_us)}** "
        f"(median of {t.runs} runs, interquartile range {fmt.time_us(t.iqr_us)}; {t.method})."
    )


def device_note(m: Measurement, *, cpu: str, cuda: str) -> str:
    """An admonition holding the prose that is true on the device `m` was measured on."""
    import textwrap

    text = cuda if m.device_kind == "cuda" else cpu
    title = f"Measured on {m.provenance.device.label}"
    body = textwrap.indent(textwrap.dedent(text).strip(), "    ")
    return f'!!! info "{title}"\n\n{body}\n'
