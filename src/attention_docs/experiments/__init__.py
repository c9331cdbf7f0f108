# One function per question a chapter asks. Every public module of this package registers its
# experiments on import (`@experiment`); `load_all` finds them with pkgutil — a new chapter's
# module needs no list edited — and imports them (torch included) only when an experiment is
# needed. Private modules (`_sweep.py`) and the machinery (registry, runner) declare none.
from __future__ import annotations

import importlib
import os
import pkgutil

NOT_EXPERIMENTS = frozenset({"registry", "runner"})


def modules() -> tuple[str, ...]:
    """The experiment modules of this package, by name, in alphabetical order (a fixed order:
    the registry, and so `list`, reads the same on every machine)."""
    return tuple(
        sorted(
            info.name
            for info in pkgutil.iter_modules(__path__)
            if not info.name.startswith("_") and info.name not in NOT_EXPERIMENTS
        )
    )


def load_all() -> None:
    """Import every experiment module, plus any named in ATTENTION_DOCS_EXPERIMENTS.

    ATTENTION_DOCS_EXPERIMENTS (comma-separated module names) lets tests and out-of-tree
    chapters register experiments that the worker process can run too.
    """
    for module in modules():
        importlib.import_module(f"attention_docs.experiments.{module}")
    for module in filter(None, os.environ.get("ATTENTION_DOCS_EXPERIMENTS", "").split(",")):
        importlib.import_module(module.strip())
