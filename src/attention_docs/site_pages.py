# Page HTML as the MkDocs plugin finishes it: plain functions over strings, so that they are
# tested without a build and survive a move away from MkDocs.
#
# - Links in executed output: markdown-exec converts a block's printed Markdown with its own
#   Markdown instance, which lacks MkDocs' link rewriting, so `[x](01-reading-a-profile.md)`
#   printed by a block would stay a link to a .md file (a 404 on the site).
# - Notebook pages: mkdocs-jupyter inlines ~600 KB of JupyterLab CSS, a MathJax and a Mermaid
#   loader into every notebook page; the page keeps only the cells, styled like the rest of the
#   site, gains links to download the notebook, and is named in the nav by its chapter.
from __future__ import annotations

import html
import posixpath
import re
from collections.abc import Callable

COMPANION = " — companion notebook"
_MD_LINK = re.compile(r'(<a\b[^>]*?\bhref=")([^":#?]+\.md(?:#[^"]*)?)(")')


def rewrite_doc_links(page_html: str, to_url: Callable[[str], str]) -> str:
    """Pass every relative link to a `.md` file through `to_url` (MkDocs' own rewriting)."""
    return _MD_LINK.sub(
        lambda m: m.group(1) + html.escape(to_url(html.unescape(m.group(2)))) + m.group(3),
        page_html,
    )


def is_notebook(src_uri: str) -> bool:
    return src_uri.startswith("notebooks/") and src_uri.endswith(".py")


def notebook_title(source: str, stem: str) -> str:
    """ "07 · scaled_dot_product_attention and its backends": the chapter number from the file
    name, the name from the notebook's first heading (`# # Title — companion notebook`)."""
    number = stem.split("_", 1)[0]
    heading = re.search(r"^# # (.+)$", source, re.M)
    name = heading.group(1).strip() if heading else stem.split("_", 1)[-1].replace("_", " ")
    name = name.removesuffix(COMPANION.strip()).removesuffix(COMPANION).strip()
    return f"{number} · {name}" if number.isdigit() else name


def download_links(stem: str, page_dest_uri: str) -> str:
    """A line under the notebook's title with the .ipynb (published by the plugin beside the
    pages) and the Jupytext .py (copied into the page's folder by mkdocs-jupyter)."""
    ipynb = posixpath.relpath(f"notebooks/{stem}.ipynb", posixpath.dirname(page_dest_uri) or ".")
    script = f"{stem}.py"
    return (
        '<p class="ad-notebook-download">Run it on your own machine: '
        f'<a href="{ipynb}" download>{stem}.ipynb</a> (Jupyter notebook) · '
        f'<a href="{script}" download>{stem}.py</a> (the same notebook as a Jupytext script)</p>'
    )


_DROP = [
    # The copy button's markup and the hidden copy of each cell's source: the site's own
    # copy button (content.code.copy) serves the cells once they are ordinary code blocks.
    re.compile(r'<div class="zeroclipboard-container">.*?</clipboard-copy>\s*</div>', re.S),
    re.compile(r'<div class="clipboard-copy-txt"[^>]*>.*?</div>', re.S),
]


def slim_notebook(page_html: str) -> str:
    """The notebook's cells without JupyterLab's CSS and scripts, code cells as the site's own
    code blocks, heading anchors as the site's."""
    start = page_html.find('<div class="jupyter-wrapper">')
    if start < 0:
        raise ValueError("not a page rendered by mkdocs-jupyter: no jupyter-wrapper")
    body = page_html[start:]
    for pattern in _DROP:
        body = pattern.sub("", body)
    body = re.sub(
        r'<div class="highlight-ipynb hl-(\w+)"><pre>(.*?)</pre></div>',
        r'<div class="language-\1 highlight"><pre><code>\2</code></pre></div>',
        body,
        flags=re.S,
    )
    body = re.sub(r'(<div class="jp-(?:In|Out)putPrompt[^"]*">)[^<]*(</div>)', r"\1\2", body)
    return body.replace('class="anchor-link"', 'class="headerlink"')


def notebook_page(page_html: str, stem: str, page_dest_uri: str) -> str:
    """A notebook page as published: slimmed, with its download links under the title."""
    body = slim_notebook(page_html)
    links = download_links(stem, page_dest_uri)
    end = body.find("</h1>")
    if end < 0:
        return links + body
    end += len("</h1>")
    return body[:end] + links + body[end:]
