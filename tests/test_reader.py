# Reading the site on any screen, without a browser: figure text sizes and tooltips, labels
# that fit and do not collide, words for column names, alt text a reader can hear, profiler
# noise kept out of output, links in executed output, notebook pages. The browser's view of
# the same (layout at 1280 and 390 px) is tests/test_browser.py.
from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
from site_links import broken_links
from test_docs_build import mkdocs_build

from attention_docs import site_pages
from attention_docs.records.trace import Span, Trace
from attention_docs.render import figures, plots, timeline
from attention_docs.render import words as fmt


def svg_texts(svg: str) -> list[tuple[float, str]]:
    """(font size in SVG units, text) of every <text> element."""
    return [
        (float(size), text)
        for size, text in re.findall(
            r"<text style=\"font-size: ([\d.]+)px[^>]*>([^<]*)</text>", svg
        )
    ]


def svg_width(svg: str) -> float:
    return float(re.search(r'viewBox="0 0 ([\d.]+) ', svg).group(1))


def shown_px(svg: str, size: float, column_px: float) -> float:
    """How tall text of `size` SVG units is when the figure is drawn `column_px` wide."""
    return size * column_px / svg_width(svg)


@pytest.mark.parametrize(
    ("column", "unit", "label"),
    [
        ("time_us", "µs", "Time (µs)"),
        ("mask_us", "µs", "Mask time (µs)"),
        ("peak_bytes", "B", "Peak memory (bytes)"),
        ("predicted_peak_bytes", "B", "Predicted peak memory (bytes)"),
        ("seq_len", None, "Sequence length"),
        ("tokens_per_s", "tokens/s", "Tokens per second (tokens/s)"),
        ("copy_gbs", "GB/s", "Copy bandwidth (GB/s)"),
        ("attention.softmax", "µs", "attention.softmax (µs)"),
    ],
)
def test_columns_read_as_words_with_units(column, unit, label):
    assert fmt.quantity_label(column, unit) == label


def test_figure_numbers_are_rounded_with_units():
    assert fmt.figure_number(2170.748374737741, "µs") == "2.17 ms"
    assert fmt.figure_number(1572864, "B") == "1.57 MB"
    assert fmt.figure_number(47.3e9, "FLOP/s") == "47.3 GFLOP/s"
    assert fmt.figure_number(12_000, "tokens") == "12,000 tokens"  # a length: exact
    assert fmt.figure_number(None, "µs") == "not available"
    assert fmt.figure_number(0.123456) == "0.123"


def small_text_figure(width_in: float) -> str:
    """A figure drawn the careless way: 6-point labels, a 7-point legend, log axes."""
    with figures.new_figure(width_in, 3.0) as fig:
        ax = fig.add_subplot()
        ax.plot([64, 256, 1024], [2e3, 3e4, 5e5], label="naive")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.text(100, 1e4, "a note", fontsize=6)
        ax.legend(fontsize=7)
        ax.set_xlabel("seq_len")
        return figures.to_svg(fig, "A figure.")


@pytest.mark.parametrize("width_in", [6.0, 7.0, 10.0])
def test_figure_text_reads_at_desktop_and_phone_sizes(width_in):
    svg = small_text_figure(width_in)
    texts = svg_texts(svg)
    assert len(texts) >= 6 and "a note" in {t for _, t in texts}
    # In the desktop column every text is at least 11 px tall...
    assert min(shown_px(svg, size, figures.COLUMN_PX) for size, _ in texts) >= 11.0
    # ...and the SVG never gets narrower than the width at which its smallest text is 9 px.
    min_width = float(re.search(r'style="min-width: ([\d.]+)px"', svg).group(1))
    assert min(shown_px(svg, size, min_width) for size, _ in texts) >= 9.0
    assert min_width <= 600  # a phone scrolls at most ~1.5 screens of figure


