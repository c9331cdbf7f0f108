# Renderers for the KV-cache decoding chapter: templates and drawings over findings/decode.py
# (decode_steps, decode_prefill_vs_decode, machine_ceilings, the H200 forecast). Pure: no
# torch, no I/O.
from __future__ import annotations

from attention_docs.analytic import gpu as gpus
from attention_docs.findings import decode as fdecode
from attention_docs.findings.forecast import check, measured_on
from attention_docs.findings.model_check import DECODE
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import claims, words
from attention_docs.render.figures import (
    INK,
    MUTED,
    SERIES_COLORS,
    figure_html,
    new_figure,
    to_svg,
    unit_ticks,
)
from attention_docs.render.forecast import forecast_box
from attention_docs.render.sweep import sweep_claim, sweep_figure
from attention_docs.render.tables import captioned_table, measurement_of

COLORS = dict(zip(fdecode.VARIANTS, SERIES_COLORS, strict=False))
# A large hollow circle (naive), a cross (repeat_kv), a small square (sdpa) drawn on top: two
# paths at one point stay visible.
MARKERS = {"naive": {"marker": "o", "markersize": 11, "markerfacecolor": "none"},
           "naive_repeat_kv": {"marker": "x", "markersize": 8}, "sdpa": {"marker": "s", "markersize": 5}}  # fmt: skip


def _say(f, spread: bool = True) -> str:
    return "—" if f is None else words.fact(f, with_spread=spread)


def _no_roof(m: Measurement) -> str:
    return (
        f"`machine_ceilings` has no copy bandwidth or {m.params['dtype']} matmul rate measured "
        "on this device, so nothing is placed under a roof here."
    )


def _versus(
    m: Measurement, a: fdecode.Point, b: fdecode.Point, names: dict[str, str] | None = None
) -> str:
    """`a` against `b`, the faster first; `names` (by variant) replaces the labels and leaves
    the range out, as a chapter's opening says it."""
    v = fdecode.versus(m, a, b)
    if v is None:
        return "not compared (a path did not run)"
    variant = {p.label: p.variant for p in (a, b)}
    fast, slow = (names[variant[label]] if names else label for label in (v.a, v.b))
    said = words.speed(v.comparison, fast, slow, with_spread=names is None)
    return words.fact_span(v.quantity.id, said)


def shape_text(s) -> str:
    """`batch 1, 16 heads, 4 k/v heads, cache 2,048, head_dim 64, float32`."""
    return (
        f"batch {s.batch_size}, {s.num_heads} heads, {s.kv_heads} k/v heads, cache "
        f"{s.keys:,}, head_dim {s.head_dim}, {s.dtype}"
    )


def finding(steps: Sourced, ceilings: Sourced | None = None) -> str:
    """The chapter's opening: a step reads the whole cache, and what sharing k/v heads did to
    its time here; the step's time, bytes and read rate go in its caption."""
    m, c = steps.measurement, measurement_of(ceilings)
    gqa, mha = fdecode.point(m, "GQA"), fdecode.point(m, "MHA")
    share = fdecode.copy_share(m, gqa, c)
    names = {"GQA": "a grouped-query step", "MHA": "a multi-head step"}
    claim = (
        "A decode step does little arithmetic but must read the whole KV cache, and sharing "
        f"k/v heads shrinks that cache: here {_versus(m, gqa, mha, names)}."
    )
    detail = (
        f"One grouped-query step ({gqa.label}) takes {_say(fdecode.step_time(m, gqa))} per "
        f"layer, reading its {_say(fdecode.cache_size(gqa))} cache at "
        f"{_say(fdecode.read_rate(m, gqa), False)}"
        + (f", {_say(share, False)} of the copy bandwidth" if share else "")
        + f". {_versus(m, gqa, mha)}."
    )
    return claims.opening(claim, steps, detail, ceilings)


# --- the base point: table, claims, roofline -------------------------------------------------


