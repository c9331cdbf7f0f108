"""The plan of one call on the lent GPU machine: which request runs first, and how long each
will take. tools/gpu_measure.py runs it; `--plan` prints it.

Order: CORE (the facts most pages need) first, then the other experiments in the order the
chapters first show them, then the rest: a new experiment needs no edit here. Estimate:
seconds on one H200, from the `gpu_work` each experiment declares, or the duration recorded
with a stored GPU entry (a measurement beats a model).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from attention_docs.experiments.registry import REGISTRY, Work

# What the pages need most, in order (issue 18: the heart of the reference post first).
CORE = (
    "machine_ceilings",  # every roofline and "% of peak"
    "forward_times",  # every forward time and speed-up on the site
    "naive_steps",  # the five steps and their timeline
    "sdpa_backends",
    "sdpa_masks",
    "flash_triton_vs_sdpa",
    "flash_tiled_vs_naive",
    "winners_summary",  # the winners map
)

# For an experiment that declares no `gpu_work` (tests/test_gpu_run.py fails until it does):
# a few profiles and timings, no compile.
DEFAULT = Work(profiles=2, timed=5, device_s=5.0)


def work(experiment: str, params: Mapping[str, Any] | None) -> tuple[Work, bool]:
    """(the request's work, whether its experiment declares it)."""
    from attention_docs.experiments import load_all

    load_all()
    declared = REGISTRY.get(experiment)
    if declared is None or declared.gpu_work is None or params is None:
        return DEFAULT, False
    try:
        return declared.gpu_work(params), True
    except (KeyError, TypeError, ValueError):  # parameters renamed since it was written
        return DEFAULT, False


CALL = re.compile(r"""\bmeasure(?:_each_device)?\(\s*["']([A-Za-z0-9_]+)["']""")


def chapter_order(chapters: Path) -> dict[str, list[str]]:
    """Experiment -> the chapter pages that show it, in the order the chapters first do."""
    shown: dict[str, list[str]] = {}
    for page in sorted(chapters.glob("*.md")):
        for name in CALL.findall(page.read_text(encoding="utf-8")):
            pages = shown.setdefault(name, [])
            if page.stem not in pages:
                pages.append(page.stem)
    return shown


def run_order(requests: Iterable[dict], shown: Mapping[str, list[str]]) -> list[dict]:
    """CORE first (in its order), then the chapters' order, then the rest; stable."""
    place = {name: i for i, name in enumerate(shown)}

    def rank(request: dict) -> tuple:
        name = request["experiment"]
        if name in CORE:
            return (0, CORE.index(name))
        if name in place:
            return (1, place[name])
        return (2, 0)

    return sorted(requests, key=rank)


def planned(manifest: Path, chapters: Path) -> tuple[list[dict], dict[str, list[str]]]:
    """The manifest's requests in run order, and the pages of `chapters` that show each
    experiment (`chapter_order`); raises ValueError naming a manifest that cannot be read."""
    from attention_docs.measurements.manifest import read_requests

    shown = chapter_order(chapters)
    return run_order(read_requests(manifest), shown), shown
