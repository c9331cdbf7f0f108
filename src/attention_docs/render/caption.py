# Captions: every table and figure says where and when it was measured, with links to its
# raw data. Returned as HTML so that the links are not taken for Markdown links to files
# that exist only after the build has measured them.
from __future__ import annotations

import html

from attention_docs.measurements.schema import Sourced
from attention_docs.render.words import params_text


def caption_text(sourced: Sourced) -> str:
    """The caption as plain text (also used as SVG alt text context)."""
    m = sourced.measurement
    p = m.provenance
    versions = f"torch {p.torch_version}" + (f", CUDA {p.cuda_version}" if p.cuda_version else "")
    # A busy machine's numbers are not facts: an entry stored anyway (allow_busy) says so.
    busy = f" · measured on a busy machine ({p.load.describe()})" if p.busy else ""
    return (
        f"{p.device.label} · {versions} · {params_text(dict(m.params))} · "
        f"{p.date[:10]} · {sourced.origin}{busy}"
    )


def caption_html(sourced: Sourced, what: str = "") -> str:
    """`<p class="ad-caption">` with the provenance and links to JSON (and trace)."""
    links = [f'<a href="{html.escape(sourced.json_href)}" download>raw data (JSON)</a>']
    if sourced.trace_href:
        links.append(f'<a href="{html.escape(sourced.trace_href)}" download>trace</a>')
    lead = f"<strong>{html.escape(what)}</strong> " if what else ""
    return (
        f'<p class="ad-caption">{lead}{html.escape(caption_text(sourced))} · '
        f"{' · '.join(links)}</p>"
    )
