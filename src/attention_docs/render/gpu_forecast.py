# A forecast (findings/gpu_forecast.py) as text for a terminal: what was forecast and how,
# the floor, realistic range and bound in one line, then one table row per kernel.
from __future__ import annotations

from attention_docs.analytic import gpu as gpus
from attention_docs.findings.gpu_forecast import AS_FLASH, DECODE, FUSED, GpuForecast
from attention_docs.render import words
from attention_docs.render.tables import markdown_table

MODELS = {
    DECODE: "one decode step: one kernel that reads the whole K and V cache once",
    FUSED: "one fused FlashAttention forward kernel; the N×N scores never leave the chip",
}


def _model(f: GpuForecast) -> str:
    if f.model in MODELS:
        text = MODELS[f.model]
    else:
        text = (
            "the kernels its recorded ATen ops launch, one after another "
            f"(recording: {f.recording})"
        )
    if f.impl in AS_FLASH and f.model == FUSED:
        text += (
            f" ({f.impl} has no model of its own: forecast as a fused kernel like FlashAttention)"
        )
    return text


def report(f: GpuForecast) -> str:
    """The plain-text report of `python -m attention_docs forecast`."""
    r = f.range
    if r.low_us is None or r.high_us is None:
        realistic = f"no realistic range: no efficiency is on record for the {f.gpu.label}"
    else:
        realistic = f"realistic {words.span(r.low_us, r.high_us)}"
    header = ["Kernel", "Op", "FLOPs", "Bytes", "Floor", "Bound"]
    rows = [
        [k.label, k.op or "—", words.count(k.flops), words.nbytes(k.bytes),
         words.time_us(k.floor_us), k.limit]
        for k in f.kernels
    ]  # fmt: skip
    lines = [
        f"Forecast for {f.impl} on the {f.gpu.label} ({f.gpu.slug}), {f.shape.text()}.",
        f"Model: {_model(f)}.",
        f"Floor {words.time_us(r.floor_us)}; {realistic}; {f.bound}-bound.",
        "",
        markdown_table(header, rows, "llrrrl"),
        "",
        "A forecast from the data sheet, not a measurement: each kernel's floor is "
        "max(FLOPs / peak, bytes / bandwidth); launch costs, L2 reuse and clocks below boost "
        "are not modelled.",
    ]
    if r.sources:
        lines.append(
            f"Realistic range: each floor over the efficiency of its ceiling ({words.series(r.sources)}). "
            + gpus.KERNEL_FIXED
        )
    return "\n".join(lines)
