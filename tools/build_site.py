"""Build the site strictly into a temporary folder beside its target, and swap it in only
when the build succeeds: a failed build leaves the previous site as it was, rather than a
site whose pages hold tracebacks.

Usage: python tools/build_site.py [--site-dir site] [--config-file mkdocs.yml]

`nox -s docs` runs it (with the ATTENTION_DOCS_* variables its arguments set). Exits with
mkdocs' exit code (2: bad input, nothing built). The site folder must be new, empty or a
built site: it is replaced whole. What killed builds left behind (their folders beside the
site, worker and `mkdocs serve` folders under the temporary folder) is cleared first.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from attention_docs import arguments, folders


def build(site: Path, config: Path) -> int:
    """`mkdocs build --strict` of `config` into a new folder, then swapped in as `site`."""
    site = site.resolve()
    site.parent.mkdir(parents=True, exist_ok=True)
    building, previous = f".{site.name}-building-", f".{site.name}-previous-"
    # What killed builds left: their folders name their pids, so a live build's are kept.
    folders.clear_dead(site.parent, [building, previous])
    folders.clear_dead(
        Path(tempfile.gettempdir()), folders.TEMP_PREFIXES, [folders.MKDOCS_SERVE_PREFIX]
    )
    # Beside the target, so that the swap is a rename on one file system.
    fresh = Path(tempfile.mkdtemp(prefix=folders.owned(building), dir=site.parent))
    old = site.with_name(f"{previous}{os.getpid()}")
    try:
        command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)]
        code = folders.run_child([*command, "-d", str(fresh)])
        if code != 0:
            state = "left as it was" if site.exists() else "not written"
            how = f"stopped by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            print(f"build failed ({how}): {site.name}/ is {state}", file=sys.stderr)
            return 128 - code if code < 0 else code
        fresh.chmod(0o755)  # mkdtemp makes the folder private; the site is published
        if site.exists():
            site.rename(old)
        fresh.rename(site)
        return 0
    finally:
        for leftover in (fresh, old):
            shutil.rmtree(leftover, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = arguments.Parser(prog="tools/build_site.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--site-dir", type=arguments.path, default=Path("site"))
    parser.add_argument("--config-file", type=arguments.path, default=Path("mkdocs.yml"))
    args = parser.parse_args(argv)
    if not args.config_file.is_file():
        parser.error(f"there is no MkDocs config file {args.config_file}; give --config-file")
    # The site folder is swapped out and deleted after a build: it must be one a build made.
    problem = folders.site_problem(args.site_dir.resolve())
    if problem:
        parser.error(f"--site-dir: {problem}")
    try:
        return build(args.site_dir, args.config_file)
    except OSError as exc:  # the site's parent folder cannot be written
        parser.error(f"cannot build beside {args.site_dir}: {exc.strerror or exc}")


if __name__ == "__main__":
    sys.exit(main())
