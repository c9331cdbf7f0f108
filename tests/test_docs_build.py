# The site as a whole: a strict build of the real docs (from the committed store, which must
# be current: the build runs frozen), then the chapter contract checked on every page; and
# the store's behaviour inside MkDocs, on a minimal site in a temporary folder.
from __future__ import annotations

import atexit
import functools
import gzip
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
import site_facts
from conftest import ROOT, with_entries
from site_links import foreign_loads

pytestmark = pytest.mark.docs


def mkdocs_build(
    config: Path,
    site: Path,
    *args: str,
    umask: int | None = None,
    say_torch: bool = False,
    **env: str,
) -> subprocess.CompletedProcess:
    """A strict build in a new process; `say_torch`: its last line of output says whether the
    build process imported torch (BUILD_AND_SAY), and a failed build exits non-zero."""
    command = ["-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site), *args]
    if say_torch:
        assert not args, "BUILD_AND_SAY takes no other arguments"
        command = ["-c", BUILD_AND_SAY, str(config), str(site)]
    return subprocess.run(
        [sys.executable, *command],
        capture_output=True,
        text=True,
        cwd=config.parent,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", **env},
        preexec_fn=None if umask is None else lambda: os.umask(umask),
    )


# The whole site is built once (its tests share this module, and `--dist loadscope` keeps a
# module on one test worker), in a process that then says whether it imported torch.
BUILD_AND_SAY = (
    "import runpy, sys\n"
    "sys.argv = ['mkdocs', 'build', '--strict', '-f', sys.argv[1], '-d', sys.argv[2]]\n"
    "try:\n"
    "    runpy.run_module('mkdocs', run_name='__main__')\n"
    "except SystemExit as exc:\n"
    "    assert not exc.code, exc.code\n"
    "print('torch imported' if 'torch' in sys.modules else 'no torch')\n"
)


@dataclass(frozen=True)
class Built:
    site: Path
    imported_torch: bool
    log: str


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    from attention_docs import book, declarations

    # What a warm build finds under .cache/: the experiment index and this machine's device
    # id (the first build after a source edit computes them, torch and all).
    declarations.experiments(ROOT / ".cache")
    declarations.device_id("auto", ROOT / ".cache", book._describe_device)
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-c", BUILD_AND_SAY, str(ROOT / "mkdocs.yml"), str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "ATTENTION_DOCS_MODE": "frozen"},
    )
    assert result.returncode == 0, f"strict build failed:\n{result.stderr[-6000:]}"
    torch_imported = result.stdout.strip().splitlines()[-1] == "torch imported"
    return Built(out, torch_imported, result.stderr)


@pytest.fixture(scope="module")
def site(built) -> Path:
    return built.site


def test_the_experiment_index_reads_back_every_declaration(tmp_path):
    """A warm build reads the declarations from .cache/ instead of importing torch: each must
    read back as the registry holds it (a field added to one and not the other once made
    every stored entry look stale)."""
    from attention_docs import declarations
    from attention_docs.experiments.registry import REGISTRY

    declarations.experiments(tmp_path)  # the registry, and its index written
    declarations._memo.clear()
    indexed = declarations.experiments(tmp_path)
    assert set(indexed) == set(REGISTRY)
    for name, exp in REGISTRY.items():
        read = indexed[name]
        assert isinstance(read, declarations.IndexedExperiment), name
        fields = ("summary", "params", "measures", "imports", "source_files")
        assert [getattr(read, f) for f in fields] == [getattr(exp, f) for f in fields], name
        assert read.fingerprint() == exp.fingerprint(), name


def pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if p.name != "404.html")


