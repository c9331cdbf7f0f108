# The roofline: this machine's measured ceilings, and each step of attention placed under
# them by its arithmetic intensity (FLOP per byte) and the FLOP/s it achieved. Tables and
# sentences say which ceiling bounds each step, or that neither does (overhead). Pure:
# Measurement in, Markdown/SVG out; the model itself is attention_docs.roofline.
from __future__ import annotations

import math

from attention_docs.cost import StepCost, itemsize
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import _format as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.figures import INK, MUTED, STEP_COLORS, figure_html, new_figure, to_svg
from attention_docs.render.primer import range_children, range_span
from attention_docs.render.tables import markdown_table
from attention_docs.roofline import FIXED_SHARE, OVERHEAD_FACTOR, Prediction, Roof, predict

MATMUL_STEPS = ("attention.scores", "attention.weighted_sum")
SPEC_KEYS = {"bfloat16": "bf16_tflops", "float16": "fp16_tflops", "float32": "fp32_tflops"}


def roof_of(m: Measurement) -> Roof:
    """The measured roof: best matmul FLOP/s in the steps' dtype, and the large copy's B/s."""
    try:
        return Roof(peak_flops=m.facts["peak_flops"], bandwidth=m.facts["bandwidth_bs"])
    except KeyError as missing:
        raise ValueError(
            f"{m.experiment} has no measured ceiling {missing}; was a ceiling out of memory?"
        ) from None


def _dtype(m: Measurement) -> str:
    """The dtype of the roof: the steps' dtype, or the first of the ceilings' dtypes."""
    if "dtype" in m.params:
        return str(m.params["dtype"])
    return str(m.params.get("dtypes", "float32")).split(",")[0].strip()


def spec_roof(m: Measurement, dtype: str | None = None) -> Roof | None:
    """The spec sheet's roof for the measured device (known GPUs only), or None."""
    spec = m.provenance.device.spec or {}
    key = SPEC_KEYS.get(dtype or _dtype(m))
    if key not in spec or "hbm_gbs" not in spec:
        return None
    return Roof(peak_flops=spec[key] * 1e12, bandwidth=spec["hbm_gbs"] * 1e9)


def predictions(m: Measurement) -> list[Prediction]:
    """Each step's roofline prediction next to its measured (profiled) time and its fixed
    cost: top-level op calls × the cheapest call this machine makes."""
    roof = roof_of(m)
    floor = m.facts.get("floor_us")
    ops = ops_per_step(m)
    return [
        predict(
            StepCost(s.label, s.flops, s.bytes),
            roof,
            s.time_us * 1e-6,
            ops[s.label] * floor * 1e-6 if floor and s.label in ops else None,
        )
        for s in m.steps
    ]


def ops_per_step(m: Measurement) -> dict[str, int]:
    """Top-level op calls inside each labelled range of the timeline (each pays a fixed cost)."""
    counts: dict[str, int] = {}
    if m.timeline is None:
        return counts
    for s in m.steps:
        top = range_span(m.timeline, s.label)
        counts[s.label] = sum(
            1
            for c in range_children(m.timeline, s.label)
            if c.kind == "op" and c.depth == top.depth + 1
        )
    return counts


# --- Tables --------------------------------------------------------------------------------


def cost_table(sourced: Sourced) -> str:
    """FLOPs, minimum bytes and arithmetic intensity per step, at the measured shape."""
    m = sourced.measurement
    rows = [
        [
            f"`{s.label}`",
            fmt.count(s.flops),
            fmt.nbytes(s.bytes),
            f"{s.flops / s.bytes:.3g}" if s.bytes else "—",
        ]
        for s in m.steps
    ]
    header = ["Step", "FLOPs", "Bytes (min)", "Intensity (FLOP/B)"]
    what = "The cost model at the measured shape."
    return markdown_table(header, rows, "lrrr") + "\n\n" + caption_html(sourced, what)


def _size_text(r: dict) -> str:
    if r["kind"] == "matmul":
        return f"n = {r['size']}"
    return f"{r['size'] / 2**20:g} MiB buffer"


