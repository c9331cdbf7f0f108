# The MkDocs side of the measurement store. It configures `book.measure()` from mkdocs.yml
# (and the ATTENTION_DOCS_* variables `nox -s docs` sets), rewrites the `@measurements/`
# link placeholder into page-relative links, publishes the store (world-readable,
# byte-identical from one build to the next, notebooks included), checks that every linked
# file exists, reports failed executed blocks by page with one root cause per session, and
# writes the build summary. Only a full build — every page, not `serve`, not `--dirty`, not
# a subset config, no failed block — rewrites the committed requests manifest: a partial
# build would shrink it to the pages it saw. Under `mkdocs serve --dirty` an edit rebuilds
# only the pages whose renderers, measured code or snippets include the file; site_pages.py
# finishes pages for readers.
from __future__ import annotations

import hashlib
import itertools
import logging
import os
import posixpath
import re
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mkdocs.config import config_options as c
from mkdocs.config.base import Config
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin, get_plugin_logger

from attention_docs import book, build_cache, folders, site_pages
from attention_docs.files import write_atomically
from attention_docs.measurements.keys import PACKAGE_ROOT
from attention_docs.measurements.manifest import requests_text

log = get_plugin_logger("attention_docs")
PLACEHOLDER = "@measurements/"
SITE = "@site/"  # the site's root, as a link from the page (captions link to method/)
DEVICE_SETTINGS = ("auto", "cpu", "cuda")
SUMMARY_MARKER = "<!-- attention-docs:build-summary -->"
YES = ("1", "true", "yes", "on")  # what turns an ATTENTION_DOCS_* switch on
SNIPPET = re.compile(r"""--8<--\s+["']([^"'\n]+)["']""")
# The GitHub repository whose Pages publish the site, as owner/name: the first variable set.
REPOSITORY_VARIABLES = ("ATTENTION_DOCS_REPOSITORY", "GITHUB_REPOSITORY")
REPOSITORY = re.compile(r"[A-Za-z0-9-]+/[A-Za-z0-9._-]+")
EDIT_BRANCH = "main"  # the branch .github/workflows/docs.yml publishes


class AttentionDocsConfig(Config):
    store = c.Type(str, default="docs/measurements")
    mode = c.Choice(book.MODES, default="auto")
    # Which device's entry a page shows, in order (see book.SELECTORS).
    prefer = c.ListOfItems(c.Type(str), default=list(book.DEFAULT_PREFER))
    # An entry measured while other work competed is measured once more when the machine
    # has calmed (waiting at most `busy_wait` seconds); busy again, it is stored flagged as
    # busy (its caption and the build summary say so) — except in mode publish, which fails.
    busy_wait = c.Type(int, default=60)
    device = c.Choice(DEVICE_SETTINGS, default="auto")
    timeout = c.Type(int, default=1800)
    requests = c.Type(str, default="docs/measurements/requests.json")
    # What builds reuse (relative to mkdocs.yml): renderer outputs, published notebooks,
    # experiment declarations and this machine's device id; "" turns it off.
    cache_dir = c.Type(str, default=".cache")


@dataclass(frozen=True)
class BlockFailure:
    page: str
    block: str
    session: str | None
    error: str  # the exception's first line, e.g. "NameError: name 'wall' is not defined"
    cause: str | None = None  # the earlier block of the same session this one failed because of


# A measurement a page needs that could not be had (missing from a frozen store, refused, a
# busy publish, a worker's failure with its last lines): its message is the whole story.
SAID = "attention_docs.workers.MeasurementError: "


def said(error: str) -> str:
    return error.removeprefix(SAID)


def exception_text(message: str) -> str:
    """The exception a markdown-exec failure message ends with, without its traceback."""
    output = message.split("Output is:", 1)[-1]
    lines = [line[2:] if line.startswith("  ") else line for line in output.splitlines()]
    lines = [line for line in lines if line.strip() and not line.startswith("```")]
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    start = frames[-1] + 1 if frames else 0
    for i, line in enumerate(lines[start:], start):
        if not line.startswith(" ") and not line.startswith("Traceback"):
            return "\n".join(lines[i:]).strip()
    return lines[-1].strip() if lines else "unknown error"


