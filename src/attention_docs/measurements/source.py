# The package's source read as code: which package modules a module imports (SourceGraph)
# and a file's tokens without comments or layout (token_digest). Store keys follow the graph
# through the measuring modules; the render cache and `mkdocs serve` follow all of it.
from __future__ import annotations

import ast
import hashlib
import io
import tokenize
from pathlib import Path

PACKAGE = "attention_docs"
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


# A file's bytes' hash -> its tokens' hash: one table for every caller, kept between builds
# by the render cache (tokenizing the files behind the renderers costs about half a second a
# build, hashing them nothing).
TOKEN_DIGESTS: dict[str, str] = {}


def token_digest(path: Path) -> str:
    """A hash of the file's `source_tokens`: a comment or layout edit keeps it. Raises
    SyntaxError or tokenize.TokenError when the file does not tokenize."""
    raw = hashlib.sha256(path.read_bytes()).hexdigest()
    known = TOKEN_DIGESTS.get(raw)
    if known is None:
        tokens = source_tokens(path.read_text(encoding="utf-8"))
        known = TOKEN_DIGESTS[raw] = hashlib.sha256(tokens.encode()).hexdigest()
    return known


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

    def module(self, relative: str) -> str:
        """`profiling/timing.py` -> `attention_docs.profiling.timing`."""
        parts = Path(relative).with_suffix("").parts
        return ".".join((self.package, *parts[: -1 if parts[-1] == "__init__" else None]))

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
