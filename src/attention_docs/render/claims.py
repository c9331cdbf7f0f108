# Sentences about naive attention's steps, filled from findings/steps.py, and the admonition
# for prose true on one kind of device. Two clocks, never mixed in one verdict: profiled time
# for shares and structure, unprofiled time (forward_times) for speed.
from __future__ import annotations

import textwrap

from attention_docs.analytic import gpu as gpus
from attention_docs.findings import steps as fs
from attention_docs.findings.forward import versus
from attention_docs.findings.model_check import NAIVE_KINDS
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import words
from attention_docs.render.caption import caption_html
from attention_docs.render.forecast import forecast_box
from attention_docs.render.tables import measurement_of as _m

fact = words.fact


def opening(claim: str, sourced: Sourced, detail: str = "", *also: object) -> str:
    """A chapter's first paragraph: one plain claim, in at most two numbers and without their
    ranges; under it, as a caption, where and at what shape it was measured, the ranges and
    the hedges (`detail`, HTML), and the links to the raw data: `sourced`'s and `also`'s (the
    other entries its numbers come from, such as the forward-time table; a bare Measurement
    or None has no file to link)."""
    others = [s for s in also if isinstance(s, Sourced)]
    return f"{claim.strip()}\n\n{caption_html(sourced, detail=detail, also=others)}\n"


def what_to_do(*actions: str) -> str:
    """The box a chapter ends with: what to do about it on your own GPU, each action backed
    by a number on the page (a fact, stated as the page states it) or a cited one."""
    items = "\n".join(f"- {a.strip()}" for a in actions if a)
    return '!!! tip "What to do"\n\n' + textwrap.indent(items, "    ") + "\n"


def device_note(m: Measurement, *, cpu: str, cuda: str) -> str:
    """An admonition holding the prose that is true on the device `m` was measured on."""
    text = cuda if m.device_kind == "cuda" else cpu
    body = textwrap.indent(textwrap.dedent(text).strip(), "    ")
    return f'!!! info "Measured on {m.provenance.device.label}"\n\n{body}\n'


def forward_time(m: Measurement) -> str:
    """The measurement's own unprofiled timing, if it recorded one (`attention_docs show`);
    pages state forward times from `forward_times` instead."""
    t = m.timing
    return f"Without the profiler, one forward takes {words.timing(t)} ({t.method})." if t else ""


def dominant_step(m: Measurement) -> str:
    """The largest step of the profiled time, or the steps within noise of it."""
    found = fs.steps(m)
    top = found.step(found.largest.part)
    if found.largest.clear:
        return (
            f"`{top.label}` takes the largest share of the profiled time, **{fact(top.share)}**, "
            f"beyond the noise of every other step over {found.forwards} profiled forwards."
        )
    tied = words.series(f"`{x}` ({fact(found.step(x).share)})" for x in found.largest.rivals)
    return (
        f"`{top.label}` ({fact(top.share)}) takes the largest share of the profiled time, "
        f"within noise of {tied}."
    )


def profiled_vs_unprofiled(m: Measurement, times: Sourced | Measurement) -> str:
    """The five profiled steps' sum beside the unprofiled forward of `forward_times`."""
    p = fs.profiled_vs_unprofiled(m, _m(times))
    if p is None:
        return ""
    what = "the kernels of the five steps" if m.device_kind == "cuda" else "the five steps"
    text = (
        f"Under the profiler {what} sum to **{fact(p.summed)}** per forward; without it the "
        f"forward takes {fact(p.unprofiled)}."
    )
    if p.versus.tie:
        text += " The two are within noise of each other."
    else:
        text += (
            " The two were timed in separate processes, so their gap is no measure of the "
            "profiler's cost ([measured in one process](01-reading-a-profile.md#what-the-"
            "profiler-costs)), and what makes it up is not measured."
        )
    if p.faults is not None:
        text += f" Each profiled forward took {fact(p.faults)} page faults."
    return text + " Profiled times are for shares, never for speed."


