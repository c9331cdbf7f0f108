# The reference dataset on the page: every published GPU point beside this site's forecast
# for its GPU and shape, with the ratio, labelled "published, not measured here"; and the
# forecast model's accuracy over every point, said plainly. Draws findings/published.py;
# decides nothing.
from __future__ import annotations

import html

from attention_docs.analytic import gpu as gpus
from attention_docs.findings import published as fpublished
from attention_docs.records.published import Point
from attention_docs.render import words
from attention_docs.render.tables import markdown_table

NOT_MEASURED = "published, not measured here"
# How each verdict reads after "the published value is ..." (a count: "... has ...").
_WHERE = {
    fpublished.WITHIN: "within the forecast range",
    fpublished.ABOVE: "above the forecast range",
    fpublished.BELOW: "below the forecast range",
    fpublished.OWN_SOURCE: "the source of the range itself (agrees by construction)",
    fpublished.NO_RANGE: "beside the data sheet's figure only (no cited efficiency for this GPU)",
    fpublished.SAME_COUNT: "the forecast's count",
    fpublished.MORE: "more kernels than the forecast",
    fpublished.FEWER: "fewer kernels than the forecast",
    fpublished.AS_FAST: "as fast as its baseline, as the forecast says",
    fpublished.SLOWER: "slower than its baseline, which the forecast cannot tell apart",
    fpublished.FASTER: "faster than its baseline, which the forecast cannot tell apart",
}

# Why a point tests nothing, said after its names.
_UNTESTED = {
    fpublished.OWN_SOURCE: "these are the efficiencies the ranges divide by, so they agree "
    "with the forecast by construction and test nothing",
    fpublished.NO_RANGE: "no efficiency is cited for this GPU, so it stands beside the data "
    "sheet's peak only, untested",
}


def value(b: fpublished.Beside) -> str:
    """The published value as its source states it, marked with its fact id."""
    return words.fact_span(b.published.id, words.as_published(b.point.value, b.point.unit))


def _shape(point: Point) -> str:
    if point.shape is not None:
        return point.shape.text()
    dtype = f", {point.dtype}" if point.dtype else ""
    if point.unit == "% of baseline":
        return f"over its benchmarks ({point.sweep}){dtype}"
    return f"best of its sweep ({point.sweep}){dtype}"


def _ratio(b: fpublished.Beside) -> str:
    r = b.ratio
    if r.value is not None:
        return words.fact(r)
    return words.fact_span(r.id, words.span(r.low, r.high, words.times))


def reference_table() -> str:
    """Every point of the reference dataset beside its forecast, with the ratio: one table
    per source, the source (and its shape, where all its points share one) said above it."""
    header = ["Published point", "GPU", "Statistic", f"Value ({NOT_MEASURED})",
              "This site's forecast", "Published ÷ forecast", "Where it falls"]  # fmt: skip
    groups: dict[str, list[fpublished.Beside]] = {}
    for b in fpublished.every_point():
        groups.setdefault(b.point.source.key, []).append(b)
    parts = []
    for found in groups.values():
        first = found[0].point
        shapes = {_shape(b.point) for b in found}
        shared = len(shapes) == 1
        s = first.source
        scripts = f" ([scripts]({s.scripts}))" if s.scripts else ""
        lead = f"**[{s.title}]({s.url}){scripts}** — {html.escape(s.software)}."
        if shared:
            lead += f" Shape: {next(iter(shapes))}."
        rows = []
        for b in found:
            p = b.point
            forecast = words.fact(b.forecast)
            if b.kernels is not None:
                forecast += f" ({words.plural(b.kernels, 'kernel')})"
            statistic = p.statistic if shared else f"{p.statistic}; {_shape(p)}"
            rows.append([p.subject, _short_gpu(b), statistic, value(b), f"{forecast}, {b.model}",
                         _ratio(b), _WHERE[b.where]])  # fmt: skip
        parts.append(lead + "\n\n" + markdown_table(header, rows, "lllrrrl"))
    caption = (
        f'<p class="ad-caption">Values {NOT_MEASURED}: each table cites its source '
        "(records/published.toml). Forecasts are this site's, from each GPU's data sheet "
        "(records/device.py): a time is the realistic range, the floor over the efficiencies "
        "on record; a throughput, the cited share of the data sheet's peak; a count, the "
        "kernels the forecast prices; a share of another kernel's throughput, the model's "
        "100% for two kernels it prices alike.</p>"
    )
    return "\n\n".join(parts) + "\n\n" + caption


def _short_gpu(b: fpublished.Beside) -> str:
    """The GPU as CUDA names it, without the vendor, in code type: `A100-SXM4-80GB`."""
    return f"`{b.gpu.label.removeprefix('NVIDIA ')}`"


def gpu_name(b: fpublished.Beside) -> str:
    """The GPU as CUDA names it, in code type: a name, not a memory size ("80GB")."""
    return f"`{b.gpu.label}`"