def steps_table(steps: Sourced, ceilings: Sourced | None = None) -> str:
    """Every path at the base point: cache, intensity, time, read rate, share of copy."""
    m, c = steps.measurement, measurement_of(ceilings)
    found = fdecode.base_points(m)
    rows = [
        [
            f"{p.label} ({p.shape.kv_heads} k/v)",
            fdecode.cache_size(p),
            fdecode.intensity(p),
            fdecode.step_time(m, p) or p.status,
            fdecode.read_rate(m, p),
            fdecode.copy_share(m, p, c),
        ]
        for p in found
    ]
    header = (
        "Variant · path | K/V cache | FLOP/B (model) | Time / step / layer (unprofiled) | "
        "Cache read rate (unprofiled) | Share of copy bandwidth"
    )
    s = found[0].shape
    what = f"One decode step per layer: batch {s.batch_size}, {s.num_heads} heads, cache {s.keys:,}, head_dim {s.head_dim}, {s.dtype}."
    layers = "Each point cycles through enough caches (“layers”) to read at least working_set_mb, as a model reads every other layer's cache between two visits to one."
    return captioned_table(header, rows, "", steps, f"{what} {layers}")


def bandwidth_claim(steps: Sourced, ceilings: Sourced | None = None) -> str:
    """What sharing k/v heads buys, and which roof binds the multi-head step."""
    m, c = steps.measurement, measurement_of(ceilings)
    mha, gqa, mqa = (fdecode.point(m, v) for v in fdecode.VARIANTS)
    text = (
        f"Grouped-query attention's cache is {_say(fdecode.cache_size(gqa))} against "
        f"{_say(fdecode.cache_size(mha))}: {_versus(m, gqa, mha)}; with one k/v head, "
        f"{_versus(m, mqa, mha)}."
    )
    below = fdecode.below_ridge(m, c, mha)
    if below is None:
        return f"{text} {_no_roof(m)}"
    bw, peak = fdecode.roof(m, c)
    roofs = (
        f"the measured ridge (its {m.params['dtype']} matmul rate, {_say(peak, False)}, over "
        f"its copy bandwidth, {_say(bw, False)})"
    )
    return (
        f"{text} A multi-head step does {_say(fdecode.intensity(mha))}, "
        + (f"below {roofs}: bytes set its floor" if below else f"above {roofs}")
        + f", and it reads at {_say(fdecode.copy_share(m, mha, c), False)} of a plain copy's rate."
        + _bytes_tests(m, mha, (gqa, mqa))
        + _resident([mha], c)
    )


# What a speed-up short of its byte ratio, or beyond it, says.
SIDES = {
    "short": "gained less than that in every round. So something other than bytes takes a "
    "larger share of a smaller step's time; this page does not measure what",
    "beyond": "gained more than that in every round. A smaller cache can sit in a faster level "
    "of memory; which one is not measured here",
}


def _bytes_tests(m, base, others) -> str:
    """Whether the steps' times followed their bytes, against `base`: said per pair."""
    tests = [t for t in (fdecode.bytes_test(m, base, p) for p in others) if t is not None]
    if not tests:
        return ""
    said = words.series(
        f"{t.fewer.label} reads {_say(t.bytes_ratio, False)} fewer bytes" for t in tests
    )
    parts = [
        f"{words.series(names)} {text}"
        for side, text in SIDES.items()
        if (names := [t.fewer.label for t in tests if t.side == side])
    ]
    verdict = ". ".join(parts) or "Each speed-up holds its byte ratio within the rounds' range"
    return (
        f" If bytes alone set the pace, each speed-up over {base.label} would equal its byte "
        f"ratio: {said}. {verdict}."
    )


