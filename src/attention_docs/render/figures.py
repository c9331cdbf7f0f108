# Deterministic SVG from matplotlib, wrapped in a captioned <figure>. The same data gives the
# same bytes: fixed hash salt, no date, no <metadata> (it leaks into the search index), text
# kept as text (so it inherits the page's font and stays selectable).
#
# Readable on any screen: a figure is drawn in points and shown at the width of the content
# column, so its text shrinks with it. `to_svg` raises every text to the size that reads as
# TEXT_PX in the desktop column, gives the SVG a minimum width at which its smallest text still
# reads as PHONE_TEXT_PX (narrower screens scroll the figure sideways), attaches tooltips, and
# keeps the figure's internals out of the search index.
from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager

from attention_docs.measurements.schema import Sourced
from attention_docs.render.caption import caption_html
from attention_docs.render.words import number, tick, ticks, value

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

COLUMN_PX = 748  # mkdocs-material's content column beside both sidebars, at 1280 px
TEXT_PX = 12.0  # the smallest figure text in that column, in CSS pixels
PHONE_TEXT_PX = 9.0  # the smallest figure text on a phone; below it the figure scrolls

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
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with mpl.rc_context(RC):
        fig = Figure(figsize=(width, height), layout="constrained")
        FigureCanvasAgg(fig)  # a renderer to measure text with (labels placed in pixels)
        yield fig


# A measured line: its points marked.
LINE = {"marker": "o", "markersize": 3.5, "linewidth": 1.4}


def frame_lines(ax) -> None:
    """A line figure's grid, frame and legend."""
    ax.grid(color=MUTED, alpha=0.3, linewidth=0.5, which="both")
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(frameon=False, fontsize=8)


def measured_ticks(ax, xs) -> None:
    """The x ticks at the measured values (a seq_len axis: 512, 1,024), where they fit."""
    # layout: a dozen labels fit the axis
    if 1 < len(xs) <= 12:
        ax.set_xticks(xs, [tick(x) for x in xs])
        ax.minorticks_off()


def min_font_pt(width_in: float) -> float:
    """The smallest font size (points) that reads as TEXT_PX in the desktop column."""
    return round(TEXT_PX * width_in * 72 / COLUMN_PX, 2)


def tooltip(artist, text: str) -> None:
    """Show `text` when the reader hovers `artist` (an SVG <title>): the full name behind a
    shortened label, a bar's exact duration."""
    fig = artist.get_figure()
    tips = fig.__dict__.setdefault("_ad_tooltips", {})
    gid = f"ad-tip-{len(tips)}"
    artist.set_gid(gid)
    tips[gid] = text


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two colours (1 to 21); 4.5 is the minimum for small text."""
    from matplotlib.colors import to_rgb

    def luminance(color: str) -> float:
        # layout: sRGB luminance (colour contrast)
        channels = [
            c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(color)
        ]
        return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]

    # layout: contrast ratio: lighter over darker
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def text_color_for(background: str) -> str:
    """White or INK, whichever reads better on `background` (white on orange does not)."""
    # layout: the text colour with more contrast
    return "white" if contrast("white", background) > contrast(INK, background) else INK


def _plain_log_formatter(original, say=tick):
    """matplotlib's choice of which log ticks to label (sub-decades on a short axis), with
    `say`'s text (words.tick's by default) instead of math text."""
    from matplotlib.ticker import LogFormatter

    class PlainLogFormatter(LogFormatter):
        def _num_to_string(self, x, vmin, vmax):
            return say(x)

        def format_ticks(self, values):
            labels = super().format_ticks(values)
            if say is not tick:  # a unit's labels (1 ms, 10 ms) are one style already
                return labels
            shown = [v for v, text in zip(values, labels, strict=True) if text]
            styled = dict(zip(shown, ticks(shown), strict=True))
            return [styled[v] if text else text for v, text in zip(values, labels, strict=True)]

    return PlainLogFormatter(
        base=original._base,
        labelOnlyBase=original.labelOnlyBase,
        minor_thresholds=original.minor_thresholds,
    )


def unit_ticks(axis, unit: str) -> None:
    """Label `axis`'s ticks in `unit` as words says each value (1 ms, 10 ms, 100 µs): one
    axis never reads "1,000" beside "10 k", and its numbers match the table's and the alt
    text's. The axis label then names the quantity without a unit."""
    from matplotlib.ticker import FuncFormatter

    def say(x) -> str:
        return value(x, unit)

    if axis.get_scale() != "log":
        axis.set_major_formatter(FuncFormatter(lambda x, _position: say(x)))
        return
    axis.set_major_formatter(_plain_log_formatter(axis.get_major_formatter(), say))
    axis.set_minor_formatter(_plain_log_formatter(axis.get_minor_formatter(), say))


def _linear_ticks():
    """words.ticks' labels for a linear axis: all its ticks in one style (0, 5 k, 10 k)."""
    from matplotlib.ticker import Formatter

    class LinearTicks(Formatter):
        def __call__(self, x, pos=None):
            return tick(x)

        def format_ticks(self, values):
            # The locator also places ticks just outside the view: they choose no style.
            # layout: the view's ends, and the ticks inside them
            low, high = (
                sorted(self.axis.get_view_interval()) if self.axis else (-math.inf, math.inf)
            )
            return ticks(list(values), [v for v in values if low <= v <= high])  # layout: in view

    return LinearTicks()