def _named(b: fpublished.Beside) -> str:
    return f"{b.point.subject} on the {gpu_name(b)}, {value(b)} against {words.fact(b.forecast)}"


def accuracy() -> str:
    """Where the published values fall against the forecasts, every point named."""
    a = fpublished.accuracy()
    within, above, below = (
        a.where(v) for v in (fpublished.WITHIN, fpublished.ABOVE, fpublished.BELOW)
    )
    out = [
        f"Of the {words.plural(len(a.points), 'published point')} on "
        f"{words.series(f'`{g}`' for g in a.gpus)}, {len(a.tested)} test a forecast time against its realistic "
        f"range: {len(within)} within it, {len(above)} above it and {len(below)} below it."
    ]
    if within:
        out.append(f"Within: {words.series(_named(b) for b in within)}.")
    for found, lead in (
        (above, "Above — the GPU took longer than the forecast allows"),
        (below, "Below — faster than the forecast allows"),
    ):
        if found:
            out.append(
                f"{lead}: {words.series(f'{_named(b)} ({_ratio(b)} the range)' for b in found)}."
            )
    same, other = a.where(fpublished.SAME_COUNT), a.where(fpublished.MORE, fpublished.FEWER)
    sentence = f"Of {words.plural(len(a.counts), 'kernel count')}, {len(same)} match the forecast's"
    if other:
        sentence += "; " + words.series(
            f"{b.point.subject} launched {value(b)} where the forecast prices "
            f"{words.fact(b.forecast)}"
            for b in other
        )
    out.append(sentence + ".")
    if a.relative:
        out.append(
            f"Of {words.plural(len(a.relative), 'throughput')} relative to a FlashAttention, "
            "the forecast prices each kernel as its baseline's (the same FLOPs and bytes), so "
            f"it says {words.fact(a.relative_forecast)} for all; published: "
            + words.series(
                f"{b.point.subject} on the {gpu_name(b)} {value(b)} of {b.point.baseline}"
                for b in a.relative
            )
            + f". The model cannot tell two kernels of one algorithm apart, and misses by up to "
            f"{words.fact(a.relative_miss)} here."
        )
    for verdict, why in _UNTESTED.items():
        if found := a.where(verdict):
            out.append(f"{words.series(_named(b) for b in found)}: {why}.")
    return " ".join(out)


def mask_kernels() -> str:
    """Chapter 02: each mask variant's kernels on the forecast GPU, as its recorded ops
    launch them, beside Hugging Face's published counts; and what in place saves."""
    r = fpublished.in_place()
    rows = []
    for v in r.variants:
        hf = (
            f"{value(v.published)} ({_WHERE[v.published.where]})"
            if v.published
            else "— (the post passes its mask in)"
        )
        ops = ", ".join(f"`{op.removeprefix('aten::')}`" for op in v.ops)
        rows.append([f"`{v.variant}`", words.fact(v.count), ops, words.fact(v.bytes), hf])
    header = ["Mask", "Kernels (forecast)", "The kernels, from the recorded ops",
              "HBM bytes (forecast)", f"Hugging Face's count ({NOT_MEASURED})"]  # fmt: skip
    first = r.variants[0]
    hf_source = next(v.published for v in r.variants if v.published).point
    caption = (
        f'<p class="ad-caption">Forecast for an {gpus.sheet().label} at '
        f"{first.count.quantity.shape.text()}: one kernel per ATen op that launches one, as "
        "the code records them on the CPU (records/recorded_ops.json). Hugging Face's counts: "
        f'<a href="{hf_source.source.url}">{html.escape(hf_source.source.title)}</a>, an A100 at '
        f"{hf_source.shape.text()}, {NOT_MEASURED}. What in place saves: a realistic range, the "
        "floors of the kernels it does not launch over the bandwidth efficiency this site "
        "states (not cited).</p>"
    )
    table = markdown_table(header, rows, "lrlrl") + "\n\n" + caption
    published = r.variants[1].published
    priced = (
        "which the forecast prices at the post's count"
        if published.where == fpublished.SAME_COUNT
        else f"where the forecast has {_WHERE[published.where]}"
    )
    extra = words.series(f"`{op.removeprefix('aten::')}`" for op in r.extra_over_published)
    saved = words.series(f"`{op.removeprefix('aten::')}`" for op in r.saved_ops)
    text = (
        f"The code under study launches {words.fact(first.count)} where Hugging Face's naive "
        f"code launches {value(published)}: it rebuilds its mask on every call, and {extra} "
        "are that mask's kernels (`torch.ones` fills it, `triu` cuts it). The post passes a "
        f"mask built once, our `masked_fill` variant, {priced}. Both out-of-place versions pay "
        "a `copy_`: `masked_fill` clones the scores before it fills them. In place, with the "
        f"mask built once, the forward skips {saved}: on the forecast GPU, "
        f"{words.fact(r.saved_bytes)} less HBM traffic and {words.fact(r.saved_time)} less "
        "kernel time per forward."
    )
    return f"{text}\n\n{table}"