def ceilings_table(sourced: Sourced) -> str:
    """Every ceiling measurement, with the spec-sheet figure where the device has one."""
    m = sourced.measurement
    rows = []
    for r in m.tables["ceilings"].records():
        if r["time_us"] is None:
            rows.append([r["kind"], r["dtype"], _size_text(r), r["status"], "—", "—", "—"])
            continue
        matmul = r["kind"] == "matmul"
        achieved = r["flop_per_s"] if matmul else r["bytes_per_s"]
        unit = "FLOP/s" if matmul else "B/s"
        spec = r["spec_per_s"]
        rows.append(
            [
                r["kind"],
                r["dtype"],
                _size_text(r),
                fmt.time_us(r["time_us"]),
                f"{fmt.count(achieved)}{unit}",
                f"{fmt.count(spec)}{unit}" if spec else "—",
                fmt.percent(achieved / spec) if spec else "—",
            ]
        )
    header = ["Ceiling", "dtype", "Size", "Time", "Achieved", "Spec sheet", "Of spec"]
    what = "Measured ceilings." + (
        "" if m.provenance.device.spec else " No spec sheet is used for this device."
    )
    return markdown_table(header, rows, "lllrrrr") + "\n\n" + caption_html(sourced, what)


def roofline_table(sourced: Sourced) -> str:
    """Per step: both roofline times, the measured time, their ratio, the fixed cost of its
    op calls, and the bound."""
    m = sourced.measurement
    rows = []
    for s, p in zip(m.steps, predictions(m), strict=True):
        fixed = fmt.time_us(p.fixed_s * 1e6) if p.fixed_s is not None else "—"
        compute, memory = fmt.time_us(p.compute_s * 1e6), fmt.time_us(p.memory_s * 1e6)
        if p.compute_s >= p.memory_s:
            compute = f"**{compute}**"
        else:
            memory = f"**{memory}**"
        rows.append(
            [
                f"`{s.label}`",
                compute,
                memory,
                f"{fmt.time_us(p.measured_s * 1e6)} "
                f"({f'{p.ratio:.1f}×' if math.isfinite(p.ratio) else '∞×'})",
                fixed,
                f"**{p.bound}**",
            ]
        )
    header = [
        "Step",
        "FLOPs ÷ peak",
        "Bytes ÷ bandwidth",
        "Measured (× roofline)",
        "Fixed cost",
        "Bound",
    ]
    what = (
        f"Roofline prediction (the larger time, in bold) against measurement; fixed cost = "
        f"top-level op calls × the cheapest call. Beyond {OVERHEAD_FACTOR:g}× a step is "
        f"overhead-bound if its fixed cost explains at least {fmt.percent(FIXED_SHARE)} of it, "
        f"inefficient otherwise."
    )
    return markdown_table(header, rows, "lrrrrl") + "\n\n" + caption_html(sourced, what)


# --- Sentences ----------------------------------------------------------------------------


def ceilings_claim(m: Measurement) -> str:
    """The two ceilings, the ridge point they imply, and (GPU) the share of the spec sheet."""
    roof = roof_of(m)
    dtype = _dtype(m)
    text = (
        f"This machine's ceilings are **{fmt.count(roof.peak_flops)}FLOP/s** ({dtype} matmul) "
        f"and **{fmt.count(roof.bandwidth)}B/s** (large copy). Their ratio, the *ridge point*, "
        f"is **{roof.ridge:.3g} FLOP per byte**: a step that does fewer FLOPs than that per byte "
        f"it moves cannot keep the arithmetic units busy, whatever the kernel."
    )
    cache = m.facts.get("cache_bandwidth_bs")
    if cache:
        text += (
            f" A copy small enough to stay in cache ran at {fmt.count(cache)}B/s, "
            f"{cache / roof.bandwidth:.1f}× the large copy."
        )
    others = [
        f"{fmt.count(v)}FLOP/s in {k.removeprefix('peak_flops_')}"
        for k, v in sorted(m.facts.items())
        if k.startswith("peak_flops_") and k != f"peak_flops_{dtype}"
    ]
    if others:
        text += f" Matmuls in other dtypes reached {', '.join(others)}."
    spec = spec_roof(m, dtype)
    if spec:
        text += (
            f" The spec sheet promises {fmt.count(spec.peak_flops)}FLOP/s and "
            f"{fmt.count(spec.bandwidth)}B/s: measured reaches "
            f"{fmt.percent(roof.peak_flops / spec.peak_flops)} and "
            f"{fmt.percent(roof.bandwidth / spec.bandwidth)} of them."
        )
    return text


