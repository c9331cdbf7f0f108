# The contributor's loop: what a build reuses (renderer outputs keyed by their code and
# arguments), what `mkdocs serve` reloads after an edit under src/, and the guide's worked
# example followed into a new chapter that builds.
from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, TESTS, with_entries
from recorded import recorded

from attention_docs import build_cache
from attention_docs.build_cache import RenderCache, RenderProxy
from attention_docs.live_reload import ModuleReloader
from attention_docs.measurements.schema import Sourced
from attention_docs.measurements.source import SourceGraph
from attention_docs.site_pages import stale_banner

MKDOCS = (sys.executable, "-m", "mkdocs")
CLI = (sys.executable, "-m", "attention_docs")


def write_package(root: Path, name: str, files: dict[str, str]) -> Path:
    package = root / name
    for rel, text in files.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return package


@contextlib.contextmanager
def importable(root: Path, name: str, files: dict[str, str]) -> Iterator[Path]:
    """`write_package`, importable from `root` until the block ends (then forgotten)."""
    package = write_package(root, name, files)
    sys.path.insert(0, str(root))
    try:
        yield package
    finally:
        sys.path.remove(str(root))
        for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            del sys.modules[module]


def touch_later(path: Path, text: str) -> None:
    """Write `text` with a modification time that surely differs from the last one."""
    before = path.stat().st_mtime_ns
    path.write_text(textwrap.dedent(text))
    os.utime(path, ns=(before + 10**9, before + 10**9))


RENDER_PACKAGE = {
    "__init__.py": "",
    "render/__init__.py": """
        from graphpkg.render.shout import shout
        from graphpkg.render.whisper import whisper
    """,
    "render/common.py": "SUFFIX = '!'\n",
    "render/shout.py": """
        from graphpkg.render.common import SUFFIX

        def shout(text):
            return text.upper() + SUFFIX
    """,
    "render/whisper.py": """
        from graphpkg.render import shout  # a re-export: the module is shout.py, not all

        def whisper(text):
            return shout(text).lower()
    """,
}


@pytest.fixture
def naive():
    """naive_steps as the store recorded it (tests/data/measurements/)."""
    return recorded("naive_steps")


def test_source_graph_follows_imports_and_reexports_but_not_the_whole_package(tmp_path):
    package = write_package(tmp_path, "graphpkg", RENDER_PACKAGE)
    graph = SourceGraph("graphpkg", package)
    assert graph.closure("graphpkg.render.shout") == (
        "graphpkg.render.common",
        "graphpkg.render.shout",
    )
    assert graph.closure("graphpkg.render.whisper") == (
        "graphpkg.render.common",
        "graphpkg.render.shout",
        "graphpkg.render.whisper",
    )
    # The real renderers: a chapter's module depends on the figure machinery, not on
    # another chapter's renderers.
    real = SourceGraph().closure("attention_docs.render.wall")
    assert "attention_docs.render.plots" in real and "attention_docs.render.figures" in real
    assert "attention_docs.render.timeline" not in real and "attention_docs.render" not in real


def test_render_cache_keys_on_code_tokens_arguments_and_measurement(tmp_path, naive):
    package = write_package(tmp_path, "graphpkg", RENDER_PACKAGE)
    sys.path.insert(0, str(tmp_path))
    try:
        from graphpkg.render.shout import shout

        cache = RenderCache(tmp_path / "cache", SourceGraph("graphpkg", package))
        key = cache.key(shout, ("a",), {})
        assert key == cache.key(shout, ("a",), {}) != cache.key(shout, ("b",), {})
        # A comment changes no token; a changed constant in an imported module does.
        # Each build makes its cache anew (the plugin's on_config).
        touch_later(package / "render" / "common.py", "SUFFIX = '!'  # loud\n")
        cache = RenderCache(tmp_path / "cache", SourceGraph("graphpkg", package))
        assert cache.key(shout, ("a",), {}) == key
        touch_later(package / "render" / "common.py", "SUFFIX = '?'\n")
        cache = RenderCache(tmp_path / "cache", SourceGraph("graphpkg", package))
        assert cache.key(shout, ("a",), {}) != key
        # Measurements are named by their content, sources by content and provenance too.
        one = Sourced(naive, "from the store", "x.json")
        again = Sourced(type(naive).loads(naive.dumps()), one.origin, "x.json")
        assert cache.key(shout, (one,), {}) == cache.key(shout, (again,), {})
        fresh = Sourced(naive, "measured during this build", "x.json")
        assert cache.key(shout, (one,), {}) != cache.key(shout, (fresh,), {})
        # An argument without a stable name is never cached: the call is simply made.
        assert cache.key(shout, (lambda: 1,), {}) is None
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("graphpkg")]:
            del sys.modules[name]