class Blocks(HTMLParser):
    """Collects each `<div class="ad-block">` and the text/tags inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: dict[str, list[str]] = {}
        self.stack: list[str | None] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div":
            self.stack.append(a.get("data-block") if a.get("class") == "ad-block" else None)
            if a.get("class") == "ad-block":
                self.blocks[a["data-block"]] = []
        for block in filter(None, self.stack):
            self.blocks[block].append(f"<{tag}>")

    def handle_endtag(self, tag):
        if tag == "div" and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        for block in filter(None, self.stack):
            if data.strip():
                self.blocks[block].append(data)


def chapter_block_ids() -> dict[str, list[str]]:
    ids = {}
    for md in sorted((ROOT / "docs" / "chapters").glob("*.md")):
        ids[md.name] = re.findall(
            r'^```+python[^\n]*exec="on"[^\n]*\bid="([^"]+)"', md.read_text(), re.M
        )
    return ids


def test_every_chapter_has_executed_blocks_with_ids(site):
    ids = chapter_block_ids()
    assert ids, "no chapters found"
    for name, found in ids.items():
        assert found, f"{name} has no executed block with an id"
        assert len(found) == len(set(found)), f"{name} repeats a block id"
        text = (ROOT / "docs" / "chapters" / name).read_text()
        assert text.count('exec="on"') == len(found), f"{name} has an executed block without an id"


def test_every_executed_block_produced_output(site):
    seen = {}
    for page in pages(site):
        parser = Blocks()
        parser.feed(page.read_text(encoding="utf-8"))
        seen.update(parser.blocks)
    for chapter, ids in chapter_block_ids().items():
        for block in ids:
            assert block in seen, f"block {block} of {chapter} is missing from the site"
            text = "".join(seen[block]).strip()
            assert text, f"block {block} of {chapter} printed nothing"


def test_snippets_are_included_not_shown(site):
    """A snippet line that survives into the page (mangled by a formatter, say) is a bug."""
    for page in pages(site):
        text = re.sub(
            r"<[^>]+>", "", page.read_text(encoding="utf-8")
        )  # highlighting splits tokens
        assert not re.search(r"--8\s*(?:&lt;|<)\s*--", text), (
            f"{page.relative_to(site)} shows a snippet line"
        )
    naive = (site / "chapters" / "02-naive-attention" / "index.html").read_text(encoding="utf-8")
    assert '<span class="nf">naive_attention</span>' in naive


def test_no_page_contains_a_traceback(site):
    for page in pages(site):
        text = page.read_text(encoding="utf-8")
        for needle in ("Traceback (most recent call last)", "Error: ", "exited with errors"):
            assert needle not in text, f"{page.relative_to(site)} contains {needle!r}"


def test_every_figure_is_an_svg_with_alt_text_and_caption(site):
    figures = 0
    for page in pages(site):
        text = page.read_text(encoding="utf-8")
        for figure in re.findall(r'<figure class="ad-figure">(.*?)</figure>', text, re.S):
            figures += 1
            assert re.search(r'<svg role="img" aria-label="[^"]{20,}"', figure), page
            caption = re.search(r'<figcaption class="ad-caption">(.*?)</figcaption>', figure, re.S)
            assert (
                caption and "torch" in caption.group(1) and "raw data (JSON)" in caption.group(1)
            ), page
            assert "<metadata>" not in figure
    assert figures >= 1


def test_every_table_from_a_measurement_has_a_caption(site):
    for page in pages(site):
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r'<div class="ad-block"[^>]*>(.*?)</div>\s*(?=<|$)', text, re.S):
            if "<table>" in block:
                assert 'class="ad-caption"' in block, (
                    f"a table in {page.relative_to(site)} has no caption"
                )


def test_links_to_measurements_resolve_and_traces_are_valid_chrome_json(site):
    checked = 0
    for page in pages(site):
        text = page.read_text(encoding="utf-8")
        for href in set(re.findall(r'(?:href|data-trace)="([^"]*measurements/[^"]+)"', text)):
            target = (page.parent / href).resolve()
            assert target.is_file(), f"{page.relative_to(site)} links to missing {href}"
            if target.name.endswith(".trace.json.gz"):
                text = gzip.decompress(target.read_bytes()).decode()
                assert not re.search(r'"(?:/tmp|/home|/root|/work)/', text), (
                    f"{href} holds a machine path"
                )
                chrome = json.loads(text)
                names = {e.get("name") for e in chrome["traceEvents"] if e.get("ph") == "X"}
                steps = {
                    "attention.scores",
                    "attention.scale",
                    "attention.mask",
                    "attention.softmax",
                    "attention.weighted_sum",
                }
                if "attention.scores" in names:
                    assert steps <= names
                    checked += 1
    assert checked >= 1


def test_site_loads_nothing_from_another_host(site):
    """Built with the repository known too: tests/test_publish.py."""
    assert foreign_loads(site) == []
    for page in pages(site):
        text = page.read_text(encoding="utf-8")
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text


def test_every_companion_notebook_is_published_as_ipynb(site):
    import nbformat

    for source in sorted((ROOT / "docs" / "notebooks").glob("*.py")):
        notebook = nbformat.read(site / "notebooks" / f"{source.stem}.ipynb", as_version=4)
        nbformat.validate(notebook)
        assert any(cell.cell_type == "code" for cell in notebook.cells)


def test_every_companion_notebook_page_is_small_and_links_its_downloads(site):
    """Each notebook's page as mkdocs-jupyter and the plugin's finishing left it: no inlined
    JupyterLab CSS or scripts in the notebook, highlighted code, both downloads linked."""
    for source in sorted((ROOT / "docs" / "notebooks").glob("*.py")):
        page = (site / "notebooks" / source.stem / "index.html").read_text(encoding="utf-8")
        assert len(gzip.compress(page.encode())) < 200_000, source.name
        notebook = page.split('<div class="jupyter-wrapper">', 1)[1].split("</article>", 1)[0]
        assert f'<a href="../{source.stem}.ipynb" download>' in notebook, source.name
        assert f'href="{source.name}" download' in notebook, source.name
        assert "<script" not in notebook and "<style" not in notebook, source.name
        assert 'class="language-python highlight"><pre><code>' in notebook, source.name


def test_no_link_or_asset_in_the_site_points_at_nothing(site):
    """Every local href/src/data-trace names a file of the site, every #anchor an id there:
    links printed by executed blocks included (they bypass MkDocs' own link check)."""
    from site_links import broken_links

    assert broken_links(site) == []


def test_search_index_holds_prose_not_figure_internals(site):
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    text = " ".join(doc["text"] for doc in index["docs"])
    labels = set()
    for page in pages(site):
        labels |= set(re.findall(r'<svg role="img" aria-label="([^"]{40,})"', page.read_text()))
    assert labels, "no figure found"
    assert not [label for label in labels if label in text], "figure alt text is indexed"
    # A figure's raw data would show as Python float reprs (2170.748374737741); code listings
    # may hold such constants on purpose, and prose may state a value to six places.
    prose = re.sub(r"<(pre|code)\b.*?</\1>", " ", text, flags=re.S)
    assert not re.findall(r"\d+\.\d{9,}", prose), "raw floats in the search index"


def test_index_summarises_the_build(site):
    text = (site / "index.html").read_text(encoding="utf-8")
    assert "attention-docs:build-summary" not in text
    assert re.search(r"It rendered <strong>\d+</strong> measurements", text)
    # An entry can back several tables: the count of reads is said as such.
    assert re.search(r"\d+ entries in the store, read \d+ times by these pages", text)


def test_the_build_log_ends_with_its_summary_not_a_line_per_notebook(built):
    assert re.search(r"attention_docs: \d+ measurements: \d+ from the store", built.log)
    assert "Copied jupyter file" not in built.log and "Cache hit:" not in built.log


def test_no_fact_is_stated_with_two_values(site):
    """One fact, one number: every place that states a shared fact shows the same value."""
    seen = site_facts.stated(pages(site), site)
    assert seen, "no page marks any shared fact (render.compare.fact)"
    conflicts = {f: values for f, values in seen.items() if len(values) > 1}
    assert not conflicts, f"facts stated with two values: {conflicts}"
    # The check means something only if facts are shared: some are stated on several pages.
    shared = [f for f, values in seen.items() if len({p for ps in values.values() for p in ps}) > 1]
    assert len(shared) >= 3, f"too few facts stated on more than one page: {shared}"


def test_every_number_with_a_unit_in_a_chapter_is_a_fact(site):
    """Prose and tables state measured numbers through the facts API (a `data-fact` span);
    the few that are not measurements of this build are listed, with their reason, in
    tests/site_facts.py, and stay under 5 % of all numbers with units."""
    found = site_facts.chapters(site)
    assert len(found) >= 12, sorted(found)
    unexplained = {
        name: sorted({t for t in page.unmarked if t not in site_facts.ALLOWED.get(name, {})})
        for name, page in found.items()
    }
    unexplained = {name: texts for name, texts in unexplained.items() if texts}
    assert not unexplained, f"numbers with units outside a fact span: {unexplained}"
    unmarked = sum(len(p.unmarked) for p in found.values())
    total = unmarked + sum(len(p.marked) for p in found.values())
    assert unmarked <= site_facts.MAX_UNMARKED_SHARE * total, (unmarked, total)


def test_every_chapter_reads_plainly_one_claim_first_short_sentences_and_what_to_do(site):
    """A reader's rules on every built chapter (site_facts.unreadable): the opening states
    at most two numbers, no sentence runs past 40 words and at most two past 35, the
    measuring machine is named in captions and boxes only, and a "What to do" box ends it."""
    machines = site_facts.devices(ROOT / "docs" / "measurements")
    assert machines, "the committed store names no machine"
    problems = {
        name: found
        for name, page in site_facts.chapters(site).items()
        if (found := site_facts.unreadable(page, (site / "chapters" / name / "index.html").read_text(encoding="utf-8"), machines))
    }  # fmt: skip
    assert not problems, problems


def test_an_opening_links_every_entry_its_numbers_come_from(site):
    """Chapter 07's opening states a speed-up from the forward-time table: its caption links
    that entry beside the backends' own."""
    page = (site / "chapters" / "07-sdpa-backends" / "index.html").read_text(encoding="utf-8")
    opening = page.split("<h1", 1)[1].split('<p class="ad-caption">', 1)[1].split("</p>", 1)[0]
    assert "raw data (JSON)" in opening and "forward_times (JSON)" in opening


def test_every_chapter_is_at_most_1300_words_of_prose_and_opens_with_its_finding(site):
    """Code, tables, figures and captions aside, a chapter is short; and its first paragraph
    states the finding with a measured number (a fact), not a preamble."""
    long = {
        name: page.prose_words
        for name, page in site_facts.chapters(site).items()
        if page.prose_words > site_facts.MAX_PROSE_WORDS
    }
    assert not long, f"chapters over {site_facts.MAX_PROSE_WORDS} words of prose: {long}"
    for page in sorted((site / "chapters").glob("*/index.html")):
        article = page.read_text(encoding="utf-8").split("<article", 1)[1]
        first = re.search(r"</h1>\s*(<(p|div)\b.*?</\2>)", article, re.S)
        assert first and 'class="ad-fact"' in first.group(1), (
            f"{page.parent.name}: the first paragraph under the title states no measured fact"
        )


def test_speed_claims_come_from_the_comparison_helpers(site):
    """An "N× faster/slower" outside a marked comparison was typed or computed without noise."""
    offenders = []
    for page in pages(site):
        text = site_facts.FACT.sub("", page.read_text(encoding="utf-8"))
        text = re.sub(r"<(script|style|svg)\b.*?</\1>", "", text, flags=re.S)
        for claim in re.findall(
            r"[\d.]+\s?× (?:faster|slower|as fast)", re.sub(r"<[^>]+>", "", text)
        ):
            offenders.append(f"{page.relative_to(site)}: {claim}")
    assert not offenders, offenders


# --- The store inside MkDocs, on a minimal site --------------------------------------------

MINIMAL_CONFIG = """
site_name: t
docs_dir: docs
markdown_extensions: [md_in_html, tables, pymdownx.superfences]
plugins:
  - markdown-exec
  - attention-docs:
      store: docs/measurements
"""


@functools.cache
def _warm_cache() -> Path:
    """What every build on this machine after its first finds under .cache/: the experiment
    index and the device id (each needs torch: 2-3 s of a small build). Made once per test
    worker; a build checks both (the sources' digest, this boot and torch) before it trusts
    them, so a copy in another site's folder is as valid as its own."""
    from attention_docs import book, declarations

    folder = Path(tempfile.mkdtemp(prefix="warm-cache-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # the worker's, gone with it
    declarations.experiments(folder)
    declarations.device_id("auto", folder, book._describe_device)
    return folder


def warm_cache(root: Path) -> None:
    """Give the site at `root` the .cache/ a second build would find (see `_warm_cache`)."""
    shutil.copytree(_warm_cache(), root / ".cache", dirs_exist_ok=True)


def minimal_site(tmp_path: Path, body: str) -> Path:
    warm_cache(tmp_path)
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "mkdocs.yml").write_text(MINIMAL_CONFIG)
    (tmp_path / "docs" / "index.md").write_text(textwrap.dedent(body))
    return tmp_path / "mkdocs.yml"


QUICK_PAGE = """
# A page

Some prose.

```python exec="on" id="quick-table" session="q"
from attention_docs import measure, render
print(render.steps.step_table(measure("_test_quick", seq_len=8)))
```

<!-- attention-docs:build-summary -->
"""


def store_files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted((root / "docs" / "measurements").rglob("*.*"))
    }


def test_prose_edit_reruns_nothing_and_frozen_needs_an_entry(tmp_path, quick_entries):
    config = minimal_site(tmp_path, QUICK_PAGE)
    frozen = mkdocs_build(config, tmp_path / "site", ATTENTION_DOCS_MODE="frozen")
    assert frozen.returncode != 0
    assert (
        "_test_quick(seq_len=8) is not in the store" in frozen.stderr
        and "quick-table" in frozen.stderr
    )
    # The sentence says what to do: no traceback of the build's own code comes with it.
    assert "Traceback" not in frozen.stderr and 'File "' not in frozen.stderr
    # Measured (as a build measures it: tests below show a build measuring a missing entry).
    with_entries(quick_entries, tmp_path, 8)
    first = mkdocs_build(config, tmp_path / "site")
    assert first.returncode == 0, first.stderr
    assert "0 measured during this build" in first.stderr
    before = store_files(tmp_path)
    assert any(re.search(r"\.cpu-[a-z0-9-]+\.json$", name) for name in before)
    (tmp_path / "docs" / "index.md").write_text(
        QUICK_PAGE.replace("Some prose.", "Other prose, edited.")
    )
    second = mkdocs_build(config, tmp_path / "site")
    assert second.returncode == 0, second.stderr
    assert "0 measured during this build" in second.stderr
    assert store_files(tmp_path) == before
    assert "from the store" in (tmp_path / "site" / "index.html").read_text()
    refresh = mkdocs_build(config, tmp_path / "site", ATTENTION_DOCS_MODE="refresh")
    assert "1 measured during this build" in refresh.stderr


def _fake_gpu_entry(cpu_entry: Path, name: str, device_id: str) -> None:
    """A copy of a CPU entry that says it was measured on the GPU `name`."""
    data = json.loads(cpu_entry.read_text())
    data["provenance"]["device"] = {
        "kind": "cuda",
        "name": name,
        "threads": None,
        "capability": "90",
        "memory_bytes": 150_000_000_000,
        "spec": None,
    }
    data["provenance"]["device_id"] = device_id
    data["provenance"]["cuda_version"] = "13.0"
    stem = cpu_entry.name.split(".")[0]
    cpu_entry.with_name(f"{stem}.{device_id}.json").write_text(json.dumps(data))


def test_stored_gpu_entries_win_in_the_configured_order(tmp_path, quick_entries):
    config = minimal_site(tmp_path, QUICK_PAGE)
    with_entries(quick_entries, tmp_path, 8)
    cpu_entry = next((tmp_path / "docs" / "measurements").rglob("*.cpu-*.json"))
    _fake_gpu_entry(cpu_entry, "NVIDIA H100 80GB HBM3", "cuda-h100-sxm")
    _fake_gpu_entry(cpu_entry, "NVIDIA H200", "cuda-h200")
    gpu_build = mkdocs_build(config, tmp_path / "site")
    assert gpu_build.returncode == 0, gpu_build.stderr
    page = (tmp_path / "site" / "index.html").read_text()
    # The default order prefers the H200 the site is published from over any other GPU.
    assert "GPU: NVIDIA H200 (sm_90)" in page and "CUDA 13.0" in page
    assert ".cuda-h200.json" in page
    # The index lists every device the store holds, used or not.
    for device in ("cuda-h200", "cuda-h100-sxm", cpu_entry.name.split(".")[1]):
        assert f"<code>{device}</code>" in page
    config.write_text(
        MINIMAL_CONFIG.replace(
            "store: docs/measurements",
            "store: docs/measurements\n      prefer: [cuda-h100-sxm, local]",
        )
    )
    assert mkdocs_build(config, tmp_path / "site").returncode == 0
    assert "NVIDIA H100 80GB HBM3" in (tmp_path / "site" / "index.html").read_text()
    config.write_text(
        MINIMAL_CONFIG.replace(
            "store: docs/measurements", "store: docs/measurements\n      prefer: [local]"
        )
    )
    local_build = mkdocs_build(config, tmp_path / "site")
    assert local_build.returncode == 0, local_build.stderr
    assert (
        "GPU: NVIDIA"
        not in (tmp_path / "site" / "index.html").read_text().split("The store holds")[0]
    )


def _as_another_cpu(entry: Path, device_id: str, name: str) -> None:
    """Move a stored entry (and its trace) to another CPU's name, as if measured there."""
    data = json.loads(entry.read_text())
    data["provenance"]["device"]["name"] = name
    data["provenance"]["device_id"] = device_id
    stem = entry.name.split(".")[0]
    if data["trace_file"]:
        trace = entry.with_name(f"{stem}.{device_id}.trace.json.gz")
        (entry.parent.parent / data["trace_file"]).rename(trace)
        data["trace_file"] = f"{entry.parent.name}/{trace.name}"
    entry.with_name(f"{stem}.{device_id}.json").write_text(json.dumps(data))
    entry.unlink()


TWO_QUICK_PAGE = QUICK_PAGE.replace(
    "<!-- attention-docs:build-summary -->",
    """```python exec="on" id="quick-table-4" session="q"
print(render.steps.step_table(measure("_test_quick", seq_len=4)))
```

<!-- attention-docs:build-summary -->""",
)


def quick_entry(root: Path, seq_len: int) -> Path:
    """The stored _test_quick entry at `seq_len` in the minimal site at `root`."""
    (entry,) = (
        p
        for p in (root / "docs" / "measurements" / "_test_quick").glob("*.json")
        if json.loads(p.read_text())["requested"]["seq_len"] == seq_len
    )
    return entry


def test_a_build_measures_what_the_store_cannot_give_it_and_names_a_corrupt_entry(
    tmp_path, quick_entries
):
    """The committed store serves a build on another machine: a frozen build and an auto one
    show another machine's entry, measuring nothing (a fresh clone builds the published
    pages on any CPU); `--this-machine` then measures that request on this machine, and the
    one whose entry is corrupt, naming the file. One measuring build: each starts a worker
    server."""
    config = minimal_site(tmp_path, TWO_QUICK_PAGE)
    with_entries(quick_entries, tmp_path, 8, 4)
    own = quick_entry(tmp_path, 8)
    _as_another_cpu(own, "cpu-elsewhere", "Other CPU")
    frozen = mkdocs_build(config, tmp_path / "site", ATTENTION_DOCS_MODE="frozen")
    assert frozen.returncode == 0, frozen.stderr
    page = (tmp_path / "site" / "index.html").read_text()
    assert "CPU: Other CPU" in page and ".cpu-elsewhere.json" in page  # the caption says so
    auto = mkdocs_build(config, tmp_path / "site")
    assert auto.returncode == 0, auto.stderr
    assert "0 measured during this build" in auto.stderr
    assert "CPU: Other CPU" in (tmp_path / "site" / "index.html").read_text()
    corrupt = quick_entry(tmp_path, 4)
    # An older schema than any this checkout reads (a newer one is kept for the checkout
    # that wrote it: measurements/store.py).
    corrupt.write_text('{"schema_version": 0}')
    again = mkdocs_build(config, tmp_path / "site", say_torch=True, ATTENTION_DOCS_THIS_MACHINE="1")
    assert again.returncode == 0, again.stderr
    assert f"{corrupt.name} is unusable (schema version 0" in again.stderr
    assert "2 measured during this build" in again.stderr
    # It measured in a worker; the build process itself imported no torch (nor a CUDA
    # context that would take the memory its worker checks).
    assert again.stdout.strip().splitlines()[-1] == "no torch"
    assert json.loads(corrupt.read_text())["schema_version"] != 0
    assert json.loads(own.read_text())["requested"]["seq_len"] == 8  # this machine's own


FAILURES = {
    "raises": ("_test_raises", "value=3", "failed (exit code 1) in its worker process"),
    "killed": ("_test_killed", "", "was killed by SIGKILL"),
}


def test_experiment_failure_in_the_worker_fails_the_build_naming_it(tmp_path):
    """Two failures of two kinds in one build (one build: each costs a worker server): each
    is named with its block, and the one does not hide the other."""
    page = "\n    # Page\n"
    for name, (experiment, params, _) in FAILURES.items():
        page += f"""
    ```python exec="on" id="doomed-{name}" session="{name}"
    from attention_docs import measure
    print(measure("{experiment}", {params}))
    ```
    """
    result = mkdocs_build(minimal_site(tmp_path, page), tmp_path / "site")
    assert result.returncode != 0
    for name, (experiment, params, expected) in FAILURES.items():
        assert f"experiment {experiment}({params}) {expected}" in result.stderr
        assert f"executed block 'doomed-{name}' in index.md failed" in result.stderr


def test_a_raising_block_fails_the_strict_build_naming_block_and_page(tmp_path):
    page = """
    # Page

    ```python exec="on" id="broken-block" session="b"
    raise RuntimeError("this block is broken on purpose")
    ```
    """
    result = mkdocs_build(minimal_site(tmp_path, page), tmp_path / "site")
    assert result.returncode != 0
    assert "'broken-block'" in result.stderr and "in index.md failed" in result.stderr


def test_a_failed_build_keeps_the_previous_site(tmp_path):
    """`nox -s docs` builds through tools/build_site.py: beside site/, swapped on success."""
    site = tmp_path / "site"
    config = minimal_site(tmp_path, "# Home\n\nThe first version.\n")

    def build() -> subprocess.CompletedProcess:
        tool = ROOT / "tools" / "build_site.py"
        command = [sys.executable, str(tool), "--site-dir", str(site), "--config-file", str(config)]
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        return subprocess.run(command, capture_output=True, text=True, env=env, check=False)

    assert build().returncode == 0
    good = (site / "index.html").read_bytes()
    assert b"The first version." in good and site.stat().st_mode & 0o777 == 0o755
    minimal_site(
        tmp_path, '# Home\n\n```python exec="on" id="broken"\nraise RuntimeError("no")\n```\n'
    )
    failed = build()
    assert failed.returncode != 0 and "site/ is left as it was" in failed.stderr
    assert (site / "index.html").read_bytes() == good
    minimal_site(tmp_path, "# Home\n\nThe second version.\n")
    assert build().returncode == 0
    assert b"The second version." in (site / "index.html").read_bytes()
    # Nothing of its own left beside site/ (.cache/ is the plugin's, given by minimal_site).
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [".cache"]


@pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="checks the message on a machine without CUDA"
)
def test_cuda_asked_of_a_machine_without_it_is_one_line(tmp_path):
    config = minimal_site(tmp_path, QUICK_PAGE + QUICK_PAGE.replace('"quick-table"', '"again"'))
    result = mkdocs_build(config, tmp_path / "site", ATTENTION_DOCS_DEVICE="cuda")
    assert result.returncode != 0
    assert result.stderr.count("no usable CUDA device") == 1, result.stderr
    assert "Traceback" not in result.stderr and "use --device cpu" in result.stderr


NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.py"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[nb.stem for nb in NOTEBOOKS])
def test_companion_notebook_runs_as_a_script(tmp_path, notebook, monkeypatch, capsys):
    """One test per notebook, so that the test workers share them out. A notebook calls
    `measure` as its chapter does; run frozen on a copy of the committed store
    (ATTENTION_DOCS_STORE), it reads every measurement from there (another device's entry
    where this machine has none) and writes nothing. What it runs live, it runs at
    ATTENTION_DOCS_TINY sizes. It runs as `python NOTEBOOK.py` would (as __main__), in this
    process: a new interpreter per notebook would import torch each time. (A reader's
    notebook, downloaded and run alone in Jupyter: tests/test_notebook_alone.py.)"""
    from attention_docs import book

    store = tmp_path / "docs" / "measurements"
    shutil.copytree(ROOT / "docs" / "measurements", store)
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTENTION_DOCS_TINY", "1")
    monkeypatch.setenv("ATTENTION_DOCS_MODE", "frozen")
    monkeypatch.setenv("ATTENTION_DOCS_STORE", str(store))
    try:
        runpy.run_path(str(notebook), run_name="__main__")
    finally:
        book.configure(book.Settings())
    printed = capsys.readouterr().out
    assert printed.strip(), f"{notebook.name} printed nothing"
    assert "Traceback" not in printed
    after = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    assert after == before, f"{notebook.name} changed the store it was only to read"
    assert not (tmp_path / "measurements").exists()
    assert "data-fact" not in printed  # show() takes the site's markup out