def _resident(points: list, c, subject: str = "Its") -> str:
    """Said where the timed layers fit in the last-level cache: then the rates compare a
    read from the cache with a copy from memory, and can pass 100%."""
    llc = fdecode.cache_resident(points, c)
    if llc is None:
        return ""
    sets = fdecode.working_sets(points)
    if len(points) > 1 and len(sets) == 1:  # variants sized to one working set
        subject = "Each variant's"
    said = words.series([_say(f, False) for f in sets])
    return (
        f" {subject} layers ({said} in all) fit in the {_say(llc, False)} last-level "
        f"cache, so these bytes may come from there rather than from memory, which this page "
        f"does not separate: the copy, sized past the cache, is then not their roof."
    )


def sdpa_ops_note(steps: Sourced) -> str:
    """What SDPA ran for each variant, and whether it copied k/v for the grouped ones."""
    ops: dict[str, list[str]] = steps.measurement.facts.get("sdpa_ops") or {}
    copy = "aten::repeat_interleave"
    by_ops: dict[str, list[str]] = {}  # the ops SDPA ran, said once for the variants that ran them
    for v, names in ops.items():
        by_ops.setdefault(", ".join(f"`{n}`" for n in names if n != copy), []).append(v)
    ran = "; ".join(f"{said} for {words.series(vs)}" for said, vs in by_ops.items())
    copied = [v for v, names in ops.items() if copy in names]
    return f"What `scaled_dot_product_attention` ran here: {ran}. " + (
        f"For {words.series(copied)} it also ran `{copy}`: it copies each k/v head once per "
        "query head before attending."
        if copied
        else f"No `{copy}` ran: it reads each k/v head once for its whole group."
    )


def _repeat_pairs(m: Measurement) -> list[tuple]:
    """Per shared-k/v variant that ran both ways: folding the group into rows, and repeating
    k and v per query head (MHA has no k/v to repeat)."""
    pairs = [(fdecode.point(m, v, "naive"), fdecode.point(m, v, "naive_repeat_kv")) for v in fdecode.VARIANTS[1:]]  # fmt: skip
    return [(a, b) for a, b in pairs if a and b]


def repeat_kv_claim(steps: Sourced) -> str:
    """What copying k/v per query head costs against folding the group into rows."""
    m = steps.measurement
    return (
        "Against repeating the k/v heads with `repeat_interleave`: "
        + "; ".join(_versus(m, a, b) for a, b in _repeat_pairs(m))
        + "."
    )


def what_to_do(steps: Sourced, pvd: Sourced) -> str:
    """What decoding's numbers mean for your own model, each action backed by the page."""
    m, p = steps.measurement, pvd.measurement
    mha, gqa = fdecode.point(m, "MHA"), fdecode.point(m, "GQA")
    repeat = _repeat_pairs(m)
    return claims.what_to_do(
        f"Share k/v heads (grouped-query or multi-query attention): the cache shrinks with "
        f"them, {_say(fdecode.cache_size(gqa))} against {_say(fdecode.cache_size(mha))} here, "
        f"and {_versus(m, gqa, mha)}.",
        f"Pass the grouped k and v to SDPA (`enable_gqa=True`) or fold the group into rows; "
        f"never `repeat_interleave` them: {_versus(m, *repeat[0])}."
        if repeat
        else "",
        f"Run the prompt as one prefill, never token by token: {p.params['prompt_len']} tokens "
        f"took {_say(fdecode.mode_per_token(p, fdecode.DECODE), False)} a token one at a time "
        f"against {_say(fdecode.mode_per_token(p, fdecode.PREFILL), False)} in prefill.",
    )


