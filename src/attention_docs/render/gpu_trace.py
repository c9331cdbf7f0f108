# A trace's attention (findings/gpu_trace.py) as text for a terminal: one table row per
# attention site and per step, beside the forecast, then the launch picture in a sentence.
# And on the site, a trace others recorded: one call as a timeline, its steps as a table,
# captioned as cited.
from __future__ import annotations

import html
from dataclasses import replace

from attention_docs.findings.gpu_trace import (
    ALL_STEPS,
    CitedTrace,
    Recorded,
    Site,
    TraceReading,
    busy_fact,
    slowest_step,
    step_facts,
)
from attention_docs.records.device import SPEC_SHEETS
from attention_docs.render import words
from attention_docs.render.figures import STEP_COLORS, captioned_figure, perfetto_button
from attention_docs.render.tables import markdown_table
from attention_docs.render.timeline import DEFAULT_SETTINGS, ranges_settings, timeline_svg

VERDICTS = {
    "gpu-bound": "gpu-bound: the GPU ran kernels most of the time",
    "cpu-bound": "cpu-bound: the GPU waited on launches more than it ran",
}


def kernel_name(name: str, limit: int = 48) -> str:
    """A kernel's name without `void` and its argument list, cut to `limit` characters."""
    name = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    depth = 0
    for i, c in enumerate(name):
        depth += {"<": 1, ">": -1}.get(c, 0)
        if c == "(" and depth == 0 and i:
            name = name[:i]
            break
    return words.clipped(name, limit)


def _shape(site: Site) -> str:
    s = site.shape
    text = f"batch×heads {s.num_heads}, seq_len {s.seq_len}"
    if s.kv_len is not None:
        text += f", kv_len {s.keys}"
    return f"{text}, head_dim {s.head_dim}, {s.dtype}{', causal' if s.causal else ''}"


def _forecast(measured: float, r) -> tuple[str, str]:
    """(the forecast's floor and realistic range, measured over that range), or dashes."""
    if r is None:
        return "—", "—"
    if r.low_us is None or r.high_us is None:
        return f"floor {words.time_us(r.floor_us)}", "—"
    text = f"{words.time_us(r.floor_us)}; {words.span(r.low_us, r.high_us)}"
    if not r.high_us:
        return text, "—"
    return text, words.span(measured / r.high_us, measured / r.low_us, say=words.times)


def report(reading: TraceReading, path: str) -> str:
    """The plain-text report of `python -m attention_docs trace PATH`."""
    gpu = reading.gpu
    lines = []
    if gpu is not None:
        lines.append(f"Attention in {path}; forecasts for the {gpu.label} ({gpu.slug}).")
    else:
        known = ", ".join(s.slug for s in SPEC_SHEETS)
        why = (
            f"the trace's GPU, {reading.device_name}, has no data sheet here"
            if reading.device_name
            else "the trace names no GPU"
        )
        lines.append(
            f"Attention in {path}; no forecast: {why} (name one with --gpu SLUG: {known})."
        )
    if reading.sites:
        header = [
            "Attention",
            "Step",
            "Calls",
            "GPU time per call (median)",
            "Forecast: floor; realistic",
            "Measured ÷ realistic",
            "Kernels",
        ]
        rows = []
        for site in reading.sites:
            rows.append(
                [
                    f"{site.kind} ({_shape(site)})",
                    "all",
                    str(site.calls),
                    words.time_us(site.gpu_us),
                    *_forecast(site.gpu_us, site.forecast),
                    "",
                ]
            )
            for t in site.steps:
                kernels = ", ".join(kernel_name(k) for k in t.kernels) or "none"
                rows.append(
                    [
                        "",
                        t.step,
                        "",
                        words.time_us(t.gpu_us),
                        *_forecast(t.gpu_us, t.forecast),
                        kernels,
                    ]
                )
        lines += ["", markdown_table(header, rows, "llrrrrl")]
    else:
        lines.append(
            "It holds GPU kernels but no attention: no scaled_dot_product_attention op and no "
            "matmul -> softmax -> matmul chain on one scores tensor."
        )
    launch = reading.launch
    lines += [
        "",
        f"Launches: {words.time_us(launch.median_delay_us)} from a launch call to its "
        f"kernel's start (median); the GPU was busy {words.percent(launch.gpu_busy_share)} of "
        f"the time from the first launch to the last kernel's end: {VERDICTS[launch.verdict]}.",
        "GPU times are the kernel clock: the durations of the kernels each op launched.",
    ]
    return "\n".join(lines)


# --- on the site: a trace others recorded, shown as cited, never as ours ------------------
SOURCE = (
    'TraceLens\'s H100 test traces (<a href="https://github.com/AMD-AGI/TraceLens">'
    "AMD-AGI/TraceLens</a>, MIT licence; for testing and education, not official benchmarks)"
)


