# Several devices on one page: the same quantity on each device (the page's own first), and
# its ratio between them. A page with one device's entry looks as it would without this module.
from __future__ import annotations

from collections.abc import Sequence

from attention_docs.findings import devices as fdevices
from attention_docs.measurements.schema import Sourced
from attention_docs.render import words
from attention_docs.render.caption import caption_html
from attention_docs.render.tables import markdown_table, measurement_of


def forward_table(entries: Sequence[Sourced]) -> str:
    """Each implementation's unprofiled forward time at the first shape every device's grid
    holds, on every device, and each other device's time against the first's; empty with one
    device."""
    if len(entries) < 2:
        return ""
    ms = [measurement_of(s) for s in entries]
    common = fdevices.common_shapes(ms)
    if not common:
        return "The devices' forward-time grids share no shape, so no time is set beside another."
    shape = common[0]
    rows = []
    for a in fdevices.across(ms, shape):
        times = [words.fact(t) if t else "did not run" for t in a.times]
        ratios = [words.versus_fact(*r) if r else "—" for r in a.ratios]
        rows.append([a.implementation, *times, *ratios])
    labels = [m.provenance.device.label for m in ms]
    header = ["Implementation", *labels]
    header += [f"{label} ÷ {labels[0]}" for label in labels[1:]]
    table = markdown_table(header, rows, "l" + "r" * (len(header) - 1))
    what = f"The forward times at {shape.text()} on each device the store holds"
    captions = "".join(
        caption_html(
            s, f"{what}: this one's." if i else f"{what}: this one's, and the ratios' base."
        )
        for i, s in enumerate(entries)
    )
    return table + "\n\n" + captions
