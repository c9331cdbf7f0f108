# The forecast box: what a named GPU's data sheet and the analytic models predict for a
# chapter's question, labelled as a forecast, and beside it the measurement of the same
# quantity on that GPU when the store holds one, with their ratio. Draws findings; decides
# nothing.
from __future__ import annotations

import html
import textwrap
from collections.abc import Sequence

from attention_docs.analytic import gpu as gpus
from attention_docs.findings import model_check
from attention_docs.findings.forecast import Check
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape
from attention_docs.render import words

# What every roofline forecast assumes (the caption of a box with `floors`).
FLOOR = (
    "A kernel's floor is max(FLOPs ÷ peak, bytes ÷ bandwidth) at boost clock, with no launch cost."
)


def forecast_box(
    gpu: SpecSheet,
    rows: Sequence[tuple[str, Check]],
    *,
    lead: str,
    model: str = "",
    floors: bool = False,
    sources: Sequence[str] = (),
    kinds: Sequence[str] = (),
    shape: Shape | None = None,
) -> str:
    """A Markdown admonition: a table of forecasts (and measurements, when stored) for `gpu`.

    `rows`: (what the row forecasts, in words; its check: the forecast, its realistic range
    if any, the measurement if stored). `lead`: the box's first sentence (the chapter's
    question answered for this GPU). `model`: what it assumes beyond the FLOOR (`floors`).
    `sources`: the efficiencies the realistic ranges divide by. `kinds`: the kinds of kernel
    it forecasts (findings/model_check.py), whose record the caption states."""
    ranged = any(c.realistic is not None for _, c in rows)
    measured_any = any(c.measured is not None for _, c in rows)
    header = ["Quantity", "Forecast from the data sheet"] + ["Realistic range"] * ranged
    if measured_any:
        header += [f"Measured on the {gpu.label}", "Measured ÷ forecast"]
    cells = []
    for what, c in rows:
        cells.append([what, words.fact(c.forecast)])
        if ranged:
            cells[-1].append("—" if c.realistic is None else words.fact(c.realistic))
        if measured_any and c.measured is None:
            cells[-1] += ["not in the store", "—"]
        elif measured_any:
            ratio = words.times(c.ratio)
            if c.low != c.high:
                ratio += f" ({words.span(c.low, c.high, words.times)})"
            # The ratio is a number with a unit too: marked, so the site tests see it.
            ratio = words.fact_span(f"{c.forecast.id};measured ÷ forecast", ratio)
            cells[-1] += [words.fact(c.measured), ratio]
    said = [FLOOR * floors, model]
    if ranged:
        cited = f" ({words.series(sources)})" if sources else ""
        said += [
            f"A realistic range divides each floor by the efficiencies on record{cited}.",
            gpus.KERNEL_FIXED,
        ]  # fmt: skip
    table = [header, ["---"] + ["--:"] * (len(header) - 1), *cells]
    return _box(gpu, table, measured_any, lead=lead, model=" ".join(said), shape=shape, kinds=kinds)


def choice_box(
    gpu: SpecSheet,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    measured: bool,
    lead: str,
    model: str = "",
) -> str:
    """The forecast admonition for forecasts that are choices, not numbers (which backend a
    dispatcher picks): a table of `rows` under `header`, cells as given. `measured`: whether
    a column holds what the GPU did (else the box says these are predictions only)."""
    return _box(gpu, [header, ["---"] * len(header), *rows], measured, lead=lead, model=model)


def _record(kinds: Sequence[str]) -> str:
    """The model's record for `kinds`, in a sentence; "" where none is at hand."""
    found = [r for k in kinds if (r := model_check.records().get(k))]
    if not found:
        return ""
    parts = [
        f"{r.kind}: {r.inside} of {len(r.checks)} inside the range"
        + (f", the worst {words.times(r.worst_over)} its high end" if r.worst_over else "")
        for r in found
    ]
    return f" Its record against GPU timings others recorded: {'; '.join(parts)}."


def _box(gpu, table, measured: bool, *, lead, model, shape: Shape | None = None, kinds=()) -> str:
    """The admonition: `lead`, the `table` (header, rule, rows) and a caption saying where the
    numbers come from (a data sheet), what `model` assumes, the store's status, the model's
    record for `kinds` and how far to trust it."""
    where = f" at {shape.text()}" if shape else ""
    status = (
        "Measured values come from this site's store."
        if measured
        else f"The store holds no measurement from an {gpu.label} yet: these are predictions only."
    )
    said = f"Forecast for an {gpu.label}{where}, from {gpu.source}. {model} {status}"
    trust = (
        ' How far to trust it: the <a href="@site/method/">method page</a> checks this model '
        "against every GPU timing others recorded, and chapters 02 and 07 show real H100 "
        "profiles."
    )
    said = html.escape(" ".join(said.split()) + _record(kinds), quote=False)
    lines = ["| " + " | ".join(cells) + " |" for cells in table]
    text = "\n".join([lead.strip(), "", *lines, "", f'<p class="ad-caption">{said}{trust}</p>'])
    title = f"On a GPU: forecast for the {gpu.label} (data sheet, not a measurement)"
    return f'!!! example "{title}"\n\n' + textwrap.indent(text, "    ") + "\n"