def _readable(fig) -> float:
    """Raise every text of `fig` to the desktop minimum; tick labels in words.tick's numbers,
    on log axes (math text draws exponents at 70% size) and linear ones (matplotlib writes
    20000, where every other number on the site reads 20 k). Returns the smallest font size
    left, in points."""
    from matplotlib.text import Text
    from matplotlib.ticker import LogFormatterSciNotation, ScalarFormatter

    floor = min_font_pt(fig.get_size_inches()[0])
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            for formatter, use in (
                (axis.get_major_formatter(), axis.set_major_formatter),
                (axis.get_minor_formatter(), axis.set_minor_formatter),
            ):
                if isinstance(formatter, LogFormatterSciNotation):
                    use(_plain_log_formatter(formatter))
                elif type(formatter) is ScalarFormatter:  # a linear axis: words' numbers too
                    use(_linear_ticks())
            marks = axis.get_major_ticks() + axis.get_minor_ticks()
            # layout: tick labels raised to the minimum font size
            if min((t.label1.get_fontsize() for t in marks), default=floor) < floor:
                ax.tick_params(axis=name, which="both", labelsize=floor)
    for ax in fig.axes:
        _contrast_on_patches(ax)
    sizes = []
    for text in fig.findobj(Text):
        # layout: a text raised to the minimum font size
        if text.get_fontsize() < floor:
            text.set_fontsize(floor)
        if text.get_text().strip():
            sizes.append(text.get_fontsize())
    # layout: the smallest font on the figure
    return min(sizes, default=floor)


def _contrast_on_patches(ax) -> None:
    """Text written on a filled box (a heat-map cell, a bar) takes white or INK, whichever
    reads better on the box's colour, unless its own colour already reads (4.5:1)."""
    from matplotlib.colors import to_hex, to_rgba

    boxes = [p for p in ax.patches if p.get_visible() and p.get_fill()]
    for text in ax.texts:
        box = text.get_bbox_patch()
        if box is None or not box.get_fill():
            # Not on a box of its own (a label's white backing): on the topmost patch under it.
            at = text.get_transform().transform(text.get_position())
            under = [p for p in boxes if p.contains_point(at)]
            if not under:
                continue
            # layout: the topmost patch under a text
            box = max(under, key=lambda p: p.get_zorder())
        r, g, b, a = to_rgba(box.get_facecolor())
        background = to_hex((r * a + 1 - a, g * a + 1 - a, b * a + 1 - a))
        # layout: WCAG text contrast
        if contrast(to_hex(text.get_color()), background) < 4.5:
            text.set_color(text_color_for(background))


def settle(fig) -> None:
    """Lay the figure out as `to_svg` will draw it (text at its final size), so that labels
    can be measured and placed in pixels before saving."""
    import matplotlib as mpl

    with mpl.rc_context(RC):
        _readable(fig)
        fig.draw_without_rendering()


def _tidy_alt(alt: str) -> str:
    """Alt text as a reader hears it: a stray long decimal (2170.748374737741) by the one
    precision rule, no None. Renderers format their numbers with words; this is the net."""

    def rounded(match: re.Match) -> str:
        return number(float(match.group(0)))

    alt = re.sub(r"(?<![\w.])-?\d+\.\d{4,}(?![\d])", rounded, alt)
    return re.sub(r"\bNone\b", "not available", alt)


def to_svg(fig, alt: str) -> str:
    """The figure as inline SVG markup with role="img" and an aria-label, readable on any
    screen (see the top of this module) and left out of the search index."""
    buf = io.StringIO()
    import matplotlib as mpl

    with mpl.rc_context(RC):
        smallest = _readable(fig)
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = svg[svg.index("<svg") :]
    for gid, text in fig.__dict__.get("_ad_tooltips", {}).items():
        svg = svg.replace(
            f'<g id="{gid}">', f'<g id="{gid}">\n  <title>{html.escape(text)}</title>', 1
        )
    label = html.escape(_tidy_alt(alt), quote=True)
    width_px = math.ceil(fig.get_size_inches()[0] * 72 * PHONE_TEXT_PX / smallest)
    svg = svg.replace(
        "<svg ",
        f'<svg role="img" aria-label="{label}" data-search-exclude '
        f'style="min-width: {width_px}px" ',
        1,
    )
    return svg.replace("<defs>", f"<title>{label}</title>\n <defs>", 1)


def figure_html(svg: str, sourced: Sourced, what: str, extra: str = "") -> str:
    """<figure> with the SVG and a caption saying where it was measured."""
    cap = caption_html(sourced, what).removeprefix('<p class="ad-caption">').removesuffix("</p>")
    return captioned_figure(svg, cap + extra)


def captioned_figure(svg: str, caption: str) -> str:
    """<figure> with the SVG and `caption` (HTML) under it."""
    return (
        f'<figure class="ad-figure">\n<div class="ad-figure__plot">\n{svg}\n</div>\n'
        f'<figcaption class="ad-caption">{caption}</figcaption>\n</figure>'
    )


def perfetto_button(href: str) -> str:
    """The button that opens the trace at `href` (as the page links it) in Perfetto."""
    return (
        f'<button type="button" class="ad-perfetto md-button" data-trace="{html.escape(href)}" '
        'title="Opens ui.perfetto.dev in a new tab and sends it this trace">Open in Perfetto</button>'
    )
