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
from attention_docs.render.tables import markdown_table, op_table, records_table, step_table
from attention_docs.render.timeline import TimelineSettings, timeline_figure, timeline_svg

__all__ = [
    "TimelineSettings",
    "caption_html",
    "caption_text",
    "device_note",
    "dominant_step",
    "forward_time",
    "markdown_table",
    "matmul_vs_elementwise",
    "op_table",
    "records_table",
    "share",
    "step_table",
    "timeline_figure",
    "timeline_svg",
]
