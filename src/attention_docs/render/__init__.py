# Findings and Measurements -> Markdown / SVG. Pure functions: they return strings, never
# print or save, never import torch (an import-linter contract), and never decide: verdicts
# come from attention_docs.findings, words from render.words. Chapters call one module per
# subject, `render.wall.sweep_table(...)`; a module is found by its file and imported on
# first use, so a new chapter's renderers need no list edited (nor a restart of `serve`).
from __future__ import annotations

import importlib
import pkgutil
import types


def __getattr__(name: str) -> types.ModuleType:
    if name.startswith("_") or name not in {m.name for m in pkgutil.iter_modules(__path__)}:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")