def exception_line(message: str) -> str:
    """The first line of the exception a markdown-exec failure message ends with."""
    return exception_text(message).splitlines()[0]


class BlockFailures(logging.Handler):
    """Watches markdown-exec's failure warnings: names the page in each, and turns a
    `NameError` after an earlier failure in the same session into one line naming that
    block — the usual cascade of one typo in a session's first block.

    It is a handler on markdown-exec's parent logger, so it sees each record before MkDocs'
    own handler (on the `mkdocs` logger, further up) prints it, and rewrites it in place.
    """

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.page: str | None = None
        self.sessions: dict[str, str] = {}  # block id -> session, on the current page
        self.failures: list[BlockFailure] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        match = re.search(r"code block (?:'([^']*)' )?exited with", message)
        if not match:
            return
        block = match.group(1) or "(a block without id)"
        session = self.sessions.get(block)
        error = exception_line(message)
        root = next(
            (
                f
                for f in self.failures
                if session and (f.page, f.session, f.cause) == (self.page, session, None)
            ),
            None,
        )
        cause = root.block if root is not None and error.startswith("NameError") else None
        self.failures.append(BlockFailure(self.page, block, session, error, cause))
        if cause:
            record.msg = (
                f"executed block '{block}' in {self.page} failed with {error}: a consequence of "
                f"block '{cause}' failing earlier in session '{session}' (see above)"
            )
        elif error.startswith(SAID):  # one sentence says what failed and what to do
            self.failures.append(BlockFailure(self.page, block, session, error))
            text = said(exception_text(message))  # a worker's last lines follow the sentence
            record.msg = f"executed block '{block}' in {self.page} failed: {text}"
        else:
            record.msg = message.replace(
                match.group(0), f"code block '{block}' in {self.page} exited with", 1
            )
        record.args = ()

    def summary(self) -> list[str]:
        """One line per root failure, with the blocks that failed because of it."""
        lines = []
        for root in (f for f in self.failures if f.cause is None):
            followers = [
                f.block for f in self.failures if f.cause == root.block and f.page == root.page
            ]
            after = (
                f"; {len(followers)} later block(s) of session '{root.session}' failed only "
                f"because of it ({', '.join(followers)})"
                if followers
                else ""
            )
            where = "" if root.error.startswith(SAID) else " (its traceback is above)"
            lines.append(
                f"executed block '{root.block}' in {root.page} failed: {said(root.error)}{after}"
                f"{where}"
            )
        return lines


def file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