def test_a_notebook_measures_this_machine_into_a_store_beside_it(tmp_path, monkeypatch):
    from attention_docs import book

    (tmp_path / "docs" / "measurements").mkdir(parents=True)
    (tmp_path / "docs" / "notebooks").mkdir()
    monkeypatch.delenv("ATTENTION_DOCS_STORE", raising=False)
    monkeypatch.delenv("ATTENTION_DOCS_MODE", raising=False)
    try:
        # Beside the notebook, even in a clone: never the committed store.
        settings = book.for_notebook(tmp_path / "docs" / "notebooks")
        assert settings.store == tmp_path / "docs" / "notebooks" / "measurements"
        assert settings.mode == "auto" and settings.prefer == book.THIS_MACHINE
        monkeypatch.setenv("ATTENTION_DOCS_STORE", str(tmp_path / "docs" / "measurements"))
        monkeypatch.setenv("ATTENTION_DOCS_MODE", "frozen")
        settings = book.for_notebook(tmp_path / "docs" / "notebooks")
        assert settings.store == tmp_path / "docs" / "measurements" and settings.mode == "frozen"
        monkeypatch.setenv("ATTENTION_DOCS_MODE", "sometimes")
        with pytest.raises(ValueError, match="not one of"):
            book.for_notebook(tmp_path)
    finally:
        book.configure(book.Settings())