def test_log_axes_have_plain_tick_labels():
    """Math text draws exponents at 70% size: a log axis reads 10 k, not 10^4, and a base-2
    axis 512 and 1,024, not 2^9 and 2^10 (and never a binary "1 k": k is 1,000)."""
    svg = small_text_figure(7.0)
    labels = {t for _, t in svg_texts(svg)}
    assert {"64", "512", "1,024", "10 k", "100 k"} <= labels, labels
    assert "1 k" not in labels
    assert "10^" not in svg and "<tspan" not in svg


def test_alt_text_is_rounded_and_the_figure_is_left_out_of_search():
    with figures.new_figure(5.0, 2.0) as fig:
        fig.add_subplot().plot([1, 2], [3, 4])
        svg = figures.to_svg(fig, "MHA · naive: 2170.748374737741; efficient: None.")
    label = re.search(r'aria-label="([^"]*)"', svg).group(1)
    assert label == "MHA · naive: 2,170; efficient: not available."
    assert svg.startswith('<svg role="img" aria-label=') and " data-search-exclude " in svg


def test_tooltips_name_what_a_label_stands_for():
    with figures.new_figure(5.0, 2.0) as fig:
        ax = fig.add_subplot()
        figures.tooltip(ax.text(0.5, 0.5, "short"), "the full <name>")
        svg = figures.to_svg(fig, "Tips.")
    assert re.search(r'<g id="ad-tip-0">\s*<title>the full &lt;name&gt;</title>', svg)


@pytest.mark.parametrize("background", figures.SERIES_COLORS[:6])
def test_text_on_a_coloured_box_takes_the_colour_that_contrasts_more(background):
    chosen = figures.text_color_for(background)
    other = figures.INK if chosen == "white" else "white"
    assert figures.contrast(chosen, background) >= figures.contrast(other, background)
    assert figures.text_color_for("#E69F00") == figures.INK  # white on orange is 2.2:1


def test_text_on_a_filled_box_is_recoloured_only_when_it_would_not_read():
    from matplotlib.patches import Rectangle

    with figures.new_figure(5.0, 2.0) as fig:
        ax = fig.add_subplot()
        ax.add_patch(Rectangle((0, 0), 1, 1, facecolor="#E69F00"))  # orange
        ax.add_patch(Rectangle((1, 0), 1, 1, facecolor="#0072B2"))  # blue
        ax.set_xlim(0, 2)
        ax.text(0.5, 0.5, "on orange", color="white")
        ax.text(1.5, 0.5, "on blue", color="white")
        svg = figures.to_svg(fig, "Boxes.")
    assert re.search(r"fill: #222222\"[^>]*>on orange<", svg)
    assert re.search(r"fill: #ffffff\"[^>]*>on blue<", svg)


def test_fit_label_shortens_only_what_does_not_fit():
    width = len  # one unit per character
    assert plots.fit_label("aten::bmm", 20, width) == "aten::bmm"
    assert plots.fit_label("aten::_scaled_dot_product_attention", 12, width) == "aten::_scal…"
    assert plots.fit_label("attention.softmax", 3, width) is None


def test_fit_label_keeps_the_longest_start_that_fits():
    # Characters of unequal widths, and spaces the shortened start drops: every room from
    # nothing to the whole text gets what trying each start, longest first, would give.
    weights = {"i": 0.4, "m": 1.6, " ": 0.5, "…": 1.0}

    def width(text):
        return sum(weights.get(c, 1.0) for c in text)

    def longest_first(text, room):
        if width(text) <= room:
            return text
        starts = (text[:end].rstrip() + "…" for end in range(len(text) - 1, 2, -1))
        return next((s for s in starts if width(s) <= room), None)

    for text in ("aten::mm", "mim mim  mim", "ab", "abcd", "attention.softmax (fused)"):
        for tenths in range(10 * int(width(text)) + 11):
            room = tenths / 10
            assert plots.fit_label(text, room, width) == longest_first(text, room), (text, room)