class AttentionDocsPlugin(BasePlugin[AttentionDocsConfig]):
    def __init__(self) -> None:
        self.command = "build"
        self.dirty = False
        self.reloader = None
        self.graph = build_cache.SourceGraph()
        # Per page (src_uri): the files it depended on when last rendered, and their digests.
        self.page_files: dict[str, dict[Path, str]] = {}

    def on_startup(self, *, command, dirty):
        # Defining this keeps one plugin object for every rebuild of `mkdocs serve`.
        self.command = command
        self.dirty = dirty
        if command == "serve":
            from attention_docs.live_reload import ModuleReloader

            self.reloader = ModuleReloader(graph=self.graph)
            self.reloader.snapshot()

    def on_config(self, config):
        if self.reloader is not None:
            self.reloader.reload_changed()
        # mkdocs-jupyter says two lines per notebook per build ("Cache hit", "Copied jupyter
        # file"): two dozen lines above the build summary that say nothing went wrong.
        for name in ("mkdocs.plugins.mkdocs_jupyter", "mkdocs.mkdocs-jupyter"):
            logging.getLogger(name).setLevel(logging.WARNING)
        self.root = root = Path(config.config_file_path).parent
        self.store = root / self.config.store
        self.requests_path = root / self.config.requests
        mode = os.environ.get("ATTENTION_DOCS_MODE") or self.config.mode
        device_setting = os.environ.get("ATTENTION_DOCS_DEVICE") or self.config.device
        prefer = tuple(self.config.prefer)
        if os.environ.get("ATTENTION_DOCS_THIS_MACHINE", "").strip().lower() in YES:
            prefer = book.THIS_MACHINE
        self.cache_dir = root / self.config.cache_dir if self.config.cache_dir else None
        for what, value, allowed, source in (
            ("device", device_setting, DEVICE_SETTINGS, "--device or ATTENTION_DOCS_DEVICE"),
            ("mode", mode, book.MODES, "ATTENTION_DOCS_MODE"),
        ):
            if value not in allowed:
                raise PluginError(
                    f"attention-docs: {what} {value!r} is not one of {', '.join(allowed)} "
                    f"(set by {source})"
                )
        if device_setting == "cuda":
            # One line now, rather than the same error from every block that measures.
            from attention_docs.profiling.device import DeviceError, resolve_device

            try:
                resolve_device("cuda")
            except DeviceError as exc:
                raise PluginError(f"attention-docs: {exc}") from None
        try:
            book.configure(
                book.Settings(
                    store=self.store,
                    mode=mode,
                    prefer=prefer,
                    busy_wait_s=_seconds("ATTENTION_DOCS_BUSY_WAIT", self.config.busy_wait),
                    device_setting=device_setting,
                    timeout_s=float(self.config.timeout),
                    cache_dir=self.cache_dir,
                )
            )
        except ValueError as exc:
            raise PluginError(f"attention-docs: {exc}") from None
        self.graph.refresh()
        self.cache = build_cache.RenderCache(
            self.cache_dir / "render" if self.cache_dir else None, self.graph
        )
        build_cache.install(self.cache)
        self.links: list[tuple[str, str]] = []
        # Built once per build (from the cache when unchanged): notebook pages link it.
        self.wheel = package_wheel(self.cache_dir) is not None
        self.failures = BlockFailures()
        logging.getLogger("mkdocs.plugins.markdown_exec").addHandler(self.failures)
        self.full = self.command in ("build", "gh-deploy") and not self.dirty
        _show_library_warnings()
        for variable in REPOSITORY_VARIABLES:
            if repository := os.environ.get(variable, "").strip():
                try:
                    publish_links(config, repository)
                except ValueError as exc:
                    raise PluginError(f"attention-docs: {exc} (set by {variable})") from None
                break
        return config

    def on_serve(self, server, config, builder):
        # mkdocs serve's site folder (mkdocs_* under the temporary folder) names no owner:
        # recorded beside it, so that what a killed serve left is cleared later.
        folders.claim(Path(config.site_dir))
        # The library is watched too when it is a source checkout (an editable install, or
        # PYTHONPATH=src), not an installed copy. Reloaded modules write no .pyc files into
        # it: each would be a change that starts another rebuild.
        if "site-packages" not in PACKAGE_ROOT.parts:
            sys.dont_write_bytecode = True
            server.watch(str(PACKAGE_ROOT))
        return server

    def on_files(self, files, config):
        pages = files.documentation_pages(inclusion=lambda level: True)
        if any(f.inclusion.is_excluded() for f in pages):
            self.full = False  # a subset of the site: its requests are not the site's
        if self.dirty:
            for f in pages:
                known = self.page_files.get(f.src_uri, {})
                changed = [p for p, d in known.items() if file_digest(p) != d]
                if changed and Path(f.abs_dest_path).exists():
                    # mkdocs --dirty rebuilds a page whose output is older than its source.
                    os.utime(f.abs_dest_path, (0, 0))
                    log.info("rebuilding %s: %s changed", f.src_uri, _short(changed))
        return files

    def on_page_markdown(self, markdown, page, config, **kwargs):
        uri = page.file.src_uri
        book.start_page(uri)
        self.failures.page = uri
        self.cache.used_files.clear()
        book.build_log().used_files.clear()
        self.snippets = {
            (self.root / m.group(1).rsplit(":", 1)[0]).resolve() for m in SNIPPET.finditer(markdown)
        }
        markdown, self.failures.sessions = wrap_blocks(markdown, uri)
        return markdown

    def on_page_content(self, html, page, config, files, **kwargs):
        from mkdocs.structure.pages import _RelativePathTreeprocessor

        used = self.snippets | self.cache.used_files | book.build_log().used_files
        self.page_files[page.file.src_uri] = {p: file_digest(p) for p in sorted(used)}

        # markdown-exec converts a block's output without MkDocs' link rewriting: apply it
        # here (a private MkDocs class, stable across 1.x; mkdocs is pinned below 2).
        html = site_pages.rewrite_doc_links(
            html, _RelativePathTreeprocessor(page.file, files, config).path_to_url
        )
        if self.reloader is not None and self.reloader.failed:
            html = site_pages.stale_banner(self.reloader.failed) + html
        if site_pages.is_notebook(page.file.src_uri):
            stem = posixpath.splitext(posixpath.basename(page.file.src_uri))[0]
            page.title = site_pages.notebook_title(page.markdown or "", stem)
            html = site_pages.notebook_page(html, stem, page.file.dest_uri, wheel=self.wheel)
        here = posixpath.dirname(page.file.dest_uri) or "."
        html = site_links(html, here, directory_urls=config.use_directory_urls)
        for rel in re.findall(re.escape(PLACEHOLDER) + r'([^"\'\s<>]+)', html):
            self.links.append((page.file.src_uri, rel))
        return html.replace(PLACEHOLDER, posixpath.relpath("measurements", here) + "/")

    def on_post_page(self, output, page, config):
        return stable_cell_ids(output)

    def on_build_error(self, error):
        if hasattr(self, "failures"):
            logging.getLogger("mkdocs.plugins.markdown_exec").removeHandler(self.failures)

    def on_post_build(self, config):
        logging.getLogger("mkdocs.plugins.markdown_exec").removeHandler(self.failures)
        site = Path(config.site_dir)
        fetches = book.build_log().fetches
        if self.full and not self.failures.failures:
            # Before the store is copied, so that the published manifest is this build's.
            write_requests(self.requests_path, fetches)
        if self.store.is_dir():
            publish_store(self.store, site / "measurements")
        missing = [
            (page, rel) for page, rel in self.links if not (site / "measurements" / rel).is_file()
        ]
        if missing:
            listing = "; ".join(f"{rel} (linked from {page})" for page, rel in missing)
            raise PluginError(f"attention-docs: linked measurement files are missing: {listing}")
        write_notebooks(Path(config.docs_dir), site, self.cache_dir)
        publish_wheel(site, self.cache_dir)
        index = site / "index.html"
        text = index.read_text(encoding="utf-8") if index.is_file() else ""
        if SUMMARY_MARKER in text:  # a dirty rebuild leaves an unchanged index alone
            summary = summary_html(fetches, book.build_log(), self.store)
            index.write_text(text.replace(SUMMARY_MARKER, summary), encoding="utf-8")
        world_readable(site)
        self.cache.save()
        measured = sum(f.origin == "measured during this build" for f in fetches)
        log.info(
            "%d measurements: %d from the store, %d measured during this build; "
            "renderers: %d from the cache, %d drawn",
            len(fetches),
            len(fetches) - measured,
            measured,
            self.cache.hits,
            self.cache.misses,
        )
        for line in self.failures.summary():
            log.warning(line)
        if self.reloader is not None:
            self.reloader.snapshot()