def manifest(root: Path) -> list[dict]:
    return json.loads((root / "docs" / "measurements" / "requests.json").read_text())


def test_only_a_full_build_writes_the_manifest_and_the_site_publishes_it_current(
    tmp_path, quick_entries
):
    config = minimal_site(tmp_path, QUICK_PAGE)
    with_entries(quick_entries, tmp_path, 8, 4)
    (tmp_path / "docs" / "other.md").write_text(
        QUICK_PAGE.replace("seq_len=8", "seq_len=4").replace('"quick-table"', '"other-table"')
    )
    full = mkdocs_build(config, tmp_path / "site")
    assert full.returncode == 0, full.stderr
    written = (tmp_path / "docs" / "measurements" / "requests.json").read_bytes()
    assert [r["requested"] for r in manifest(tmp_path)] == [{"seq_len": 4}, {"seq_len": 8}]
    # The published copy is this build's, not the previous build's.
    assert (tmp_path / "site" / "measurements" / "requests.json").read_bytes() == written
    # A subset of the pages, a dirty build, a build with a failing block: none rewrites it.
    subset = tmp_path / "subset.yml"
    subset.write_text(MINIMAL_CONFIG + "exclude_docs: |\n  /other.md\n")
    assert mkdocs_build(subset, tmp_path / "site").returncode == 0
    dirty = mkdocs_build(config, tmp_path / "site", "--dirty")  # strict fails on its warning
    # ... but the plugin ran to the end, having seen only the pages it rebuilt.
    assert "1 measurements: 1 from the store" in dirty.stderr
    (tmp_path / "docs" / "broken.md").write_text(
        '```python exec="on" id="broken"\nraise RuntimeError("no")\n```\n'
    )
    assert mkdocs_build(config, tmp_path / "site").returncode != 0
    assert (tmp_path / "docs" / "measurements" / "requests.json").read_bytes() == written


