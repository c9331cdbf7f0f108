# What a reader of a built page is told in numbers: every number with a unit in a chapter's
# prose and tables, and whether it is marked as a fact (`<span class="ad-fact">`), plus the
# chapter's prose words and sentences. Code, figures and provenance captions are left out: code is code, a
# figure's numbers are its data, a caption says where a measurement was made. Used by the
# docs build test and by hand: `python tests/site_facts.py SITE_DIR [STORE]` prints a report,
# with what breaks a reader's rules (`unreadable`); `--facts SITE_DIR` lists every fact id
# with its values (two builds' lists compared show that a change moved no number).
from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

# A number (1,234.5) followed by a unit: times, bytes, rates, FLOPs, shares, multiples.
NUMBER_WITH_UNIT = re.compile(
    r"(?<![\w.\-])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
    r"\s?(?:[nµm]?s|[kKMGTP]i?B(?:/s)?|B/s|bytes?|[kMGTP]?FLOP(?:/s|/B)?|%|×)(?![\w/])"
)
WORD = re.compile(r"[A-Za-z][\w'’\-]*")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
# Whole subtrees a reader does not read as prose or table numbers.
SKIP_TAGS = {"pre", "code", "svg", "script", "style", "figure", "nav", "form"}
SKIP_CLASSES = {"ad-caption", "headerlink", "md-source-file"}
NOT_PROSE_TAGS = {"table"}  # numbers inside count; words do not (tables are data)
BLOCKS = {"p", "li"}  # where prose sentences are
# A sentence ends at . ! or ? before a space and a capital, a digit or a bracket.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(“\"])")


# Numbers with units a chapter may state outside a fact span, each with the reason it is not
# a measurement of this build: chapter folder -> {the text as it reads: why}. The docs build
# test fails on any other unmarked number, and when these exceed 5 % of all numbers.
_H100 = {"80GB": "part of a GPU's name, NVIDIA H100 80GB HBM3, as a recorded trace names it"}
ALLOWED: dict[str, dict[str, str]] = {"02-naive-attention": _H100, "07-sdpa-backends": _H100}
MAX_UNMARKED_SHARE = 0.05
MAX_PROSE_WORDS = 1300
# A reader's rules (DEVELOPERS.md): the opening states one claim in at most two numbers, a
# sentence stays under 35 words (two per chapter may reach 40), the measuring machine is
# named in the captions and boxes, not in sentences, and the chapter ends with what to do.
MAX_OPENING_NUMBERS = 2
LONG, MAX_LONG, TOO_LONG = 35, 2, 40
NUMERAL = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?")
WHAT_TO_DO = '<p class="admonition-title">What to do</p>'


@dataclass
class PageFacts:
    marked: list[str] = field(default_factory=list)
    unmarked: list[str] = field(default_factory=list)
    prose_words: int = 0
    paragraphs: list[str] = field(default_factory=list)  # prose blocks, in page order

    def sentences(self) -> list[str]:
        return [s for p in self.paragraphs for s in SENTENCE_END.split(p) if WORD.search(s)]


def words(text: str) -> int:
    return len(WORD.findall(text))


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.result = PageFacts()
        self.stack: list[tuple[str, bool, bool, bool, bool]] = []  # tag, skip, fact, table, block
        self.in_article = 0
        self.blocks: list[list[str]] = []  # text of the open prose blocks, innermost last

    def _state(self) -> tuple[bool, bool, bool]:
        if not self.stack:
            return False, False, False
        _, skip, fact, table, _ = self.stack[-1]
        return skip, fact, table

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        a = dict(attrs)
        classes = set((a.get("class") or "").split())
        skip, fact, table = self._state()
        skip = skip or tag in SKIP_TAGS or bool(classes & SKIP_CLASSES)
        fact = fact or "ad-fact" in classes
        table = table or tag in NOT_PROSE_TAGS
        if tag == "article":
            self.in_article += 1
        # An admonition's title is a heading, not a sentence.
        block = tag in BLOCKS and not (skip or table or "admonition-title" in classes)
        if block and self.in_article:
            self.blocks.append([])
        self.stack.append((tag, skip, fact, table, block and bool(self.in_article)))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        while self.stack:
            open_tag, _, _, _, block = self.stack.pop()
            if open_tag == "article":
                self.in_article -= 1
            if block:
                text = " ".join("".join(self.blocks.pop()).split())
                if text:
                    self.result.paragraphs.append(text)
            if open_tag == tag:
                break

    def handle_data(self, data):
        if not self.in_article:
            return
        skip, fact, table = self._state()
        if skip:
            return
        numbers = [m.group(0) for m in NUMBER_WITH_UNIT.finditer(data)]
        (self.result.marked if fact else self.result.unmarked).extend(numbers)
        if not table:
            self.result.prose_words += words(data)
            if self.blocks:
                self.blocks[-1].append(data)