def site_links(html: str, here: str, *, directory_urls: bool = True) -> str:
    """`@site/PATH` links made relative to a page in the folder `here`. Without directory URLs
    (the offline build) a page is a file: `@site/method/` is `method.html`."""
    if not directory_urls:
        html = re.sub(re.escape(SITE) + r"""([^"'\s<>#]+)/(?=["'#])""", rf"{SITE}\1.html", html)
    return html.replace(SITE, posixpath.relpath(".", here) + "/")


def publish_links(config, repository: str) -> None:
    """Fill what mkdocs.yml leaves empty from the repository `owner/name` whose GitHub Pages
    publish the site: its address (canonical URLs, the sitemap, the 404 page's links), an
    edit link on each page, and a link to the repository in the footer.

    Not `repo_url`: with it, Material's JavaScript asks GitHub's API for the repository's
    stars and forks on every visit, and the site loads nothing from another host.
    """
    if not REPOSITORY.fullmatch(repository) or repository.split("/")[1] in (".", ".."):
        raise ValueError(f"the repository {repository!r} is not a GitHub owner/name")
    owner, name = repository.split("/")
    repo_url = f"https://github.com/{owner}/{name}"
    config.site_url = config.site_url or f"https://{owner.lower()}.github.io/{name}/"
    config.edit_uri = config.edit_uri or f"{repo_url}/edit/{EDIT_BRANCH}/docs/"
    social = {"icon": "fontawesome/brands/github", "link": repo_url, "name": repository}
    config.extra["social"] = config.extra.get("social") or [social]


