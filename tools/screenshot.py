"""Screenshots of built pages in headless Chromium, and the requests they make.

Usage: python tools/screenshot.py SITE_DIR OUT_DIR PAGE [PAGE ...]
                                  [--dark] [--width 1280] [--element CSS_SELECTOR]
Serves SITE_DIR on 127.0.0.1, opens each page (a path such as chapters/02-naive-attention/)
in a window WIDTH pixels wide (390 for a phone) and writes a full-page PNG to OUT_DIR, or with
--element one PNG per matching element (`figure.ad-figure`, `table`), which is easier to look
at than a page ten thousand pixels tall. Prints every request that left 127.0.0.1: there
should be none. Uses Debian's chromium (`apt-get install chromium`), never a downloaded one,
and playwright (`nox -s browser` installs it). Exit code 2: bad input, or either is missing.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import importlib.util
import sys
import threading
from pathlib import Path

from attention_docs import arguments

CHROMIUM = Path("/usr/bin/chromium")
WIDTHS = range(200, 7681)  # a phone's 390 px to an 8K screen; Chromium draws nothing past it


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


def width(text: str) -> int:
    """--width: whole CSS pixels that a window can be."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value not in WIDTHS:
        raise argparse.ArgumentTypeError(
            f"must be a whole number of CSS pixels from {WIDTHS.start} to {WIDTHS.stop - 1}, "
            f"got {text!r}; e.g. --width 390 for a phone"
        )
    return value


def main(argv: list[str]) -> int:
    parser = arguments.Parser(prog="tools/screenshot.py", description=__doc__.split("\n", 1)[0])
    parser.add_argument("site", type=arguments.path)
    parser.add_argument("out", type=arguments.path)
    parser.add_argument("paths", nargs="+", metavar="PAGE")
    parser.add_argument("--dark", action="store_true", help="the dark colour scheme")
    parser.add_argument("--width", type=width, default=1280, help="window width in CSS pixels")
    parser.add_argument(
        "--element", type=arguments.word, help="screenshot each element matching this selector"
    )
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        parser.error(f"{args.site} is not a built site (no index.html); build one first")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"{args.out} is a file, not a folder for screenshots")
    if importlib.util.find_spec("playwright") is None or not CHROMIUM.exists():
        parser.error(
            f"it needs playwright (pip install playwright) and Debian's chromium at {CHROMIUM} "
            "(apt-get install --no-install-recommends chromium); `nox -s browser` installs "
            "playwright"
        )
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        parser.error(f"cannot make {args.out}: {exc.strerror or exc}")
    from playwright.sync_api import sync_playwright

    handler = functools.partial(QuietHandler, directory=str(args.site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    foreign: list[str] = []
    suffix = ("-dark" if args.dark else "") + (f"-{args.width}" if args.width != 1280 else "")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(
            viewport={"width": args.width, "height": 900},
            color_scheme="dark" if args.dark else "light",
        )
        page.on("request", lambda r: r.url.startswith((base, "data:")) or foreign.append(r.url))
        for path in args.paths:
            page.goto(base + path, wait_until="networkidle")
            stem = (path.strip("/").replace("/", "_") or "index") + suffix
            if args.element:
                hidden = 0
                for i, element in enumerate(page.locator(args.element).all()):
                    if not element.is_visible():  # e.g. inside a content tab not selected
                        hidden += 1
                        continue
                    target = args.out / f"{stem}-{i}.png"
                    element.screenshot(path=str(target))
                    print("wrote", target)
                if hidden:
                    print(f"skipped {hidden} hidden {args.element!r} element(s) on {path}")
            else:
                target = args.out / f"{stem}.png"
                page.screenshot(path=str(target), full_page=True)
                print("wrote", target)
        browser.close()
    server.shutdown()
    print("requests to other hosts:", foreign or "none")
    return 1 if foreign else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
