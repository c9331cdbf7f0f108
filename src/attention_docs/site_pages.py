# Page HTML as the MkDocs plugin finishes it: plain functions over strings, tested without a
# build. Links a block printed get MkDocs' rewriting (markdown-exec converts them without
# it); notebook pages keep only their cells, without mkdocs-jupyter's ~600 KB of CSS and
# loaders; a published notebook begins with a cell that installs this package's wheel.
from __future__ import annotations

import html
import posixpath
import re
from collections.abc import Callable
from importlib import metadata

from attention_docs import __version__

COMPANION = " — companion notebook"
# The package as a wheel, published with the site (the plugin builds it).
DOWNLOADS = "downloads"
WHEEL = f"attention_docs-{__version__}-py3-none-any.whl"
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


def stale_banner(failed: dict[str, str]) -> str:
    """What a page served by `mkdocs serve` says when an edited module could not be reloaded
    (a syntax error mid-edit): its content may come from the old code."""
    items = "".join(
        f"<li><code>{html.escape(module)}</code>: {html.escape(why)}</li>"
        for module, why in sorted(failed.items())
    )
    return (
        '<div class="admonition warning"><p class="admonition-title">This page may be stale'
        "</p><p>An edited module could not be reloaded, so what it renders here comes from "
        f"its old code. Fix it and save again:</p><ul>{items}</ul></div>"
    )


def download_links(stem: str, page_dest_uri: str, *, wheel: bool = True) -> str:
    """A line under the notebook's title with the .ipynb (published by the plugin beside the
    pages), the Jupytext .py (copied into the page's folder by mkdocs-jupyter) and, where the
    build published it, the package's wheel, which the notebook's first cell installs from
    the folder it is in."""
    here = posixpath.dirname(page_dest_uri) or "."
    ipynb = posixpath.relpath(f"notebooks/{stem}.ipynb", here)
    script = f"{stem}.py"
    package = ""
    if wheel:
        href = posixpath.relpath(f"{DOWNLOADS}/{WHEEL}", here)
        package = (
            f' · <a href="{href}" download>{WHEEL}</a> (the package it runs: put it beside the '
            "notebook, and its first cell installs it)"
        )
    return (
        '<p class="ad-notebook-download">Run it on your own machine: '
        f'<a href="{ipynb}" download>{stem}.ipynb</a> (Jupyter notebook) · '
        f'<a href="{script}" download>{stem}.py</a> (the same notebook as a Jupytext script)'
        f"{package}</p>"
    )


def _torch_requirement() -> str:
    """The torch this site is built with, as a requirement (read without importing torch)."""
    try:
        return "torch==" + metadata.version("torch").split("+", 1)[0]
    except metadata.PackageNotFoundError:
        return "torch"


TORCH = _torch_requirement()
INSTALL_CELL = f"""\
# Installs the package this notebook runs, where it is missing: from ATTENTION_DOCS_PACKAGE
# if you set it (the wheel's path or URL, a clone's folder), else from {WHEEL}
# beside this notebook (the notebook's page on the site links it). pip takes NumPy and
# matplotlib with it and, where torch is missing too, {TORCH}, the torch this site was
# built with: set ATTENTION_DOCS_TORCH to choose another (say "torch>=2.6"). On Linux, PyPI's
# torch is the CUDA build, gigabytes; without a GPU, set PIP_EXTRA_INDEX_URL to
# https://download.pytorch.org/whl/cpu for the CPU build. With a CUDA GPU the experiments use it.
import glob, importlib.util, os, subprocess, sys

if importlib.util.find_spec("attention_docs") is None:
    package = os.environ.get("ATTENTION_DOCS_PACKAGE") or next(
        iter(sorted(glob.glob("attention_docs-*.whl"))), None
    )
    if package is None:
        raise SystemExit(
            "attention_docs is not installed here: download {WHEEL} from this notebook's "
            "page into this folder (or set ATTENTION_DOCS_PACKAGE to it) and run this cell again"
        )
    wanted = [package]
    if importlib.util.find_spec("torch") is None:
        wanted.append(os.environ.get("ATTENTION_DOCS_TORCH") or "{TORCH}")
    if subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *wanted]).returncode:
        raise SystemExit(
            "pip could not install " + " ".join(wanted) + " (its own message is above): "
            "connect to the network, or install them yourself, then run this cell again"
        )
    importlib.invalidate_caches()
"""


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


def notebook_page(page_html: str, stem: str, page_dest_uri: str, *, wheel: bool = True) -> str:
    """A notebook page as published: slimmed, with its download links under the title."""
    body = slim_notebook(page_html)
    links = download_links(stem, page_dest_uri, wheel=wheel)
    end = body.find("</h1>")
    if end < 0:
        return links + body
    end += len("</h1>")
    return body[:end] + links + body[end:]
