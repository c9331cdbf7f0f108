# The roofline: this machine's measured ceilings (the `machine_ceilings` entry), and each step
# of attention placed under them by its arithmetic intensity (FLOP per byte) and the FLOP/s
# it reaches *without the profiler* (each step timed alone, from the `forward_times` entry).
# Tables and sentences say which ceiling bounds each step, or that neither does. A verdict
# uses one clock: the steps' unprofiled times against roofline times, and, beyond the
# roofline, a fixed cost read on the same clock — op calls × the CPU floor on a CPU, the GPU's
# idle time before each kernel on a GPU. Pure: Measurements in, Markdown/SVG out; the model
# itself is attention_docs.analytic.roofline.
from __future__ import annotations

import math
from dataclasses import dataclass

from attention_docs.analytic.cost import StepCost, itemsize
from attention_docs.analytic.roofline import FIXED_SHARE, OVERHEAD_FACTOR, Prediction, Roof, predict
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.timing import Timing
from attention_docs.render import words as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.claims import step_time
from attention_docs.render.compare import ceiling
from attention_docs.render.figures import INK, MUTED, STEP_COLORS, figure_html, new_figure, to_svg
from attention_docs.render.primer import range_children, range_span
from attention_docs.render.tables import markdown_table

MATMUL_STEPS = ("attention.scores", "attention.weighted_sum")
SPEC_KEYS = {"bfloat16": "bf16_tflops", "float16": "fp16_tflops", "float32": "fp32_tflops"}
CLOCK = {
    "cuda": "CUDA events, the GPU clock",
    "cpu": "torch.utils.benchmark, the CPU wall clock",
}


def _m(source: Sourced | Measurement) -> Measurement:
    return source.measurement if isinstance(source, Sourced) else source


def _same_device(*ms: Measurement) -> None:
    devices = {f"{m.experiment}: {m.device_id}" for m in ms}
    if len({m.device_id for m in ms}) > 1:
        raise ValueError(
            "a roofline needs its steps, its ceilings and its times from one device; got "
            + ", ".join(sorted(devices))
            + ". Measure the missing entries on that device."
        )


def steps_dtype(roof: Measurement) -> str:
    return str(roof.params["dtype"])


def ceilings_dtype(ceilings: Measurement) -> str:
    """The first dtype the ceilings were measured in (the device's working dtype)."""
    return str(ceilings.params.get("dtypes", "float32")).split(",")[0].strip()


def roof_of(ceilings: Sourced | Measurement, dtype: str | None = None) -> Roof:
    """The measured roof: the best matmul FLOP/s in `dtype`, and the large copy's bytes/s."""
    m = _m(ceilings)
    dtype = dtype or ceilings_dtype(m)
    key = f"peak_flops_{dtype}"
    if key not in m.facts or "bandwidth_bs" not in m.facts:
        raise ValueError(
            f"machine_ceilings on {m.device_id} has no {key} or bandwidth_bs (it holds "
            f"{', '.join(sorted(m.facts))}); measure it with --dtypes {dtype}"
        )
    return Roof(peak_flops=m.facts[key], bandwidth=m.facts["bandwidth_bs"])


def spec_roof(ceilings: Measurement, dtype: str) -> Roof | None:
    """The spec sheet's roof for the measured device (known GPUs only), or None."""
    spec = ceilings.provenance.device.spec or {}
    key = SPEC_KEYS.get(dtype)
    if key not in spec or "hbm_gbs" not in spec:
        return None
    return Roof(peak_flops=spec[key] * 1e12, bandwidth=spec["hbm_gbs"] * 1e9)


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


def fixed_costs_us(m: Measurement) -> dict[str, float]:
    """Each step's fixed cost per forward, on the clock of its unprofiled time: on a GPU the
    idle time before its kernels (from the profiled trace), on a CPU its top-level op calls
    times the CPU floor (the smallest call, timed without the profiler)."""
    gpu = m.facts.get("gpu_steps")
    if gpu:
        return {label: values["gap_us"] for label, values in gpu.items()}
    floor = m.facts.get("floor_us")
    if not floor:
        return {}
    return {label: calls * floor for label, calls in ops_per_step(m).items()}


