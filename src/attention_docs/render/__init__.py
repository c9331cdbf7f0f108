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
from attention_docs.render.tables import markdown_table, op_table, records_table, step_table
from attention_docs.render.timeline import TimelineSettings, timeline_figure, timeline_svg

__all__ = [
    "TimelineSettings",
    "bar_figure",
    "caption_html",
    "caption_text",
    "device_note",
    "dominant_step",
    "forward_time",
    "line_figure",
    "loglog_slope",
    "markdown_table",
    "matmul_vs_elementwise",
    "op_table",
    "records_table",
    "share",
    "stacked_share_figure",
    "step_table",
    "timeline_figure",
    "timeline_svg",
]
from attention_docs.render import flex, fusion  # chapter renderers, one module per chapter

__all__ += ["flex", "fusion"]
