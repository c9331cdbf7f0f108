# The built site as a reader's browser sees it: Debian's Chromium driven by Playwright against
# the site served on 127.0.0.1. Run with `nox -s browser`; skipped where either is missing.
# ATTENTION_DOCS_SITE=path/to/site checks an already built site (tools/preview.py builds one
# of a few pages) instead of building the whole site here.
from __future__ import annotations

import functools
import gzip
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import ROOT
from site_links import broken_links, html_pages
from test_docs_build import mkdocs_build

pytestmark = pytest.mark.browser
CHROMIUM = Path("/usr/bin/chromium")
SITE_ENV = "ATTENTION_DOCS_SITE"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # one line per request drowns the report
        pass


ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-quic",
    "--disable-sync",
]
# Two readers: a laptop (the content column is ~750 px beside both sidebars) and a phone.
DESKTOP, PHONE = 1280, 390
# Smallest figure text a reader can read without zooming, in CSS pixels.
MIN_TEXT_PX = {DESKTOP: 11.0, PHONE: 9.0}

# Stands in for ui.perfetto.dev (no network here): it speaks Perfetto's postMessage protocol,
# answering PING with PONG, and keeps the trace it is sent.
PERFETTO_STUB = """<!doctype html><title>stub</title><script>
window.received = null;
window.addEventListener("message", (e) => {
  if (e.data === "PING") { e.source.postMessage("PONG", e.origin); return; }
  if (e.data && e.data.perfetto) {
    window.received = new TextDecoder().decode(new Uint8Array(e.data.perfetto.buffer));
    document.title = "received";
  }
});
</script>"""