def fixed_cost_text(m: Measurement) -> str:
    """What the fixed-cost column means on this measurement's device."""
    if m.facts.get("gpu_steps"):
        return (
            "fixed cost = the GPU's idle time just before each of the step's kernels, read "
            "off the profiled trace on the GPU clock (launch overhead the GPU could not hide)"
        )
    return (
        "fixed cost = the step's top-level op calls × the CPU floor, the wall time of a "
        "16-element torch.add timed without the profiler"
    )


@dataclass(frozen=True)
class Verdict:
    """One step: its roofline prediction at the unprofiled median, and at the rounds' ends."""

    label: str
    timing: Timing | None  # the step timed alone without the profiler; None if not timed
    prediction: Prediction | None  # at the median
    low: Prediction | None  # at the fastest round
    high: Prediction | None  # at the slowest round

    @property
    def bound(self) -> str:
        if self.prediction is None:
            return "not timed"
        ends = {self.low.bound, self.prediction.bound, self.high.bound}
        if len(ends) == 1:
            return self.prediction.bound
        # The rounds' range straddles a threshold: the verdict is inside the noise.
        order = ("compute", "memory", "overhead", "inefficient")
        return " or ".join(b for b in order if b in ends) + " (within noise)"

    @property
    def ratios(self) -> tuple[float, float, float] | None:
        """measured ÷ roofline at the median, fastest and slowest round."""
        if self.prediction is None:
            return None
        return self.prediction.ratio, self.low.ratio, self.high.ratio


def verdicts(
    roof: Sourced | Measurement, ceilings: Sourced | Measurement, times: Sourced | Measurement
) -> list[Verdict]:
    """Each step's verdict: unprofiled time (forward_times) against the roofline of the
    measured ceilings, with the step's fixed cost on the same clock."""
    m, c, t = _m(roof), _m(ceilings), _m(times)
    _same_device(m, c, t)
    ceiling_roof = roof_of(c, steps_dtype(m))
    shape = fwd.Shape.of(m.params)
    fixed = fixed_costs_us(m)
    found = []
    for s in m.steps:
        try:
            timing = fwd.step_timing(t, s.label, shape)
        except fwd.NotMeasuredError:
            timing = None
        if timing is None:
            found.append(Verdict(s.label, None, None, None, None))
            continue
        cost = StepCost(s.label, s.flops, s.bytes)
        f = fixed[s.label] * 1e-6 if s.label in fixed else None
        found.append(
            Verdict(
                s.label,
                timing,
                predict(cost, ceiling_roof, timing.median_us * 1e-6, f),
                predict(cost, ceiling_roof, timing.low_us * 1e-6, f),
                predict(cost, ceiling_roof, timing.high_us * 1e-6, f),
            )
        )
    return found


def predictions(
    roof: Sourced | Measurement, ceilings: Sourced | Measurement, times: Sourced | Measurement
) -> list[Prediction]:
    """The median predictions of the steps that were timed."""
    return [v.prediction for v in verdicts(roof, ceilings, times) if v.prediction is not None]


def _ratio(x: float) -> str:
    return f"{x:.1f}×" if math.isfinite(x) else "∞×"


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


def _fact_rows(records: list[dict]) -> dict[int, str]:
    """Which rows of the ceilings table are the device's ceiling facts, by row index."""
    facts: dict[int, str] = {}
    ok = [(i, r) for i, r in enumerate(records) if r["time_us"] is not None]
    for dtype in {r["dtype"] for _, r in ok if r["kind"] == "matmul"}:
        best = max(
            ((i, r) for i, r in ok if r["kind"] == "matmul" and r["dtype"] == dtype),
            key=lambda item: item[1]["flop_per_s"],
        )
        facts[best[0]] = f"peak_flops_{dtype}"
    copies = [(i, r) for i, r in ok if r["kind"] == "copy"]
    if copies:
        facts[max(copies, key=lambda item: item[1]["size"])[0]] = "bandwidth_bs"
        smallest = min(copies, key=lambda item: item[1]["size"])[0]
        facts.setdefault(smallest, "cache_bandwidth_bs")
    return facts


