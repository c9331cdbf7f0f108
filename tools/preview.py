"""Build only some chapters, strictly, against a store of your choice.

Usage: python tools/preview.py --store STORE [--site SITE] [--mode auto|frozen|refresh]
       PAGE [PAGE ...]

PAGE is a path under docs/, such as chapters/06-fusion.md or notebooks/06_fusion.py. The
site's own mkdocs.yml is copied with every other chapter and notebook excluded, the nav cut
down to the index and the given pages, and the measurement store pointed at STORE (which
is created if missing; measurements the pages lack are made there, never in the committed
store). Exits with mkdocs' exit code. Run it from the repository root, in an environment
with the docs dependencies (`.nox/docs/bin/python tools/preview.py ...`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def preview_config(pages: list[str], store: Path) -> str:
    """mkdocs.yml, with the other pages excluded and the store moved."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    docs = ROOT / "docs"
    others = sorted(
        p.relative_to(docs).as_posix()
        for folder in ("chapters", "notebooks")
        for p in (docs / folder).glob("*")
        if p.relative_to(docs).as_posix() not in pages
    )
    text = text.replace("docs_dir: docs", f"docs_dir: {docs.as_posix()}")
    text = re.sub(r"^nav:\n(?:[ -].*\n?)*", "", text, flags=re.M)
    text = text.replace("store: docs/measurements", f"store: {store.as_posix()}")
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
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)]
    command += ["-d", str(args.site.resolve())]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
