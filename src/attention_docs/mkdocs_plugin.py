# The MkDocs side of the measurement store. It configures `book.measure()` from mkdocs.yml
# (and ATTENTION_DOCS_* variables set by `nox -s docs -- --refresh|--frozen|--device`),
# rewrites the `@measurements/` link placeholder into page-relative links, publishes
# entries measured during the build, checks that every linked file exists, names the page
# of any executed block that failed, and writes the build summary and requests manifest.
# It also finishes pages for readers (site_pages.py): links to .md files in executed output
# are rewritten like the page's own, and notebook pages are slimmed, titled and linked.
from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import shutil
from pathlib import Path

from mkdocs.config import config_options as c
from mkdocs.config.base import Config
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin, get_plugin_logger

from attention_docs import book, site_pages

log = get_plugin_logger("attention_docs")
PLACEHOLDER = "@measurements/"
SUMMARY_MARKER = "<!-- attention-docs:build-summary -->"


class AttentionDocsConfig(Config):
    store = c.Type(str, default="docs/measurements")
    mode = c.Choice(book.MODES, default="auto")
    # Which device's entry a page shows, in order (see book.SELECTORS).
    prefer = c.ListOfItems(c.Type(str), default=list(book.DEFAULT_PREFER))
    # Store entries measured while other work competed (flagged in the summary); false
    # refuses them, so the build fails on a busy machine instead of publishing noise.
    allow_busy = c.Type(bool, default=True)
    device = c.Choice(("auto", "cpu", "cuda"), default="auto")
    timeout = c.Type(int, default=1800)
    requests = c.Type(str, default="docs/measurements/requests.json")


