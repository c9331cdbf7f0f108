# Sentences whose numbers come from a Measurement, so that prose cannot go stale. Each
# function returns Markdown; chapters print it from an executed block.
#
# Two clocks appear here and are never mixed in one verdict: profiled step times (shares and
# structure; each profiled forward kept in a `per_forward` table so that a share carries its
# spread) and unprofiled times, which come from the one `forward_times` entry.
from __future__ import annotations

import statistics

from attention_docs.findings.compare import compare
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced, StepStat
from attention_docs.records.timing import Timing
from attention_docs.records.trace import launch_gaps
from attention_docs.render import words as fmt
from attention_docs.render.compare import forward_time as fact_forward_time
from attention_docs.render.compare import ratio_text
from attention_docs.render.tables import step_total_us


def ranked_steps(m: Measurement) -> list[StepStat]:
    return sorted(m.steps, key=lambda s: s.time_us, reverse=True)


def share(m: Measurement, label: str) -> float:
    total = step_total_us(m)
    return m.step(label).time_us / total if total else 0.0


def profiled_spread(values: list[float]) -> Timing:
    """Per-forward profiled times as a Timing: the forwards play the part of rounds."""
    return Timing(
        median_us=statistics.median(values),
        iqr_us=0.0,
        runs=len(values),
        method="profiled forwards",
        rounds_us=tuple(values),
    )


def step_spreads(m: Measurement) -> dict[str, Timing] | None:
    """Each step's profiled time over the profiled forwards, or None when not recorded."""
    table = m.tables.get("per_forward")
    if table is None or not table.rows:
        return None
    return {s.label: profiled_spread(table.column(s.label)) for s in m.steps}


def profiled_sum(m: Measurement) -> Timing | None:
    """The five steps' profiled sum, forward by forward."""
    table = m.tables.get("per_forward")
    if table is None or not table.rows:
        return None
    labels = [s.label for s in m.steps]
    return profiled_spread([sum(r[label] for label in labels) for r in table.records()])


def dominant_step(m: Measurement) -> str:
    """'`attention.scores` takes the largest share: 41.2% …', or a tie when the two largest
    steps' ranges over the profiled forwards overlap."""
    first, second = ranked_steps(m)[:2]
    total = step_total_us(m)
    where = "of GPU time" if m.device_kind == "cuda" else "of the time"
    spreads = step_spreads(m)
    if spreads is not None and compare(spreads[second.label], spreads[first.label]).tie:
        lo, hi = spreads[first.label], spreads[second.label]
        return (
            f"`{first.label}` ({fmt.percent(first.time_us / total)}) and `{second.label}` "
            f"({fmt.percent(second.time_us / total)}) take the largest shares {where} spent in "
            f"the five steps, within noise of each other: over the {len(lo.rounds_us)} "
            f"profiled forwards the first ranged {fmt.time_us(lo.low_us)}–"
            f"{fmt.time_us(lo.high_us)}, the second {fmt.time_us(hi.low_us)}–"
            f"{fmt.time_us(hi.high_us)}."
        )
    text = (
        f"`{first.label}` takes the largest share: **{fmt.percent(first.time_us / total)}** "
        f"{where} spent in the five steps ({fmt.time_us(first.time_us)} of "
        f"{fmt.time_us(total)} per forward), ahead of `{second.label}` at "
        f"{fmt.percent(second.time_us / total)}"
    )
    if spreads is None:
        return text + "."
    n = len(spreads[first.label].rounds_us)
    return text + f", in each of the {n} profiled forwards."


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
        f"**{fmt.percent(time_mm / time_all)}** of the profiled time; the three element-wise "
        f"passes over the N×N matrix do {fmt.percent(1 - flops_mm / flops_all)} of the FLOPs "
        f"in {fmt.percent(1 - time_mm / time_all)} of the time."
    )


def forward_time(m: Measurement) -> str:
    """The measurement's own unprofiled timing, if it recorded one (`python -m attention_docs
    show`); pages state forward times from `forward_times` instead."""
    t = m.timing
    if t is None:
        return ""
    return (
        f"Without the profiler, one forward takes **{fmt.time_us(t.median_us)}** "
        f"(median of {t.runs} runs, interquartile range {fmt.time_us(t.iqr_us)}; {t.method})."
    )


def _m(source: Sourced | Measurement) -> Measurement:
    return source.measurement if isinstance(source, Sourced) else source


def step_time(times: Sourced | Measurement, label: str, shape: fwd.Shape) -> str:
    """One naive step's unprofiled time (timed alone), as the site-wide fact."""
    return fact_forward_time(times, fwd.STEP_PREFIX + label, shape)


def events_per_forward(m: Measurement) -> int:
    """Events the profiler recorded in the measurement's one-forward timeline."""
    if m.timeline is None:
        return 0
    return sum(1 for s in m.timeline.spans if s.kind in ("range", "op", "runtime"))


