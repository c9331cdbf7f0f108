"""Build-speed benchmark: cold build (empty store) vs warm (store filled) vs a prose edit.

Usage: python benchmarks/bench_build.py [--target 0.15]
Copies the project's docs and mkdocs.yml into a temporary folder, so the committed store is
never touched. Prints the three build times and fails (exit 1) when the warm build takes more
than `--target` of the cold one: a rebuild after a prose-only edit must run no experiment.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(project: Path) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(project / "site")],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"build failed:\n{result.stderr[-4000:]}")
    found = re.search(r"(\d+) measurements: (\d+) from the store, (\d+) measured", result.stderr)
    return elapsed, found.group(0) if found else "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--target", type=float, default=0.15, help="largest allowed warm/cold ratio"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="attention-docs-bench-") as tmp:
        project = Path(tmp)
        shutil.copy(ROOT / "mkdocs.yml", project)
        shutil.copytree(
            ROOT / "docs", project / "docs", ignore=shutil.ignore_patterns("measurements")
        )
        shutil.copytree(ROOT / "src", project / "src")  # snippets are included from src/
        cold, cold_log = build(project)
        warm, warm_log = build(project)
        chapter = next(iter(sorted((project / "docs" / "chapters").glob("*.md"))))
        chapter.write_text(chapter.read_text() + "\nA prose edit.\n")
        prose, prose_log = build(project)
    print(f"cold build (empty store): {cold:7.1f} s   {cold_log}")
    print(f"warm build (store filled): {warm:6.1f} s   {warm_log}")
    print(f"after a prose-only edit:  {prose:7.1f} s   {prose_log}")
    ratio = warm / cold
    print(f"warm / cold = {ratio:.1%} (target: at most {args.target:.0%})")
    if not prose_log.endswith("0 measured"):
        print("FAIL: the prose-only edit re-ran an experiment")
        return 1
    return 0 if ratio <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
