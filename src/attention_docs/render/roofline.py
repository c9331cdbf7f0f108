# The roofline: the measured ceilings, naive attention's steps under them at their unprofiled
# times, each step's verdict (findings/roofline.py), and the same steps on a GPU's data sheet.
from __future__ import annotations

from attention_docs.findings import roofline as fr
from attention_docs.findings import steps as fs
from attention_docs.findings.forecast import check
from attention_docs.findings.model_check import ELEMENTWISE, MATMUL, SOFTMAX
from attention_docs.measurements.schema import Sourced
from attention_docs.records.steps import MATMULS
from attention_docs.render import claims, words
from attention_docs.render.caption import on_one_device
from attention_docs.render.figures import (
    INK,
    MUTED,
    STEP_COLORS,
    figure_html,
    new_figure,
    to_svg,
    unit_ticks,
)
from attention_docs.render.forecast import forecast_box
from attention_docs.render.tables import captioned_table
from attention_docs.render.tables import measurement_of as _m

fact = words.fact
SMALL = {"textcoords": "offset points", "fontsize": 7}
CORNER = {"ha": "right", "va": "bottom", "fontsize": 7, "color": INK}


def _roofline(naive, ceilings, times, sweep=None) -> fr.Roofline:
    return fr.roofline(_m(naive), _m(ceilings), _m(times), _m(sweep))


def _verdict(p: fr.Placed) -> str:
    if p.bound.verdict is None:
        return "not timed"
    word = p.bound.verdict if p.bound.verdict == "inefficient" else f"{p.bound.verdict}-bound"
    return word if p.bound.settled else f"{word} (not in every round)"


def _code(label: str) -> str:
    """A step as the prose names it, in code type: `softmax`."""
    return f"`{label.removeprefix('attention.')}`"


def _qualified(r: fr.Roofline) -> str:
    if not r.same_bytes:
        return ""
    names = words.series(_code(s.step) for s in r.same_bytes)
    return (
        f" — though {names} took longer than {_code(r.same_bytes[0].like)}, which moves the same "
        f"bytes: bandwidth alone does not explain {'them' if len(r.same_bytes) > 1 else 'it'} (below)"
    )


@on_one_device
def finding(naive: Sourced, ceilings: Sourced, times: Sourced, sweep: Sourced, gpu_times) -> str:
    """Chapter 03's finding: the verdicts here, and why the score matmuls stay memory-bound
    on the forecast GPU."""
    r = _roofline(naive, ceilings, times, sweep)
    g = fs.gpu_steps(gpu_times)
    groups: dict[str, list[str]] = {}
    for p in r.placed:
        groups.setdefault(_verdict(p), []).append(_code(p.step.label))
    here = "; ".join(f"{k}: {words.series(v)}" for k, v in groups.items())
    side = "above" if r.cap_above_ridge else "below"
    gpu_side = "above" if g.cap_above_ridge else "below"
    return (
        f"On {_m(naive).provenance.device.label}, each step timed without the profiler in the forward's order "
        f"is {here}{_qualified(r)}. The ridge here is {fact(r.ridge, with_spread=False)}, and a matmul of naive "
        f"attention at most reaches {fact(r.cap)}, {side} it. On an {g.gpu.label} in "
        f"{g.shape.dtype} the data sheet's ridge is {fact(g.ridge)} and the matmuls cannot pass "
        f"{fact(g.cap)}: {gpu_side} the ridge however long the sequence, which is why fusing the "
        f"steps, and never writing the N×N scores at all, pays there."
    )


def what_to_do(gpu_times) -> str:
    """What the cost model means for your own GPU, each action backed by the page."""
    g = fs.gpu_steps(gpu_times)
    return claims.what_to_do(
        f"Compute a step's intensity before you tune it. On an {g.gpu.label} in {g.shape.dtype} "
        f"the ridge is {fact(g.ridge)}, and naive attention's matmuls cannot pass "
        f"{fact(g.cap)}, "
        + ("above it." if g.cap_above_ridge else "so their bytes, not their FLOPs, set the floor."),
        "Fuse or remove the element-wise passes first: they do almost no arithmetic per byte, "
        "so only fewer bytes make them faster ([fusion](06-fusion.md)).",
    )