def profiled_vs_unprofiled(m: Measurement, times: Sourced | Measurement) -> str:
    """The five profiled steps' sum set against the unprofiled forward of `forward_times`,
    and what the difference is, on the measurement's clock."""
    t = _m(times)
    shape = fwd.Shape.of(m.params)
    unprofiled = fwd.timing(t, fwd.NAIVE, shape)
    summed = profiled_sum(m)
    if unprofiled is None or summed is None:
        return ""
    forward = fact_forward_time(t, fwd.NAIVE, shape)
    cuda = m.device_kind == "cuda"
    what = "the kernels of the five steps" if cuda else "the five steps"
    text = (
        f"Under the profiler {what} sum to **{fmt.time_us(summed.median_us)}** per forward "
        f"({fmt.time_us(summed.low_us)}–{fmt.time_us(summed.high_us)} over "
        f"{len(summed.rounds_us)} profiled forwards); without the profiler the forward takes "
        f"{forward} ({(unprofiled.method or 'an unprofiled timer').split(',')[0]})."
    )
    c = compare(unprofiled, summed)  # ratio = profiled / unprofiled
    if c.tie:
        return text + " The two are within noise of each other."
    diff = summed.median_us - unprofiled.median_us
    events = events_per_forward(m)
    if cuda:
        if diff < 0:
            gaps = launch_gaps(m.timeline) if m.timeline is not None else None
            idle = (
                f" In the profiled forward drawn below, the GPU sat idle between kernels for "
                f"{fmt.time_us(gaps.total_us)} ({gaps.count} gaps, median "
                f"{fmt.time_us(gaps.median_us)})."
                if gaps is not None and gaps.median_us is not None
                else ""
            )
            return text + (
                f" The kernels account for {fmt.percent(summed.median_us / unprofiled.median_us)}"
                f" of the unprofiled forward; the other {fmt.time_us(-diff)} is time the GPU "
                f"was not running this forward's kernels.{idle}"
            )
        return text + (
            f" The kernels sum to {ratio_text(c)} the unprofiled forward: under the profiler "
            f"they ran {fmt.time_us(diff)} longer in total than the forward takes alone."
        )
    if diff > 0:
        per_event = (
            f", {fmt.time_us(diff / events)} for each of the {events} events" if events else ""
        )
        return text + (
            f" The profiled sum is {ratio_text(c)} the unprofiled time. The difference, "
            f"**{fmt.time_us(diff)}** per forward{per_event} it recorded, is the profiler's "
            f"own overhead ([Reading a profile](01-reading-a-profile.md#what-the-profiler-costs) "
            f"measures it per event): profiled times are for shares, never for speed."
        )
    return text + (
        f" The profiled sum is *shorter* than the unprofiled forward ({ratio_text(c)}): the "
        f"forward's own code between the five ranges, which no range covers, costs "
        f"{fmt.time_us(-diff)} more than the profiler adds."
    )


def intensity_claim(m: Measurement) -> str:
    """Each step's arithmetic intensity at the measured shape, from the cost model, and the
    matmuls' ceiling 2·head_dim/itemsize."""
    from attention_docs.analytic.cost import itemsize

    head_dim, dtype = int(m.params["head_dim"]), str(m.params["dtype"])
    size = itemsize(dtype)
    cap = 2 * head_dim / size
    parts = [
        f"`{s.label}` {s.flops / s.bytes:.3g}" if s.bytes else f"`{s.label}` —" for s in m.steps
    ]
    matmuls = [s for s in m.steps if s.label in ("attention.scores", "attention.weighted_sum")]
    reached = min(s.flops / s.bytes for s in matmuls if s.bytes)
    return (
        f"At this shape (seq_len={m.params['seq_len']}, head_dim={head_dim}, {dtype}) the "
        f"cost model gives, in FLOP per byte: {', '.join(parts)}. However long the sequence, "
        f"a matmul's intensity stays below 2 × head_dim ÷ itemsize = 2 × {head_dim} ÷ {size} "
        f"= **{cap:.3g} FLOP/B**; here the matmuls reach {reached:.3g}, "
        f"{fmt.percent(reached / cap)} of that ceiling, because the N×N matrix each one writes "
        f"or reads is part of its bytes. The element-wise passes stay below one FLOP per byte "
        f"at every shape."
    )


def mask_step_claim(m: Measurement, times: Sourced | Measurement) -> str:
    """`attention.mask` timed alone against each matmul, without the profiler, at the shape
    `m` (a naive_steps measurement) ran at."""
    t = _m(times)
    shape = fwd.Shape.of(m.params)
    mask = fwd.step_timing(t, "attention.mask", shape)
    if mask is None:
        return ""
    parts = []
    for label in ("attention.scores", "attention.weighted_sum"):
        other = fwd.step_timing(t, label, shape)
        if other is None:
            continue
        c = compare(other, mask)  # ratio = mask / matmul
        if c.tie:
            parts.append(f"within noise of `{label}` ({step_time(t, label, shape)})")
        else:
            parts.append(f"{ratio_text(c)} the time of `{label}` ({step_time(t, label, shape)})")
    return (
        f"Timed alone without the profiler, `attention.mask`, which does no arithmetic, takes "
        f"{step_time(t, 'attention.mask', shape)}: {' and '.join(parts)}."
    )


def device_note(m: Measurement, *, cpu: str, cuda: str) -> str:
    """An admonition holding the prose that is true on the device `m` was measured on."""
    import textwrap

    text = cuda if m.device_kind == "cuda" else cpu
    title = f"Measured on {m.provenance.device.label}"
    body = textwrap.indent(textwrap.dedent(text).strip(), "    ")
    return f'!!! info "{title}"\n\n{body}\n'
