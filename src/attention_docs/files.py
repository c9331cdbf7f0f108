# Writing a file so that no reader sees half of it: the store's entries, the build cache, the
# published notebooks and the archives are read by other processes (a build, `mkdocs serve`,
# a second checkout) while they are written, and a write cut short (a full disk, a kill)
# must leave the old file, not a truncated one. The bottom layer: every other imports it.
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def try_writing(folder: Path) -> None:
    """Create a file in `folder` and remove it: raises the OSError a write there would.

    Asked before work that ends in a write, it tells a read-only mount, another user's folder
    and root's capabilities apart as the write would, where permission bits cannot.
    """
    fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=folder)
    os.close(fd)
    Path(probe).unlink()


def write_atomically(path: Path, data: bytes | str) -> None:
    """Write `data` (text as UTF-8) to `path` whole or not at all, world-readable.

    It goes to a temporary file beside `path`, is flushed to the disk and then renamed over
    `path`, which a reader sees as one step; on any failure the temporary file is removed and
    `path` keeps what it held. Missing parent folders are made.
    """
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes 0600 files; what is written here is published with the site or read
        # by another user's checkout.
        Path(tmp).chmod(0o644)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
