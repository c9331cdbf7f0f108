# The roofline: the measured ceilings, naive attention's steps under them at their unprofiled
# times, each step's verdict (findings/roofline.py), and the same steps on a GPU's data sheet.
from __future__ import annotations

from collections import Counter

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


_COUNT = ("no", "one", "two", "three", "four", "five")


def _tally(noun: str, placed: list[fr.Placed]) -> str:
    """How a group of steps is bound, in words: "both matmuls are compute-bound", "of the
    three element-wise steps, one is memory-bound and two are inefficient"."""
    said = Counter(_verdict(p) for p in placed)
    if len(said) == 1:
        every = "both" if len(placed) == 2 else f"all {_COUNT[len(placed)]}"
        return f"{every} {noun} are {next(iter(said))}"
    parts = (f"{_COUNT[k]} {'is' if k == 1 else 'are'} {v}" for v, k in said.items())
    return f"of the {_COUNT[len(placed)]} {noun}, {words.series(parts)}"


@on_one_device
def finding(naive: Sourced, ceilings: Sourced, times: Sourced, sweep: Sourced) -> str:
    """Chapter 03's opening: what bounds the matmuls and what bounds the element-wise steps,
    in words; each step's time ÷ floor in the caption under it."""
    r = _roofline(naive, ceilings, times, sweep)
    matmuls = [p for p in r.placed if p.step.label in MATMULS]
    others = [p for p in r.placed if p.step.label not in MATMULS]
    claim = f"Here {_tally('matmuls', matmuls)}; {_tally('element-wise steps', others)}."
    if worst := fr.most_inefficient(others):
        claim += (
            f" The {worst.step.label.removeprefix('attention.')} step took "
            f"{fact(worst.ratio, with_spread=False)} its floor at the bandwidth this machine "
            "reaches at its size."
        )
    ratios = words.series(
        f"{p.step.label.removeprefix('attention.')} {fact(p.ratio)}" for p in r.placed if p.ratio
    )
    detail = (
        f"Each step timed without the profiler, in the forward's order, against the roof of "
        f"the copy that matches its bytes. Time ÷ roofline floor: {ratios}."
    )
    return claims.opening(claim, naive, detail, times, ceilings)


def what_to_do(gpu_times) -> str:
    """What the cost model means for your own GPU, each action backed by the page."""
    g = fs.gpu_steps(gpu_times)
    return claims.what_to_do(
        f"Compute a step's intensity before you tune it. On an {g.gpu.label} in {g.shape.dtype} "
        f"the ridge is {fact(g.ridge)}, and naive attention's matmuls cannot pass "
        f"{fact(g.cap)}, "
        + ("above it." if g.cap_above_ridge else "so their bytes, not their FLOPs, set the floor."),
        "Fuse or remove the element-wise passes first: they do almost no arithmetic per byte, "
        "so faster arithmetic cannot help them ([fusion](06-fusion.md)).",
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
        f"This machine's ceilings are **{fact(r.peak)}** for a {dtype} matmul and "
        f"**{fact(r.bandwidth)}** for a large copy. Their ratio, the *ridge point*, is "
        f"**{fact(r.ridge)}**: a step that does fewer FLOPs than that per byte it moves cannot "
        f"keep the arithmetic units busy."
    )
    side = "above" if r.cap_above_ridge else "below"
    text += (
        f" However long the sequence, a matmul of naive attention reaches at most "
        f"{fact(r.cap)}: {side} this ridge."
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
    text = (
        f"A step within **{fact(fr.OVERHEAD)}** of its roofline time is held by the ceiling "
        f"behind the larger of its two roofline times: **compute** or **memory**. Beyond that, "
        f"neither ceiling explains it. It is **overhead**-bound when its fixed cost is at least "
        f"{fact(fr.FIXED)} of its time, and **inefficient** otherwise. Here the fixed cost is "
        f"{fixed}."
    )
    if r.small_copy is None:
        return text
    small = [p for p in r.placed if p.bandwidth.id == r.small_copy.id]
    if len(small) == len(r.placed):
        held = f"Every step here fits the small copy, so each is held to its {fact(r.small_copy)}"
    elif not small:
        held = f"No step here fits the small copy: each is held to the large copy's {fact(r.bandwidth)}"
    else:
        names = words.series(_code(p.step.label) for p in small)
        held = f"Here only {names} fit the small copy, at {fact(r.small_copy)}; the others get the large one"
    return text + (
        " A step reads what the step before it just wrote, so a copy past every cache would "
        "hide a slow kernel. Each step is therefore held to the smallest copy that moves about "
        f"as many bytes or more; a copy moves twice its buffer, reading and writing it. {held}."
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
            f"{words.series(memory)} moved bytes faster, in every round, than the copy the roof "
            f"takes for {'its' if len(memory) == 1 else 'their'} size: that copy is not the best "
            f"this machine does there."
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
    profile records, and what the minimum-bytes model leaves out, said as unmeasured."""
    like = _code(r.same_bytes[0].like)
    slower = words.series(f"{_code(s.step)} {fact(s.ratio)}" for s in r.same_bytes)
    ops = "; ".join(
        f"{_code(s.step)}: {words.series(f'`{o}`' for o in s.ops)}" for s in r.same_bytes if s.ops
    )
    recorded = f" Inside each range the profile records {ops}." if ops else ""
    names = words.series(_code(s.step) for s in r.same_bytes)
    return (
        f"{names} {'move' if len(r.same_bytes) > 1 else 'moves'} the same minimum bytes as {like} ({fact(r.same_bytes[0].bytes)}), yet in "
        f"every round took longer: {slower} its time.{recorded} The cost model counts one pass "
        f"over the N×N matrix per step. What it leaves out may explain the gap: the passes the "
        f"code adds (building a mask, copying before a fill) and the cost of an exponential."
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
        f"the sequence. That is below the {g.gpu.label}'s ridge of {fact(g.ridge)}, so memory "
        f"limits even the score matmuls there, and the element-wise steps far more. In float32 "
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
    """Log-log roofline: the measured roof (dashed: the small copy's, where steps are held to
    it), the steps at their unprofiled FLOP/s with the rounds' range as an error bar, the ridge
    marked; a step without FLOPs listed by its bandwidth instead."""
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
        ax.plot(
            xs, [r.roof.attainable(x) for x in xs], color=INK, lw=1.6, label="roof (large copy)"
        )
        if any(p.bandwidth.id != r.bandwidth.id for p in r.placed):
            small = r.small_copy.value
            # layout: the small copy's roof, min(peak, bandwidth × intensity), drawn
            ax.plot(xs, [min(r.peak.value, small * x) for x in xs], color=INK, lw=1.0, ls="--", label="roof (small copy)")  # fmt: skip
            alt.append(f"Roof of the small copy, which the steps' bytes fit: {words.value(small, 'B/s')}.")  # fmt: skip
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