def roofline_figure(steps: Sourced, ceilings: Sourced | None = None) -> str:
    """Each path at the base point at (intensity, FLOP/s reached unprofiled) under the roof."""
    m, c = steps.measurement, measurement_of(ceilings)
    ridge = fdecode.ridge(m, c)
    if ridge is None:
        return f'<p class="ad-caption">{_no_roof(m)}</p>'
    bw, peak = (f.value for f in fdecode.roof(m, c))
    ran = [p for p in fdecode.base_points(m) if p.time]
    # layout: the x axis starts below the lowest intensity
    lo = min(min(p.cost.intensity for p in ran) / 4, 0.1)
    # layout: the x axis ends past the ridge and the last point
    hi = max(ridge, *(p.cost.intensity for p in ran)) * 8
    alt = [f"Roofline: copy {words.per_second(bw, 'B')}, matmul {words.per_second(peak, 'FLOP')}."]
    with new_figure(7.0, 3.8) as fig:
        ax = fig.add_subplot()
        xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        # layout: the roof line drawn: min(peak, bandwidth × x)
        ax.plot(xs, [min(peak, bw * x) for x in xs], color=INK, linewidth=1.4)
        ax.axvline(ridge, color=MUTED, linestyle=":", linewidth=1)
        ax.text(ridge * 1.1, peak * 0.55, f"ridge {words.intensity(ridge)}", color=MUTED)
        for p in ran:
            rate = p.cost.flops / (p.time.time_us * 1e-6)
            style = {"color": COLORS.get(p.variant, INK), "label": p.label, **MARKERS[p.impl]}
            ax.plot(p.cost.intensity, rate, linestyle="none", **style)
            alt.append(
                f"{p.label}: {words.intensity(p.cost.intensity)}, {words.per_second(rate, 'FLOP')}."
            )
        ax.set(xscale="log", yscale="log", ylim=(None, peak * 2))
        ax.set(
            xlabel="FLOP per byte the step must move (cost model)",
            ylabel="achieved rate (unprofiled)",
        )
        unit_ticks(ax.yaxis, "FLOP/s")  # 1 GFLOP/s, 10 GFLOP/s: as the tables say
        ax.grid(color=MUTED, alpha=0.3, linewidth=0.5, which="both")
        ax.spines[["top", "right"]].set_visible(False)
        fig.legend(loc="outside right center", frameon=False, fontsize=8)
        svg = to_svg(fig, " ".join(alt))
    return figure_html(svg, steps, "Decode steps under machine_ceilings' roof, unprofiled.")


# --- the cache and the batch -----------------------------------------------------------------


def _variant_names(m: Measurement) -> dict[str, str]:
    return {
        v: f"{v} ({words.plural(m.facts['kv_heads'][v], 'k/v head')})" for v in fdecode.VARIANTS
    }


def cache_figure(steps: Sourced) -> str:
    """Time per step against cache length at batch 1, log-log, one banded line per variant."""
    return sweep_figure(
        steps,
        "One decode step per layer at batch 1 as the cache grows, unprofiled.",
        spec=fdecode.CACHE,
        names=_variant_names(steps.measurement),
        ylabel="time per step per layer",
    )


def cache_claim(steps: Sourced, ceilings: Sourced | None = None) -> str:
    """The slope of each line over the longer caches, and how fast the longest cache is read."""
    m, c = steps.measurement, measurement_of(ceilings)
    ranked = sweep_claim(steps, spec=fdecode.CACHE, names=_variant_names(m))
    slopes = [f"{v} {_say(s)}" for v in fdecode.VARIANTS if (s := fdecode.tail_slope(m, v))]
    if not slopes:
        return f"{ranked} Too few cache lengths ran on this device to fit a slope.".strip()
    last = [fdecode.cache_series(m, v)[-1] for v in fdecode.VARIANTS]
    reads = [f"{p.variant} {_say(s, False)}" for p in last if (s := fdecode.copy_share(m, p, c))]
    text = (
        f"{ranked} Over the longer half of the caches the log-log slopes are "
        f"{words.series(slopes)} (each range from the times' intervals)."
    ).strip()
    if not reads:
        return text
    return (
        f"{text} At {last[0].shape.keys:,} tokens they read at {', '.join(reads)} of the copy "
        f"bandwidth.{_resident(last, c, 'The')}"
    )


