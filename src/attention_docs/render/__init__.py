# Measurement -> Markdown / SVG. Pure functions: they return strings, never print or save,
# and never import torch (a test checks this).
from attention_docs.render.caption import caption_html, caption_text
from attention_docs.render.claims import (
    device_note,
    dominant_step,
    forward_time,
    matmul_vs_elementwise,
    share,
)
from attention_docs.render.plots import bar_figure, line_figure, loglog_slope, stacked_share_figure
from attention_docs.render.primer import (
    dispatch_tree,
    first_call_ops_claim,
    first_call_ops_table,
    first_calls_claim,
    first_calls_table,
    overhead_claim,
    overhead_table,
    self_vs_total_claim,
    size_sweep_claim,
    size_sweep_figure,
    size_sweep_table,
)
from attention_docs.render.roofline import (
    ceilings_claim,
    ceilings_table,
    cost_table,
    roofline_claim,
    roofline_figure,
    roofline_table,
)
from attention_docs.render.tables import markdown_table, op_table, records_table, step_table
from attention_docs.render.timeline import TimelineSettings, timeline_figure, timeline_svg

__all__ = [
    "TimelineSettings",
    "bar_figure",
    "caption_html",
    "caption_text",
    "ceilings_claim",
    "ceilings_table",
    "cost_table",
    "device_note",
    "dispatch_tree",
    "dominant_step",
    "first_call_ops_claim",
    "first_call_ops_table",
    "first_calls_claim",
    "first_calls_table",
    "forward_time",
    "line_figure",
    "loglog_slope",
    "markdown_table",
    "matmul_vs_elementwise",
    "op_table",
    "overhead_claim",
    "overhead_table",
    "records_table",
    "roofline_claim",
    "roofline_figure",
    "roofline_table",
    "self_vs_total_claim",
    "share",
    "size_sweep_claim",
    "size_sweep_figure",
    "size_sweep_table",
    "stacked_share_figure",
    "step_table",
    "timeline_figure",
    "timeline_svg",
]
