# Deterministic SVG from matplotlib, wrapped in a captioned <figure>. The same data gives the
# same bytes: fixed hash salt, no date, no <metadata> (it leaks into the search index), text
# kept as text (so it inherits the page's font and stays selectable).
from __future__ import annotations

import html
import io
import re
from collections.abc import Iterator
from contextlib import contextmanager

from attention_docs.measurements.schema import Sourced
from attention_docs.render.caption import caption_html

# Okabe–Ito: distinguishable with every common colour-vision deficiency, and after the
# dark theme's invert + hue-rotate filter.
STEP_COLORS = {
    "attention.scores": "#0072B2",
    "attention.scale": "#E69F00",
    "attention.mask": "#009E73",
    "attention.softmax": "#CC79A7",
    "attention.weighted_sum": "#56B4E9",
}
SERIES_COLORS = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#F0E442",
    "#000000",
)
INK = "#222222"
MUTED = "#888888"

RC = {
    "svg.fonttype": "none",
    "svg.hashsalt": "attention-docs",
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.edgecolor": MUTED,
    "axes.labelcolor": INK,
    "xtick.color": INK,
    "ytick.color": INK,
    "text.color": INK,
    "figure.facecolor": "none",
    "axes.facecolor": "none",
    "savefig.facecolor": "none",
    "path.simplify": False,
}


@contextmanager
def new_figure(width: float, height: float) -> Iterator:
    """A matplotlib Figure (no pyplot state) under the deterministic settings."""
    import matplotlib as mpl
    from matplotlib.figure import Figure

    with mpl.rc_context(RC):
        yield Figure(figsize=(width, height), layout="constrained")


def to_svg(fig, alt: str) -> str:
    """The figure as inline SVG markup with role="img" and an aria-label."""
    buf = io.StringIO()
    import matplotlib as mpl

    with mpl.rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = svg[svg.index("<svg") :]
    label = html.escape(alt, quote=True)
    svg = svg.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)
    return svg.replace("<defs>", f"<title>{label}</title>\n <defs>", 1)


def figure_html(svg: str, sourced: Sourced, what: str, extra: str = "") -> str:
    """<figure> with the SVG and a caption saying where it was measured."""
    cap = caption_html(sourced, what).removeprefix('<p class="ad-caption">').removesuffix("</p>")
    return (
        f'<figure class="ad-figure">\n{svg}\n'
        f'<figcaption class="ad-caption">{cap}{extra}</figcaption>\n</figure>'
    )