def mask_step_claim(m: Measurement, times: Sourced | Measurement) -> str:
    """`attention.mask`'s time in the forward against each matmul's, without the profiler."""
    t, shape = _m(times), fs.shape_of(m)
    mask = fs.step_time(t, "attention.mask", shape)
    if mask is None:
        return ""
    parts = []
    for label in ("attention.scores", "attention.weighted_sum"):
        v = versus(t, fwd.STEP_PREFIX + label, fwd.STEP_PREFIX + "attention.mask", shape)
        if v is not None and v.comparison.tie:
            ratio = words.fact_span(v.quantity.id, words.times(v.comparison.ratio))
            parts.append(f"within noise of `{label}` ({ratio})")
        elif v is not None:
            ratio = words.fact_span(v.quantity.id, words.versus(v.comparison))
            parts.append(f"{ratio} the time of `{label}`")
    return (
        f"Timed in the forward without the profiler, `attention.mask`, which does no arithmetic, "
        f"takes {fact(mask)}: {' and '.join(parts)}."
    )


def finding(naive: Sourced) -> str:
    """Chapter 02's opening: the matmuls' share of the FLOPs against their share of the
    profiled time; that share's range in its caption."""
    found = fs.steps(naive.measurement)
    return opening(
        f"Here the two matmuls do {fact(found.matmul_flops)} of the FLOPs but take only "
        f"{fact(found.matmul_time, with_spread=False)} of the profiled time: the three passes "
        "over the N×N scores take the rest.",
        naive,
        f"The matmuls' share of the profiled time over {found.forwards} profiled forwards: "
        f"{fact(found.matmul_time)}; FLOPs from the cost model.",
    )


def naive_what_to_do(naive: Sourced, gpu_times: list) -> str:
    """Chapter 02's box: what its numbers mean for your own attention."""
    found, g = fs.steps(naive.measurement), fs.gpu_steps(gpu_times)
    return what_to_do(
        f"Profile before you optimise the matmuls: here they do {fact(found.matmul_flops)} of "
        f"the FLOPs but take only {fact(found.matmul_time, with_spread=False)} of the profiled "
        "time.",
        f"On a GPU, count bytes: on an {g.gpu.label} the naive forward's floor, "
        f"{fact(g.forward.forecast)}, is set by the bytes it moves. Fewer passes over the "
        "N×N scores ([fusion](06-fusion.md), [SDPA](07-sdpa-backends.md)) save the most.",
    )


def gpu_forecast(gpu_times: list) -> str:
    """Each naive step on the forecast GPU: intensity against the ridge, the ceiling that
    limits it, its floor; beside the measurement when the store holds that GPU's entry."""
    g = fs.gpu_steps(gpu_times)
    rows = [
        (f"`{s.label}` at {fact(s.intensity)}: {s.kernel.limit}-bound floor", s.floor)
        for s in g.steps
    ]
    kernels = gpus.naive_kernels(g.gpu, g.shape)
    mask = [k.op.removeprefix("aten::") for k in kernels if k.label == "attention.mask"]
    rows.append((f"naive forward: its {len(kernels)} kernels' floors in a row", g.forward))
    lead = (
        f"The ridge of a {g.shape.dtype} matmul on the {g.gpu.label} is {fact(g.ridge)}. A "
        f"matmul of naive attention cannot pass {fact(g.cap)} (2·head_dim ÷ itemsize) however "
        f"long the sequence, and no element-wise step passes {fact(g.densest_elementwise.intensity)}."
    )
    model = (
        f"A step's kernels are those its recorded ATen ops launch (the mask step's: {words.series(mask)}), "
        "each reading its inputs once and writing its output once; peak: tensor cores for the matmuls, "
        "CUDA cores for the rest."
    )  # fmt: skip
    return forecast_box(
        g.gpu, rows, shape=g.shape, lead=lead, model=model, floors=True, kinds=NAIVE_KINDS
    )
