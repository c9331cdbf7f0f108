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
from attention_docs.render.backward import (
    autograd_nodes_table,
    backward_claims,
    backward_table,
    phase_claim,
    saved_claims,
    saved_detail_table,
    saved_figure,
    step_timeline,
    unavailable_implementations,
)
from attention_docs.render.sdpa import (
    backend_claims,
    backend_ops_table,
    backend_table,
    backend_time_figure,
    mask_claims,
    mask_table,
    math_score_bytes,
    sdpa_timeline,
    unavailable_backends,
    why_claims,
    why_matrix,
    why_reasons,
)

__all__ += [
    "autograd_nodes_table",
    "backend_claims",
    "backend_ops_table",
    "backend_table",
    "backend_time_figure",
    "backward_claims",
    "backward_table",
    "mask_claims",
    "mask_table",
    "math_score_bytes",
    "phase_claim",
    "saved_claims",
    "saved_detail_table",
    "saved_figure",
    "sdpa_timeline",
    "step_timeline",
    "unavailable_backends",
    "unavailable_implementations",
    "why_claims",
    "why_matrix",
    "why_reasons",
]
