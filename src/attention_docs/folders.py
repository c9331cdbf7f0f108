# Folders that builds make and remove, by two rules:
# - A temporary folder names the process that owns it (`owned`: in its name; `claim`: in a
#   `<name>.pid` file beside a folder another program names) and is cleared only once that
#   process no longer runs: a build killed with SIGKILL leaves its folders to the next one.
# - A site folder that a build replaces or empties must be one a build made, so a mistyped
#   --site-dir (`src`, `.`) loses nothing.
from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

# What this project makes under the temporary folder, each `<prefix><pid>-<random>`.
TEMP_PREFIXES = ("attention-docs-workers-", "attention-docs-run-", "gpu-measure-")
# What `mkdocs serve` makes there, claimed by the plugin with a `<name>.pid` file.
MKDOCS_SERVE_PREFIX = "mkdocs_"


def owned(prefix: str) -> str:
    """`prefix` with this process's pid: the name's start of a temporary folder it owns."""
    return f"{prefix}{os.getpid()}-"


def running(pid: int) -> bool:
    """Whether process `pid` runs (or may: when that cannot be told, it counts as running)."""
    if sys.platform == "win32":
        return True  # os.kill(pid, 0) would end the process there, not ask about it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's process, or a pid this system cannot have: keep it
    return True


def claim(path: Path) -> None:
    """Record this process as the owner of `path`, a folder whose name another program
    chose, in `<path>.pid` beside it; and clear what dead processes left beside it."""
    clear_dead(path.parent, TEMP_PREFIXES, [MKDOCS_SERVE_PREFIX])
    with contextlib.suppress(OSError):
        path.with_name(f"{path.name}.pid").write_text(f"{os.getpid()}\n", encoding="utf-8")


def clear_dead(folder: Path, prefixes: Iterable[str], claimed: Iterable[str] = ()) -> None:
    """Remove what dead processes left in `folder`.

    That is each entry named `<prefix><pid>` or `<prefix><pid>-...` for one of `prefixes`,
    and each entry named `<claimed prefix>...` whose `<name>.pid` file names a pid, when that
    process no longer runs (its `.pid` file goes with it). An entry with no owner is kept.
    """
    named = [re.compile(rf"{re.escape(p)}(?P<pid>\d+)(?:-.*)?") for p in prefixes]
    claimed = tuple(claimed)
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        marker = entry.with_name(f"{entry.name}.pid")
        if entry.name.endswith(".pid"):
            # A claimed folder's owner removed the folder itself (mkdocs serve does on exit).
            owner = entry.with_name(entry.name.removesuffix(".pid"))
            if owner.name.startswith(claimed) and not owner.exists():
                _clear(entry, _pid_in(entry))
            continue
        matches = [m for pattern in named if (m := pattern.fullmatch(entry.name))]
        if matches:
            _clear(entry, int(matches[0].group("pid")))
        elif entry.name.startswith(claimed) and _clear(entry, _pid_in(marker)):
            _remove(marker)


def _clear(entry: Path, pid: int | None) -> bool:
    """Remove `entry` if `pid` names a process that no longer runs; whether it is gone."""
    if pid is None or running(pid):
        return False
    _remove(entry)
    return not entry.exists()


def _pid_in(marker: Path) -> int | None:
    try:
        return int(marker.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            entry.unlink(missing_ok=True)


def site_problem(site: Path) -> str | None:
    """Why `site` cannot be a site folder that a build empties or replaces, as a clause;
    None when it can: it does not exist, is empty, or holds a built site (its index.html)."""
    if not site.exists():
        return None
    if not site.is_dir():
        return f"{site} is a file, not a site folder"
    try:
        if next(site.iterdir(), None) is None or (site / "index.html").is_file():
            return None
    except OSError as exc:
        return f"{site} cannot be read ({exc.strerror or exc})"
    return (
        f"{site} holds files but no built site (no index.html), and a build would delete "
        "them; give another folder, or empty it first"
    )


# Signals that stop a build from outside (`kill`, a closed terminal, nox's own end). Ctrl-C
# reaches the child without help: the terminal sends SIGINT to the whole process group.
FORWARDED = ("SIGTERM", "SIGHUP")


def run_child(command: list[str], **kwargs) -> int:
    """Run `command` and wait for it; a SIGTERM or SIGHUP sent to this process is passed on.

    A tool that runs `mkdocs build` and is stopped with `kill` would otherwise leave the
    build running alone, measuring on a machine that nobody watches and writing a site
    nobody swaps in. Returns the child's exit code (negative: the signal that ended it).
    """
    import signal
    import subprocess

    child = subprocess.Popen(command, **kwargs)
    forwarded = [getattr(signal, name) for name in FORWARDED if hasattr(signal, name)]

    def forward(signum, frame) -> None:
        child.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in forwarded}
    try:
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:
                child.wait()  # it had the SIGINT too; its clean-up runs before ours
                raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