def test_a_cached_figure_is_the_same_bytes_and_is_not_drawn_again(tmp_path, naive):
    from attention_docs.render.timeline import timeline_figure

    sourced = Sourced(naive, "from the store", "x.json")
    first = RenderCache(tmp_path)
    drawn = first.call(timeline_figure, (sourced,), {})
    assert first.misses == 1 and first.hits == 0 and "<svg" in drawn
    second = RenderCache(tmp_path)
    assert second.call(timeline_figure, (sourced,), {}) == drawn
    assert second.hits == 1 and second.misses == 0
    assert ROOT / "src" / "attention_docs" / "render" / "timeline.py" in second.used_files


def test_blocks_see_the_renderers_through_the_cache_and_the_library_does_not(tmp_path):
    import attention_docs
    import attention_docs.render as real_render

    cache = RenderCache(None)
    build_cache.install(cache)
    try:
        from attention_docs import render

        assert isinstance(render, RenderProxy)
        assert isinstance(render.compare, RenderProxy)
        assert (
            render.timeline.TimelineSettings
            is sys.modules["attention_docs.render.timeline"].TimelineSettings
        )
        assert render.tables.markdown_table(["a"], [["1"]]) == real_render.tables.markdown_table(
            ["a"], [["1"]]
        )
        assert ROOT / "src" / "attention_docs" / "render" / "tables.py" in cache.used_files
        assert sys.modules["attention_docs.render"].tables.markdown_table.__module__ == (
            "attention_docs.render.tables"
        )
    finally:
        attention_docs.render = sys.modules["attention_docs.render"]
    assert attention_docs.render is real_render


def test_the_reloader_reloads_changed_modules_and_their_importers_in_order(tmp_path, caplog):
    files = {
        "__init__.py": "",
        "base.py": "VALUE = 1\n",
        "user.py": """
            from livepkg.base import VALUE

            def value():
                return VALUE
        """,
        "other.py": "OTHER = 1\n",
    }
    with importable(tmp_path, "livepkg", files) as package:
        import livepkg.other
        import livepkg.user

        reloader = ModuleReloader("livepkg", package, keep=())
        reloader.snapshot()
        touch_later(package / "base.py", "VALUE = 1  # a comment only\n")
        assert reloader.reload_changed() == []
        touch_later(package / "base.py", "VALUE = 2\n")
        assert reloader.reload_changed() == ["livepkg.base", "livepkg.user"]
        assert livepkg.user.value() == 2 and livepkg.other.OTHER == 1
        # Mid-edit, a file that does not parse: the server keeps the code it has.
        touch_later(package / "base.py", "VALUE = (\n")
        with caplog.at_level("WARNING", logger="attention_docs"):
            assert reloader.reload_changed() == []
        assert "could not reload livepkg.base" in caplog.text and livepkg.user.value() == 2
        # ... and the pages rebuilt meanwhile say so, naming the module and the error
        # (issue 30, case 15: only the log said it).
        assert set(reloader.failed) == {"livepkg.base"}
        assert "SyntaxError" in reloader.failed["livepkg.base"]
        banner = stale_banner(reloader.failed)
        assert "This page may be stale" in banner and "<code>livepkg.base</code>" in banner
        touch_later(package / "base.py", "VALUE = 3\n")  # mended: no banner any more
        assert reloader.reload_changed() == ["livepkg.base", "livepkg.user"]
        assert reloader.failed == {}


