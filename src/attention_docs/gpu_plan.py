"""The plan of one call on the lent GPU machine: which request runs first, and how long each
will take. tools/gpu_measure.py runs it; `--plan` prints it.

Order: what the pages need most first (CORE: the shared facts, the naive steps and their
timeline, the SDPA backends, FlashAttention and Triton, the winners map), then every other
experiment in the order the chapters first show it (their `measure("name")` calls), then
anything no chapter shows. A new experiment needs no edit here to be placed.

Estimate: seconds on one H200 with 16 cores, counted from each request's work at the
parameters it gets on the GPU (WORK below, one function per experiment): the worker's start,
cold and warm compiles, FlexAttention and Triton compiles, profiler sessions, callables
timed in interleaved rounds, and the device's own time where forwards are large. The
constants come from the sizing notes at the top of each experiment module. Where the store
holds a GPU entry of the request, its recorded duration is used instead (a measurement
beats a model). An experiment missing from WORK gets DEFAULT, and tests/test_gpu_run.py
fails until it has its own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

# Seconds on the lent machine (one H200, 16 cores), from the experiments' sizing notes.
START_S = 6.0  # a worker: fork, CUDA context, the measured code imported afresh
COMPILE_S = 15.0  # one torch.compile graph, cold (Dynamo, Inductor, Triton code generation)
WARM_COMPILE_S = 3.0  # the same graph found in Inductor's on-disk cache (Dynamo still traces)
FLEX_COMPILE_S = 10.0  # one FlexAttention mod: a kernel of its own
TRITON_S = 30.0  # the site's Triton kernel, first compile in a process (Triton's start too)
TRITON_SPEC_S = 8.0  # each further specialisation (dtype, head_dim, causal)
PROFILE_S = 0.5  # one profiler session: start, warm-up and active steps, trace processing
TIMED_S = (
    0.2  # one callable at one shape: 20 rounds of 3 CUDA-event runs, each after a warm-up call
)


@dataclass(frozen=True)
class Work:
    """What one request does on the GPU, counted from its parameters."""

    compiles: int = 0
    warm_compiles: int = 0
    flex_compiles: int = 0
    triton: int = 0  # 1 when the request compiles the Triton kernel
    triton_specs: int = 0  # further specialisations of it
    profiles: int = 0
    timed: int = 0
    device_s: float = 0.0  # the forwards' own time, where they are large (bytes, FLOPs)

    @property
    def seconds(self) -> float:
        return (
            START_S
            + self.compiles * COMPILE_S
            + self.warm_compiles * WARM_COMPILE_S
            + self.flex_compiles * FLEX_COMPILE_S
            + self.triton * TRITON_S
            + self.triton_specs * TRITON_SPEC_S
            + self.profiles * PROFILE_S
            + self.timed * TIMED_S
            + self.device_s
        )


def _doublings(low: float, high: float) -> int:
    """How many sizes a sweep from `low` to `high` by doubling visits."""
    return int(math.log2(max(high, low) / max(low, 1))) + 1 if low > 0 else 1


def _count(text: Any) -> int:
    return len([t for t in str(text).split(",") if t.strip()])


def _forward_times(p: Mapping[str, Any]) -> Work:
    from attention_docs.measurements.forward import GRIDS

    shapes = GRIDS["cuda"].shapes()
    if p.get("tiny"):
        shapes = shapes[:2]
    groups = len({(s.dtype, s.causal, s.head_dim) for s in shapes})
    # Nine implementations and the five steps alone per shape; per (dtype, causal,
    # head_dim) one compiled graph, one FlexAttention kernel, one Triton specialisation.
    return Work(
        compiles=groups,
        flex_compiles=groups,
        triton=1,
        triton_specs=groups - 1,
        timed=14 * len(shapes),
        device_s=0.25 * len(shapes),
    )


def _wall_shapes(p: Mapping[str, Any]) -> int:
    from attention_docs.experiments.wall import sweep_shapes

    return len({s for shapes in sweep_shapes(dict(p)).values() for s in shapes})


def _decode_points(p: Mapping[str, Any]) -> int:
    from attention_docs.experiments.decode import step_points

    return len(step_points(p))


# One function per experiment: its parameters on the GPU -> its work.
WORK: dict[str, Callable[[Mapping[str, Any]], Work]] = {
    "machine_ceilings": lambda p: Work(timed=_count(p["dtypes"]) + 1, device_s=2.0),
    "forward_times": _forward_times,
    # the method page: the forward and the five steps alone and in sequence (no threads on a GPU)
    "timing_method": lambda p: Work(timed=11, device_s=1.0),
    # chapter 01
    "op_size_sweep": lambda p: Work(timed=p["max_log2"] - p["min_log2"] + 1, device_s=2.0),
    "profile_first_calls": lambda p: Work(profiles=2, device_s=0.05 * p["calls"]),
    "profile_overhead": lambda p: Work(profiles=2, timed=2, device_s=0.05 * p["iterations"]),
    # chapter 02
    "naive_steps": lambda p: Work(profiles=1, timed=1),
    "naive_step_shares": lambda p: Work(profiles=_count(p["shapes"]), device_s=1.0),
    "naive_mask_variants": lambda p: Work(profiles=4, timed=4),
    "naive_dtypes": lambda p: Work(profiles=3, timed=3, device_s=1.0),
    # chapter 04
    "memory_timeline": lambda p: Work(profiles=1, device_s=0.5),
    "memory_peak": lambda p: Work(device_s=2.0),
    # chapter 05
    "wall": lambda p: Work(profiles=_wall_shapes(p), timed=_wall_shapes(p), device_s=4.0),
    # chapter 06: compiles dominate; the later requests find kernels in Inductor's cache
    "fusion_kernels": lambda p: Work(compiles=1, warm_compiles=2, profiles=2),
    "fusion_recompile": lambda p: Work(warm_compiles=2, device_s=5.0),
    # chapter 07
    "sdpa_backends": lambda p: Work(profiles=6),
    "sdpa_masks": lambda p: Work(profiles=4, timed=4, device_s=1.0),
    "sdpa_why": lambda p: Work(profiles=8, device_s=1.0),
    # chapter 08
    "flash_tiled_vs_naive": lambda p: Work(profiles=3, device_s=3.0),
    "flash_block_sweep": lambda p: Work(timed=_count(p["blocks"]), device_s=4.0),
    "flash_triton_vs_sdpa": lambda p: Work(triton=1, timed=5 * 5, device_s=3.0),
    # chapter 09
    "backward_compare": lambda p: Work(profiles=5, timed=10, device_s=4.0),
    "backward_saved_tensors": lambda p: Work(device_s=3.0),
    # chapter 10: every mod is a kernel of its own
    "flex_masks": lambda p: Work(flex_compiles=4, timed=12, device_s=5.0),
    "flex_block_mask_cost": lambda p: Work(device_s=3.0),
    # chapter 11: bytes and launches, no compiles
    "decode_steps": lambda p: Work(timed=_decode_points(p), device_s=0.3 * _decode_points(p)),
    "decode_prefill_vs_decode": lambda p: Work(timed=2, device_s=1.5),
    # chapter 12: forward_times' graphs and Triton kernel, from the on-disk caches
    "winners_summary": lambda p: Work(warm_compiles=3, profiles=9, device_s=1.0),
    # a backward graph per dtype for the compiled and FlexAttention paths
    "train_times": lambda p: Work(
        compiles=_count(p["dtypes"]),
        flex_compiles=_count(p["dtypes"]),
        timed=7 * _count(p["dtypes"]) * _count(p["seq_lens"]),
        device_s=1.0 * _count(p["dtypes"]) * _count(p["seq_lens"]),
    ),
}

# For an experiment WORK does not know yet: a few profiles and timings, no compile.
DEFAULT = Work(profiles=2, timed=5, device_s=5.0)


def work(experiment: str, params: Mapping[str, Any] | None) -> tuple[Work, bool]:
    """(the request's work, whether WORK knows the experiment)."""
    fn = WORK.get(experiment)
    if fn is None or params is None:
        return DEFAULT, False
    try:
        return fn(params), True
    except (KeyError, TypeError, ValueError):  # parameters renamed since WORK was written
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
