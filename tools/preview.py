"""Build (or serve) only some chapters, strictly, against a store of your choice.

Usage: python tools/preview.py --store STORE [--site SITE] [--mode auto|frozen|refresh]
       [--serve] PAGE [PAGE ...]

PAGE is a path under docs/, such as chapters/06-fusion.md or notebooks/06_fusion.py. The
site's own mkdocs.yml is copied with every other page and notebook excluded, the nav cut
down to the index and the given pages, and the measurement store pointed at STORE (which
is created if missing; measurements the pages lack are made there, never in the committed
store). Such a partial build never rewrites the committed requests manifest. Exits with
mkdocs' exit code (2: bad input, nothing built). Each run writes a config of its own
(.cache/preview-mkdocs-<pid>-*.yml, removed when it ends), so previews of other pages can
run at once; two into one SITE cannot. SITE must be empty, new or a built site: mkdocs
empties it. With --serve, the pages are served instead on http://127.0.0.1:8000
the way `nox -s serve` serves the whole site (a prose or library edit reloads them).
Run it from the repository root, in an environment with the docs dependencies
(`.nox/docs/bin/python tools/preview.py ...`).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

from filelock import FileLock, Timeout

from attention_docs import arguments, folders

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_PAGE = "chapters/06-fusion.md"
# Each run's config: .cache/preview-mkdocs-<pid>-<random>.yml, removed when it ends.
CONFIG_PREFIX = "preview-mkdocs-"


def preview_config(pages: list[str], store: Path, root: Path = ROOT) -> str:
    """`root`'s mkdocs.yml, with the other pages excluded and the store moved.

    The config is written under root/.cache/, so every folder it names is made absolute:
    the docs, the build caches (shared with full builds) and mkdocs-jupyter's cache (its
    own: mkdocs-jupyter deletes the cached notebooks a build did not use).
    """
    text = (root / "mkdocs.yml").read_text(encoding="utf-8")
    docs = root / "docs"
    candidates = [*docs.rglob("*.md"), *(docs / "notebooks").glob("*.py")]
    others = sorted(
        rel
        for p in candidates
        if (rel := p.relative_to(docs).as_posix()) not in pages and rel != "index.md"
    )
    text = text.replace("docs_dir: docs", f"docs_dir: {docs.as_posix()}")
    text = re.sub(r"^nav:\n(?:[ -].*\n?)*", "", text, flags=re.M)
    text = text.replace(
        "store: docs/measurements",
        f"store: {store.as_posix()}\n      cache_dir: {(root / '.cache').as_posix()}",
    )
    text = text.replace(
        "  - mkdocs-jupyter:\n",
        "  - mkdocs-jupyter:\n"
        f"      cache_dir: {(root / '.cache' / 'mkdocs-jupyter-preview').as_posix()}\n",
    )
    text += "\nexclude_docs: |\n" + "".join(f"  /{o}\n" for o in others)
    text += "\nnav:\n  - index.md\n" + "".join(f"  - {p}\n" for p in pages)
    if not any(p.startswith("notebooks/") for p in pages):
        text = re.sub(r"  - mkdocs-jupyter:\n(?:      .*\n)*", "", text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = arguments.Parser(prog="tools/preview.py", description=__doc__.split("\n", 1)[0])
    parser.add_argument("pages", nargs="+")
    parser.add_argument("--store", type=arguments.path, required=True)
    parser.add_argument("--site", type=arguments.path, default=ROOT / ".cache" / "preview-site")
    parser.add_argument("--mode", default="auto", choices=("auto", "frozen", "refresh"))
    parser.add_argument("--serve", action="store_true", help="serve the pages live instead")
    args = parser.parse_args(argv)
    docs = (ROOT / "docs").resolve()
    for page in args.pages:
        # A page is a file under docs/, named relative to it: `../README.md` and an absolute
        # path are files too, and reached mkdocs as pages it could not have.
        path = (docs / page).resolve()
        if Path(page).is_absolute() or not path.is_relative_to(docs) or not path.is_file():
            parser.error(f"{page!r} is not a page under docs/ (e.g. {EXAMPLE_PAGE})")
    store = args.store.resolve()
    if store.exists() and not store.is_dir():
        parser.error(f"--store {args.store} is a file, not a store folder")
    if not args.serve and (problem := folders.site_problem(args.site.resolve())):
        parser.error(f"--site: {problem}")
    try:
        store.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        parser.error(f"cannot make the store folder {store}: {exc.strerror or exc}")
    env = {**os.environ, "ATTENTION_DOCS_MODE": args.mode, "NO_MKDOCS_2_WARNING": "1"}
    if store != (ROOT / "docs" / "measurements").resolve():
        # A scratch store is never published: a preview on a shared machine keeps its first
        # attempt (flagged busy in captions) instead of waiting for the machine to calm.
        env.setdefault("ATTENTION_DOCS_BUSY_WAIT", "0")
    cache = ROOT / ".cache"
    # A config of its own: two previews at once (other pages, other stores) must not build
    # each other's. It names this process, so that a killed preview's is cleared later.
    try:
        cache.mkdir(parents=True, exist_ok=True)
        folders.clear_dead(cache, [CONFIG_PREFIX])
        fd, name = tempfile.mkstemp(prefix=folders.owned(CONFIG_PREFIX), suffix=".yml", dir=cache)
    except OSError as exc:
        parser.error(f"cannot write the preview's config in {cache}: {exc.strerror or exc}")
    config = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(preview_config(args.pages, store))
        if args.serve:
            command = [sys.executable, "-m", "mkdocs", "serve", "--dirty", "--livereload"]
            command += ["-f", str(config)]
            command += ["--dev-addr", "127.0.0.1:8000"]
            return folders.run_child(command, cwd=ROOT, env=env)
        site = args.site.resolve()
        command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)]
        command += ["-d", str(site)]
        # Two builds into one site folder would leave a mix of both.
        site.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(site.with_name(f".{site.name}.lock"), timeout=0):
            return folders.run_child(command, cwd=ROOT, env=env)
    except Timeout:
        parser.error(
            f"another preview is building into {args.site}: wait for it to end, or give this "
            "one another --site"
        )
    finally:
        config.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
