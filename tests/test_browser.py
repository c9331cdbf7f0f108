# The built site as a reader's browser sees it: Debian's Chromium driven by Playwright against
# the site served on 127.0.0.1. Run with `nox -s browser`; skipped where either is missing.
from __future__ import annotations

import functools
import gzip
import http.server
import json
import threading
from pathlib import Path

import pytest
from conftest import ROOT
from test_docs_build import mkdocs_build

pytestmark = pytest.mark.browser
CHROMIUM = Path("/usr/bin/chromium")
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


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    site = tmp_path_factory.mktemp("site")
    result = mkdocs_build(ROOT / "mkdocs.yml", site, ATTENTION_DOCS_MODE="frozen")
    assert result.returncode == 0, result.stderr[-4000:]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser, base
        browser.close()
    server.shutdown()


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
