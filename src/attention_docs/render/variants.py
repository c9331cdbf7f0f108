# Renderers for "Naive attention, deeper": the mask-variant comparison and the dtype
# comparison, as tables and as sentences whose numbers come from the Measurement.
from __future__ import annotations

from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import _format as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.tables import markdown_table


def mask_variants_table(sourced: Sourced) -> str:
    """Per variant: the mask step's time and allocations, the forward, what is kept."""
    m = sourced.measurement
    rows = [
        [
            f"`{r['variant']}`",
            fmt.time_us(r["mask_us"]),
            f"{r['mask_allocations']:g}",
            fmt.nbytes(r["mask_allocated_bytes"]),
            fmt.time_us(r["forward_us"]),
            fmt.nbytes(r["prepared_bytes"]),
        ]
        for r in m.tables["variants"].records()
    ]
    header = [
        "Variant",
        "Mask step",
        "Allocations in it",
        "Allocated in it",
        "Forward (unprofiled)",
        "Kept between calls",
    ]
    return markdown_table(header, rows) + "\n\n" + caption_html(sourced, "Mask variants.")


def mask_variants_claim(m: Measurement) -> str:
    """Which variant has the cheapest mask step, and what each one allocates there."""
    rows = {r["variant"]: r for r in m.tables["variants"].records()}
    fastest = min(rows.values(), key=lambda r: r["mask_us"])
    slowest = max(rows.values(), key=lambda r: r["mask_us"])
    matrix = m.facts["matrix_bytes"]
    alloc = ", ".join(f"`{v}` {r['mask_allocated_bytes'] / matrix:.2f}" for v, r in rows.items())
    forward = min(rows.values(), key=lambda r: r["forward_us"])
    return (
        f"The cheapest `attention.mask` step is `{fastest['variant']}`'s at "
        f"**{fmt.time_us(fastest['mask_us'])}**, against {fmt.time_us(slowest['mask_us'])} for "
        f"`{slowest['variant']}` ({slowest['mask_us'] / fastest['mask_us']:.1f}×). Bytes "
        f"allocated inside the step, in units of one N×N score matrix "
        f"({fmt.nbytes(matrix)}): {alloc}. Unprofiled, the fastest forward is "
        f"`{forward['variant']}`'s at {fmt.time_us(forward['forward_us'])}."
    )


def _dtypes(m: Measurement) -> list[str]:
    return str(m.facts["dtypes"]).split(",")


def dtype_table(sourced: Sourced) -> str:
    """Per step: time in each dtype, and each dtype's time relative to float32."""
    m = sourced.measurement
    dtypes = _dtypes(m)
    others = [d for d in dtypes if d != "float32"]
    rows = []
    for r in m.tables["dtypes"].records():
        base = r["float32_us"]
        label = r["step"] if r["step"].startswith("forward") else f"`{r['step']}`"
        rows.append(
            [
                label,
                *(fmt.time_us(r[f"{d}_us"]) for d in dtypes),
                *(f"{r[f'{d}_us'] / base:.2f}×" if base else "—" for d in others),
            ]
        )
    header = ["Step", *dtypes, *(f"{d} / float32" for d in others)]
    return markdown_table(header, rows) + "\n\n" + caption_html(sourced, "Per step, per dtype.")


def dtype_claim(m: Measurement) -> str:
    """How much faster or slower each half-precision dtype is, and where it differs most."""
    records = m.tables["dtypes"].records()
    steps = [r for r in records if not r["step"].startswith("forward")]
    forward = next(r for r in records if r["step"].startswith("forward"))
    parts = []
    for d in _dtypes(m):
        if d == "float32":
            continue
        ratio = forward[f"{d}_us"] / forward["float32_us"]
        change = (
            f"**{ratio:.2f}×** the time of float32 — slower"
            if ratio > 1
            else f"**{ratio:.2f}×** the time of float32 — faster"
        )
        extreme = max(steps, key=lambda r: r[f"{d}_us"] / r["float32_us"])
        best = min(steps, key=lambda r: r[f"{d}_us"] / r["float32_us"])
        parts.append(
            f"In {d} the unprofiled forward takes {change}. Step by step the ratio runs from "
            f"{best[f'{d}_us'] / best['float32_us']:.2f}× (`{best['step']}`) to "
            f"{extreme[f'{d}_us'] / extreme['float32_us']:.2f}× (`{extreme['step']}`)."
        )
    capability = m.facts.get("cpu_capability")
    if capability:
        parts.append(f"PyTorch reports this CPU's best vector instruction set as **{capability}**.")
    return " ".join(parts)


def mask_variants_figure(sourced: Sourced) -> str:
    """Bars: the `attention.mask` step's time per variant."""
    from attention_docs.render.plots import bar_figure

    return bar_figure(
        sourced,
        "variants",
        label="variant",
        value="mask_us",
        what="Time of the attention.mask step per variant.",
    )