def trace_with(name: str, share: float) -> Trace:
    lane = "CPU thread"
    spans = (
        Span("attention.scores", "range", lane, 0.0, 100.0 * share, depth=0),
        Span(name, "op", lane, 0.0, 100.0 * share, depth=1),
        Span("aten::a_very_long_operator_name_that_cannot_fit", "op", lane, 99.0, 1.0, depth=1),
    )
    return Trace(spans=spans, lanes=(lane,))


def test_timeline_gives_a_wide_op_its_full_name_and_every_bar_a_tooltip():
    sdpa = "aten::_scaled_dot_product_flash_attention_for_cpu"
    svg = timeline.timeline_svg(trace_with(sdpa, 0.9))
    texts = {t for _, t in svg_texts(svg)}
    assert sdpa in texts  # the name the prose asks the reader to find is never cut
    # The 1% bar is too narrow for a label: its name is on hover only.
    assert not any(t.startswith("aten::a_very") for t in texts)
    assert "<title>aten::a_very_long_operator_name_that_cannot_fit · 1 µs</title>" in svg
    assert min(shown_px(svg, s, figures.COLUMN_PX) for s, _ in svg_texts(svg)) >= 11.0


def test_timeline_shortens_a_label_only_with_its_full_name_on_hover():
    sdpa = "aten::_scaled_dot_product_flash_attention_for_cpu"
    svg = timeline.timeline_svg(trace_with(sdpa, 0.3))
    shortened = [t for _, t in svg_texts(svg) if t.endswith(plots.ELLIPSIS)]
    assert shortened and sdpa.startswith(shortened[0][:-1])
    group = re.search(
        rf"<title>{re.escape(sdpa)} · [^<]*</title>\s*<g[^>]*>\s*<text[^>]*>{re.escape(shortened[0])}<",
        svg,
    )
    assert group, "the shortened label's group carries the full name as its title"


def test_profiler_start_and_stop_lines_stay_out_of_the_output():
    code = (
        "import attention_docs, torch\n"
        "from torch.profiler import profile\n"
        "with profile():\n    torch.ones(3) + 1\n"
        "print('profiled')"
    )
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout.strip() == "profiled"
    assert "USDT" not in result.stderr and "profiler_start" not in result.stderr


def test_links_to_pages_are_rewritten_with_the_pages_own_rule():
    html = (
        '<p><a href="01-reading-a-profile.md#schedule">primer</a> '
        '<a href="https://example.org/a.md">away</a> <a href="../04-memory/">done</a></p>'
    )
    seen = []
    out = site_pages.rewrite_doc_links(html, lambda url: seen.append(url) or "../x/#schedule")
    assert seen == ["01-reading-a-profile.md#schedule"]
    assert out.count('href="../x/#schedule"') == 1 and "https://example.org/a.md" in out


def test_notebook_titles_name_the_chapter():
    source = (
        "# %% [markdown]\n# # scaled_dot_product_attention and its backends — companion notebook\n"
    )
    assert (
        site_pages.notebook_title(source, "07_sdpa_backends")
        == "07 · scaled_dot_product_attention and its backends"
    )
    assert site_pages.notebook_title("", "12_which_attention_wins") == "12 · which attention wins"


def test_link_checker_finds_missing_files_and_anchors(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="a/">ok</a><a href="a/#there">ok</a><a href="a/#nowhere">no anchor</a>'
        '<a href="b/">no page</a><img src="img.png"><a href="https://x.org/">away</a>'
        '<a href="#top">self</a><h1 id="top">t</h1>'
    )
    (tmp_path / "a" / "index.html").write_text(
        '<h2 id="there">x</h2><a href="../index.html">up</a>'
    )
    assert broken_links(tmp_path) == [
        "index.html: a/#nowhere (no id 'nowhere' on that page)",
        "index.html: b/ (no such file)",
        "index.html: img.png (no such file)",
    ]


