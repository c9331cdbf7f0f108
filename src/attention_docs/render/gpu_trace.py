# A trace's attention (findings/gpu_trace.py) as text for a terminal: one table row per
# attention site and per step, beside the forecast, then the launch picture in a sentence.
from __future__ import annotations

from attention_docs.findings.gpu_trace import Site, TraceReading
from attention_docs.records.device import SPEC_SHEETS
from attention_docs.render import words
from attention_docs.render.tables import markdown_table

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
