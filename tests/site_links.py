# A link checker over a built site's HTML: every local href/src/data-trace must name a file
# that exists in the site, and every #fragment an id on the page it points to. Used by the
# docs build test, the browser tests, and by hand: `python tests/site_links.py SITE_DIR`.
from __future__ import annotations

import posixpath
import re
import sys
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

LINK_ATTRS = {"href", "src", "data-trace"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name") and tag != "meta":
                self.ids.add(value)
            elif name in LINK_ATTRS and tag not in ("base",):
                self.links.append(value)


@cache
def _parse(path: Path) -> _Page:
    parser = _Page()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def html_pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


# What a page makes the browser fetch from another host: a script, stylesheet, image, frame or
# media source that names one, or a stylesheet's @import. A canonical link names the page's
# published address and is never fetched.
_LOADS_FOREIGN = re.compile(
    r'<(?:script|link|img|iframe|source)\b(?![^>]*\brel="canonical")[^>]*\b(?:src|href)="((?:https?:)?//[^"]+)"'
)
_IMPORTS_FOREIGN = re.compile(r"@import\s+url\(\s*['\"]?((?:https?:)?//[^'\")]+)")


def foreign_loads(site: Path) -> list[str]:
    """`file: address` for each thing the site's pages or stylesheets load from another host."""
    site = site.resolve()
    found = []
    for path in [*html_pages(site), *sorted(site.rglob("*.css"))]:
        text = path.read_text(encoding="utf-8", errors="replace")
        pattern = _LOADS_FOREIGN if path.suffix == ".html" else _IMPORTS_FOREIGN
        found += [f"{path.relative_to(site).as_posix()}: {url}" for url in pattern.findall(text)]
    return found


def _target(site: Path, page: Path, path: str) -> Path:
    """The file a link's path names, from the page it is on (directory URLs included)."""
    if path.startswith("/"):
        rel = path.lstrip("/")
    else:
        here = page.parent.relative_to(site).as_posix()
        rel = posixpath.normpath(posixpath.join(here, path))
    target = site / unquote(rel)
    return target / "index.html" if target.is_dir() or path.endswith("/") else target


def broken_links(site: Path) -> list[str]:
    """`page: link (why)` for each local link that points at nothing."""
    site = site.resolve()
    _parse.cache_clear()
    problems = []
    for page in html_pages(site):
        for link in sorted(set(_parse(page).links)):
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//") or not (parts.path or parts.fragment):
                continue
            target = _target(site, page, parts.path) if parts.path else page
            where = f"{page.relative_to(site).as_posix()}: {link}"
            if not target.resolve().is_relative_to(site):
                problems.append(f"{where} (outside the site)")
            elif not target.is_file():
                problems.append(f"{where} (no such file)")
            elif (
                parts.fragment
                and target.suffix == ".html"
                and unquote(parts.fragment) not in _parse(target).ids
            ):
                problems.append(f"{where} (no id {parts.fragment!r} on that page)")
    return problems


if __name__ == "__main__":
    found = broken_links(Path(sys.argv[1]))
    print("\n".join(found) or "no broken links")
    sys.exit(1 if found else 0)