NOTEBOOK_CONFIG = """
site_name: t
docs_dir: docs
theme: {name: material, font: false}
markdown_extensions: [md_in_html, tables, pymdownx.superfences]
plugins:
  - search
  - markdown-exec
  - mkdocs-jupyter:
      include: ["notebooks/*.py"]
      ignore: ["*.md"]
      execute: false
      allow_errors: false
      include_source: true
      cache: false
  - attention-docs:
      store: docs/measurements
      cache_dir: CACHE
"""

FIGURE_PAGE = QUICK_PAGE.replace(
    "<!-- attention-docs:build-summary -->",
    """```python exec="on" id="quick-figure" session="q" html="1"
print(render.timeline.timeline_figure(measure("_test_quick", seq_len=8)))
```

<!-- attention-docs:build-summary -->""",
)

NOTEBOOK = """# %% [markdown]
# # A notebook
#
# Its cells get random ids from jupytext.

# %%
print(1 + 1)

# %%
print(2 + 2)
"""


def site_files(site: Path) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in site.rglob("*") if p.is_file()}


def test_two_builds_from_one_store_are_byte_identical_and_world_readable(tmp_path, quick_entries):
    import nbformat

    with_entries(quick_entries, tmp_path, 8)
    warm_cache(tmp_path)
    (tmp_path / "docs" / "notebooks").mkdir(parents=True)
    (tmp_path / "docs" / "index.md").write_text(textwrap.dedent(FIGURE_PAGE))
    (tmp_path / "docs" / "notebooks" / "nb.py").write_text(NOTEBOOK)
    config = tmp_path / "mkdocs.yml"
    config.write_text(NOTEBOOK_CONFIG.replace("CACHE", ".cache"))
    # A build that draws everything (and fills the caches) and one that reads it all from
    # them, under a umask that would make every new file private.
    fresh = mkdocs_build(config, tmp_path / "a", umask=0o077, ATTENTION_DOCS_MODE="frozen")
    assert fresh.returncode == 0, fresh.stderr
    assert re.search(r"renderers: 0 from the cache, [1-9]\d* drawn", fresh.stderr)
    warm = mkdocs_build(config, tmp_path / "b", umask=0o077, ATTENTION_DOCS_MODE="frozen")
    assert warm.returncode == 0, warm.stderr
    assert re.search(r"renderers: [1-9]\d* from the cache", warm.stderr)
    a, b = site_files(tmp_path / "a"), site_files(tmp_path / "b")
    assert a.keys() == b.keys()
    assert [name for name in a if a[name] != b[name]] == []
    assert "measurements/requests.json" in b and "notebooks/nb.ipynb" in b
    for path in (tmp_path / "b").rglob("*"):
        assert path.stat().st_mode & 0o777 == (0o755 if path.is_dir() else 0o644), path
    notebook = nbformat.reads(b["notebooks/nb.ipynb"].decode(), as_version=4)
    nbformat.validate(notebook)
    assert [c["id"] for c in notebook.cells] == ["cell-0", "cell-1", "cell-2", "cell-3"]
    assert "pip" in notebook.cells[0]["source"]  # the cell a downloaded notebook installs with
    assert 'id="cell-id=cell-1"' in b["notebooks/nb/index.html"].decode()