def read_page(html: str) -> PageFacts:
    reader = _Reader()
    reader.feed(html)
    return reader.result


def chapters(site: Path) -> dict[str, PageFacts]:
    """Every chapter page of a built site, by its folder name."""
    return {
        page.parent.name: read_page(page.read_text(encoding="utf-8"))
        for page in sorted((site / "chapters").glob("*/index.html"))
    }


FACT = re.compile(r'<span class="ad-fact" data-fact="([^"]+)">(.*?)</span>', re.S)
VALUE = re.compile(r"\d[\d.,]*\s?(?:[a-zµ%×]+(?:/s)?|[A-Z][A-Za-z]*/s)?")


def fact_value(text: str) -> str:
    """The value a fact states: its first number with its unit (`9.62 ms`, `2.20×`)."""
    found = VALUE.search(re.sub(r"<[^>]+>", "", text))
    return found.group(0).strip() if found else text


def stated(pages: Iterable[Path], site: Path) -> dict[str, dict[str, list[str]]]:
    """Every fact the pages state: its id -> each value it is stated with -> the pages."""
    seen: dict[str, dict[str, list[str]]] = {}
    for page in pages:
        rel = page.relative_to(site).as_posix()
        for fact_id, text in FACT.findall(page.read_text(encoding="utf-8")):
            seen.setdefault(fact_id, {}).setdefault(fact_value(text), []).append(rel)
    return seen


def devices(store: Path) -> set[str]:
    """The names of the machines that measured a store's entries."""
    names = set()
    for entry in store.glob("*/*.json"):
        try:
            names.add(json.loads(entry.read_text(encoding="utf-8"))["provenance"]["device"]["name"])
        except (ValueError, KeyError, TypeError):
            continue
    return names


def unreadable(page: PageFacts, html: str, machines: set[str]) -> list[str]:
    """What in a chapter breaks a reader's rules (empty when none does)."""
    found = []
    opening = page.paragraphs[0] if page.paragraphs else ""
    if len(NUMERAL.findall(opening)) > MAX_OPENING_NUMBERS:
        found.append(f"the opening states {len(NUMERAL.findall(opening))} numbers: {opening}")
    sentences = page.sentences()
    long = [s for s in sentences if words(s) > LONG]
    found += [f"{words(s)} words: {s}" for s in long if words(s) > TOO_LONG]
    if len(long) > MAX_LONG:
        found += [f"{len(long)} sentences over {LONG} words"]
        found += [f"{words(s)} words: {s}" for s in long if words(s) <= TOO_LONG]
    found += [f"names {m} in a sentence: {s}" for s in sentences for m in machines if m in s]
    if WHAT_TO_DO not in html:
        found.append('no "What to do" box')
    return found


def main(site: str, store: str = "docs/measurements") -> None:
    total_marked = total_unmarked = 0
    for name, found in chapters(Path(site)).items():
        total_marked += len(found.marked)
        total_unmarked += len(found.unmarked)
        print(
            f"{name}: {found.prose_words} prose words; {len(found.marked)} marked, "
            f"{len(found.unmarked)} unmarked numbers with units"
        )
        for text in found.unmarked:
            print(f"    unmarked: {text}")
        html = (Path(site) / "chapters" / name / "index.html").read_text(encoding="utf-8")
        for problem in unreadable(found, html, devices(Path(store))):
            print(f"    {problem}")
    share = total_unmarked / max(total_marked + total_unmarked, 1)
    print(
        f"all chapters: {total_unmarked} of {total_marked + total_unmarked} unmarked ({share:.1%})"
    )


def dump(site: str) -> None:
    """Every fact id the site states, with its values, one per line and sorted: compare two
    builds' dumps to show a change moved no number."""
    root = Path(site)
    for fact_id, values in sorted(stated(sorted(root.rglob("*.html")), root).items()):
        print(f"{fact_id}\t{' | '.join(sorted(values))}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--facts"]:
        dump(*sys.argv[2:3])
    else:
        main(*sys.argv[1:3])
