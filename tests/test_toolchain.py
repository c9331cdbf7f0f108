# The tools the project runs hold still: every `mkdocs serve` asks for live reload (click
# 8.3 turned it off by default), the lint tools are pinned in constraints.txt and installed
# through it, and a declared floor is never below what pyproject.toml's own config needs.
from __future__ import annotations

import ast
import importlib.util
import tomllib
from importlib.metadata import version

import pytest
from conftest import ROOT
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# The first import-linter release that has each contract type pyproject.toml declares.
CONTRACT_SINCE = {"layers": "1.0", "forbidden": "1.0", "acyclic_siblings": "2.6"}
PINNED = ("ruff", "import-linter")


def constraints() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    return dict(line.split("==") for line in lines if "==" in line)


def requirements(group: str) -> dict[str, Requirement]:
    found = (Requirement(r) for r in PYPROJECT["dependency-groups"][group] if isinstance(r, str))
    return {r.name: r for r in found}


def serve_commands() -> list[tuple[str, list[str]]]:
    """Every list of string literals in the project that holds "serve" and "--dirty": the
    command lines that start `mkdocs serve`."""
    found = []
    for path in (
        "noxfile.py",
        "tools/preview.py",
        "benchmarks/bench_build.py",
        *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("test_*.py")),
    ):
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.List | ast.Call):
                items = node.elts if isinstance(node, ast.List) else node.args
                words = [n.value for n in items if isinstance(n, ast.Constant)]
                if "serve" in words and "--dirty" in words:
                    found.append((path, words))
    return found


def test_every_mkdocs_serve_asks_for_live_reload():
    commands = serve_commands()
    assert {path for path, _ in commands} >= {
        "noxfile.py",
        "tools/preview.py",
        "benchmarks/bench_build.py",
        "tests/test_contributor_loop.py",
    }
    for path, words in commands:
        assert "--livereload" in words, path
    # And mkdocs, as installed, reads the flag as live reload on.
    from mkdocs.__main__ import serve_command

    assert serve_command.make_context("serve", ["--dirty", "--livereload"]).params["livereload"]


@pytest.mark.parametrize("group", ["test", "lint"])
def test_the_import_linter_floor_has_every_contract_type_declared(group):
    needed = max(
        Version(CONTRACT_SINCE[c["type"]]) for c in PYPROJECT["tool"]["importlinter"]["contracts"]
    )
    floors = [
        Version(s.version)
        for s in requirements(group)["import-linter"].specifier
        if s.operator == ">="
    ]
    assert floors and min(floors) >= needed


@pytest.mark.parametrize("name", PINNED)
def test_the_lint_tools_are_pinned_within_their_declared_range_and_installed_so(name):
    pinned = constraints()[name]
    for group in ("test", "lint"):
        assert requirements(group)[name].specifier.contains(pinned), (group, pinned)
    assert version(name) == pinned  # this environment was installed through constraints.txt
    lint = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    session = next(n for n in lint.body if isinstance(n, ast.FunctionDef) and n.name == "lint")
    installs = [
        [a.value for a in call.args if isinstance(a, ast.Constant)]
        for call in ast.walk(session)
        if isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "install"
    ]
    assert installs and all(words[:2] == ["-c", "constraints.txt"] for words in installs)


def test_every_lint_tool_is_pinned_within_its_declared_range():
    """check-jsonschema too: the workflows' schema it carries changes with its releases."""
    pins = constraints()
    for name, requirement in requirements("lint").items():
        assert name in pins and requirement.specifier.contains(pins[name]), name


class Session:
    """What `_store_args` uses of a nox session: its arguments, and `error`, which stops it."""

    def __init__(self, *posargs: str) -> None:
        self.posargs = list(posargs)

    def error(self, message: str):
        raise SystemExit(message)


def store_args(*posargs: str, serve: bool = False):
    spec = importlib.util.spec_from_file_location("project_noxfile", ROOT / "noxfile.py")
    noxfile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noxfile)
    return noxfile._store_args(Session(*posargs), serve=serve)


@pytest.mark.parametrize(
    ("posargs", "message"),
    [
        (("--frozen", "--refresh"), "--frozen and --refresh contradict each other"),
        (("--refresh", "--frozen"), "--refresh and --frozen contradict each other"),
        (("--publish", "--auto"), "--publish and --auto contradict each other"),
        (("--device", "cpu", "--device=cuda"), "--device is given twice (cpu and cuda)"),
        (("--device",), "--device '' is not one of auto, cpu, cuda"),
        (("--fast",), "unknown argument '--fast'"),
    ],
)
def test_nox_docs_refuses_contradictory_arguments_in_one_sentence(posargs, message):
    with pytest.raises(SystemExit) as refused:
        store_args(*posargs)
    assert message in str(refused.value)


def test_nox_serve_refuses_offline_in_one_sentence():
    """An offline site is one to open from disk; serve serves over HTTP."""
    with pytest.raises(SystemExit) as refused:
        store_args("--frozen", "--offline", serve=True)
    assert str(refused.value) == (
        "--offline builds a site to open from disk and nox -s serve serves one over HTTP: "
        "build it with nox -s docs -- --offline"
    )


def test_nox_docs_arguments_that_agree_are_taken():
    env = store_args("--frozen", "--frozen", "--device", "cpu", "--this-machine", "--offline")
    assert env == {
        "ATTENTION_DOCS_MODE": "frozen",
        "ATTENTION_DOCS_DEVICE": "cpu",
        "ATTENTION_DOCS_THIS_MACHINE": "1",
        # mkdocs.yml reads it with !ENV as a YAML boolean: "1" would be refused.
        "ATTENTION_DOCS_OFFLINE": "true",
    }
