# What a build can skip. A renderer's output is a pure function of its arguments and of its
# code (its module and what that imports: measurements/source.py's SourceGraph), so
# RenderCache keeps it under .cache/ keyed by a hash of the two; RenderProxy is what
# `from attention_docs import render` gives a block, noting the files each call read so that
# `mkdocs serve` knows which pages an edit touches. A hit returns the bytes the call returned.
from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import hashlib
import importlib.metadata
import inspect
import json
import sys
import time
import tokenize
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attention_docs.files import write_atomically
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.measurements.source import TOKEN_DIGESTS, SourceGraph, token_digest

# Bump when the cache's keys or files change meaning.
CACHE_VERSION = 1
# Results computed faster than this are not written: a lookup would cost as much.
MIN_SECONDS = 0.005


class UncacheableError(TypeError):
    """An argument whose value cannot be named by a hash (a function, an open file...)."""


class RenderCache:
    """Renderer outputs on disk, keyed by (renderer, its code, its arguments).

    `folder` None keeps nothing (every call computes) but still records the files each call
    depends on, for `mkdocs serve`.
    """

    def __init__(self, folder: Path | None, graph: SourceGraph | None = None) -> None:
        self.folder = folder
        self.graph = graph or SourceGraph()
        self.hits = 0
        self.misses = 0
        self.used_files: set[Path] = set()
        self._digests: dict[int, tuple[Measurement, str]] = {}
        self._code: dict[str, tuple[str, tuple[Path, ...]]] = {}
        # The token digests (measurements/source.py) learnt by earlier builds.
        self._memo_path = folder / "tokens.json" if folder else None
        with contextlib.suppress(OSError, ValueError, TypeError):  # none kept, or damaged
            if self._memo_path is not None:
                TOKEN_DIGESTS.update(json.loads(self._memo_path.read_text(encoding="utf-8")))
        self._saved = len(TOKEN_DIGESTS)
        # The libraries whose output a renderer returns as is (an SVG's bytes).
        try:
            matplotlib = importlib.metadata.version("matplotlib")
        except importlib.metadata.PackageNotFoundError:
            matplotlib = "none"
        self._salt = f"{CACHE_VERSION}\0matplotlib={matplotlib}"

    @staticmethod
    def _token_digest(path: Path) -> str:
        try:
            return token_digest(path)
        except (SyntaxError, tokenize.TokenError):  # a file mid-edit: its bytes name it
            return hashlib.sha256(path.read_bytes()).hexdigest()

    def save(self) -> None:
        """Keep the token hashes learnt this build (one short line per version of a file)."""
        if self._memo_path is not None and len(TOKEN_DIGESTS) != self._saved:
            write_atomically(self._memo_path, json.dumps(TOKEN_DIGESTS, sort_keys=True))
            self._saved = len(TOKEN_DIGESTS)

    def code(self, module: str) -> tuple[str, tuple[Path, ...]]:
        """(digest, files) of `module`'s closure, computed once per build."""
        known = self._code.get(module)
        if known is None:
            # The token streams of the closure's files: comments and layout change no key.
            files = self.graph.files(module)
            h = hashlib.sha256()
            for path in files:
                h.update(path.relative_to(self.graph.root).as_posix().encode() + b"\0")
                h.update(self._token_digest(path).encode() + b"\0")
            known = self._code[module] = (h.hexdigest(), files)
        return known

    def _measurement(self, m: Measurement) -> str:
        known = self._digests.get(id(m))
        if known is None or known[0] is not m:
            known = (m, hashlib.sha256(m.dumps().encode()).hexdigest())
            self._digests[id(m)] = known
        return known[1]

    def token(self, value: Any) -> str:  # noqa: PLR0911 - one return per kind of value
        """A string that names `value` exactly; raises UncacheableError when it cannot."""
        if value is None or isinstance(value, bool | int | float | str | bytes):
            return f"{type(value).__name__}:{value!r}"
        if isinstance(value, Measurement):
            return f"M:{self._measurement(value)}"
        if isinstance(value, Sourced):
            return (
                f"S:{self._measurement(value.measurement)}:{value.origin!r}:"
                f"{value.json_path!r}:{value.base!r}"
            )
        if isinstance(value, enum.Enum):
            return f"E:{type(value).__qualname__}.{value.name}"
        if isinstance(value, list | tuple):
            inner = ",".join(self.token(v) for v in value)
            return f"{type(value).__name__}({inner})"
        if isinstance(value, set | frozenset):
            return "set(" + ",".join(sorted(self.token(v) for v in value)) + ")"
        if isinstance(value, dict):
            items = sorted(f"{self.token(k)}={self.token(v)}" for k, v in value.items())
            return "dict(" + ",".join(items) + ")"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            inner = ",".join(
                f"{f.name}={self.token(getattr(value, f.name))}" for f in dataclasses.fields(value)
            )
            return f"{type(value).__module__}.{type(value).__qualname__}({inner})"
        raise UncacheableError(type(value).__name__)

    def key(self, func: Callable, args: tuple, kwargs: dict) -> str | None:
        try:
            arguments = self.token((args, kwargs))
        except UncacheableError:
            return None
        code = self.code(func.__module__)[0]
        text = f"{self._salt}\0{func.__module__}.{func.__qualname__}\0{code}\0{arguments}"
        return hashlib.sha256(text.encode()).hexdigest()

    def call(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """`func(*args, **kwargs)`, from the cache when this exact call was made before."""
        self.used_files.update(self.code(func.__module__)[1])
        key = self.key(func, args, kwargs) if self.folder else None
        path = self.folder / key[:2] / f"{key}.txt" if key else None
        if path is not None and path.is_file():
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                pass  # a damaged entry is computed again and rewritten
            else:
                self.hits += 1
                return text
        started = time.perf_counter()
        result = func(*args, **kwargs)
        if isinstance(result, str):
            self.misses += 1
            if path is not None and time.perf_counter() - started >= MIN_SECONDS:
                write_atomically(path, result)
        return result


class RenderProxy(types.ModuleType):
    """A renderer module as an executed block sees it: public functions go through `cache`,
    public submodules (`render.compare`) are proxied too, everything else is the module's own.

    The real module stays untouched (the library's own imports use it); only the name that
    blocks import, `attention_docs.render`, points here during a build. Nothing is kept
    between lookups, so a module reloaded by `mkdocs serve` is seen at once.
    """

    def __init__(self, module: types.ModuleType, cache: RenderCache) -> None:
        super().__init__(module.__name__, module.__doc__)
        self._module = module
        self._cache = cache

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if name.startswith("_"):
            return value
        if inspect.isfunction(value):

            @functools.wraps(value)
            def cached(*args: Any, **kwargs: Any) -> Any:
                return self._cache.call(value, args, kwargs)

            return cached
        if isinstance(value, types.ModuleType) and value.__name__.startswith(f"{self.__name__}."):
            return RenderProxy(value, self._cache)
        return value


def install(cache: RenderCache) -> None:
    """Point `attention_docs.render` (the name blocks import) at a proxy over `cache`."""
    import attention_docs
    import attention_docs.render  # loads the real module into sys.modules

    real = sys.modules["attention_docs.render"]
    attention_docs.render = RenderProxy(real, cache)  # type: ignore[attr-defined]