def cited_figure(t: CitedTrace, href: str, title: str) -> str:
    """One call of the recorded attention as a timeline figure (CPU launches, GPU kernels,
    the flows between them), captioned as recorded by others; `href`: the trace as the page
    links it, for download and Perfetto."""
    r = t.recorded
    steps = [step.step for step in r.site.steps]
    settings = (
        DEFAULT_SETTINGS
        if all(step in STEP_COLORS for step in steps)
        else ranges_settings(steps, title)
    )
    settings = replace(settings, title=title, xlabel="Time since the call's first op (µs)")
    run = ", ".join(
        x for x in (r.model, r.reading.device_name, r.torch and f"torch {r.torch}") if x
    )
    caption = (
        f"<strong>{html.escape(title)}</strong> One of its {words.count(r.site.calls)} calls, "
        f"the one with the median GPU time. Recorded by others, not measured by this build: "
        f'{SOURCE}; {html.escape(run)}. <a href="{html.escape(href)}" download>raw data '
        f"(JSON)</a>, the whole trace · {perfetto_button(href)}"
    )
    return captioned_figure(timeline_svg(r.timeline, settings), caption)


def cited_steps(t: CitedTrace) -> str:
    """The recorded attention's steps: kernels, GPU time per call, and the site's forecast
    for that GPU beside it, then a caption."""
    r = t.recorded
    gpu = r.reading.gpu
    where = f"the {gpu.label}" if gpu else "this GPU"
    header = ["Step", "Kernels", "GPU time per call", f"Forecast for {where}: floor; realistic",
              "Recorded ÷ realistic"]  # fmt: skip
    rows = []
    for f in step_facts(r):
        forecast = "—"
        if f.floor is not None:
            forecast = words.fact(f.floor)
            if f.realistic is not None:
                forecast += "; " + words.fact(f.realistic)
        step = "**all**" if f.step == ALL_STEPS else f.step.removeprefix("attention.")
        rows.append([step, ", ".join(kernel_name(k, 40) for k in f.kernels),
                     words.fact(f.time), forecast, words.fact(f.ratio) if f.ratio else "—"])  # fmt: skip
    caption = (
        f"{_shape(r.site).capitalize()}: the median over its {r.site.calls} calls, kernel "
        "clock. Recorded by others (the source is in the figure's caption); the forecast is "
        'this site\'s model of that GPU (<a href="@site/method/">method</a>).'
    )
    return markdown_table(header, rows, "llrrr") + f'\n\n<p class="ad-caption">{caption}</p>'


def _where(r: Recorded) -> str:
    model = r.model.split("/")[-1] if r.model else "a model"
    return f"{model}, on an {r.reading.device_name or 'unnamed GPU'}"


def naive_claim(t: CitedTrace) -> str:
    """The recorded naive attention's slowest step beside its score matmul, in a sentence."""
    r = t.recorded
    slowest = slowest_step(r)
    scores = next((f for f in step_facts(r) if f.step == "attention.scores"), None)
    against = (
        f", against {words.fact(scores.time)} for the score matmul"
        if scores is not None and scores is not slowest
        else ""
    )
    return (
        f"In a profile others recorded ({_where(r)}), naive attention at "
        f"{r.site.shape.seq_len:,} tokens spends {words.fact(slowest.time)} per call in its "
        f"{slowest.step.removeprefix('attention.')} kernel{against}."
    )


def _one_step(t: CitedTrace) -> tuple:
    """A recorded SDPA call and its one step's facts."""
    (f,) = step_facts(t.recorded)
    return t.recorded, f


def flash_claim(t: CitedTrace) -> str:
    """The recorded SDPA call's kernel and its time, in a sentence."""
    r, f = _one_step(t)
    s = r.site.shape
    launched = "one kernel" if len(f.kernels) == 1 else f"{len(f.kernels)} kernels"
    return (
        f"In a profile others recorded ({_where(r)}), each SDPA call launched {launched}, "
        f"`{kernel_name(f.kernels[0], 40)}`: {words.fact(f.time)} for {s.num_heads:,} heads "
        f"of {s.seq_len:,} tokens."
    )


def launch_claim(t: CitedTrace) -> str:
    """Whether the recorded run kept its GPU busy, in a sentence."""
    r, f = _one_step(t)
    verdict = r.reading.launch.verdict
    joint = "yet the GPU was busy only" if verdict == "cpu-bound" else "and the GPU was busy"
    return (
        f"In {_where(r)}, the attention kernel ran for {words.fact(f.time)}, {joint} "
        f"{words.fact(busy_fact(r))} of the run: {VERDICTS[verdict].split(': ', 1)[1]}."
    )