class _FailedBlocks(logging.Handler):
    """Remembers markdown-exec's failure warnings together with the page being rendered."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.page: str | None = None
        self.failures: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        match = re.search(r"code block (?:'([^']*)' )?exited with", message)
        if match:
            block = match.group(1) or "(a block without id)"
            self.failures.append(f"block '{block}' in {self.page}")
            log.warning(
                "executed block '%s' in %s failed (its traceback is above)", block, self.page
            )


class AttentionDocsPlugin(BasePlugin[AttentionDocsConfig]):
    def on_config(self, config):
        root = Path(config.config_file_path).parent
        self.store = root / self.config.store
        self.requests_path = root / self.config.requests
        mode = os.environ.get("ATTENTION_DOCS_MODE") or self.config.mode
        device = os.environ.get("ATTENTION_DOCS_DEVICE") or self.config.device
        try:
            book.configure(
                book.Settings(
                    store=self.store,
                    mode=mode,
                    prefer=tuple(self.config.prefer),
                    allow_busy=self.config.allow_busy,
                    device=device,
                    timeout_s=float(self.config.timeout),
                )
            )
        except ValueError as exc:
            raise PluginError(f"attention-docs: {exc}") from None
        self.links: list[tuple[str, str]] = []
        self.handler = _FailedBlocks()
        logging.getLogger("mkdocs.plugins.markdown_exec").addHandler(self.handler)
        _show_library_warnings()
        return config

    def on_page_markdown(self, markdown, page, **kwargs):
        self.handler.page = page.file.src_uri
        return wrap_blocks(markdown, page.file.src_uri)

    def on_page_content(self, html, page, config, files, **kwargs):
        from mkdocs.structure.pages import _RelativePathTreeprocessor

        # markdown-exec converts a block's output without MkDocs' link rewriting: apply it
        # here (a private MkDocs class, stable across 1.x; mkdocs is pinned below 2).
        html = site_pages.rewrite_doc_links(
            html, _RelativePathTreeprocessor(page.file, files, config).path_to_url
        )
        if site_pages.is_notebook(page.file.src_uri):
            stem = posixpath.splitext(posixpath.basename(page.file.src_uri))[0]
            page.title = site_pages.notebook_title(page.markdown or "", stem)
            html = site_pages.notebook_page(html, stem, page.file.dest_uri)
        if PLACEHOLDER not in html:
            return html
        directory = posixpath.dirname(page.file.dest_uri)
        prefix = posixpath.relpath("measurements", directory or ".") + "/"
        for rel in re.findall(re.escape(PLACEHOLDER) + r'([^"\'\s<>]+)', html):
            self.links.append((page.file.src_uri, rel))
        return html.replace(PLACEHOLDER, prefix)

    def on_post_build(self, config):
        logging.getLogger("mkdocs.plugins.markdown_exec").removeHandler(self.handler)
        site = Path(config.site_dir)
        if self.store.is_dir():
            shutil.copytree(
                self.store,
                site / "measurements",
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns(".*"),
            )
        missing = [
            (page, rel) for page, rel in self.links if not (site / "measurements" / rel).is_file()
        ]
        if missing:
            listing = "; ".join(f"{rel} (linked from {page})" for page, rel in missing)
            raise PluginError(f"attention-docs: linked measurement files are missing: {listing}")
        self._write_notebooks(Path(config.docs_dir), site)
        fetches = book.build_log().fetches
        self._write_requests(fetches)
        summary = summary_html(fetches, book.build_log(), self.store)
        index = site / "index.html"
        if index.is_file():
            text = index.read_text(encoding="utf-8")
            index.write_text(text.replace(SUMMARY_MARKER, summary), encoding="utf-8")
        measured = sum(f.origin == "measured during this build" for f in fetches)
        log.info(
            "%d measurements: %d from the store, %d measured during this build",
            len(fetches),
            len(fetches) - measured,
            measured,
        )
        if self.handler.failures:
            log.warning("executed blocks failed: %s", ", ".join(self.handler.failures))

    def _write_notebooks(self, docs: Path, site: Path) -> None:
        """Publish each Jupytext companion notebook as a .ipynb readers can download and run."""
        import jupytext

        for source in sorted((docs / "notebooks").glob("*.py")):
            target = site / "notebooks" / f"{source.stem}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            jupytext.write(jupytext.read(source), target, fmt="ipynb")

    def _write_requests(self, fetches) -> None:
        requests = sorted(
            {
                json.dumps({"experiment": f.experiment, "requested": f.requested}, sort_keys=True)
                for f in fetches
            }
        )
        text = "[\n" + ",\n".join(f"  {r}" for r in requests) + "\n]\n"
        if requests and (
            not self.requests_path.exists()
            or self.requests_path.read_text(encoding="utf-8") != text
        ):
            self.requests_path.parent.mkdir(parents=True, exist_ok=True)
            self.requests_path.write_text(text, encoding="utf-8")


EXEC_FENCE = re.compile(
    r"^(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*\bexec=\"(?:on|1|true)\"[^\n]*)\n.*?^(?P=fence)[ \t]*$",
    re.M | re.S,
)


def wrap_blocks(markdown: str, page: str) -> str:
    """Wrap each top-level executed block in `<div class="ad-block" data-block="ID">`.

    The wrapper lets the tests check that every block produced output, and the id names the
    block in error messages; a block without an id is reported.
    """

    def wrap(match: re.Match) -> str:
        found = re.search(r'\bid="([^"]+)"', match.group("info"))
        if not found:
            log.warning(
                'an executed block in %s has no id="..."; give it one (see contributing.md)', page
            )
            return match.group(0)
        return f'<div class="ad-block" data-block="{found.group(1)}" markdown="1">\n\n{match.group(0)}\n\n</div>'

    return EXEC_FENCE.sub(wrap, markdown)


def _show_library_warnings() -> None:
    """Print the library's warnings (an unreadable store file, say) beside MkDocs' log.

    They do not go through MkDocs' logger on purpose: the problem they report is mended in
    the same build (the entry is measured again), so they must not fail a strict build.
    """
    library = logging.getLogger("attention_docs")
    if not any(getattr(h, "_attention_docs", False) for h in library.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)-7s -  attention_docs: %(message)s"))
        handler._attention_docs = True  # type: ignore[attr-defined]
        library.addHandler(handler)
        library.setLevel(logging.INFO)
        library.propagate = False


def store_devices(store: Path) -> dict[str, dict]:
    """Every device the store holds entries from: its description and entry count."""
    from attention_docs.measurements.store import Store

    found: dict[str, dict] = {}
    for _, m, _ in Store(store).entries():
        if m is None:
            continue
        p = m.provenance
        row = found.setdefault(p.device_id, {"provenance": p, "entries": 0})
        row["entries"] += 1
        if p.date > row["provenance"].date:
            row["provenance"] = p
    return dict(sorted(found.items()))


def _device_item(device_id: str, row: dict, used: int) -> str:
    import html

    p = row["provenance"]
    memory = f", {p.device.memory_bytes / 2**30:.0f} GiB" if p.device.memory_bytes else ""
    versions = f"torch {p.torch_version}" + (f", CUDA {p.cuda_version}" if p.cuda_version else "")
    return (
        f"<li><code>{html.escape(device_id)}</code>: {html.escape(p.device.label)}{memory}; "
        f"{html.escape(versions)}; {row['entries']} entries in the store, "
        f"{used} shown on these pages</li>"
    )


def summary_html(fetches, build_log, store: Path | None = None) -> str:
    """The index page's account of this build: where each measurement came from."""
    import html

    import torch

    if not fetches:
        return "<p>This build rendered no measurement.</p>"
    measured = [f for f in fetches if f.origin == "measured during this build"]
    stored = [f for f in fetches if f.origin == "from the store"]
    local = "a CUDA GPU" if torch.cuda.is_available() else "the CPU (no CUDA device found)"
    used: dict[str, int] = {}
    for f in fetches:
        used[f.device_id] = used.get(f.device_id, 0) + 1
    held = store_devices(store) if store else {}
    items = "".join(_device_item(d, row, used.get(d, 0)) for d, row in held.items())
    busy = sorted({(f.experiment, f.busy) for f in fetches if f.busy})
    if busy:
        listed = "".join(
            f"<li><code>{html.escape(e)}</code>: {html.escape(why)}</li>" for e, why in busy
        )
        items += (
            "</ul><p><strong>Measured on a busy machine</strong> (other work competed; "
            f"their timings are less trustworthy):</p><ul>{listed}"
        )
    problems = ""
    if build_log.problems:
        listed = "".join(f"<li>{html.escape(p)}</li>" for p in build_log.problems)
        problems = (
            f"<p>Stored files that could not be used and were measured again:</p><ul>{listed}</ul>"
        )
    return (
        '<div class="admonition info"><p class="admonition-title">This build</p>'
        f"<p>Built with torch {html.escape(torch.__version__)} on {local}. "
        f"It rendered <strong>{len(fetches)}</strong> measurements: "
        f"<strong>{len(measured)}</strong> measured during this build and "
        f"<strong>{len(stored)}</strong> read from the committed store. The store holds "
        f"measurements from these devices:</p><ul>{items}</ul>{problems}</div>"
    )
