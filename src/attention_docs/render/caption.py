# Captions: every table and figure says where and when it was measured, with links to its
# raw data. Returned as HTML so that the links are not taken for Markdown links to files
# that exist only after the build has measured them.
from __future__ import annotations

import functools
import html
from collections.abc import Callable, Iterable

from attention_docs.findings.facts import DevicesDifferError
from attention_docs.measurements.schema import Sourced
from attention_docs.render import words
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


# The page that says how every number is measured, as the MkDocs plugin links it from any page.
METHOD_HREF = "@site/method/"


def caption_html(
    sourced: Sourced, what: str = "", detail: str = "", also: Iterable[Sourced] = ()
) -> str:
    """`<p class="ad-caption">` with the provenance and links to JSON (and trace), and to the
    page saying how it was measured. `detail` (HTML: facts are spans) follows `what`; `also`:
    other entries its numbers come from, each linked by its experiment's name."""
    links = [f'<a href="{html.escape(sourced.json_href)}" download>raw data (JSON)</a>']
    if sourced.trace_href:
        links.append(f'<a href="{html.escape(sourced.trace_href)}" download>trace</a>')
    links += [
        f'<a href="{html.escape(s.json_href)}" download>{s.measurement.experiment} (JSON)</a>'
        for s in also
    ]
    links.append(f'<a href="{METHOD_HREF}">how it was measured</a>')
    lead = (f"<strong>{html.escape(what)}</strong> " if what else "") + (
        f"{detail.strip()} " if detail else ""
    )
    return (
        f'<p class="ad-caption">{lead}{html.escape(caption_text(sourced))} · '
        f"{' · '.join(links)}</p>"
    )


def on_one_device(render: Callable[..., str]) -> Callable[..., str]:
    """A renderer of a finding that needs one device's entries: given several devices'
    (DevicesDifferError), it says so in a sentence instead of failing the page."""

    @functools.wraps(render)
    def rendered(*args, **kwargs) -> str:
        try:
            return render(*args, **kwargs)
        except DevicesDifferError as exc:
            return words.devices_differ(exc.what, exc.devices)

    return rendered
