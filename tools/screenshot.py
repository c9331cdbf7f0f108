"""Screenshots of built pages in headless Chromium, and the requests they make.

Usage: python tools/screenshot.py SITE_DIR OUT_DIR PAGE [PAGE ...] [--dark]
Serves SITE_DIR on 127.0.0.1, opens each page (a path such as chapters/02-naive-attention/)
and writes a full-page PNG to OUT_DIR. Prints every request that left 127.0.0.1: there
should be none. Uses Debian's chromium (`apt-get install chromium`), never a downloaded one.
"""

from __future__ import annotations

import functools
import http.server
import sys
import threading
from pathlib import Path

from playwright.sync_api import sync_playwright

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


def main(argv: list[str]) -> int:
    dark = "--dark" in argv
    site, out, *paths = [a for a in argv if a != "--dark"]
    Path(out).mkdir(parents=True, exist_ok=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=site)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    foreign: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(
            viewport={"width": 1280, "height": 900}, color_scheme="dark" if dark else "light"
        )
        page.on(
            "request",
            lambda r: (
                None
                if r.url.startswith(base) or r.url.startswith("data:")
                else foreign.append(r.url)
            ),
        )
        for path in paths:
            page.goto(base + path, wait_until="networkidle")
            name = (
                (path.strip("/").replace("/", "_") or "index") + ("-dark" if dark else "") + ".png"
            )
            page.screenshot(path=str(Path(out) / name), full_page=True)
            print("wrote", Path(out) / name)
        browser.close()
    server.shutdown()
    print("requests to other hosts:", foreign or "none")
    return 1 if foreign else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
