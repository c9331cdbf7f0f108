"""Tasks: `nox -s docs`, `serve`, `tests`, `lint`, `bench`, `browser`.

This file is the only place that knows how to install things. Every session installs the
project with torch pinned by `constraints.txt` (2.13.0, a small CPU build on PyPI) and keeps
compile caches and temporary files inside `.cache/` in the project.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

ROOT = Path(__file__).parent
CACHE = ROOT / ".cache"
PYPROJECT = nox.project.load_toml("pyproject.toml")

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests"]


def _env() -> dict[str, str]:
    tmp = CACHE / "tmp"
    inductor = CACHE / "inductor"
    for folder in (tmp, inductor):
        folder.mkdir(parents=True, exist_ok=True)
    return {
        # Inductor writes its precompiled header under $TMPDIR/torchinductor_$USER whatever
        # TORCHINDUCTOR_CACHE_DIR says: point both inside the project.
        "TMPDIR": str(tmp),
        "TORCHINDUCTOR_CACHE_DIR": str(inductor),
        "TRITON_CACHE_DIR": str(CACHE / "triton"),
        "MPLCONFIGDIR": str(CACHE / "matplotlib"),
        "NO_MKDOCS_2_WARNING": "1",
        "PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS", ""),
    }


def _install(session: nox.Session, *groups: str) -> None:
    session.install("--upgrade", "pip")
    packages = [p for g in groups for p in nox.project.dependency_groups(PYPROJECT, g)]
    session.install("-c", "constraints.txt", "-e", ".", *packages)


def _store_args(session: nox.Session) -> dict[str, str]:
    """`-- --refresh`, `-- --frozen`, `-- --device cpu` -> ATTENTION_DOCS_* variables."""
    env = {}
    args = list(session.posargs)
    while args:
        arg = args.pop(0)
        if arg in ("--refresh", "--frozen", "--auto"):
            env["ATTENTION_DOCS_MODE"] = arg.removeprefix("--")
        elif arg == "--device" and args:
            env["ATTENTION_DOCS_DEVICE"] = args.pop(0)
        elif arg.startswith("--device="):
            env["ATTENTION_DOCS_DEVICE"] = arg.split("=", 1)[1]
        else:
            session.error(
                f"unknown argument {arg!r}; nox -s docs accepts --refresh, --frozen, --auto "
                "and --device auto|cpu|cuda"
            )
    return env


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site into site/, strictly: any warning fails the build."""
    _install(session, "docs")
    env = {**_env(), **_store_args(session)}
    session.run("mkdocs", "build", "--strict", "--site-dir", "site", env=env)


@nox.session
def serve(session: nox.Session) -> None:
    """Live preview on http://127.0.0.1:8000 (pass --refresh/--frozen/--device like docs)."""
    _install(session, "docs")
    env = {**_env(), **_store_args(session)}
    session.run("mkdocs", "serve", "--dev-addr", "127.0.0.1:8000", env=env)


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite, including a strict build of the whole site."""
    _install(session, "test")
    args = session.posargs or ["-n", "2", "--dist", "loadgroup"]
    session.run("pytest", *args, env=_env())


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks with targets: cold vs warm docs build (a warm build under 15% of cold)."""
    _install(session, "docs")
    session.run("python", "benchmarks/bench_build.py", *session.posargs, env=_env())


@nox.session
def browser(session: nox.Session) -> None:
    """The built site in headless Chromium (Debian's chromium package; never a download)."""
    if not Path("/usr/bin/chromium").exists():
        session.error("needs Debian's chromium: apt-get install --no-install-recommends chromium")
    _install(session, "test", "browser")
    session.run("pytest", "-m", "browser", "-p", "no:xdist", *session.posargs, env=_env())


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