def test_the_reloader_asks_for_a_restart_only_when_a_kept_module_was_edited(tmp_path, caplog):
    """The plugin's own modules are kept across rebuilds; a renderer they import is not."""
    files = {
        "__init__.py": "",
        "renderer.py": "def draw():\n    return 1\n",
        "plugin.py": "from keeppkg import renderer\n\ndef build():\n    return renderer.draw()\n",
    }
    with importable(tmp_path, "keeppkg", files) as package:
        import keeppkg.plugin

        reloader = ModuleReloader("keeppkg", package, keep=("keeppkg.plugin",))
        reloader.snapshot()
        touch_later(package / "renderer.py", "def draw():\n    return 2\n")
        with caplog.at_level("WARNING", logger="attention_docs"):
            assert reloader.reload_changed() == ["keeppkg.renderer"]
        assert keeppkg.plugin.build() == 2 and "restart" not in caplog.text
        touch_later(package / "plugin.py", "from keeppkg import renderer\n\nVERSION = 2\n")
        with caplog.at_level("WARNING", logger="attention_docs"):
            reloader.reload_changed()
        assert "keeppkg.plugin changed: restart the server" in caplog.text


# --- mkdocs serve, on a minimal site with its own copy of the library ----------------------


def copy_library(root: Path) -> dict[str, str]:
    """A copy of src/ under `root`, and the environment that imports it instead."""
    shutil.copytree(
        ROOT / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    path = os.pathsep.join([str(root / "src"), str(TESTS)])
    env = {**os.environ, "PYTHONPATH": path, "NO_MKDOCS_2_WARNING": "1"}
    env["ATTENTION_DOCS_EXPERIMENTS"] += ",short_rounds"
    # The copy has no bytecode yet: its first interpreter writes it for the others.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


SERVED_PAGE = """
# A page

Some prose.

```python exec="on" id="quick-table" session="q"
from attention_docs import measure, render
print(render.steps.step_table(measure("_test_quick", seq_len=8)))
```
"""


class Served:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [*MKDOCS, "serve", "--dirty", "--livereload", "--dev-addr", f"127.0.0.1:{self.port}"],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float = 300) -> str:
        seen = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                assert self.proc.poll() is None, "".join(seen)
                continue
            seen.append(line)
            if text in line:
                return "".join(seen)
        raise AssertionError(f"no {text!r} in:\n{''.join(seen)}")

    def page(self, path: str = "") -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/{path}", timeout=60) as r:
            return r.read().decode("utf-8")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.mark.docs
def test_serve_shows_a_renderer_edit_without_a_restart_and_rebuilds_only_its_pages(
    tmp_path, quick_entries
):
    env = copy_library(tmp_path)
    (tmp_path / "docs").mkdir()
    with_entries(quick_entries, tmp_path, 8)  # what the page shows is stored: nothing measures
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: t\nmarkdown_extensions: [md_in_html, tables, pymdownx.superfences]\n"
        "plugins: [markdown-exec, attention-docs]\n"
    )
    (tmp_path / "docs" / "index.md").write_text(SERVED_PAGE)
    (tmp_path / "docs" / "other.md").write_text("# Other\n\nNo measurement here.\n")
    server = Served(tmp_path, env)
    try:
        server.wait_for("Serving on")
        assert ">Step<" in server.page()
        steps = tmp_path / "src" / "attention_docs" / "render" / "steps.py"
        steps.write_text(steps.read_text().replace('f"Step | Time', 'f"Step name | Time', 1))
        log = server.wait_for("Reloading browsers")
        assert "reloaded" in log and "attention_docs.render.steps" in log
        assert "rebuilding index.md: attention_docs/render/steps.py changed" in log
        assert "rebuilding other.md" not in log  # it uses no renderer
        assert ">Step name<" in server.page()
        index = tmp_path / "docs" / "index.md"
        index.write_text(index.read_text().replace("Some prose.", "Edited prose."))
        log = server.wait_for("Reloading browsers")
        assert "Edited prose." in server.page() and "0 measured during this build" in log
    finally:
        server.stop()


# --- The guide's worked example --------------------------------------------------------------

GUIDE = ROOT / "docs" / "contributing.md"