def batch_table(steps: Sourced, ceilings: Sourced | None = None) -> str:
    """Grouped-query steps as the batch grows: per step, per token, read rate, share of copy."""
    m, c = steps.measurement, measurement_of(ceilings)
    series = fdecode.batch_series(m)
    rows = [
        [
            str(p.shape.batch_size),
            fdecode.step_time(m, p),
            fdecode.per_token(m, p),
            fdecode.read_rate(m, p),
            fdecode.copy_share(m, p, c),
        ]
        for p in series
    ]
    header = "Batch | Time / step / layer (unprofiled) | Time / token / layer | Cache read rate | Share of copy bandwidth"
    what = f"Grouped-query steps by batch, unprofiled ({shape_text(series[0].shape)})."
    return captioned_table(header, rows, "", steps, what)


def batch_claim(steps: Sourced) -> str:
    """What batching does to the time per token, and from which batch it gains nothing more."""
    m = steps.measurement
    series, found, flat = fdecode.batch_series(m), fdecode.token_gain(m), fdecode.saturation(m)
    if found is None:
        return "Too few batch sizes ran on this device to compare."
    (q, gain), first, last = found, series[0], series[-1]
    text = (
        f"From batch {first.shape.batch_size} to {last.shape.batch_size} the time per token "
        f"goes from {_say(fdecode.per_token(m, first), False)} to {_say(fdecode.per_token(m, last), False)}"
        f": {words.fact_span(q.id, words.versus(gain))}"  # `within noise (1.01×)` when a tie
        + ("." if gain.tie else " the throughput per layer.")
    )
    if flat is None:
        return f"{text} The time per token still falls beyond the noise at the largest batch."
    return text + (
        f" From batch {flat.shape.batch_size} on, no larger batch decodes a token faster beyond "
        "the noise: each sequence brings its own cache, so a larger batch reads more bytes."
    )


# --- prefill against decode, one step under the profiler -------------------------------------


def prefill_table(pvd: Sourced) -> str:
    """The same tokens all at once and one at a time: time, per token, FLOP rate, bytes."""
    m = pvd.measurement
    rows = []
    for mode in (fdecode.PREFILL, fdecode.DECODE):
        rate, moved, per_byte = fdecode.mode_costs(m, mode)
        per_token = _say(fdecode.mode_per_token(m, mode), False)
        rows.append(
            [mode, fdecode.mode_time(m, mode), per_token, _say(rate, False), moved, per_byte]
        )
    header = (
        "Mode | Total (unprofiled) | Per token | Useful FLOP/s | Bytes (model) | FLOP/B (model)"
    )
    what = f"The same {m.params['prompt_len']} tokens, one layer."
    return captioned_table(header, rows, "", pvd, what)


def prefill_claim(pvd: Sourced, ceilings: Sourced | None = None) -> str:
    """Decode's time split into its bytes at the copy bandwidth and its steps' fixed cost."""
    m = pvd.measurement
    (q, k), s = fdecode.prefill_speed(m), fdecode.split(m, measurement_of(ceilings))
    text = (
        f"For the same useful FLOPs, {words.fact_span(q.id, words.speed(k, 'prefill', 'decode'))}"
        f": decode moves {_say(fdecode.bytes_ratio(m))} prefill's bytes, the cache re-read at every step."
    )
    if s is None:
        return f"{text} How much of decode's time its bytes explain needs this device's copy bandwidth."
    if not s.holds:
        return text + (
            " How much of decode is bytes and how much is the cost of a step is not stated: the "
            "bytes at the copy bandwidth plus one-token steps add up to more than decoding took "
            "on this run, beyond the noise (the machine's load is in the raw data)."
        )
    return text + (
        f" At the copy bandwidth its bytes take {_say(s.bytes_share)} of decode's time; "
        f"{m.params['prompt_len']} steps on a one-token cache "
        f"({_say(fdecode.mode_time(m, fdecode.FLOOR), False)} each) take {_say(s.steps_share)}. "
        + (
            "Here taking a step costs decode more than its bytes do."
            if s.steps_dominate
            else "Here the bytes re-read at every step cost decode more than taking a step does."
        )
    )