def roofline_claim(m: Measurement) -> str:
    """Which steps each bound holds, and how close the matmuls come to the peak."""
    preds = predictions(m)
    groups: dict[str, list[str]] = {"compute": [], "memory": [], "overhead": [], "inefficient": []}
    for p in preds:
        groups[p.bound].append(f"`{p.label}`")
    parts = [
        f"**{bound}**{'' if bound == 'inefficient' else '-bound'}: {', '.join(labels)}"
        for bound, labels in groups.items()
        if labels
    ]
    roof = roof_of(m)
    text = "On this measurement, " + "; ".join(parts) + "."
    for s in m.steps:
        if s.label not in MATMUL_STEPS or not s.bytes or s.time_us <= 0:
            continue
        intensity = s.flops / s.bytes
        achieved = s.flops / (s.time_us * 1e-6)
        side = (
            "right of the ridge, where compute is the limit"
            if intensity >= roof.ridge
            else (
                "*left* of the ridge: even this matmul moves too many bytes per FLOP for the "
                "arithmetic to be the limit, because it reads or writes the N×N matrix"
            )
        )
        text += (
            f" `{s.label}` ({intensity:.3g} FLOP/B) sits {side}; it reaches "
            f"{fmt.percent(achieved / roof.attainable(intensity))} of what the roof allows there."
        )
    faster = [p for p in preds if p.ratio < 1]
    if faster:
        names = ", ".join(f"`{p.label}`" for p in faster)
        text += (
            f" {names} ran *faster* than the roofline allows: the roof is the bandwidth of a "
            f"buffer too large for any cache, and these steps' data was still in cache."
        )
    return text


def profiler_flops_claim(m: Measurement) -> str:
    """The cost model's matmul FLOPs against torch.profiler's own count for `aten::bmm`."""
    ours = sum(s.flops for s in m.steps if s.label in MATMUL_STEPS)
    counted = m.facts.get("profiler_flops") or {o.name: o.flops for o in m.ops if o.flops}
    if not counted:
        return "torch.profiler reported no FLOP count for any op of this measurement."
    theirs = sum(counted.values())
    names = ", ".join(f"`{name}`" for name in sorted(counted))
    agree = "the same number" if math.isclose(ours, theirs, rel_tol=1e-6) else "a different number"
    return (
        f"torch.profiler (`with_flops=True`) counted **{fmt.count(theirs)}** FLOPs per forward "
        f"in {names}; the cost model gives {fmt.count(ours)} for `attention.scores` plus "
        f"`attention.weighted_sum` — {agree}. The profiler counts only ops it has a formula "
        f"for; the element-wise steps do not appear in its count at all."
    )


def bound_rules() -> str:
    """The classification rule, with the thresholds the code uses."""
    return (
        f"A step that runs within **{OVERHEAD_FACTOR:g}×** of its roofline time is bound by "
        f"the larger of its two roofline times: **compute** if FLOPs ÷ peak is larger, "
        f"**memory** if bytes ÷ bandwidth is. Beyond {OVERHEAD_FACTOR:g}× (under "
        f"{fmt.percent(1 / OVERHEAD_FACTOR)} of the attainable rate) neither ceiling explains "
        f"it. It is **overhead**-bound when its fixed cost — its op calls times the cheapest "
        f"call this machine makes — accounts for at least {fmt.percent(FIXED_SHARE)} of its "
        f"time, and **inefficient** otherwise: its kernel is simply far from the hardware's "
        f"best."
    )


def matmul_cap_claim(m: Measurement) -> str:
    """The matmuls' intensity cannot exceed 2·head_dim/itemsize; is that above the ridge?"""
    head_dim = int(m.params["head_dim"])
    dtype = _dtype(m)
    size = itemsize(dtype)
    cap = 2 * head_dim / size
    roof = roof_of(m)
    if cap >= roof.ridge:
        verdict = (
            f"above this machine's ridge of {roof.ridge:.3g} FLOP/B: long enough sequences "
            f"make the matmuls compute-bound here"
        )
    else:
        verdict = (
            f"*below* this machine's ridge of {roof.ridge:.3g} FLOP/B: here the matmuls of "
            f"naive attention are memory-bound at every sequence length, because each one "
            f"writes or reads the N×N matrix"
        )
    return (
        f"However long the sequence, the matmuls' intensity cannot exceed 2 × head_dim ÷ "
        f"itemsize = 2 × {head_dim} ÷ {size} = **{cap:.3g} FLOP/B** ({dtype}) — {verdict}."
    )