def guide_files() -> dict[str, str]:
    """The guide's code blocks that carry a file name (`title="path"`), as its page shows
    them: their snippet lines expanded by pymdownx.snippets, set as mkdocs.yml sets it."""
    import markdown

    text = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r'^(`{3,})\w+ title="([^"]+)"\n(.*?)^\1$', text, flags=re.M | re.S)
    snippets = markdown.Markdown(
        extensions=["pymdownx.snippets"],
        extension_configs={
            "pymdownx.snippets": {
                "base_path": [str(ROOT)],
                "check_paths": True,
                "dedent_subsections": True,
            }
        },
    ).preprocessors["snippet"]
    # A file included whole ends with its newline: an empty line, which the block's end drops.
    return {
        path: "\n".join(snippets.run(body.splitlines())).rstrip("\n") + "\n"
        for _, path, body in blocks
    }


MINI_CONFIG = """\
site_name: t
markdown_extensions:
  - admonition
  - md_in_html
  - tables
  - pymdownx.superfences
  - pymdownx.snippets: {base_path: ["."], check_paths: true}
plugins:
  - search
  - markdown-exec
  - mkdocs-jupyter: {include: ["notebooks/*.py"], ignore: ["*.md"]}
  - attention-docs
nav:
  - Home: index.md
  - Chapters:
      - chapters/01-first.md
  - Notebooks:
      - notebooks/01_first.py
"""


