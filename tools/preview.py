"""Build (or serve) only some chapters, strictly, against a store of your choice.

Usage: python tools/preview.py --store STORE [--site SITE] [--mode auto|frozen|refresh]
       [--serve] PAGE [PAGE ...]

PAGE is a path under docs/, such as chapters/06-fusion.md or notebooks/06_fusion.py. The
site's own mkdocs.yml is copied with every other page and notebook excluded, the nav cut
down to the index and the given pages, and the measurement store pointed at STORE (which
is created if missing; measurements the pages lack are made there, never in the committed
store). Such a partial build never rewrites the committed requests manifest. Exits with
mkdocs' exit code. With --serve, the pages are served instead on http://127.0.0.1:8000
the way `nox -s serve` serves the whole site (a prose or library edit reloads them).
Run it from the repository root, in an environment with the docs dependencies
(`.nox/docs/bin/python tools/preview.py ...`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("pages", nargs="+")
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--site", type=Path, default=ROOT / ".cache" / "preview-site")
    parser.add_argument("--mode", default="auto", choices=("auto", "frozen", "refresh"))
    parser.add_argument("--serve", action="store_true", help="serve the pages live instead")
    args = parser.parse_args(argv)
    for page in args.pages:
        if not (ROOT / "docs" / page).is_file():
            parser.error(f"{page} is not a file under docs/")
    store = args.store.resolve()
    store.mkdir(parents=True, exist_ok=True)
    config = ROOT / ".cache" / "preview-mkdocs.yml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(preview_config(args.pages, store), encoding="utf-8")
    env = {**os.environ, "ATTENTION_DOCS_MODE": args.mode, "NO_MKDOCS_2_WARNING": "1"}
    if store != (ROOT / "docs" / "measurements").resolve():
        # A scratch store is never published: a preview on a shared machine keeps what it
        # measured (flagged busy in captions) instead of waiting for the machine to calm.
        env.setdefault("ATTENTION_DOCS_ALLOW_BUSY", "1")
    if args.serve:
        command = [sys.executable, "-m", "mkdocs", "serve", "--dirty", "-f", str(config)]
        command += ["--dev-addr", "127.0.0.1:8000"]
    else:
        command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)]
        command += ["-d", str(args.site.resolve())]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