# --- The figure -------------------------------------------------------------------------------


def roofline_svg(m: Measurement) -> str:
    """Log-log roofline: measured ceilings (and spec sheet), steps as points, ridge marked."""
    roof = roof_of(m)
    spec = spec_roof(m)
    placed = [s for s in m.steps if s.flops > 0 and s.bytes > 0 and s.time_us > 0]
    flat = [s for s in m.steps if s.flops == 0]
    intensities = [s.flops / s.bytes for s in placed] + [roof.ridge]
    lo = min(intensities) / 8
    hi = max(intensities) * 8
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    alt = [
        f"Roofline. Measured peak {fmt.count(roof.peak_flops)}FLOP/s, bandwidth "
        f"{fmt.count(roof.bandwidth)}B/s, ridge at {roof.ridge:.3g} FLOP/B."
    ]
    with new_figure(7.0, 4.2) as fig:
        ax = fig.add_subplot()
        ax.plot(xs, [roof.attainable(x) for x in xs], color=INK, lw=1.6, label="measured roof")
        if spec:
            ax.plot(
                xs,
                [spec.attainable(x) for x in xs],
                color=MUTED,
                lw=1.2,
                ls="--",
                label="spec-sheet roof",
            )
            alt.append(
                f"Spec sheet: {fmt.count(spec.peak_flops)}FLOP/s, {fmt.count(spec.bandwidth)}B/s."
            )
        ax.axvline(roof.ridge, color=MUTED, lw=0.8, ls=":")
        ax.annotate(
            f"ridge {roof.ridge:.3g} FLOP/B",
            (roof.ridge, roof.peak_flops),
            xytext=(4, -12),
            textcoords="offset points",
            fontsize=7,
            color=MUTED,
        )
        for s in placed:
            intensity = s.flops / s.bytes
            achieved = s.flops / (s.time_us * 1e-6)
            color = STEP_COLORS.get(s.label, INK)
            ax.plot([intensity], [achieved], "o", color=color, ms=7, label=s.label.split(".")[-1])
            share = achieved / roof.attainable(intensity)
            alt.append(
                f"{s.label}: {intensity:.3g} FLOP/B, {fmt.count(achieved)}FLOP/s "
                f"({fmt.percent(share)} of attainable)."
            )
        notes = []
        for s in flat:
            if s.bytes and s.time_us > 0:
                rate = s.bytes / (s.time_us * 1e-6)
                notes.append(
                    f"{s.label}: 0 FLOPs; moved {fmt.count(rate)}B/s "
                    f"({fmt.percent(rate / roof.bandwidth)} of the copy bandwidth)"
                )
            else:
                notes.append(f"{s.label}: 0 FLOPs, 0 bytes (no work at this setting)")
        if notes:
            ax.text(
                0.98,
                0.03,
                "\n".join(notes),
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=7,
                color=INK,
            )
            alt.extend(n + "." for n in notes)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
        ax.set_ylabel("FLOP/s")
        ax.grid(color=MUTED, alpha=0.3, linewidth=0.5, which="both")
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(frameon=False, fontsize=8, loc="upper left")
        return to_svg(fig, " ".join(alt))


def roofline_figure(sourced: Sourced) -> str:
    """The roofline of the measurement's steps as a captioned <figure>."""
    return figure_html(
        roofline_svg(sourced.measurement), sourced, "The five steps on this machine's roofline."
    )


__all__ = [
    "bound_rules",
    "ceilings_claim",
    "ceilings_table",
    "cost_table",
    "matmul_cap_claim",
    "ops_per_step",
    "predictions",
    "profiler_flops_claim",
    "roof_of",
    "roofline_claim",
    "roofline_figure",
    "roofline_svg",
    "roofline_table",
    "spec_roof",
]
