"""Build the site strictly into a temporary folder beside its target, and swap it in only
when the build succeeds: a failed build leaves the previous site as it was, rather than a
site whose pages hold tracebacks.

Usage: python tools/build_site.py [--site-dir site] [--config-file mkdocs.yml]

`nox -s docs` runs it (with the ATTENTION_DOCS_* variables its arguments set). Exits with
mkdocs' exit code.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def build(site: Path, config: Path) -> int:
    """`mkdocs build --strict` of `config` into a new folder, then swapped in as `site`."""
    site = site.resolve()
    site.parent.mkdir(parents=True, exist_ok=True)
    # Beside the target, so that the swap is a rename on one file system.
    fresh = Path(tempfile.mkdtemp(prefix=f".{site.name}-building-", dir=site.parent))
    old = site.with_name(f".{site.name}-previous-{os.getpid()}")
    try:
        command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)]
        code = subprocess.run([*command, "-d", str(fresh)], check=False).returncode
        if code != 0:
            state = "left as it was" if site.exists() else "not written"
            print(f"build failed (exit code {code}): {site.name}/ is {state}", file=sys.stderr)
            return code
        fresh.chmod(0o755)  # mkdtemp makes the folder private; the site is published
        if site.exists():
            site.rename(old)
        fresh.rename(site)
        return 0
    finally:
        for leftover in (fresh, old):
            shutil.rmtree(leftover, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site-dir", type=Path, default=Path("site"))
    parser.add_argument("--config-file", type=Path, default=Path("mkdocs.yml"))
    args = parser.parse_args(argv)
    return build(args.site_dir, args.config_file)


if __name__ == "__main__":
    sys.exit(main())