# What a reader would trip over on one page, measured in the browser's layout: tables wider
# than their column, numbers broken across lines, figure text too small to read, a page that
# scrolls sideways, figure labels drawn over each other, a shortened label with no tooltip.
READING_PROBLEMS = """(minText) => {
  const problems = [];
  const column = document.querySelector(".md-content__inner");
  const columnWidth = column.clientWidth
    - parseFloat(getComputedStyle(column).paddingLeft)
    - parseFloat(getComputedStyle(column).paddingRight);
  const root = document.documentElement;
  if (root.scrollWidth > window.innerWidth + 1) {
    problems.push(`the page scrolls sideways: ${root.scrollWidth} px in a ${window.innerWidth} px window`);
  }
  // The box a table is seen through: the nearest ancestor that clips it (material wraps each
  // table in a scroll wrapper, wider than the column by its padding), else the column.
  const frame = (el) => {
    for (let p = el.parentElement; p && p !== column; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o !== "visible") return [p.clientWidth, o === "auto" || o === "scroll"];
    }
    return [columnWidth, false];
  };
  const lines = (node) => {
    const range = document.createRange();
    range.selectNodeContents(node);
    const tops = new Set();
    for (const r of range.getClientRects()) if (r.width > 0) tops.add(Math.round(r.bottom));
    return tops.size;
  };
  document.querySelectorAll(".md-content table").forEach((table, i) => {
    const width = table.getBoundingClientRect().width;
    const head = [...table.querySelectorAll("th")].map((th) => th.textContent.trim()).join(" | ");
    const [room, scrolls] = frame(table);
    // On a laptop every table fits; on a phone a wide one may scroll inside its wrapper.
    if (width > room + 1 && (window.innerWidth >= 960 || !scrolls)) {
      problems.push(`table ${i} (${head.slice(0, 60)}) is ${Math.round(width)} px in a ${Math.round(room)} px column`);
    }
    table.querySelectorAll("td").forEach((td) => {
      const text = td.textContent.trim();
      // A <br> inside a cell (a median over its range) is a line break on purpose.
      if (getComputedStyle(td).textAlign === "right" && text && lines(td) > 1 + td.querySelectorAll("br").length) {
        problems.push(`table ${i}: the value "${text}" is broken across lines`);
      }
    });
  });
  document.querySelectorAll(".md-content figure svg").forEach((svg, f) => {
    const boxes = [];
    svg.querySelectorAll("text").forEach((t) => {
      const label = t.textContent.trim();
      if (!label) return;
      const m = t.getScreenCTM();
      const px = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
      if (px < minText - 0.05) {
        problems.push(`figure ${f}: "${label.slice(0, 40)}" is ${px.toFixed(1)} px tall`);
      }
      if (label.endsWith("…") && !t.closest("g:has(> title)")) {
        problems.push(`figure ${f}: "${label}" is shortened with no tooltip giving the full name`);
      }
      const b = t.getBoundingClientRect();
      if (b.width > 0 && b.height > 0) boxes.push([label, b]);
    });
    for (let a = 0; a < boxes.length; a++) {
      for (let b = a + 1; b < boxes.length; b++) {
        const [la, ra] = boxes[a], [lb, rb] = boxes[b];
        const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
        const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
        if (w > 2 && h > 2 && w * h > 0.2 * Math.min(ra.width * ra.height, rb.width * rb.height)) {
          problems.push(`figure ${f}: "${la.slice(0, 30)}" and "${lb.slice(0, 30)}" overlap`);
        }
      }
    }
  });
  return problems;
}"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    # Skip before building: without a browser the build would be thrown away.
    pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    if os.environ.get(SITE_ENV):
        return Path(os.environ[SITE_ENV]).resolve()
    out = tmp_path_factory.mktemp("site")
    result = mkdocs_build(ROOT / "mkdocs.yml", out, ATTENTION_DOCS_MODE="frozen")
    assert result.returncode == 0, result.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def served(site):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser, base
        browser.close()
    server.shutdown()


OFFLINE_CHAPTER = "chapters/02-naive-attention.md"


@pytest.fixture(scope="module")
def offline_site(tmp_path_factory) -> Path:
    """The index and one chapter as `nox -s docs -- --offline` builds them, from the committed
    store (tools/preview.py: seconds, not the whole site), with the repository known: its
    edit and repository links must not make a browser fetch anything either."""
    pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    site = tmp_path_factory.mktemp("offline") / "site"
    command = [sys.executable, "tools/preview.py", "--store", "docs/measurements"]
    command += ["--mode", "frozen", "--site", str(site), OFFLINE_CHAPTER]
    result = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "ATTENTION_DOCS_OFFLINE": "true", "ATTENTION_DOCS_REPOSITORY": "o/n"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return site


def test_the_offline_site_reads_from_disk(offline_site):
    """site/index.html opened as a file: its link to a chapter opens the chapter, figures
    and all, search answers, and nothing is fetched from anywhere but the disk."""
    sync_api = pytest.importorskip("playwright.sync_api")
    link = OFFLINE_CHAPTER.replace(".md", ".html")  # no directory URLs: a folder is no page
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page()
        elsewhere: list[str] = []
        page.on(
            "request",
            lambda r: None if r.url.startswith(("file://", "data:")) else elsewhere.append(r.url),
        )
        page.goto((offline_site / "index.html").as_uri(), wait_until="load")
        page.locator(f'.md-content a[href="{link}"]').first.click()
        page.wait_for_url((offline_site / link).as_uri())
        figures = page.locator("figure.ad-figure svg")
        assert figures.count() >= 1
        assert figures.first.is_visible() and figures.first.bounding_box()["width"] > 400
        broken = page.evaluate(
            "() => [...document.images].filter((i) => !i.complete || !i.naturalWidth).map((i) => i.src)"
        )
        assert broken == []
        # `bmm` is only ever written as `aten::bmm`, in this chapter.
        page.click(".md-search__input")
        page.locator("input.md-search__input").press_sequentially("bmm", delay=50)
        page.wait_for_selector(".md-search-result__item", timeout=15000)
        assert "Naive attention" in page.locator(".md-search-result").inner_text()
        browser.close()
    assert elsewhere == []


def reader_pages(site: Path) -> list[str]:
    """Every chapter and notebook page of the built site, as paths under it."""
    return [
        p.parent.relative_to(site).as_posix() + "/"
        for folder in ("chapters", "notebooks")
        for p in sorted((site / folder).glob("*/index.html"))
    ]


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_every_page_reads_at_this_width(served, site, width):
    """Layout does not depend on the colour scheme: the dark theme only filters the figures."""
    browser, base = served
    page = browser.new_page(viewport={"width": width, "height": 900})
    problems = []
    paths = reader_pages(site)
    assert paths, f"no chapter or notebook pages under {site}"
    for path in paths:
        page.goto(base + path, wait_until="networkidle")
        problems += [f"{path}: {p}" for p in page.evaluate(READING_PROBLEMS, MIN_TEXT_PX[width])]
    page.close()
    assert not problems, f"{len(problems)} problems at {width} px:\n" + "\n".join(problems[:60])


def test_every_link_and_download_resolves_over_http(served, site):
    """Every local link, asset and download on every page answers 200; nothing leaves the site."""
    browser, base = served
    context = browser.new_context()
    foreign: list[str] = []
    context.on(
        "request",
        lambda r: None if r.url.startswith((base, "data:", "blob:")) else foreign.append(r.url),
    )
    page = context.new_page()
    targets: set[str] = set()
    for path in ["", *reader_pages(site), "contributing/"]:
        page.goto(base + path, wait_until="networkidle")
        if path.startswith("notebooks/"):
            stem = path.strip("/").rsplit("/", 1)[-1]
            assert page.locator(f'a[download][href$="{stem}.ipynb"]').count() == 1, path
        targets |= set(
            page.evaluate(
                """() => [...document.querySelectorAll('a[href], link[href], script[src], img[src], [data-trace]')]
                    .map((e) => new URL(e.getAttribute('href') || e.getAttribute('src') || e.dataset.trace, document.baseURI))
                    .filter((u) => u.origin === location.origin)
                    .map((u) => u.origin + u.pathname)"""
            )
        )
    failed = [url for url in sorted(targets) if not context.request.get(url).ok]
    context.close()
    assert not failed, "links that do not resolve:\n" + "\n".join(failed)
    assert foreign == [], f"requests left the site: {foreign}"
    assert broken_links(site) == []
    assert len(html_pages(site)) > 1


def test_pages_load_nothing_from_other_hosts_and_show_their_figures(served):
    browser, base = served
    page = browser.new_page()
    foreign = []
    page.on("request", lambda r: foreign.append(r.url) if not r.url.startswith(base) else None)
    for path in ("", "chapters/02-naive-attention/", "contributing/"):
        page.goto(base + path, wait_until="networkidle")
    page.goto(base + "chapters/02-naive-attention/", wait_until="networkidle")
    figure = page.locator("figure.ad-figure svg").first
    assert figure.is_visible()
    assert figure.bounding_box()["width"] > 400
    assert page.locator("figure.ad-figure figcaption").first.inner_text().count("torch") >= 1
    assert foreign == []


def test_dark_theme_keeps_figures_readable(served):
    browser, base = served
    page = browser.new_page(color_scheme="dark")
    page.goto(base + "chapters/02-naive-attention/", wait_until="networkidle")
    assert page.locator("body").get_attribute("data-md-color-scheme") == "slate"
    flt = page.locator("figure.ad-figure svg").first.evaluate("e => getComputedStyle(e).filter")
    assert "invert" in flt


def test_search_finds_aten_op_names_by_their_parts(served):
    browser, base = served
    page = browser.new_page()
    page.goto(base + "chapters/02-naive-attention/", wait_until="networkidle")
    page.click(".md-search__input")
    # `bmm` is only ever written as `aten::bmm`: the separator must split op names.
    page.locator("input.md-search__input").press_sequentially("bmm", delay=50)
    page.wait_for_selector(".md-search-result__item", timeout=15000)
    assert "Naive attention" in page.locator(".md-search-result").inner_text()


def test_open_in_perfetto_sends_the_trace(served):
    browser, base = served
    context = browser.new_context()
    context.route(
        "https://ui.perfetto.dev/**",
        lambda route: route.fulfill(body=PERFETTO_STUB, content_type="text/html"),
    )
    page = context.new_page()
    page.goto(base + "chapters/02-naive-attention/", wait_until="networkidle")
    with context.expect_page() as popup_info:
        page.locator("button.ad-perfetto").first.click()
    popup = popup_info.value
    popup.wait_for_function("document.title === 'received'", timeout=15000)
    trace = json.loads(popup.evaluate("window.received"))
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {"attention.scores", "attention.softmax"} <= names
    # What the button fetched is the published gzip file.
    href = page.locator("button.ad-perfetto").first.get_attribute("data-trace")
    assert href.endswith(".trace.json.gz")
    context.close()


def test_trace_download_is_valid_gzip(served):
    browser, base = served
    page = browser.new_page()
    page.goto(base + "chapters/02-naive-attention/", wait_until="networkidle")
    href = page.locator("figure.ad-figure figcaption a", has_text="trace").first.get_attribute(
        "href"
    )
    response = page.request.get(page.url + href)
    assert response.ok
    assert json.loads(gzip.decompress(response.body()))["traceEvents"]
