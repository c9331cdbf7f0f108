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

from attention_docs import folders

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
    """Starting mkdocs fails the test: bad input is refused before mkdocs starts."""

    def refuse(command, **kwargs):
        raise AssertionError(f"started {command}")

    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(folders, "run_child", refuse)


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
        return 0

    monkeypatch.setattr(folders, "run_child", mkdocs)
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


def test_build_site_clears_what_dead_builds_left_and_keeps_a_live_ones(tmp_path, monkeypatch):
    """Killed builds left .site-building-* beside site/ and worker and `mkdocs serve` folders
    under the temporary folder, for ever."""
    build_site = load("build_site")
    dead, live = dead_pid(), os.getpid()
    left = [
        tmp_path / f".site-building-{dead}-x1",
        tmp_path / f".site-previous-{dead}",
        tmp_path / "tmp" / f"attention-docs-workers-{dead}-x2",
        tmp_path / "tmp" / "mkdocs_dead",
    ]
    kept = [
        tmp_path / f".site-building-{live}-x3",
        tmp_path / "tmp" / f"attention-docs-workers-{live}-x4",
        tmp_path / "tmp" / "mkdocs_live",
        tmp_path / "tmp" / "mkdocs_unclaimed",  # no owner known: kept
        tmp_path / ".site-building-x5",  # named as builds once named them: no owner known
    ]
    for folder in left + kept:
        folder.mkdir(parents=True)
        (folder / "index.html").write_text("half a site\n")
    (tmp_path / "tmp" / "mkdocs_dead.pid").write_text(f"{dead}\n")
    (tmp_path / "tmp" / "mkdocs_live.pid").write_text(f"{live}\n")
    (tmp_path / "tmp" / "mkdocs_gone.pid").write_text(f"{dead}\n")  # mkdocs removed its folder
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr("tempfile.tempdir", None)
    building = []

    def mkdocs(command, **kwargs):
        building.append(Path(command[command.index("-d") + 1]).name)
        return 1

    monkeypatch.setattr(folders, "run_child", mkdocs)
    config = tmp_path / "mkdocs.yml"
    config.write_text("site_name: t\n")
    assert (
        build_site.main(["--site-dir", str(tmp_path / "site"), "--config-file", str(config)]) == 1
    )
    assert [p for p in left if p.exists()] == [] and all(p.exists() for p in kept)
    assert not (tmp_path / "tmp" / "mkdocs_dead.pid").exists()
    assert not (tmp_path / "tmp" / "mkdocs_gone.pid").exists()
    assert (tmp_path / "tmp" / "mkdocs_live.pid").exists()
    # This build's own folder names it, so that a later build can tell whether it runs.
    assert building[0].startswith(f".site-building-{live}-")
    assert not (tmp_path / building[0]).exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--site-dir", "FOLDER"], "no built site (no index.html), and a build would delete"),
        (["--site-dir", "FILE"], "is a file, not a site folder"),
        (["--site-dir", ""], "argument --site-dir: is empty"),
        (["--config-file", ""], "argument --config-file: is empty"),
        (["--config-file", "MISSING"], "there is no MkDocs config file"),
    ],
)
@pytest.mark.usefixtures("no_mkdocs")
def test_build_site_refuses_bad_input_in_one_sentence_and_deletes_nothing(
    tmp_path, capsys, monkeypatch, argv, message
):
    """`--site-dir src` (or `.`) would have been swapped out and deleted after a build."""
    (tmp_path / "file").write_text("not a folder\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "notes.txt").write_text("mine\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: t\n")
    monkeypatch.chdir(tmp_path)
    names = {"FILE": "file", "FOLDER": "folder", "MISSING": "missing.yml"}
    argv = [names.get(a, a) for a in argv]
    one_line_error(exit_code(load("build_site").main, argv), capsys.readouterr().err, message)
    assert (tmp_path / "folder" / "notes.txt").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "folder", "mkdocs.yml"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["SITE", "OUT", "index.html", "--width", "0"], "--width: must be a whole number of"),
        (["SITE", "OUT", "index.html", "--width", "-390"], "--width: must be a whole number of"),
        (["SITE", "OUT", "index.html", "--width", "1e9"], "--width: must be a whole number of"),
        (["SITE", "OUT", "index.html", "--width", "wide"], "--width: must be a whole number of"),
        (["NOWHERE", "OUT", "index.html"], "is not a built site (no index.html)"),
        (["SITE", "FILE", "index.html"], "is a file, not a folder for screenshots"),
        (["SITE", "", "index.html"], "argument out: is empty"),
        (["SITE", "OUT", "index.html", "--element", ""], "argument --element: is empty"),
    ],
)
def test_screenshot_refuses_bad_input_in_one_sentence(tmp_path, capsys, argv, message):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<p>site</p>\n")
    (tmp_path / "file").write_text("not a folder\n")
    names = {
        "SITE": tmp_path / "site",
        "OUT": tmp_path / "out",
        "FILE": tmp_path / "file",
        "NOWHERE": tmp_path / "nowhere",
    }
    argv = [str(names.get(a, a)) for a in argv]
    one_line_error(exit_code(load("screenshot").main, argv), capsys.readouterr().err, message)
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(
    importlib.util.find_spec("playwright") is not None, reason="checks a machine without it"
)
def test_screenshot_without_playwright_says_how_to_get_it(tmp_path, capsys):
    """It failed importing playwright at its first line, a traceback."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<p>site</p>\n")
    argv = [tmp_path / "site", tmp_path / "out", "index.html"]
    code = exit_code(load("screenshot").main, argv)
    one_line_error(code, capsys.readouterr().err, "needs playwright")


def test_mkdocs_serves_site_folder_is_claimed_by_the_serving_process(tmp_path, monkeypatch):
    """`mkdocs serve` names its site folder mkdocs_<random>, with no owner: the plugin records
    it, so that a killed serve's folder can be told from a live one's."""
    from types import SimpleNamespace

    from attention_docs.mkdocs_plugin import AttentionDocsPlugin

    monkeypatch.setattr(sys, "dont_write_bytecode", sys.dont_write_bytecode)  # on_serve sets it
    site, old = tmp_path / "mkdocs_serving", tmp_path / "mkdocs_killed"
    site.mkdir()
    old.mkdir()
    (tmp_path / "mkdocs_killed.pid").write_text(f"{dead_pid()}\n")

    class Server:
        def watch(self, path):
            pass

    AttentionDocsPlugin().on_serve(Server(), SimpleNamespace(site_dir=str(site)), None)
    assert (tmp_path / "mkdocs_serving.pid").read_text() == f"{os.getpid()}\n"
    assert not old.exists() and not (tmp_path / "mkdocs_killed.pid").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM ends a process at once there")
def test_a_build_stopped_with_sigterm_stops_its_mkdocs_and_leaves_no_half_site(tmp_path):
    """`kill` of tools/build_site.py (or of the nox running it) ended the tool alone: its
    `mkdocs build` ran on, measuring for a site nobody would swap in."""
    import signal
    import time

    # A stand-in for mkdocs: it writes its pid, then would run for a minute.
    mkdocs = tmp_path / "pkgs" / "mkdocs"
    mkdocs.mkdir(parents=True)
    (mkdocs / "__init__.py").write_text("")
    (mkdocs / "__main__.py").write_text(
        "import os, pathlib, sys, time\n"
        f"pathlib.Path({str(tmp_path / 'child.pid')!r}).write_text(str(os.getpid()))\n"
        "time.sleep(60)\n"
    )
    (tmp_path / "mkdocs.yml").write_text("site_name: t\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "pkgs"), str(ROOT / "src")])}
    tool = subprocess.Popen(
        [
            sys.executable,
            ROOT / "tools" / "build_site.py",
            "--site-dir",
            tmp_path / "site",
            "--config-file",
            tmp_path / "mkdocs.yml",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    pid_file = tmp_path / "child.pid"
    # The file exists before its pid is written in it: wait for the pid itself.
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, "the stand-in mkdocs never started"
        time.sleep(0.05)
    child = int(pid_file.read_text())
    tool.send_signal(signal.SIGTERM)
    _, err = tool.communicate(timeout=30)
    assert tool.returncode == 128 + signal.SIGTERM, err
    assert "build failed (stopped by SIGTERM): site/ is not written" in err
    assert not folders.running(child) or _zombie(child)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".site")) == []


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