READER_CONFIG = """
site_name: t
docs_dir: docs
theme: {name: material}
markdown_extensions: [md_in_html, tables, attr_list, pymdownx.superfences]
plugins:
  - search
  - markdown-exec
  - mkdocs-jupyter:
      include: ["notebooks/*.py"]
      include_source: true
      ignore_h1_titles: true
  - attention-docs:
      store: docs/measurements
nav:
  - index.md
  - other.md
  - notebooks/01_first.py
"""

READER_PAGE = """
# A page

```python exec="on" id="reader-link" session="r"
print("Read [the other page](other.md#there) first.")
```

```python exec="on" id="reader-figure" session="r" html="1"
from attention_docs.render import figures
with figures.new_figure(5.0, 2.0) as fig:
    ax = fig.add_subplot()
    ax.plot([1, 2], [3, 4])
    ax.set_xlabel("zebraquantity")
    print('<figure class="ad-figure">' + figures.to_svg(fig, "A line.") + "</figure>")
```
"""

NOTEBOOK = """# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # First steps — companion notebook
#
# Some words.

# %%
print("hello")
"""


def test_a_built_site_rewrites_output_links_excludes_figures_from_search_and_ships_notebooks(
    tmp_path,
):
    (tmp_path / "docs" / "notebooks").mkdir(parents=True)
    (tmp_path / "mkdocs.yml").write_text(READER_CONFIG)
    (tmp_path / "docs" / "index.md").write_text(textwrap.dedent(READER_PAGE))
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## There\n\nText.\n")
    (tmp_path / "docs" / "notebooks" / "01_first.py").write_text(NOTEBOOK)
    site = tmp_path / "site"
    result = mkdocs_build(tmp_path / "mkdocs.yml", site)
    assert result.returncode == 0, result.stderr[-3000:]
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="other/#there"' in index and "other.md" not in index
    assert ">zebraquantity</text>" in index  # the figure is on the page...
    search = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    assert "zebraquantity" not in json.dumps(search)  # ...and not in the search index
    assert any("Read the other page first" in d["text"] for d in search["docs"])
    page = (site / "notebooks" / "01_first" / "index.html").read_text(encoding="utf-8")
    assert "01 · First steps" in page  # the nav names the notebook by its chapter
    assert '<a href="../01_first.ipynb" download>' in page and 'href="01_first.py" download' in page
    assert "<style" not in page.split('<div class="jupyter-wrapper">')[1]
    assert len(gzip.compress(page.encode())) < 200_000
    assert broken_links(site) == []


def test_a_label_on_its_own_white_box_keeps_dark_text_on_a_dark_cell():
    """A heat-map label with a white backing reads against the backing, not the cell."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig, ax = plt.subplots()
    ax.add_patch(Rectangle((0, 0), 1, 1, facecolor="#0072B2"))
    bare = ax.text(0.3, 0.5, "bare", color=figures.INK)
    boxed = ax.text(0.7, 0.5, "boxed", color=figures.INK, bbox={"facecolor": "white"})
    figures._contrast_on_patches(ax)
    assert bare.get_color() != figures.INK  # dark ink on blue is switched
    assert boxed.get_color() == figures.INK  # dark ink on its white box stays
    plt.close(fig)


def test_the_index_says_which_numbers_are_cited_constants_and_where_they_live():
    """Issue 28: "No number on these pages was typed by hand" while data sheets and papers'
    percentages are constants. The index names the kinds and the files that hold them."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    index = (root / "docs" / "index.md").read_text(encoding="utf-8")
    assert "typed by hand" not in index
    named = re.findall(r"`((?:records|analytic)/[\w/]+\.py)`", index)
    assert named, "the index names the files holding the cited constants"
    for path in named:
        assert (root / "src" / "attention_docs" / path).is_file(), path
    assert "published figures" in index and "forecasts" in index