def ceilings_table(sourced: Sourced) -> str:
    """Every ceiling measurement with the spread of its rounds, and the spec-sheet figure
    where the device has one. The rows that are the device's ceilings are its facts."""
    m = sourced.measurement
    records = m.tables["ceilings"].records()
    facts = _fact_rows(records)
    rows = []
    for i, r in enumerate(records):
        what = f"{r['kind']} ({r['dtype']})" if r["kind"] == "matmul" else r["kind"]
        if r["time_us"] is None:
            rows.append([what, _size_text(r), r["status"], "—", "—", "—"])
            continue
        matmul = r["kind"] == "matmul"
        achieved = r["flop_per_s"] if matmul else r["bytes_per_s"]
        work = r["flops"] if matmul else r["bytes"]
        per = "FLOP" if matmul else "B"
        key = facts.get(i)
        if key and key != "cache_bandwidth_bs":
            cell = ceiling(m, key, spread=True)
        else:
            low, high = work / r["high_us"] * 1e6, work / r["low_us"] * 1e6
            cell = f"{fmt.count(achieved)}{per}/s ({fmt.count(low)}–{fmt.count(high)}{per}/s over the rounds)"
        spec = r["spec_per_s"]
        rows.append(
            [
                what,
                _size_text(r),
                fmt.time_us(r["time_us"]),
                cell,
                f"{fmt.count(spec)}{per}/s" if spec else "—",
                fmt.percent(achieved / spec) if spec else "—",
            ]
        )
    header = [
        "Ceiling",
        "Size",
        "Time (median)",
        "Achieved (median; rounds)",
        "Spec sheet",
        "Of spec",
    ]
    what = "Measured ceilings, timed without the profiler in interleaved rounds." + (
        "" if m.provenance.device.spec else " No spec sheet is used for this device."
    )
    return markdown_table(header, rows, "llrrrr") + "\n\n" + caption_html(sourced, what)


def roofline_table(
    roof: Sourced, ceilings: Sourced | Measurement, times: Sourced | Measurement
) -> str:
    """Per step: both roofline times, the unprofiled time and its ratio to the roofline (with
    the rounds' range), the fixed cost on the same clock, and the bound."""
    m = roof.measurement
    t = _m(times)
    shape = fwd.Shape.of(m.params)
    rows = []
    for v in verdicts(m, ceilings, t):
        p = v.prediction
        if p is None:
            rows.append([f"`{v.label}`", "—", "—", "not timed alone", "—", "—"])
            continue
        compute, memory = fmt.time_us(p.compute_s * 1e6), fmt.time_us(p.memory_s * 1e6)
        if p.compute_s >= p.memory_s:
            compute = f"**{compute}**"
        else:
            memory = f"**{memory}**"
        ratio, low, high = v.ratios
        fixed = fmt.time_us(p.fixed_s * 1e6) if p.fixed_s is not None else "—"
        rows.append(
            [
                f"`{v.label}`",
                compute,
                memory,
                f"{step_time(t, v.label, shape)}: {_ratio(ratio)} ({_ratio(low)}–{_ratio(high)})",
                fixed,
                f"**{v.bound}**",
            ]
        )
    header = [
        "Step",
        "FLOPs ÷ peak",
        "Bytes ÷ bandwidth",
        "Unprofiled time: × roofline (rounds)",
        "Fixed cost",
        "Bound",
    ]
    what = (
        f"Roofline prediction (the larger time, in bold) against each step's unprofiled time, "
        f"the step timed alone ({CLOCK.get(m.device_kind, CLOCK['cpu'])}); "
        f"{fixed_cost_text(m)}. Beyond "
        f"{OVERHEAD_FACTOR:g}× a step is overhead-bound if its fixed cost explains at least "
        f"{fmt.percent(FIXED_SHARE)} of it, inefficient otherwise; a range that straddles a "
        f"threshold gives both verdicts, within noise."
    )
    return markdown_table(header, rows, "lrrrrl") + "\n\n" + caption_html(roof, what)


# --- Sentences ----------------------------------------------------------------------------


