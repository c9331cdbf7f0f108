# A reader's notebook, run the way a reader runs it: the published .ipynb copied alone into
# an empty folder, in a fresh virtual environment that has Jupyter and torch but not this
# package, executed with `jupyter nbconvert --execute`. Its first cell installs the package
# from the wheel the site publishes; it measures this machine into a store beside the
# notebook; what it shows is rendered Markdown and HTML, without the site's fact markup.
# Two chapters' notebooks: one that profiles (memory), one that compiles (fusion).
from __future__ import annotations

import email
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT
from filelock import FileLock

from attention_docs.mkdocs_plugin import publish_wheel, published_notebook
from attention_docs.site_pages import WHEEL

NOTEBOOKS = ("04_memory", "06_fusion")
BIN = "Scripts" if sys.platform == "win32" else "bin"
# A reader's Python keeps the bytecode of what it imports. A machine that says not to
# (PYTHONDONTWRITEBYTECODE, as CI images often do) made every interpreter the notebook
# starts (its kernel, its worker server, the compile-cost probe) compile torch's source
# again: the fusion notebook took 56 s, 40 s with bytecode kept.
READER_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


@pytest.fixture(scope="session")
def reader(tmp_path_factory):
    """A fresh environment with what a reader brings (Jupyter, torch as pinned), and the
    wheel the site publishes: made once per run, and shared by the test workers (each
    notebook runs on a worker of its own, conftest.ONE_BY_ONE)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the workers' folders share this run's parent
        base = base.parent
    root = base / "reader"
    with FileLock(f"{root}.lock"):
        if not (root / "wheel").exists():
            (root / "wheel").write_text(str(_make_reader(root)))
    return root / "env" / BIN / "python", Path((root / "wheel").read_text())


def _make_reader(root) -> Path:
    wheel = publish_wheel(root / "site")
    assert wheel is not None and wheel.name == WHEEL
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        needs = email.message_from_bytes(archive.read(metadata)).get_all("Requires-Dist", [])
    venv.create(root / "env")  # pip comes in the one install below (ensurepip took 3 s)
    python = root / "env" / BIN / "python"
    _link_torch(Path(sysconfig.get_path("purelib", vars={"base": str(root / "env")})))
    # One pip run puts in what a reader brings (torch, found linked; Jupyter) and what the
    # wheel needs (NumPy, matplotlib, ...): the notebook's first cell then installs the wheel
    # alone. --no-compile: Python compiles what a notebook imports, once (READER_ENV).
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile",
         "-c", ROOT / "constraints.txt", "pip", "torch", "nbconvert", "ipykernel", *needs],
        check=True, env=READER_ENV,
    )  # fmt: skip
    return wheel


def _link_torch(site: Path) -> None:
    """The reader's torch is this suite's: the same pinned build, its files hard-linked into
    the new environment (copied where links cannot cross file systems), so that pip finds
    torch there, as on a reader's machine that has it. Unpacking its 750 MB wheel took half
    of the environment's 20 s."""
    torch = importlib.metadata.distribution("torch")
    where = Path(torch.locate_file(""))
    info = next(where.glob(f"torch-{torch.version}.dist-info"))
    for name in (*(torch.read_text("top_level.txt") or "torch").split(), info.name):
        shutil.copytree(where / name, site / name, copy_function=_link_or_copy)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def outputs(notebook: dict) -> list[dict]:
    return [o for cell in notebook["cells"] for o in cell.get("outputs", [])]


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_a_downloaded_notebook_runs_alone_and_shows_rendered_tables(reader, tmp_path, stem):
    python, wheel = reader
    folder = tmp_path / "downloads"
    folder.mkdir()
    (folder / f"{stem}.ipynb").write_bytes(
        published_notebook(ROOT / "docs" / "notebooks" / f"{stem}.py")
    )
    store = ROOT / "docs" / "measurements"
    before = sorted(p.name for p in store.rglob("*") if p.is_file())
    env = {
        **READER_ENV,
        "ATTENTION_DOCS_PACKAGE": str(wheel),
        "PIP_CONSTRAINT": str(ROOT / "constraints.txt"),
        # Not the suite's: the reader's environment knows nothing of tests/.
        "PYTHONPATH": "",
        "ATTENTION_DOCS_EXPERIMENTS": "",
        # What has a small size of its own is measured at it (forward_times' whole grid
        # took two of the three minutes this test took): every other experiment at the
        # chapter's size, as a reader's run measures it.
        "ATTENTION_DOCS_TINY": "1",
    }
    env.pop("ATTENTION_DOCS_STORE", None)
    env.pop("ATTENTION_DOCS_MODE", None)
    done = subprocess.run(
        [python, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
         "--ExecutePreprocessor.timeout=1200", "--output", "executed.ipynb", f"{stem}.ipynb"],
        cwd=folder, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    executed = json.loads((folder / "executed.ipynb").read_text(encoding="utf-8"))
    shown = outputs(executed)
    assert not [o for o in shown if o["output_type"] == "error"]
    rendered = [o for o in shown if {"text/markdown", "text/html"} & set(o.get("data", {}))]
    assert rendered, "the notebook showed nothing rendered"
    text = json.dumps(shown)
    assert "data-fact" not in text and "ad-fact" not in text  # the site's markup, taken out
    assert "!!! " not in text  # MkDocs' admonitions, which Jupyter shows raw
    assert "@measurements/" not in text and "@site/" not in text
    assert "Traceback" not in text
    # It measured this machine, into a store of its own beside the notebook ...
    entries = list((folder / "measurements").glob("*/*.json"))
    assert entries and all(".cpu-" in p.name or ".cuda-" in p.name for p in entries)
    # ... and wrote nothing into the clone's committed store.
    assert sorted(p.name for p in store.rglob("*") if p.is_file()) == before


def test_the_install_cell_says_in_one_sentence_when_pip_cannot_install(tmp_path):
    """Run offline (here: a wheel that is not there, no index), pip fails: the cell says so
    after pip's own message, as a SystemExit, not a CalledProcessError's traceback. Under
    `python -S` neither attention_docs nor torch is found, so both are asked for: torch at
    the version the site was built with."""
    from attention_docs.site_pages import INSTALL_CELL, TORCH

    env = {**os.environ, "ATTENTION_DOCS_PACKAGE": str(tmp_path / "missing.whl")}
    env["PIP_NO_INDEX"] = "1"
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-S", "-c", INSTALL_CELL],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert f"pip could not install {tmp_path / 'missing.whl'} {TORCH} (its own message" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr
    assert TORCH.startswith("torch==2.")  # the docs environment's torch, read without importing


def test_a_notebook_shows_an_admonition_as_a_quote_under_its_title(capsys):
    from recorded import recorded

    from attention_docs import render
    from attention_docs.notebook import show

    show(render.claims.device_note(recorded("naive_steps"), cpu="On a CPU.\n\nTwo.", cuda="GPU"))
    shown = capsys.readouterr().out
    assert "!!!" not in shown
    assert shown.startswith("> **Measured on ") and "> On a CPU.\n>\n> Two." in shown
