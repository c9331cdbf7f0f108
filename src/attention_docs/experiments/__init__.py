# One function per question a chapter asks. Modules listed here register their experiments
# on import; `load_all` imports them (torch included) only when an experiment is needed.
from __future__ import annotations

import importlib
import os

MODULES = (
    "forward",
    "naive",
    "naive_variants",
    "memory",
    "wall",
    "sdpa",
    "backward",
    "primer",
    "cost_model",
    "flash",
    "decode",
    "fusion",
    "flex",
    "winners",
    "method",
)


def load_all() -> None:
    """Import every experiment module, plus any named in ATTENTION_DOCS_EXPERIMENTS.

    ATTENTION_DOCS_EXPERIMENTS (comma-separated module names) lets tests and out-of-tree
    chapters register experiments that the worker process can run too.
    """
    for module in MODULES:
        importlib.import_module(f"attention_docs.experiments.{module}")
    for module in filter(None, os.environ.get("ATTENTION_DOCS_EXPERIMENTS", "").split(",")):
        importlib.import_module(module.strip())