def scaffolded(root: Path) -> tuple[dict[str, str], dict[str, bytes], str]:
    """A minimal project under `root` (a copy of src/, one chapter, the project's
    pyproject.toml) with `new-chapter mask-cost` run in it: (its environment, every file's
    bytes before the command, what the command printed)."""
    env = copy_library(root)
    (root / "docs" / "chapters").mkdir(parents=True)
    (root / "docs" / "notebooks").mkdir()
    (root / "tests").mkdir()
    (root / "docs" / "index.md").write_text("# Home\n\n<!-- attention-docs:build-summary -->\n")
    (root / "docs" / "chapters" / "01-first.md").write_text("# First\n\nProse.\n")
    (root / "docs" / "notebooks" / "01_first.py").write_text("# %%\nprint(1)\n")
    (root / "mkdocs.yml").write_text(MINI_CONFIG)
    # The project's ruff settings, whose per-file rules are relative to the project's root.
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(ROOT / "examples", root / "examples")  # what new-chapter copies
    before = {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    scaffold = subprocess.run(
        [*CLI, "new-chapter", "mask-cost", "--title", "Preparing a mask", "--root", str(root)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert scaffold.returncode == 0, scaffold.stderr
    return env, before, scaffold.stdout


WRITTEN = (
    "src/attention_docs/experiments/mask_cost.py",
    "docs/chapters/02-mask-cost.md",
    "docs/notebooks/02_mask_cost.py",
    "tests/test_mask_cost.py",
)


def test_new_chapter_writes_four_files_and_they_pass_the_lint_session(tmp_path):
    """What `nox -s lint` runs (ruff check, ruff format --check, lint-imports), run here on
    the scaffolded project directly: the tests session has the tools, not nox."""
    _, before, printed = scaffolded(tmp_path)
    after = {
        p.relative_to(tmp_path).as_posix(): p.read_bytes()
        for p in tmp_path.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    # Four new files, and only the nav of mkdocs.yml edited (by the tool): no list of
    # modules, no table of GPU estimates.
    assert sorted(set(after) - set(before)) == sorted(WRITTEN)
    assert [rel for rel in before if before[rel] != after[rel]] == ["mkdocs.yml"]
    assert "nothing to register" in printed
    config = (tmp_path / "mkdocs.yml").read_text()
    assert "- chapters/02-mask-cost.md" in config and "- notebooks/02_mask_cost.py" in config
    for command in (["check", "."], ["format", "--check", "."]):
        lint = subprocess.run(
            [sys.executable, "-m", "ruff", *command],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr
    here = Path(sys.executable).parent
    lint_imports = shutil.which("lint-imports", path=f"{here}{os.pathsep}{os.environ['PATH']}")
    if lint_imports is None:
        pytest.skip("lint-imports is not installed here (pyproject.toml's test group has it)")
    contracts = subprocess.run(
        [lint_imports],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "src")},
        check=False,
    )
    assert contracts.returncode == 0, contracts.stdout[-3000:]
    assert "0 broken" in contracts.stdout


@pytest.mark.docs
def test_the_guides_example_is_what_new_chapter_writes_and_it_builds(tmp_path):
    from site_facts import read_page

    env, _, _ = scaffolded(tmp_path)
    # The guide includes the example's files (it copies none), and they are what the command
    # writes: the guide cannot drift from what builds. `NN` is the chapter's number.
    shown = guide_files()
    guide = GUIDE.read_text(encoding="utf-8")
    for rel in (
        "src/attention_docs/experiments/mask_cost.py",
        "docs/chapters/NN-mask-cost.md",
        "docs/notebooks/NN_mask_cost.py",
        "tests/test_mask_cost.py",
    ):
        assert rel in shown, f"the guide does not show {rel}"
        assert f'--8<-- "examples/chapter/{rel}' in guide, f"the guide copies {rel}"
        assert shown[rel] == (ROOT / "examples" / "chapter" / rel).read_text(), rel
        written = (tmp_path / rel.replace("NN", "02")).read_text()
        assert shown[rel].replace("NN", "02") == written, rel
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-5000:]
    page = (tmp_path / "site" / "chapters" / "02-mask-cost" / "index.html").read_text()
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", page)
    assert headers[:3] == ["Sequence length", "Bool mask", "Float bias"]
    # Every number the page states is a fact, its id derived from the declared sweep: one
    # per line and length, and the ratio at the longest.
    facts = read_page(page)
    assert facts.unmarked == [], facts.unmarked
    ids = set(re.findall(r'data-fact="([^"]+)"', page))
    seq_lens = [128, 256, 512, 1024, 2048]
    for line in ("bool mask", "float bias"):
        for n in seq_lens:
            assert any(
                i.startswith(f"causal mask preparation time;{line};;unprofiled;")
                and i.endswith(f";seq_len={n}")
                for i in ids
            ), (line, n)
    assert any(i.startswith("speed ratio;") and i.endswith("seq_len=2048") for i in ids)
    # Ties are decided from the rounds: each length marks its leaders, and the sentence
    # says who leads where.
    assert len(re.findall(r"\((?:fastest|tied for fastest: within noise)\)", page)) >= 5
    assert re.search(r"(?:is fastest|are within noise of each other) at sequence length", page)
    alt = re.search(r'<svg role="img" aria-label="(Time to[^"]*)"', page)
    assert alt, "the figure has no alt text"
    # A length is exact (1,024 tokens, never 1,020), a time in its unit (never "16 k").
    assert "1,024 tokens → " in alt.group(1) and "1,020" not in alt.group(1)
    table = re.search(r"<table>.*?</table>", page, flags=re.S).group(0)
    assert not re.search(r"\d k\b", re.sub(r"<[^>]+>", "", table))
    assert "def prepare_mask(" in re.sub(r"<[^>]+>", "", page)  # the code under study
    assert list((tmp_path / "docs" / "measurements" / "mask_cost").glob("*.json"))
    assert (
        '"experiment": "mask_cost"'
        in (tmp_path / "docs" / "measurements" / "requests.json").read_text()
    )
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_mask_cost.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert tests.returncode == 0, tests.stdout[-3000:]
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "attention_docs",
            "new-chapter",
            "mask-cost",
            "--root",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert again.returncode == 2 and "has the slug 'mask-cost' already" in again.stderr


def test_experiment_modules_are_found_without_a_list(tmp_path, monkeypatch):
    """Every public module of the experiments package is one (a new chapter's module needs
    no list edited); private modules and the registry's machinery are not."""
    from attention_docs import experiments

    folder = Path(experiments.__file__).parent
    public = sorted(
        p.stem
        for p in folder.glob("*.py")
        if not p.stem.startswith("_") and p.stem not in {"registry", "runner"}
    )
    assert list(experiments.modules()) == public
    assert "forward" in public and "_sweep" not in experiments.modules()
    # A module dropped beside them is found and imported, in alphabetical order.
    (tmp_path / "aa_new.py").write_text("IMPORTED = True\n")
    (tmp_path / "_private.py").write_text("raise ImportError('a private module is not loaded')\n")
    monkeypatch.setattr(experiments, "__path__", [*experiments.__path__, str(tmp_path)])
    assert experiments.modules()[0] == "aa_new" and "_private" not in experiments.modules()
    try:
        experiments.load_all()
        assert sys.modules["attention_docs.experiments.aa_new"].IMPORTED
    finally:
        sys.modules.pop("attention_docs.experiments.aa_new", None)