def _move_to_an_older_key(entry: Path, *, fingerprint: str | None = None) -> Path:
    """The entry as if stored under another key (code changed, or the method)."""
    data = json.loads(entry.read_text())
    data["key"] = "0123456789abcdef"
    if fingerprint:
        data["fingerprint"] = fingerprint
    data["trace_file"] = None
    older = entry.with_name("0123456789abcdef." + entry.name.split(".", 1)[1])
    older.write_text(json.dumps(data))
    entry.unlink()
    return older


def test_frozen_messages_say_missing_unreadable_or_changed_and_how_to_fix_it(
    tmp_path, quick_entries
):
    config = minimal_site(tmp_path, QUICK_PAGE)
    missing = mkdocs_build(config, tmp_path / "site", ATTENTION_DOCS_MODE="frozen")
    assert "_test_quick(seq_len=8) is not in the store" in missing.stderr
    assert "python -m attention_docs run _test_quick --seq-len 8 --store" in missing.stderr
    with_entries(quick_entries, tmp_path, 8)
    entry = next((tmp_path / "docs" / "measurements").rglob("*.cpu-*.json"))
    good = entry.read_text()
    entry.write_text(good[: len(good) // 2])
    unreadable = mkdocs_build(config, tmp_path / "site", ATTENTION_DOCS_MODE="frozen")
    assert unreadable.returncode != 0
    assert f"its stored file {entry.name} cannot be read" in unreadable.stderr
    assert "measured again" not in unreadable.stderr and "not in the store" not in unreadable.stderr
    entry.write_text(good)
    _move_to_an_older_key(entry, fingerprint="feedfacefeedface")
    changed = mkdocs_build(config, tmp_path / "site", ATTENTION_DOCS_MODE="frozen")
    assert "_test_quick(seq_len=8) is stale in the store" in changed.stderr
    assert "the code it measured has changed since (its fingerprint feedface" in changed.stderr
    assert "attention/naive.py" in changed.stderr and "prune" in changed.stderr


CASCADE_PAGE = """
# Page

```python exec="on" id="first" session="s"
quick = measur("_test_quick")
```

```python exec="on" id="second" session="s"
print(quick)
```

```python exec="on" id="third" session="s"
print(quick.measurement)
```

```python exec="on" id="alone" session="t"
raise ZeroDivisionError("a failure of its own")
```
"""


def test_one_failure_in_a_session_is_reported_as_one_root_cause(tmp_path):
    result = mkdocs_build(minimal_site(tmp_path, CASCADE_PAGE), tmp_path / "site")
    assert result.returncode != 0
    err = result.stderr
    assert err.count("Traceback (most recent call last)") == 2  # first and alone, not the rest
    assert (
        "executed block 'second' in index.md failed with NameError: name 'quick' is not "
        "defined: a consequence of block 'first' failing earlier in session 's'"
    ) in err
    summary = (
        "executed block 'first' in index.md failed: NameError: name 'measur' is not defined; "
        "2 later block(s) of session 's' failed only because of it (second, third) "
        "(its traceback is above)"
    )
    assert summary in err
    assert "executed block 'alone' in index.md failed: ZeroDivisionError" in err
    # "above" is true: the summary comes after the traceback it points to.
    assert err.index("Traceback (most recent call last)") < err.index(summary)


def test_a_build_with_nothing_to_measure_never_imports_torch(built):
    """Importing torch costs seconds: a build whose measurements are all stored needs none
    (a page comparing devices once imported it to compute a key it already had)."""
    assert not built.imported_torch


def test_every_forecast_box_links_the_models_record(site):
    """A forecast box says how far to trust it: the method page's check of the model against
    every GPU timing others recorded (which links the chapters' real H100 profiles)."""
    boxes = recorded = 0
    for page in sorted((site / "chapters").glob("*/index.html")):
        text = page.read_text(encoding="utf-8")
        for box in re.findall(r'<div class="admonition example">(.*?)</div>\s*<', text, re.S):
            if "forecast for the" not in box:
                continue
            boxes += 1
            assert "How far to trust it" in box and 'href="../../method/"' in box, page
            recorded += "Its record against GPU timings others recorded" in box
    assert boxes >= 8
    # A box that forecasts kernels the model has been checked on states their record.
    assert recorded >= 7
    method = (site / "method" / "index.html").read_text(encoding="utf-8")
    assert 'id="every-gpu-timing-others-recorded"' in method
    assert "../chapters/02-naive-attention/#on-a-real-gpu-a-profile-others-recorded" in method
