"""One word, one meaning: `device` is a `torch.device`, and only where torch is run.

A device is named in four ways, and each has its own name:

- `device_setting`: what a reader asks for (auto, cpu or cuda: `--device`, mkdocs.yml);
- `device_kind`: what that is on this machine (cpu or cuda);
- `device_id`: the id entries and facts are stored under (`cpu-amd-epyc-…`, `cuda-h200`);
- `device_label`: how a caption says it ("NVIDIA H200").

Read from the source with `ast`: outside the layers that run torch (attention/, profiling/,
experiments/, inputs.py), no parameter, field or assigned name is a bare `device`. Two exceptions, each
with its reason below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "attention_docs"
TOOLS = PACKAGE.parent.parent / "tools"
RUNS_TORCH = ("attention", "profiling", "experiments", "inputs.py")
ALLOWED = {
    # The mkdocs.yml option a reader sets (`device: cuda`): its name is the reader's word.
    ("mkdocs_plugin.py", "AttentionDocsConfig"),
    # The device as described (a DeviceInfo: kind, name, memory), under the key every stored
    # entry's provenance holds it: renaming the field would rename that key in the store.
    ("measurements/schema.py", "Provenance"),
    # A dispatch platform's kind; the file is part of the experiments' fingerprints, so a
    # rename would change the store's keys for experiments whose code did not change.
    ("analytic/sdpa_dispatch.py", "Platform"),
}


def bare_device_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, where) of every binding named `device` in `tree`: a parameter, a class field,
    an assigned or loop name."""
    found = []

    def visit(node: ast.AST, owner: str, line: int) -> None:
        line = getattr(node, "lineno", line)  # a comprehension has no line of its own
        if isinstance(node, ast.ClassDef):
            owner = node.name
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            a = node.args
            for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                if arg is not None and arg.arg == "device":
                    found.append((node.lineno, f"a parameter of {getattr(node, 'name', 'lambda')}"))
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(
            node, ast.AnnAssign | ast.AugAssign | ast.For | ast.comprehension | ast.NamedExpr
        ):
            targets = [node.target]
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name) and name.id == "device":
                    found.append((line, f"a name bound in {owner}"))
        for child in ast.iter_child_nodes(node):
            visit(child, owner, line)

    visit(tree, "the module", 0)
    return found


def _checked() -> list[Path]:
    files = [p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in RUNS_TORCH]
    return sorted(files) + sorted(TOOLS.glob("*.py"))


def _owner_allowed(path: Path, tree: ast.AST, line: int) -> bool:
    relative = path.relative_to(PACKAGE).as_posix() if path.is_relative_to(PACKAGE) else ""
    return any(
        isinstance(node, ast.ClassDef)
        and node.lineno <= line <= (node.end_lineno or 0)
        and (relative, node.name) in ALLOWED
        for node in ast.walk(tree)
    )


@pytest.mark.parametrize("path", _checked(), ids=lambda p: p.name)
def test_no_bare_device_outside_the_layers_that_run_torch(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bare = [
        f"{path.name}:{line}: {where}"
        for line, where in bare_device_names(tree)
        if not _owner_allowed(path, tree, line)
    ]
    assert not bare, "name it device_setting, device_kind, device_id or device_label: " + "; ".join(
        bare
    )


def test_the_check_sees_every_kind_of_binding():
    source = """
def f(device: str): ...
class C:
    device: str
for device in ids: ...
a, device = 1, 2
lambda device: device
[x for device in ids]
"""
    lines = [line for line, _ in bare_device_names(ast.parse(source))]
    assert lines == [2, 4, 5, 6, 7, 8]
    assert bare_device_names(ast.parse("device_id = q.device_id\nx = ctx.device")) == []


def test_the_exceptions_still_exist():
    """An exception whose class is gone would excuse nothing: drop it from ALLOWED."""
    for relative, owner in ALLOWED:
        tree = ast.parse((PACKAGE / relative).read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.ClassDef) and n.name == owner for n in ast.walk(tree))
