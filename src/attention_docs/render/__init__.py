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
from attention_docs.render.memory import (
    allocation_claim,
    memory_step_table,
    memory_timeline_figure,
    memory_timeline_svg,
    oom_claim,
    peak_claim,
    peak_figure,
    peak_table,
)
from attention_docs.render.variants import (
    dtype_claim,
    dtype_table,
    mask_variants_claim,
    mask_variants_figure,
    mask_variants_table,
)
from attention_docs.render.wall import (
    head_dim_claim,
    heads_claim,
    local_slopes,
    seq_len_claim,
    step_share_figure,
    step_shares_claim,
    sweep_figure,
    sweep_table,
    tokens_claim,
    turning_point,
)

__all__ += [
    "allocation_claim",
    "dtype_claim",
    "dtype_table",
    "head_dim_claim",
    "heads_claim",
    "local_slopes",
    "mask_variants_claim",
    "mask_variants_figure",
    "mask_variants_table",
    "memory_step_table",
    "memory_timeline_figure",
    "memory_timeline_svg",
    "oom_claim",
    "peak_claim",
    "peak_figure",
    "peak_table",
    "seq_len_claim",
    "step_share_figure",
    "step_shares_claim",
    "sweep_figure",
    "sweep_table",
    "tokens_claim",
    "turning_point",
]