def ceilings_claim(ceilings: Sourced | Measurement, dtype: str | None = None) -> str:
    """The two ceilings (as the site-wide facts), the ridge point they imply, the cache copy,
    other dtypes, and (known devices) the share of the spec sheet."""
    m = _m(ceilings)
    dtype = dtype or ceilings_dtype(m)
    roof = roof_of(m, dtype)
    text = (
        f"This machine's ceilings are **{ceiling(m, f'peak_flops_{dtype}', spread=True)}** "
        f"({dtype} matmul) and **{ceiling(m, 'bandwidth_bs', spread=True)}** (large copy). "
        f"Their ratio, the *ridge point*, is **{roof.ridge:.3g} FLOP per byte**: a step that "
        f"does fewer FLOPs than that per byte it moves cannot keep the arithmetic units busy, "
        f"whatever the kernel."
    )
    copies = [r for r in m.tables["ceilings"].records() if r["kind"] == "copy" and r["time_us"]]
    if len(copies) > 1:
        small = min(copies, key=lambda r: r["size"])
        slow, fast = small["bytes"] / small["high_us"] * 1e6, small["bytes"] / small["low_us"] * 1e6
        large_low = m.facts.get("bandwidth_bs_low", roof.bandwidth)
        large_high = m.facts.get("bandwidth_bs_high", roof.bandwidth)
        text += (
            f" The small copy ({fmt.nbytes(small['size'])}) ran at "
            f"{fmt.count(small['bytes_per_s'])}B/s ({fmt.count(slow)}–{fmt.count(fast)}B/s "
            f"over the rounds)"
        )
        if slow <= large_high and large_low <= fast:
            text += ": within noise of the large copy."
        else:
            ratio = small["bytes_per_s"] / roof.bandwidth
            text += f", {ratio:.1f}× the large copy, beyond the noise of both."
    others = [
        f"{ceiling(m, k, spread=True)} in {k.removeprefix('peak_flops_')}"
        for k in sorted(m.facts)
        if k.startswith("peak_flops_")
        and not k.endswith(("_low", "_high"))
        and k != f"peak_flops_{dtype}"
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


def roofline_claim(
    roof: Sourced | Measurement, ceilings: Sourced | Measurement, times: Sourced | Measurement
) -> str:
    """Which steps each bound holds, and how close the matmuls come to the roof, from the
    steps' unprofiled times."""
    m, c, t = _m(roof), _m(ceilings), _m(times)
    found = verdicts(m, c, t)
    shape = fwd.Shape.of(m.params)
    groups: dict[str, list[str]] = {}
    for v in found:
        groups.setdefault(v.bound, []).append(f"`{v.label}`")
    parts = [
        f"**{bound}**{'' if bound in ('inefficient', 'not timed') or '(' in bound else '-bound'}: "
        f"{', '.join(labels)}"
        for bound, labels in groups.items()
    ]
    ceiling_roof = roof_of(c, steps_dtype(m))
    text = (
        f"With each step timed alone without the profiler "
        f"({CLOCK.get(m.device_kind, CLOCK['cpu'])}), the verdicts are: " + "; ".join(parts) + "."
    )
    for v in found:
        s = m.step(v.label)
        if v.label not in MATMUL_STEPS or not s.bytes or v.timing is None:
            continue
        intensity = s.flops / s.bytes
        attainable = ceiling_roof.attainable(intensity)
        share = s.flops / (v.timing.median_us * 1e-6) / attainable
        low = s.flops / (v.timing.high_us * 1e-6) / attainable
        high = s.flops / (v.timing.low_us * 1e-6) / attainable
        side = (
            "right of the ridge, where compute is the limit"
            if intensity >= ceiling_roof.ridge
            else (
                "*left* of the ridge: even this matmul moves too many bytes per FLOP for the "
                "arithmetic to be the limit, because it reads or writes the N×N matrix"
            )
        )
        text += (
            f" `{v.label}` ({intensity:.3g} FLOP/B) sits {side}; at "
            f"{step_time(t, v.label, shape)} it reaches {fmt.percent(share)} "
            f"({fmt.percent(low)}–{fmt.percent(high)} over the rounds) of what the roof "
            f"allows there."
        )
    faster = [v for v in found if v.ratios and v.ratios[2] < 1]
    by_memory = [f"`{v.label}`" for v in faster if v.prediction.memory_s > v.prediction.compute_s]
    by_compute = [f"`{v.label}`" for v in faster if v.prediction.memory_s <= v.prediction.compute_s]
    if by_memory:
        cache = c.facts.get("cache_bandwidth_bs")
        text += (
            f" {', '.join(by_memory)} moved {'its' if len(by_memory) == 1 else 'their'} bytes "
            f"faster than the large copy in every round: the roof is the bandwidth of a buffer "
            f"larger than the caches, and a step timed alone on the same inputs can find them "
            f"in a cache" + (f" (the small copy ran at {fmt.count(cache)}B/s)." if cache else ".")
        )
    if by_compute:
        text += (
            f" {', '.join(by_compute)} did more FLOP/s than the measured peak in every round: "
            f"the matmul that measured the peak reached less than this machine can do "
            f"(measure it larger, `--matmul-size`)."
        )
    return text


def fixed_cost_claim(roof: Sourced | Measurement) -> str:
    """What the fixed cost is on this device, measured: the GPU's launch gaps, or the CPU
    floor. On a GPU, how busy the kernels kept it."""
    m = _m(roof)
    gaps = m.facts.get("launch_gaps")
    if gaps:
        text = (
            f"On this GPU the five steps' kernels were busy for {fmt.time_us(gaps['busy_us'])} "
            f"per profiled forward and the stream sat idle between them for "
            f"{fmt.time_us(gaps['total_us'])}"
        )
        if gaps.get("median_us") is not None:
            text += f" ({gaps['count']} gaps in all, median {fmt.time_us(gaps['median_us'])})"
        share = gaps.get("idle_share")
        if share is not None:
            text += f": the GPU was idle {fmt.percent(share)} of the time from its first kernel to its last"
        return text + ". That idle time, step by step, is the fixed cost in the table."
    floor = m.facts.get("floor_us")
    if not floor:
        return "This measurement recorded no fixed cost per call."
    return (
        f"This measurement ran on a CPU: there are no kernels and no launch gaps to read. The "
        f"fixed cost of a call is the CPU floor: a 16-element `torch.add` took "
        f"{fmt.time_us(floor)} ({fmt.time_us(m.facts['floor_low_us'])}–"
        f"{fmt.time_us(m.facts['floor_high_us'])} over the rounds), timed without the "
        f"profiler like the steps it is set against."
    )


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


def bound_rules(roof: Sourced | Measurement | None = None) -> str:
    """The classification rule, with the thresholds the code uses and, given a measurement,
    which fixed cost its device uses."""
    fixed = (
        f" Here the {fixed_cost_text(_m(roof))}."
        if roof is not None
        else " The fixed cost is read on the same clock as the step's time."
    )
    return (
        f"A step that runs within **{OVERHEAD_FACTOR:g}×** of its roofline time is bound by "
        f"the larger of its two roofline times: **compute** if FLOPs ÷ peak is larger, "
        f"**memory** if bytes ÷ bandwidth is. Beyond {OVERHEAD_FACTOR:g}× (under "
        f"{fmt.percent(1 / OVERHEAD_FACTOR)} of the attainable rate) neither ceiling explains "
        f"it. It is **overhead**-bound when its fixed cost accounts for at least "
        f"{fmt.percent(FIXED_SHARE)} of its time, and **inefficient** otherwise: its kernel is "
        f"simply far from the hardware's best.{fixed} Every time in a verdict is unprofiled: "
        f"the profiler's own cost would make every step look slower than it is."
    )


def matmul_cap_claim(roof: Sourced | Measurement, ceilings: Sourced | Measurement) -> str:
    """The matmuls' intensity cannot exceed 2·head_dim/itemsize; is that above the ridge?"""
    m, c = _m(roof), _m(ceilings)
    head_dim = int(m.params["head_dim"])
    dtype = steps_dtype(m)
    size = itemsize(dtype)
    cap = 2 * head_dim / size
    ridge = roof_of(c, dtype).ridge
    if cap >= ridge:
        verdict = (
            f"above this machine's ridge of {ridge:.3g} FLOP/B: long enough sequences "
            f"make the matmuls compute-bound here"
        )
    else:
        verdict = (
            f"*below* this machine's ridge of {ridge:.3g} FLOP/B: here the matmuls of "
            f"naive attention are memory-bound at every sequence length, because each one "
            f"writes or reads the N×N matrix"
        )
    return (
        f"However long the sequence, the matmuls' intensity cannot exceed 2 × head_dim ÷ "
        f"itemsize = 2 × {head_dim} ÷ {size} = **{cap:.3g} FLOP/B** ({dtype}) — {verdict}."
    )


# --- The figure -------------------------------------------------------------------------------


def roofline_svg(
    roof: Sourced | Measurement, ceilings: Sourced | Measurement, times: Sourced | Measurement
) -> str:
    """Log-log roofline: measured ceilings (and spec sheet), the steps as points at their
    unprofiled FLOP/s with the rounds' range as an error bar, ridge marked."""
    m, c = _m(roof), _m(ceilings)
    dtype = steps_dtype(m)
    ceiling_roof = roof_of(c, dtype)
    spec = spec_roof(c, dtype)
    found = {v.label: v for v in verdicts(m, c, times)}
    placed = [
        s for s in m.steps if s.flops > 0 and s.bytes > 0 and found[s.label].timing is not None
    ]
    flat = [s for s in m.steps if s.flops == 0]
    intensities = [s.flops / s.bytes for s in placed] + [ceiling_roof.ridge]
    lo = min(intensities) / 8
    hi = max(intensities) * 8
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    alt = [
        f"Roofline. Measured peak {fmt.count(ceiling_roof.peak_flops)}FLOP/s, bandwidth "
        f"{fmt.count(ceiling_roof.bandwidth)}B/s, ridge at {ceiling_roof.ridge:.3g} FLOP/B. "
        f"Steps at their unprofiled time."
    ]
    with new_figure(7.0, 4.2) as fig:
        ax = fig.add_subplot()
        ax.plot(
            xs, [ceiling_roof.attainable(x) for x in xs], color=INK, lw=1.6, label="measured roof"
        )
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
        ax.axvline(ceiling_roof.ridge, color=MUTED, lw=0.8, ls=":")
        ax.annotate(
            f"ridge {ceiling_roof.ridge:.3g} FLOP/B",
            (ceiling_roof.ridge, ceiling_roof.peak_flops),
            xytext=(4, -12),
            textcoords="offset points",
            fontsize=7,
            color=MUTED,
        )
        for s in placed:
            t = found[s.label].timing
            intensity = s.flops / s.bytes
            achieved = s.flops / (t.median_us * 1e-6)
            slow, fast = s.flops / (t.high_us * 1e-6), s.flops / (t.low_us * 1e-6)
            color = STEP_COLORS.get(s.label, INK)
            ax.errorbar(
                [intensity],
                [achieved],
                yerr=[[achieved - slow], [fast - achieved]],
                fmt="o",
                color=color,
                ms=7,
                capsize=3,
                label=s.label.split(".")[-1],
            )
            share = achieved / ceiling_roof.attainable(intensity)
            alt.append(
                f"{s.label}: {intensity:.3g} FLOP/B, {fmt.count(achieved)}FLOP/s "
                f"({fmt.count(slow)}–{fmt.count(fast)}FLOP/s over the rounds; "
                f"{fmt.percent(share)} of attainable)."
            )
        notes = []
        for s in flat:
            t = found[s.label].timing
            if s.bytes and t is not None:
                rate = s.bytes / (t.median_us * 1e-6)
                notes.append(
                    f"{s.label}: 0 FLOPs; moved {fmt.count(rate)}B/s "
                    f"({fmt.percent(rate / ceiling_roof.bandwidth)} of the copy bandwidth)"
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
        ax.set_ylabel("FLOP/s (unprofiled)")
        ax.grid(color=MUTED, alpha=0.3, linewidth=0.5, which="both")
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(frameon=False, fontsize=8, loc="upper left")
        return to_svg(fig, " ".join(alt))


def roofline_figure(
    roof: Sourced, ceilings: Sourced | Measurement, times: Sourced | Measurement
) -> str:
    """The roofline of the measurement's steps as a captioned <figure>."""
    return figure_html(
        roofline_svg(roof, ceilings, times),
        roof,
        "The five steps on this machine's roofline, each at its unprofiled time (error bars: "
        "the fastest and slowest round).",
    )


__all__ = [
    "Verdict",
    "bound_rules",
    "ceilings_claim",
    "ceilings_table",
    "cost_table",
    "fixed_cost_claim",
    "fixed_costs_us",
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
    "verdicts",
]
