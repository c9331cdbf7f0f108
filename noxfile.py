"""Tasks: `nox -s docs`, `serve`, `tests`, `lint`, `bench`, `browser`, `fleet`.

This file is the only place that knows how to install things. Every session installs the
project with torch pinned by `constraints.txt` (2.13.0: on Linux x86-64, PyPI's wheel is the
CUDA build with gigabytes of NVIDIA libraries; the README gives the variable that takes
PyTorch's CPU build instead) and the lint tools pinned there too, and keeps
compile caches and temporary files inside `.cache/` in the project. `docs`, `serve` and
`bench` share one environment (.nox/docs), installed once and again only when
pyproject.toml or constraints.txt change.
"""

from __future__ import annotations

import hashlib
import os
import sys
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
        # Bytecode is written (into __pycache__/, ignored by git) even where the shell says
        # not to: a build or the suite starts dozens of processes that import this package
        # (a worker per measurement), and each would compile it again. `serve` writes none
        # into the folders it watches (mkdocs_plugin.py).
        "PYTHONDONTWRITEBYTECODE": "",
    }


DOCS_ENV = ROOT / ".nox" / "docs"
BIN = "Scripts" if sys.platform == "win32" else "bin"


def _stamp(*groups: str) -> str:
    """What an environment's installed packages depend on: the project's pins and groups."""
    digest = hashlib.sha256(" ".join(groups).encode())
    for name in ("pyproject.toml", "constraints.txt"):
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()


def _install(session: nox.Session, *groups: str, env: Path | None = None) -> None:
    """Install the project and `groups` into this session's environment (or `env`), unless
    the environment already holds exactly that: a reused environment starts in seconds."""
    location = env or Path(session.virtualenv.location)
    stamp_file = location / ".attention-docs-installed"
    stamp = _stamp(*groups)
    if stamp_file.is_file() and stamp_file.read_text() == stamp:
        return
    packages = [p for g in groups for p in nox.project.dependency_groups(PYPROJECT, g)]
    if env is None:
        session.install("--upgrade", "pip")
        session.install("-c", "constraints.txt", "-e", ".", *packages)
    else:
        python = str(env / BIN / "python")
        session.run(python, "-m", "pip", "install", "-q", "--upgrade", "pip", external=True)
        pins = ("-c", "constraints.txt", "-e", ".", *packages)
        session.run(python, "-m", "pip", "install", *pins, external=True)
    stamp_file.write_text(stamp)


def _docs_env(session: nox.Session) -> Path:
    """The `docs` session's environment, created if missing: serve and bench run in it too,
    so that the first `nox -s serve` does not install a second copy of torch and MkDocs."""
    if not (DOCS_ENV / BIN / "python").exists():
        session.run(sys.executable, "-m", "venv", str(DOCS_ENV), external=True)
    _install(session, "docs", env=DOCS_ENV)
    return DOCS_ENV / BIN


