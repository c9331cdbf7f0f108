# tools/preview.py, tools/build_site.py and tools/screenshot.py given bad input, and the
# folders they make and remove (issue 30): one sentence and exit code 2 for bad input,
# nothing deleted that a build did not make, and nothing a killed build left kept forever.
# They run as their `main` in this process, with mkdocs replaced where a test is about what
# comes before it.
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = "chapters/02-naive-attention.md"
OTHER_PAGE = "chapters/01-reading-a-profile.md"


def load(tool: str):
    spec = importlib.util.spec_from_file_location(f"tool_{tool}", ROOT / "tools" / f"{tool}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exit_code(main, argv: list[str]) -> int:
    try:
        return main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's errors
        return exc.code


def one_line_error(code: int, err: str, message: str) -> None:
    assert code == 2, err
    assert message in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.fixture
def no_mkdocs(monkeypatch):
    """subprocess.run that fails the test: bad input is refused before mkdocs starts."""

    def refuse(command, **kwargs):
        raise AssertionError(f"started {command}")

    monkeypatch.setattr(subprocess, "run", refuse)


def dead_pid() -> int:
    """The pid of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    return proc.pid


def test_two_previews_at_once_build_their_own_pages_against_their_own_stores(tmp_path, monkeypatch):
    """They shared .cache/preview-mkdocs.yml: the second overwrote it while the first's
    mkdocs had yet to read it, and the first built the second's page against its store."""
    preview = load("preview")
    read: list[tuple[Path, str] | None] = []

    def mkdocs(command, **kwargs):
        config = Path(command[command.index("-f") + 1])
        if not read:  # the first run: the second starts and ends before its mkdocs reads
            read.append(None)
            second = ["--store", tmp_path / "b", "--site", tmp_path / "site-b", OTHER_PAGE]
            assert exit_code(preview.main, second) == 0
            read[0] = (config, config.read_text())
        else:
            read.append((config, config.read_text()))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(subprocess, "run", mkdocs)
    first = ["--store", tmp_path / "a", "--site", tmp_path / "site-a", PAGE]
    assert exit_code(preview.main, first) == 0
    (first_config, first_text), (second_config, second_text) = read
    assert first_config != second_config
    assert f"store: {(tmp_path / 'a').as_posix()}" in first_text and f"  - {PAGE}" in first_text
    assert f"  - {OTHER_PAGE}" not in first_text
    assert f"store: {(tmp_path / 'b').as_posix()}" in second_text
    # Each run's config is its own, and goes when the run ends.
    assert first_config.name.startswith(f"preview-mkdocs-{os.getpid()}-")
    assert not first_config.exists() and not second_config.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--store", "STORE", "../README.md"], "'../README.md' is not a page under docs/"),
        (["--store", "STORE", "/etc/passwd"], "'/etc/passwd' is not a page under docs/"),
        (["--store", "STORE", "chapters"], "'chapters' is not a page under docs/"),
        (["--store", "STORE", ""], "'' is not a page under docs/"),
        (["--store", "", PAGE], "argument --store: is empty"),
        (["--store", "FILE", PAGE], "is a file, not a store folder"),
        (["--store", "STORE", "--site", "", PAGE], "argument --site: is empty"),
        (["--store", "STORE", "--site", "FILE", PAGE], "is a file, not a site folder"),
        (["--store", "STORE", "--site", "FOLDER", PAGE], "no built site (no index.html)"),
    ],
)
def test_preview_refuses_bad_input_in_one_sentence_before_it_builds(
    tmp_path, capsys, no_mkdocs, argv, message
):
    """A page outside docs/ reached mkdocs; a --store that is a file and a --site that is a
    file ended in tracebacks; a --site folder of other files would have been emptied by
    mkdocs (`--site src`)."""
    (tmp_path / "file").write_text("not a folder\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "notes.txt").write_text("mine\n")
    names = {"STORE": tmp_path / "store", "FILE": tmp_path / "file", "FOLDER": tmp_path / "folder"}
    argv = [str(names.get(a, a)) for a in argv]
    one_line_error(exit_code(load("preview").main, argv), capsys.readouterr().err, message)
    assert (tmp_path / "folder" / "notes.txt").read_text() == "mine\n"
    assert not (tmp_path / "store").exists()


def test_a_preview_into_a_site_folder_another_is_building_into_is_refused(
    tmp_path, capsys, no_mkdocs
):
    from filelock import FileLock

    site = tmp_path / "site"
    with FileLock(tmp_path / ".site.lock"):
        code = exit_code(load("preview").main, ["--store", tmp_path / "s", "--site", site, PAGE])
    one_line_error(code, capsys.readouterr().err, f"another preview is building into {site}")