def _seconds(variable: str, default: float) -> float:
    """A non-negative number of seconds that an environment variable may override."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return float(default)
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):  # NaN fails the comparison
        raise PluginError(
            f"attention-docs: {variable}={text!r} is not a number of seconds (0 or more)"
        )
    return value


def _short(paths: list[Path]) -> str:
    names = [p.name if p.suffix == ".json" else p.as_posix().split("/src/")[-1] for p in paths]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def stable_cell_ids(html: str) -> str:
    """Notebook cells numbered in order: jupytext gives a `.py` notebook's cells random ids,
    and nbconvert writes them into the page, so two builds of one notebook would differ."""
    counter = itertools.count()
    return re.sub(r'id="cell-id=[^"]*"', lambda _: f'id="cell-id=cell-{next(counter)}"', html)


def write_requests(path: Path, fetches) -> None:
    """The requests manifest: every (experiment, requested) this build rendered, sorted."""
    if not fetches:
        return
    text = requests_text((f.experiment, f.requested) for f in fetches)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        write_atomically(path, text)


def publish_store(store: Path, target: Path) -> None:
    """Copy the store's entries, traces and manifest into the site (dotfiles left out).

    A file the site already holds, same size and not older, is left as it is: `serve`
    rebuilds into the same folder after every edit.
    """

    def copy(src: str, dst: str) -> None:
        s, d = Path(src).stat(), Path(dst).stat() if Path(dst).exists() else None
        if d is None or d.st_size != s.st_size or d.st_mtime < s.st_mtime:
            shutil.copy2(src, dst)

    shutil.copytree(
        store, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".*"), copy_function=copy
    )


def world_readable(site: Path) -> None:
    """Every published file 0644, every folder 0755, whatever the umask was."""
    for folder, dirs, files in os.walk(site):
        for name in dirs:
            (Path(folder) / name).chmod(0o755)
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                path.chmod(0o644)


def write_notebooks(docs: Path, site: Path, cache_dir: Path | None = None) -> None:
    """Publish each Jupytext companion notebook as a .ipynb readers can download and run,
    its first cell installing the package (site_pages.INSTALL_CELL) where it is missing.

    Cells are numbered (`cell-0`, ...) instead of jupytext's random ids, so that the file
    is the same from one build to the next; it is kept under `cache_dir`, keyed by the
    source, since jupytext's conversion and validation take a while.
    """
    for source in sorted((docs / "notebooks").glob("*.py")):
        target = site / "notebooks" / f"{source.stem}.ipynb"
        if target.exists() and target.stat().st_mtime >= source.stat().st_mtime:
            continue  # written by an earlier build into this folder (`serve`)
        write_atomically(target, published_notebook(source, cache_dir))


def published_notebook(source: Path, cache_dir: Path | None = None) -> bytes:
    """The .ipynb a reader downloads for the Jupytext notebook `source`."""
    import importlib.metadata

    text = source.read_bytes()
    key = hashlib.sha256(
        f"{importlib.metadata.version('jupytext')}\0{site_pages.INSTALL_CELL}\0".encode() + text
    ).hexdigest()
    cached = cache_dir / "notebooks" / f"{key}.ipynb" if cache_dir else None
    if cached is not None and cached.is_file():
        return cached.read_bytes()
    import jupytext
    import nbformat

    notebook = jupytext.reads(text.decode("utf-8"), fmt="py:percent")
    notebook.cells.insert(0, nbformat.v4.new_code_cell(site_pages.INSTALL_CELL))
    for i, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{i}"
    data = jupytext.writes(notebook, fmt="ipynb").encode()
    if cached is not None:
        write_atomically(cached, data)
    return data


# The project the package is built from: a source checkout's (an editable install, or
# PYTHONPATH=src), never an installed copy's.
PROJECT = PACKAGE_ROOT.parents[1]


def package_wheel(cache_dir: Path | None = None) -> bytes | None:
    """The package as the wheel notebooks install (site_pages.WHEEL), built by hatchling,
    whose wheels are reproducible (fixed timestamps), and kept under `cache_dir` while the
    project's files stay the same. None, with a warning in the log, where there is no
    project to build it from (an installed copy) or it cannot be built."""
    if not (PROJECT / "pyproject.toml").is_file() or "site-packages" in PACKAGE_ROOT.parts:
        return None
    digest = hashlib.sha256()
    for path in sorted(
        (*PACKAGE_ROOT.rglob("*.py"), PROJECT / "pyproject.toml", PROJECT / "README.md")
    ):
        digest.update(path.as_posix().encode() + b"\0" + file_digest(path).encode())
    key = digest.hexdigest()[:16]
    cached = cache_dir / "wheel" / key / site_pages.WHEEL if cache_dir else None
    if cached is not None and cached.is_file():
        return cached.read_bytes()
    from hatchling.builders.wheel import WheelBuilder

    try:
        with tempfile.TemporaryDirectory() as folder:
            (built,) = WheelBuilder(str(PROJECT)).build(directory=folder, versions=["standard"])
            data = Path(built).read_bytes()
    except (OSError, ValueError, TypeError) as exc:  # hatchling's errors for a bad project
        logging.getLogger("attention_docs").warning(
            "the package's wheel could not be built from %s (%s): the notebooks' pages link "
            "none, and a downloaded notebook needs ATTENTION_DOCS_PACKAGE",
            PROJECT,
            exc,
        )
        return None
    if cached is not None:
        write_atomically(cached, data)
    return data


def publish_wheel(site: Path, cache_dir: Path | None = None) -> Path | None:
    """Write `package_wheel` into the site's downloads folder; its path, or None."""
    data = package_wheel(cache_dir)
    if data is None:
        return None
    target = site / site_pages.DOWNLOADS / site_pages.WHEEL
    if not target.is_file() or target.read_bytes() != data:
        write_atomically(target, data)
    return target


FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
EXECUTED = re.compile(r'\bexec="(?:on|1|true)"')


def top_level_fences(markdown: str) -> list[tuple[int, int, str]]:
    """(first line, last line, info) of each fenced block that is not inside another one.

    A fence inside a longer one (a guide showing a chapter's source in a ```` block) is
    content, not a block: it is neither executed nor wrapped.
    """
    lines = markdown.split("\n")
    found = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence = opening.group("fence")
        end = i + 1
        closing = re.compile(rf"^{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        found.append((i, min(end, len(lines) - 1), opening.group("info")))
        i = end + 1
    return found


def wrap_blocks(markdown: str, page: str) -> tuple[str, dict[str, str]]:
    """Wrap each top-level executed block in `<div class="ad-block" data-block="ID">`; and
    the blocks' ids mapped to their session names.

    The wrapper lets the tests check that every block produced output, and the id names the
    block in error messages; a block without an id is reported.
    """
    lines = markdown.split("\n")
    sessions = {}
    for first, last, info in reversed(top_level_fences(markdown)):
        if not EXECUTED.search(info):
            continue
        found = re.search(r'\bid="([^"]+)"', info)
        if not found:
            log.warning(
                'an executed block in %s has no id="..."; give it one (see contributing.md)', page
            )
            continue
        if session := re.search(r'\bsession="([^"]+)"', info):
            sessions[found.group(1)] = session.group(1)
        lines[last + 1 : last + 1] = ["", "</div>"]
        lines[first:first] = [
            f'<div class="ad-block" data-block="{found.group(1)}" markdown="1">',
            "",
        ]
    return "\n".join(lines), sessions


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

    from attention_docs.render import words

    p = row["provenance"]
    memory = (
        f", {words.value(p.device.memory_bytes / 2**30, 'GiB')}" if p.device.memory_bytes else ""
    )
    versions = f"torch {p.torch_version}" + (f", CUDA {p.cuda_version}" if p.cuda_version else "")
    spec = (p.device.spec or {}).get("source")
    sheet = f"data sheet: {spec}" if spec else "no data sheet: its ceilings are measured"
    return (
        f"<li><code>{html.escape(device_id)}</code>: {html.escape(p.device.label)}{memory}; "
        f"{html.escape(versions)}; {html.escape(sheet)}; {row['entries']} entries in the "
        f"store, read {used} times by these pages (one entry can back several)</li>"
    )


def _section(intro: str, items: list[str]) -> str:
    """Closes the list before it, then a paragraph and its own list (left open)."""
    return f"</ul><p>{intro}</p><ul>" + "".join(f"<li>{item}</li>" for item in items)


def summary_html(fetches, build_log, store: Path | None = None) -> str:
    """The index page's account of this build: where each measurement came from."""
    import html
    import importlib.metadata

    if not fetches:
        return "<p>This build rendered no measurement.</p>"
    measured = [f for f in fetches if f.origin == "measured during this build"]
    stored = [f for f in fetches if f.origin == "from the store"]
    on_gpu = book.local_device_id(book.settings().device_setting).startswith("cuda-")
    local = "a CUDA GPU" if on_gpu else "the CPU"
    if not on_gpu and book.settings().device_setting == "auto":
        local += " (no CUDA device found)"
    torch_version = importlib.metadata.version("torch")
    used = Counter(f.device_id for f in fetches)
    held = store_devices(store) if store else {}
    items = "".join(_device_item(d, row, used.get(d, 0)) for d, row in held.items())
    busy = sorted({(f.experiment, f.busy) for f in fetches if f.busy})
    if busy:
        items += _section(
            "<strong>Measured on a busy machine</strong> (other work competed, and again after "
            "waiting for the machine to calm; their captions say so, and their timings are less "
            "trustworthy):",
            [f"<code>{html.escape(e)}</code>: {html.escape(why)}" for e, why in busy],
        )
    if build_log.mixed:
        items += _section(
            "<strong>Pages that show more than one device</strong> (the store lacked an entry "
            "on the page's own device; each caption names its device):",
            [
                html.escape(f"{page}: {', '.join(sorted(devices))}")
                for page, devices in sorted(build_log.mixed.items())
            ],
        )
    problems = ""
    if build_log.problems:
        listed = "".join(f"<li>{html.escape(p)}</li>" for p in build_log.problems)
        problems = (
            f"<p>Stored files that could not be used and were measured again:</p><ul>{listed}</ul>"
        )
    return (
        '<div class="admonition info"><p class="admonition-title">This build</p>'
        f"<p>Built with torch {html.escape(torch_version)} on {local}. "
        f"It rendered <strong>{len(fetches)}</strong> measurements: "
        f"<strong>{len(measured)}</strong> measured during this build and "
        f"<strong>{len(stored)}</strong> read from the committed store. The store holds "
        f"measurements from these devices:</p><ul>{items}</ul>{problems}</div>"
    )