def _store_args(session: nox.Session, *, serve: bool = False) -> dict[str, str]:
    """`-- --refresh`, `-- --frozen`, `-- --publish`, `-- --this-machine`, `-- --device cpu`,
    `-- --offline` (docs only: a site to open from disk) -> ATTENTION_DOCS_* variables."""
    env = {}
    args = list(session.posargs)
    modes = ("--refresh", "--frozen", "--auto", "--publish")
    while args:
        arg = args.pop(0)
        if arg in modes:
            given = env.setdefault("ATTENTION_DOCS_MODE", arg.removeprefix("--"))
            if given != arg.removeprefix("--"):
                session.error(
                    f"--{given} and {arg} contradict each other: give one of {', '.join(modes)}"
                )
        elif arg == "--this-machine":
            env["ATTENTION_DOCS_THIS_MACHINE"] = "1"
        elif arg == "--offline":
            if serve:
                session.error(
                    "--offline builds a site to open from disk and nox -s serve serves one "
                    "over HTTP: build it with nox -s docs -- --offline"
                )
            # mkdocs.yml turns Material's offline plugin on with it (a YAML boolean).
            env["ATTENTION_DOCS_OFFLINE"] = "true"
        elif arg == "--device" or arg.startswith("--device="):
            value = arg.split("=", 1)[1] if "=" in arg else (args.pop(0) if args else "")
            if env.setdefault("ATTENTION_DOCS_DEVICE", value) != value:
                session.error(
                    f"--device is given twice ({env['ATTENTION_DOCS_DEVICE']} and {value}): give it once"
                )
        else:
            session.error(
                f"unknown argument {arg!r}; nox -s docs accepts --refresh, --frozen, --auto, "
                "--publish, --this-machine, --offline and --device auto|cpu|cuda"
            )
    if env.get("ATTENTION_DOCS_DEVICE", "auto") not in ("auto", "cpu", "cuda"):
        session.error(f"--device {env['ATTENTION_DOCS_DEVICE']!r} is not one of auto, cpu, cuda")
    return env


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site into site/, strictly: a block that raises, a broken link, a missing
    figure or any other MkDocs warning fails the build. The warnings about stored entries (a
    busy machine's, an unreadable one measured again) do not: the build summary repeats them.
    A failed build leaves the previous site/ as it was (tools/build_site.py builds beside it
    and swaps). With `-- --offline` the site opens from disk (site/index.html, file://): its
    links name .html files and search works without a server."""
    env = _store_args(session)  # bad arguments are refused before anything is installed
    _install(session, "docs")
    session.run("python", "tools/build_site.py", "--site-dir", "site", env={**_env(), **env})


@nox.session(python=False)
def serve(session: nox.Session) -> None:
    """Live preview on http://127.0.0.1:8000 (pass --refresh/--frozen/--device like docs).

    `--dirty` rebuilds only what an edit touches: a prose edit its page; an edit under
    src/ (watched by the plugin) the pages whose renderers, measured code or snippets use
    the file, with the changed modules reloaded — no restart. Renderer outputs are reused
    from .cache/, so a reload redraws only what changed.
    """
    env = _store_args(session, serve=True)
    bin_dir = _docs_env(session)
    env = {**_env(), **env}
    session.run(
        str(bin_dir / "mkdocs"),
        "serve",
        "--dirty",
        # With click 8.3, mkdocs serve starts with live reload off unless asked for it.
        "--livereload",
        "--dev-addr",
        "127.0.0.1:8000",
        env=env,
        external=True,
    )


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite, including a strict build of the whole site."""
    _install(session, "test")
    # loadscope: a module's tests share a worker, and so its module-scoped fixtures. The 15
    # slowest are listed at the end: the suite's time is a target (README).
    args = session.posargs or ["-n", "2", "--dist", "loadscope", "--durations=15"]
    session.run("pytest", *args, env=_env())


@nox.session(python=False)
def bench(session: nox.Session) -> None:
    """The contributor's loop and the timings' reproducibility, each against its targets.

    benchmarks/bench_build.py: cold build, warm build, and the reload after a prose edit and
    after a renderer edit under `mkdocs serve --dirty`. benchmarks/bench_repro.py: the same
    timings three times, twice idle and once beside one CPU-bound process (verdicts that must
    not reverse, how far the times moved, interval width, physics).
    `nox -s bench -- repro` runs only the second, `-- build [its options]` only the first.
    """
    bin_dir = _docs_env(session)
    args = list(session.posargs)
    which = [args.pop(0)] if args and args[0] in ("build", "repro") else ["build", "repro"]
    failed = []
    for name in which:
        try:
            session.run(
                str(bin_dir / "python"),
                f"benchmarks/bench_{name}.py",
                *args,
                env=_env(),
                external=True,
            )
        except nox.command.CommandFailed:
            failed.append(name)
    if failed:
        session.error(f"missed a target: {', '.join(failed)} (see above)")


@nox.session
def fleet(session: nox.Session) -> None:
    """The manifest measured on Hugging Face Jobs: `nox -s fleet -- h200 a100-large l4x1`
    (any options of `python -m attention_docs fleet`, such as --dry-run, follow)."""
    if not session.posargs:
        session.error("name the flavors: nox -s fleet -- h200 a100-large l4x1 [--dry-run]")
    _install(session, "docs", "fleet")
    session.run("python", "-m", "attention_docs", "fleet", *session.posargs, env=_env())


@nox.session
def browser(session: nox.Session) -> None:
    """The built site in headless Chromium (Debian's chromium package; never a download)."""
    if not Path("/usr/bin/chromium").exists():
        session.error("needs Debian's chromium: apt-get install --no-install-recommends chromium")
    _install(session, "test", "browser")
    session.run("pytest", "-m", "browser", "-p", "no:xdist", *session.posargs, env=_env())


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, the import layers (import-linter's contracts in
    pyproject.toml), and the GitHub workflows against their schema (check-jsonschema's copy
    of it: nothing is downloaded)."""
    session.install("-c", "constraints.txt", *nox.project.dependency_groups(PYPROJECT, "lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    # import-linter reads the source without importing it: the package need not be installed
    # (nor torch), only findable.
    session.run("lint-imports", env={"PYTHONPATH": str(ROOT / "src")})
    workflows = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(".github/workflows/*.y*ml"))
    session.run("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *workflows)