def step_share_table(pvd: Sourced) -> str:
    """The profiled decode step: each range's share (structure only), then its unprofiled time."""
    m = pvd.measurement
    shares, top = fdecode.step_shares(m)
    rows = [[f"`{s.label}`", str(s.calls), shares[s.label]] for s in m.steps]
    header = "Range | Calls | Share of the profiled step (range over profiled steps)"
    said = (
        f"`{top.part}` has the largest share"
        if top.clear
        else f"no range's share clears every other's beyond the noise (`{top.part}` and "
        f"{words.series(f'`{r}`' for r in top.rivals)} overlap)"
    )
    what = "One decode step on the naive path, profiled: shares only."
    return captioned_table(header, rows, "", pvd, what) + (
        f"\n\nUnprofiled, this step takes {_say(fdecode.mode_time(m, fdecode.PROFILED_STEP))}; under the "
        f"profiler {said}."
    )


# --- on a GPU --------------------------------------------------------------------------------


def gpu_forecast(entries: list[Sourced], pvd: Sourced) -> str:
    """The H200 forecast: each step's floor from bytes ÷ bandwidth (with the measurement when
    the store holds the GPU's decode_steps entry), the batch that fills it without split-KV,
    and the tokens per step that would make a step compute-bound."""
    gpu = gpus.sheet()
    floors = fdecode.floor_checks(gpu, measured_on(entries, gpu))
    rows = [
        (f"Step floor, {v} ({fdecode.GPU_KV_HEADS[v]} k/v), batch {b}, cache {c:,}", k)
        for v, b, c, k in floors
    ]
    for what, fact in (
        ("Batch that fills it without split-KV", fdecode.fill_batch),
        ("New tokens per step that reach the ridge", fdecode.ridge_tokens),
    ):
        rows += [(f"{what}, {v}", check(fact(gpu, v), None)) for v in fdecode.VARIANTS]
    host = fdecode.mode_time(pvd.measurement, fdecode.FLOOR)
    lead = (
        "Every step below is bound by HBM bandwidth"
        + ("" if fdecode.memory_bound_everywhere(gpu) else " except where the FLOP floor is longer")
        + f": its intensity stays under the ridge ({_say(fdecode.gpu_ridge(gpu))}) at any batch, as "
        "each sequence brings its own cache. Only more new tokens per step (speculative "
        f"decoding) raise it. Launches: {fdecode.host_bound([k.forecast for *_, k in floors], host)} "
        f"of the {len(floors)} floors are shorter than this CPU's eager step with one cached "
        f"token ({_say(host, False)}, with almost nothing to read). CUDA graphs "
        '(`torch.compile(mode="reduce-overhead")`) replay a captured step without that Python '
        "and launch work. Parallelism: one thread block per "
        "sequence and k/v head leaves SMs idle below the batches listed; FlashAttention 2 then "
        f"splits the cache (split-KV, flash-decoding: {_say(fdecode.splits(gpu, 'GQA', 1, 4096))} "
        "for GQA at batch 1, cache 4,096)."
    )
    model = (
        "Floor: the K/V cache, queries and outputs moved once at the data sheet's bandwidth "
        "(analytic.gpu.decode_step); launches, L2 and clocks not modelled. Launches: this CPU's "
        "eager step is a stand-in, not a GPU host's cost: a GPU machine's CPU runs the same ops "
        "and adds a kernel launch to each, and neither is measured here. Blocks and splits: "
        "FlashAttention 2's published rule (flash_api.cpp: groups folded into rows, two "
        f"128-thread blocks per SM on {gpu.sm_count} SMs, split when they fill under four fifths)."
    )
    return forecast_box(gpu, rows, lead=lead, model=model, kinds=(DECODE,))
