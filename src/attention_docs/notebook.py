# What a companion notebook shows, and where it keeps what it measures. A notebook is for
# seeing the reader's own machine: `book.for_notebook()` measures this machine into a store
# beside the notebook (never a clone's committed one), and `show()` displays what a renderer
# returns as the site would — Markdown tables and prose, SVG figures — through IPython, with
# the site's fact markup taken out and its links pointed at files the reader has.
from __future__ import annotations

import re
import sys
import textwrap

# The site's markup a notebook has no use for: fact spans (the site-wide test reads them)
# and the placeholders the MkDocs plugin turns into page-relative links.
_FACT = re.compile(r'<span class="ad-fact" data-fact="[^"]*">(.*?)</span>', re.S)
_METHOD_LINK = re.compile(r'<a href="@site/method/">([^<]*)</a>')
# MkDocs' admonitions (`!!! info "Title"` and an indented body), which Jupyter's Markdown
# shows as they are typed: a notebook shows them as a quote under its title.
_ADMONITION = re.compile(r'^!!! \w+ "([^"]*)"\n\n((?:(?:    .*)?\n?)*)', re.M)


def _quoted(found: re.Match) -> str:
    body = textwrap.dedent(found.group(2)).strip().splitlines()
    return "\n".join([f"> **{found.group(1)}**", ">", *(f"> {line}".rstrip() for line in body)])


def show(text: str) -> None:
    """Display a renderer's output: rendered in Jupyter (Markdown, or HTML for a figure),
    printed elsewhere (a script, `python notebook.py`)."""
    from attention_docs import book

    store = book.settings().store.as_posix().rstrip("/") + "/"
    text = _METHOD_LINK.sub(r"\1 (a page of the site)", _FACT.sub(r"\1", text))
    text = _ADMONITION.sub(_quoted, text.replace("@measurements/", store))
    shell = sys.modules.get("IPython")
    ipython = shell.get_ipython() if shell is not None else None
    if ipython is None or not getattr(ipython, "kernel", None):
        print(text)
        return
    from IPython.display import HTML, Markdown, display

    figure = text.lstrip().startswith(("<figure", "<svg", "<div"))
    display(HTML(text) if figure else Markdown(text))
