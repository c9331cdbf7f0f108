# What a build can skip, and what an edit must redo. Three parts:
#   - SourceGraph: the package's import graph, read from the source (ast), so that a module's
#     "code" is the module and everything it imports from the package, transitively;
#   - RenderCache: a renderer's output is a pure function of its arguments (measurements
#     included) and of that code, so it is stored under .cache/ keyed by a hash of the three
#     and reused — an unchanged figure is never redrawn (matplotlib is most of a warm build);
#   - RenderProxy: what `from attention_docs import render` gives an executed block during a
#     build: the same functions, answered from the cache, each call noting the files it read
#     so that `mkdocs serve` knows which pages a source edit touches.
# Nothing here changes a renderer's output: a hit returns the bytes the same call returned.
from __future__ import annotations

import ast
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
from attention_docs.measurements.keys import PACKAGE_ROOT, file_tokens
from attention_docs.measurements.schema import Measurement, Sourced

PACKAGE = "attention_docs"
# Bump when the cache's keys or files change meaning.
CACHE_VERSION = 1
# Results computed faster than this are not written: a lookup would cost as much.
MIN_SECONDS = 0.005


class SourceGraph:
    """The import graph of a package, from its source files.

    `closure(module)` is the module's file and the files of every package module it imports
    (at top level or inside functions), transitively. A name imported from a package's
    `__init__` that merely re-exports it (`from attention_docs.render import caption_html`)
    counts as the module that defines it, so one renderer's closure is not the whole package.
    """

    def __init__(self, package: str = PACKAGE, root: Path = PACKAGE_ROOT) -> None:
        self.package = package
        self.root = root
        # Per file, keyed by its (mtime, size): the modules it imports.
        self._imports: dict[Path, tuple[tuple[int, int], frozenset[str]]] = {}
        self._files: dict[str, Path | None] = {}

    def refresh(self) -> None:
        """Forget which modules exist (a build may follow the creation of a file)."""
        self._files.clear()

    def file(self, module: str) -> Path | None:
        """The source file of `module`, or None when it is not a module of the package."""
        if module in self._files:
            return self._files[module]
        found = None
        if module == self.package or module.startswith(self.package + "."):
            base = self.root.joinpath(*module.split(".")[1:])
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    found = candidate
                    break
        self._files[module] = found
        return found

    @staticmethod
    def _parse(path: Path) -> ast.Module | None:
        try:
            return ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            return None  # a file being edited: it depends on nothing until it parses

    def _reexport(self, package: str, name: str) -> str | None:
        """The module a package's `__init__` imports `name` from, if it does."""
        init = self.file(package)
        if init is None or init.name != "__init__.py":
            return None
        tree = self._parse(init)
        for node in tree.body if tree else ():
            if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
                source = self._absolute(node, package, is_package=True)
                if source and self.file(source):
                    return source
        return None

    def _absolute(self, node: ast.ImportFrom, module: str, *, is_package: bool) -> str | None:
        if not node.level:
            return node.module
        parts = module.split(".")
        base = parts if is_package else parts[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        return ".".join([*base, node.module] if node.module else base)

    def imports(self, module: str) -> frozenset[str]:
        """The package modules `module` imports directly (remembered until its file changes)."""
        path = self.file(module)
        if path is None:
            return frozenset()
        try:
            stat = path.stat()
        except OSError:
            return frozenset()
        stamp = (stat.st_mtime_ns, stat.st_size)
        known = self._imports.get(path)
        if known is None or known[0] != stamp:
            known = (stamp, self._read_imports(module, path))
            self._imports[path] = known
        return known[1]

    def _read_imports(self, module: str, path: Path) -> frozenset[str]:
        tree = self._parse(path)
        found: set[str] = set()
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if self.file(a.name))
            elif isinstance(node, ast.ImportFrom):
                source = self._absolute(node, module, is_package=path.name == "__init__.py")
                if not source or not self.file(source):
                    continue
                for alias in node.names:
                    target = f"{source}.{alias.name}"
                    if self.file(target):
                        found.add(target)
                    else:
                        found.add(self._reexport(source, alias.name) or source)
        found.discard(module)
        return frozenset(found)

    def closure(self, module: str) -> tuple[str, ...]:
        """`module` and every package module it imports, transitively, sorted."""
        seen: set[str] = set()
        todo = [module]
        while todo:
            name = todo.pop()
            if name in seen or not self.file(name):
                continue
            seen.add(name)
            todo.extend(self.imports(name))
        return tuple(sorted(seen))

    def files(self, module: str) -> tuple[Path, ...]:
        return tuple(p for p in map(self.file, self.closure(module)) if p is not None)


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
        # File bytes' hash -> token stream's hash, kept between builds: tokenizing the ~25
        # files behind the renderers costs about half a second a build, hashing them nothing.
        self._memo_path = folder / "tokens.json" if folder else None
        self._tokens: dict[str, str] = {}
        with contextlib.suppress(OSError, ValueError, TypeError):  # none kept, or damaged
            if self._memo_path is not None:
                self._tokens = dict(json.loads(self._memo_path.read_text(encoding="utf-8")))
        self._new_tokens = False
        # The libraries whose output a renderer returns as is (an SVG's bytes).
        try:
            matplotlib = importlib.metadata.version("matplotlib")
        except importlib.metadata.PackageNotFoundError:
            matplotlib = "none"
        self._salt = f"{CACHE_VERSION}\0matplotlib={matplotlib}"

    def _file_tokens(self, path: Path) -> str:
        raw = hashlib.sha256(path.read_bytes()).hexdigest()
        if raw not in self._tokens:
            try:
                self._tokens[raw] = hashlib.sha256(file_tokens(path).encode()).hexdigest()
            except (SyntaxError, tokenize.TokenError):
                return raw  # a file mid-edit: its bytes name it well enough
            self._new_tokens = True
        return self._tokens[raw]

    def save(self) -> None:
        """Keep the token hashes learnt this build (one short line per version of a file)."""
        if self._memo_path is not None and self._new_tokens:
            write_atomically(self._memo_path, json.dumps(self._tokens, sort_keys=True))
            self._new_tokens = False

    def code(self, module: str) -> tuple[str, tuple[Path, ...]]:
        """(digest, files) of `module`'s closure, computed once per build."""
        known = self._code.get(module)
        if known is None:
            # The token streams of the closure's files: comments and layout change no key.
            files = self.graph.files(module)
            h = hashlib.sha256()
            for path in files:
                h.update(path.relative_to(self.graph.root).as_posix().encode() + b"\0")
                h.update(self._file_tokens(path).encode() + b"\0")
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