# --- Cost and ceilings -----------------------------------------------------------------------------


def costs(sourced: Sourced) -> str:
    """FLOPs, minimum bytes and arithmetic intensity per step at the measured shape; and the
    cost model's matmul FLOPs against torch.profiler's own count."""
    rows = [
        [f"`{s.label}`", s.flops, s.bytes, s.intensity] for s in fs.steps(sourced.measurement).steps
    ]
    header = "Step | FLOPs (cost model) | Bytes (cost model, minimum) | Intensity (cost model)"
    what = "The cost model (computed, not measured)."
    table = captioned_table(header, rows, "lrrr", sourced, what)
    p = fr.profiler_flops(sourced.measurement)
    if p is None:
        return table
    agree = "the same number" if p.agree else "a different number"
    return table + (
        f"\n\ntorch.profiler (`with_flops=True`, in a profile of its own) counted "
        f"**{fact(p.counted)}** per forward in {words.series(f'`{n}`' for n in p.names)}; the "
        f"cost model gives {fact(p.model)} for the two matmuls — {agree}. It has no formula for "
        f"the element-wise steps: they do not appear in its count at all."
    )


def ceilings_table(sourced: Sourced) -> str:
    """Every ceiling measurement with the range of its rounds (and the data sheet's figure
    where the device has one)."""
    found = fr.ceiling_rows(sourced.measurement)
    spec = any(r.spec for r in found)
    rows = [
        (f"matmul ({r.dtype})", f"n = {r.size}", r.rate or r.status, *[r.spec] * spec)
        if r.buffer is None
        else ("copy", r.buffer, r.rate or r.status, *[r.spec] * spec)
        for r in found
    ]
    header = ["Ceiling", "Size", "Achieved (unprofiled; range over rounds)"]
    what = "Measured ceilings, timed without the profiler in interleaved rounds."
    return captioned_table(header + ["Data sheet"] * spec, rows, "llr" + "r" * spec, sourced, what)


@on_one_device
def ceilings_claim(naive: Sourced, ceilings: Sourced, times: Sourced) -> str:
    """The two ceilings, the ridge they imply, and the small copy against the large one."""
    r = _roofline(naive, ceilings, times)
    dtype = _m(naive).params["dtype"]
    text = (
        f"This machine's ceilings are **{fact(r.peak)}** ({dtype} matmul) and "
        f"**{fact(r.bandwidth)}** (large copy). Their ratio, the *ridge point*, is "
        f"**{fact(r.ridge)}**: a step that does fewer FLOPs than that per byte it moves cannot "
        f"keep the arithmetic units busy, whatever the kernel."
    )
    if r.small_copy is not None:
        tie = ": within noise of" if r.small_copy_tie else ", beyond the noise of"
        text += f" The small copy ran at {fact(r.small_copy)}{tie} the large one."
    return text


# --- Predicted against measured ---------------------------------------------------------------------


@on_one_device
def bound_rules(naive: Sourced, ceilings: Sourced, times: Sourced, sweep: Sourced) -> str:
    """The classification rule with the thresholds the code uses, and this device's fixed cost."""
    r = _roofline(naive, ceilings, times, sweep)
    if r.fixed_from == "gaps":
        fixed = (
            "the GPU's idle time just before each of the step's kernels, read off the profiled "
            "trace on the GPU clock"
        )
    elif r.floor_call is not None:
        fixed = (
            f"the step's top-level op calls × the per-call floor measured in "
            f"[Reading a profile](01-reading-a-profile.md#overhead-bound-or-work-bound), "
            f"{fact(r.floor_call, with_spread=False)}"
        )
    else:
        fixed = "not measured"
    return (
        f"A step within **{fact(fr.OVERHEAD)}** of its roofline time is bound by "
        f"the larger of its two roofline times: **compute** if FLOPs ÷ peak is larger, "
        f"**memory** if bytes ÷ bandwidth is. Beyond that it reaches under a fifth of what this "
        f"machine allows and neither ceiling explains it: it is **overhead**-bound when its "
        f"fixed cost accounts for at least {fact(fr.FIXED)} of its "
        f"time, and **inefficient** otherwise. Here the fixed cost is {fixed}."
    )


