# Store keys. A key names what was measured: the experiment, the parameters the chapter
# asked for, and a fingerprint of the code under measurement. The fingerprint ignores
# comments and layout (tokens only), so reformatting a file re-runs nothing, and it is the
# same under every Python version, so a GPU machine's entries match a CPU machine's build.
from __future__ import annotations

import hashlib
import io
import json
import tokenize
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
_SKIP = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}


def source_tokens(text: str) -> str:
    """The significant tokens of Python source, one per line (comments and layout dropped)."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return "\n".join(t.string for t in tokens if t.type not in _SKIP)


# Tokenizing is slow (a build asks for ~50 keys, each hashing several files): each file's
# tokens are remembered for as long as its size and modification time stay the same.
_TOKENS: dict[Path, tuple[tuple[int, int], str]] = {}


def file_tokens(path: Path) -> str:
    """`source_tokens` of the file at `path`, remembered until the file changes."""
    stat = path.stat()
    stamp = (stat.st_mtime_ns, stat.st_size)
    known = _TOKENS.get(path)
    if known is None or known[0] != stamp:
        known = (stamp, source_tokens(path.read_text(encoding="utf-8")))
        _TOKENS[path] = known
    return known[1]


def fingerprint(files: Iterable[str], root: Path = PACKAGE_ROOT) -> str:
    """Hash of the token streams of `files` (paths relative to the package, e.g. `attention/naive.py`)."""
    digest = hashlib.sha256()
    for rel in sorted(set(files)):
        path = root / rel
        if not path.is_file():
            raise FileNotFoundError(f"fingerprint: {rel} is not a file under {root.name}/")
        digest.update(rel.encode() + b"\0" + file_tokens(path).encode() + b"\0")
    return digest.hexdigest()[:16]


def params_text(params: Mapping[str, Any]) -> str:
    """batch_size=1, num_heads=4, ... in the given order; booleans by name (`not causal`):
    how a request is named in captions, build logs and error messages."""
    parts = []
    for name, value in params.items():
        if isinstance(value, bool):
            parts.append(name if value else f"not {name}")
        else:
            parts.append(f"{name}={value}")
    return ", ".join(parts)


def canonical(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(sorted(params.items())), separators=(",", ":"), sort_keys=True)


# How measurements are taken (profiling/): bump it when a change there alters what every
# experiment records — as interleaved timing rounds and the load record did (2) — so that
# every key changes and the whole store is measured again.
METHOD_VERSION = 2


def store_key(experiment: str, requested: Mapping[str, Any], code_fingerprint: str) -> str:
    """The key under which a measurement is stored: 16 hex digits."""
    text = f"{experiment}\0{canonical(requested)}\0{code_fingerprint}\0method {METHOD_VERSION}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]
