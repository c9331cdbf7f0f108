# Store keys: the experiment, the parameters a chapter asked for, and a fingerprint of the
# code under measurement. The fingerprint hashes the code's syntax tree without comments,
# layout or prose (docstrings, `summary=`/`help=`/`notes=`, raise and log messages, notes
# appended) or the `gpu_work=` estimate, so a sentence edit keeps every stored entry (a GPU
# entry costs a GPU run to replace). `code_text` writes the tree with a fixed set of fields:
# a GPU machine's Python gives the same fingerprint as a CPU machine's.
from __future__ import annotations

import ast
import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from attention_docs.measurements.source import PACKAGE, PACKAGE_ROOT, SourceGraph

# Keyword arguments whose value is a sentence for readers, never an input of the measurement.
PROSE_KEYWORDS = frozenset({"summary", "help", "notes", "note", "description", "message"})
# Calls whose arguments are sentences: log lines and notes (`notes.append(...)`).
PROSE_CALLS = frozenset({"debug", "info", "warning", "error", "exception", "append"})
_PROSE = "<prose>"
# Keyword arguments that plan a run on the lent GPU (experiments/registry.py): left out whole.
PLAN_KEYWORDS = frozenset({"gpu_work"})
# The module whose names a plan is built from: an import of one that only a plan used goes too.
_REGISTRY = "attention_docs.experiments.registry"


class _StripProse(ast.NodeTransformer):
    """Replace prose in a module's tree by one placeholder (see the comment at the top)."""

    DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)

    def visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, self.DOCUMENTED):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
        return super().visit(node)

    def visit_Raise(self, node: ast.Raise) -> ast.AST:
        return _Silence().visit(node)

    def visit_Module(self, node: ast.Module) -> ast.AST:
        self.generic_visit(node)
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        for imported in ast.walk(node):
            if isinstance(imported, ast.ImportFrom) and imported.module == _REGISTRY:
                imported.names = [a for a in imported.names if (a.asname or a.name) in used]
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.AST | None:
        if node.arg in PLAN_KEYWORDS:
            return None
        if node.arg in PROSE_KEYWORDS:
            node.value = ast.Constant(_PROSE)
            return node
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else None
        owner = (
            func.value.id
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            else ""
        )
        if name in PROSE_CALLS and (name != "append" or owner == "notes"):
            node.args = [_Silence().visit(arg) for arg in node.args]
        return self.generic_visit(node)


class _Silence(ast.NodeTransformer):
    """Every string inside a node (an exception's message, a log line) as the placeholder."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant(_PROSE) if isinstance(node.value, str) else node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return ast.Constant(_PROSE)


# Fields that say nothing about what code does, or that only some Python versions have.
_IGNORED_FIELDS = frozenset({"ctx", "kind", "type_comment", "type_params"})


def code_text(tree: ast.AST) -> str:
    """The tree written out with a fixed set of fields (empty ones left out): the same text
    for the same code under every Python version."""

    def write(node: Any) -> str:
        if isinstance(node, ast.AST):
            fields = []
            for name, value in ast.iter_fields(node):
                if name in _IGNORED_FIELDS or value is None or value == []:
                    continue
                fields.append(f"{name}={write(value)}")
            return f"{type(node).__name__}({','.join(fields)})"
        if isinstance(node, list):
            return "[" + ",".join(write(item) for item in node) + "]"
        return repr(node)

    return write(tree)


def code_fingerprint_text(source: str) -> str:
    """What of a module's source a fingerprint hashes: its code without comments, layout or
    prose."""
    return code_text(_StripProse().visit(ast.parse(source)))


_CODE: dict[Path, tuple[tuple[int, int], str]] = {}


def _fingerprint_text(path: Path) -> str:
    """`code_fingerprint_text` of the file, remembered until the file changes."""
    stat = path.stat()
    stamp = (stat.st_mtime_ns, stat.st_size)
    known = _CODE.get(path)
    if known is None or known[0] != stamp:
        known = _CODE[path] = (stamp, code_fingerprint_text(path.read_text(encoding="utf-8")))
    return known[1]


# The code a measurement depends on besides the modules an experiment names: what its module
# imports from these places, and what those import in turn. Registry, runner and the store
# are how a measurement is kept, not how it is taken; records are its data types (their
# meaning is versioned by the schema); renderers never run in a worker.
MEASURING = ("experiments/", "profiling/", "attention/", "analytic/", "inputs.py")
NOT_MEASURING = frozenset(
    {"experiments/__init__.py", "experiments/registry.py", "experiments/runner.py"}
)


def _measuring(rel: str) -> bool:
    return rel.startswith(MEASURING) and rel not in NOT_MEASURING


# Measured by every experiment: the worker sets the process up with it (threads, malloc).
ALWAYS_MEASURED = ("profiling/environment.py",)


@functools.cache
def _graph(root: Path) -> SourceGraph:
    return SourceGraph(PACKAGE, root)


def measured_closure(files: Iterable[str], root: Path = PACKAGE_ROOT) -> tuple[str, ...]:
    """`files`, ALWAYS_MEASURED and every measuring module they import, transitively, sorted."""
    graph = _graph(root)
    graph.refresh()
    seen: set[str] = set()
    todo = [*files, *ALWAYS_MEASURED]
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        path = root / rel
        if not path.is_file():
            raise FileNotFoundError(f"fingerprint: {rel} is not a file under {root.name}/")
        seen.add(rel)
        for module in graph.imports(graph.module(rel)):
            found = graph.file(module).relative_to(root).as_posix()
            if found not in seen and _measuring(found):
                todo.append(found)
    return tuple(sorted(seen))


def fingerprint(files: Iterable[str], root: Path = PACKAGE_ROOT, extra: str = "") -> str:
    """Hash of the code (without comments, layout or prose) of `files` (paths relative to the
    package, e.g. `attention/naive.py`), and of `extra` text (an experiment's defaults)."""
    digest = hashlib.sha256(extra.encode() + b"\0")
    for rel in sorted(set(files)):
        path = root / rel
        if not path.is_file():
            raise FileNotFoundError(f"fingerprint: {rel} is not a file under {root.name}/")
        digest.update(rel.encode() + b"\0" + _fingerprint_text(path).encode() + b"\0")
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


def store_key(experiment: str, requested: Mapping[str, Any], code_fingerprint: str) -> str:
    """The key under which a measurement is stored: 16 hex digits."""
    text = f"{experiment}\0{canonical(requested)}\0{code_fingerprint}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]