@on_one_device
def verdicts(naive: Sourced, ceilings: Sourced, times: Sourced, sweep: Sourced) -> str:
    """Per step: both roofline times (the floor in bold), the unprofiled time and its ratio
    to the floor, the fixed cost on the same clock, and the verdict; then how close the
    matmuls come to the roof, and which steps beat a roof that was not theirs."""
    r = _roofline(naive, ceilings, times, sweep)
    rows = []
    for p in r.placed:
        compute, memory = fact(p.compute), fact(p.memory)
        compute, memory = (
            (f"**{compute}**", memory) if p.bound.roof == "compute" else (compute, f"**{memory}**")
        )
        alone = p.step.alone or "not timed"
        rows.append(
            [f"`{p.step.label}`", compute, memory, alone, p.ratio, p.fixed, f"**{_verdict(p)}**"]
        )
    header = (
        "Step | FLOPs ÷ peak | Bytes ÷ bandwidth | Time in the forward (unprofiled) | ÷ floor | "
        "Fixed cost | Bound"
    )
    what = (
        "Roofline floor against each step's time in the forward without the profiler "
        "(the steps timed one after another, in interleaved rounds)."
    )
    parts = [captioned_table(header, rows, "lrrrrrl", naive, what) + "\n\n"]
    for p in r.placed:
        if p.step.label not in MATMULS or p.attained is None:
            continue
        side = "right of the ridge" if fr.right_of_ridge(r, p) else "*left* of the ridge"
        parts.append(
            f"`{p.step.label}` ({fact(p.step.intensity)}) sits {side} and reaches "
            f"{fact(p.attained)} of what the roof allows there."
        )
    beat = [p for p in r.placed if p.beats_roof]
    memory = [f"`{p.step.label}`" for p in beat if p.bound.roof == "memory"]
    if memory:
        parts.append(
            f"{words.series(memory)} moved bytes faster than the large copy in every round: "
            f"at this size a step's inputs, written by the step before it, can still be in a "
            f"cache the copy is too large for (the page does not measure which)."
        )
    if r.same_bytes:
        parts.append(same_bytes_text(r))
    if any(p.bound.roof == "compute" for p in beat):
        parts.append(
            "A matmul beat the measured peak in every round: the matmul that measured it "
            "reached less than the machine can do (measure it larger, `--matmul-size`)."
        )
    return " ".join(parts)


def same_bytes_text(r: fr.Roofline) -> str:
    """The memory-side steps slower than one moving the same bytes, with the ops their
    profile records: what the minimum-bytes model leaves out, said as unmeasured."""
    like = _code(r.same_bytes[0].like)
    slower = words.series(f"{_code(s.step)} {fact(s.ratio)} as long" for s in r.same_bytes)
    ops = "; ".join(
        f"{_code(s.step)}: {words.series(f'`{o}`' for o in s.ops)}" for s in r.same_bytes if s.ops
    )
    recorded = f" Inside each range the profile records {ops}." if ops else ""
    return (
        f"{like} moves the same minimum bytes ({fact(r.same_bytes[0].bytes)}) as the "
        f"slower steps here, which took {slower}, in every round: the bandwidth {like} reached does "
        f'not hold them, so their "memory-bound" above says only which roof is nearer.{recorded} '
        f"The cost model counts one pass over the N×N matrix per step; it does not count the "
        f"passes the code adds (building a mask, copying before a fill) nor that an "
        f"exponential costs more than one FLOP. Which of these makes the difference is not "
        f"measured here."
    )


# --- On a GPU ---------------------------------------------------------------------------------------


def gpu_forecast(gpu_times) -> str:
    """The steps' places on the forecast GPU's roofline, and the ridge in bf16 and float32;
    beside the measurement when the store holds that GPU's entry."""
    g = fs.gpu_steps(gpu_times)
    rows = [
        (f"ridge, {g.shape.dtype} matmul (tensor cores)", check(g.ridge, None)),
        ("ridge, float32 (CUDA cores, TF32 off)", check(g.ridge_float32, None)),
    ]
    rows += [
        (f"`{s.label}` at {fact(s.intensity)}: {s.kernel.limit}-bound, attainable rate", s.rate)
        for s in g.steps
    ]
    lead = (
        f"In {g.shape.dtype}, a matmul of naive attention cannot pass {fact(g.cap)} however long "
        f"the sequence: below the {g.gpu.label}'s ridge of {fact(g.ridge)}, so even the score "
        f"matmuls are limited by memory there, and the element-wise steps far more. In float32 "
        f"(TF32 off) the ridge drops to {fact(g.ridge_float32)} and the limit to "
        f"{fact(g.cap_float32)}: "
        + ("above it." if g.cap_float32_above_ridge else "still below it.")
        if not g.cap_above_ridge
        else f"On the {g.gpu.label} the ridge of a {g.shape.dtype} matmul is {fact(g.ridge)}."
    )
    model = (
        "A step's attainable rate is min(peak, bandwidth × intensity); each step is one kernel "
        "moving the cost model's minimum bytes."
    )
    kinds = (MATMUL, SOFTMAX, ELEMENTWISE)
    return forecast_box(g.gpu, rows, shape=g.shape, lead=lead, model=model, kinds=kinds)


# --- The figure ---------------------------------------------------------------------------------------


@on_one_device
def roofline_figure(naive: Sourced, ceilings: Sourced, times: Sourced, sweep: Sourced) -> str:
    """Log-log roofline: the measured roof, the steps at their unprofiled FLOP/s with the
    rounds' range as an error bar, the ridge marked; a step without FLOPs listed by its
    bandwidth instead."""
    r = _roofline(naive, ceilings, times, sweep)
    placed = [p for p in r.placed if p.step.flop_rate and p.step.intensity]
    xs_all = [p.step.intensity.value for p in placed] + [r.ridge.value]
    # layout: the x axis spans every point
    lo, hi = min(xs_all) / 8, max(xs_all) * 8
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    alt = [
        f"Roofline. Measured peak {words.value(r.peak.value, 'FLOP/s')}, bandwidth "
        f"{words.value(r.bandwidth.value, 'B/s')}, ridge {words.value(r.ridge.value, 'FLOP/B')}. "
        f"Steps at their unprofiled time."
    ]
    with new_figure(7.0, 4.2) as fig:
        ax = fig.add_subplot()
        ax.plot(xs, [r.roof.attainable(x) for x in xs], color=INK, lw=1.6, label="measured roof")
        ax.axvline(r.ridge.value, color=MUTED, lw=0.8, ls=":")
        ridge = f"ridge {words.value(r.ridge.value, 'FLOP/B')}"
        ax.annotate(ridge, (r.ridge.value, r.peak.value), (4, -12), **SMALL, color=MUTED)
        for p in placed:
            f, x = p.step.flop_rate, p.step.intensity.value
            bar = [[f.value - f.low], [f.high - f.value]]
            name = p.step.label.removeprefix("attention.")
            color = STEP_COLORS.get(p.step.label, INK)
            ax.errorbar([x], [f.value], bar, fmt="o", ms=7, capsize=3, color=color, label=name)
            alt.append(
                f"{p.step.label}: {words.value(x, 'FLOP/B')}, {words.value(f.value, 'FLOP/s')} "
                f"({words.value(p.attained.value, '%')} of attainable)."
            )
        notes = [
            f"{p.step.label}: 0 FLOPs; moved {words.value(p.step.byte_rate.value, 'B/s')}"
            for p in r.placed
            if not p.step.cost.flops and p.step.byte_rate
        ]
        if notes:
            ax.text(0.98, 0.03, "\n".join(notes), transform=ax.transAxes, **CORNER)
            alt.extend(n + "." for n in notes)
        ax.set(xscale="log", yscale="log", ylabel="achieved rate (unprofiled)")
        unit_ticks(ax.yaxis, "FLOP/s")  # 1 GFLOP/s, 10 GFLOP/s: as the tables say
        ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
        ax.grid(color=MUTED, alpha=0.3, linewidth=0.5, which="both")
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(frameon=False, fontsize=8, loc="upper left")
        svg = to_svg(fig, " ".join(alt))
    what = (
        "The five steps on the measured device's roofline, each at its unprofiled time in the "
        "forward (error bars: its confidence interval over the rounds)."
    )
    return figure_html(svg, naive, what)
