# The site's forward times, as one fact table. Every page that states how long an
# implementation's forward pass takes at some shape — a chapter's "2.2× faster", chapter 12's
# map, a roofline's "% of peak" — reads it from the one `forward_times` entry of its device,
# so no two places can disagree. This module is the grid (which shapes and implementations
# the entry holds) and the lookups; `experiments/forward.py` measures it. No torch here: the
# renderers read it.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from attention_docs.records.shape import Shape
from attention_docs.records.timing import Timing

# Implementation names, as tables, figures and prose print them.
NAIVE = "naive (eager)"
COMPILED = "naive + torch.compile"
SDPA_MATH = "SDPA math"
SDPA_FLASH = "SDPA flash"
SDPA_EFFICIENT = "SDPA efficient"
SDPA_CUDNN = "SDPA cudnn"
FLEX = "FlexAttention"
TILED = "tiled (Python loop)"
TRITON = "Triton (this site's kernel)"
IMPLEMENTATIONS = (
    NAIVE,
    COMPILED,
    SDPA_MATH,
    SDPA_FLASH,
    SDPA_EFFICIENT,
    SDPA_CUDNN,
    FLEX,
    TILED,
    TRITON,
)
STEP_PREFIX = "step "  # rows "step attention.softmax": one naive step timed on its own

COLUMNS = (
    "implementation",
    "batch_size",
    "num_heads",
    "seq_len",
    "head_dim",
    "dtype",
    "causal",
    "median_us",
    "low_us",
    "high_us",
    "runs",
    "status",
)
OK = "ok"


@dataclass(frozen=True)
class Grid:
    """The shapes the site's forward-time table holds on one kind of device."""

    batch_size: int
    num_heads: int
    dtype: str
    seq_lens: tuple[int, ...]
    head_dims: tuple[int, ...]
    tiled_max_seq_len: int  # the Python tile loop is too slow beyond this

    def shapes(self) -> list[Shape]:
        return [
            Shape(self.batch_size, self.num_heads, n, d, self.dtype, causal)
            for causal in (True, False)
            for d in self.head_dims
            for n in self.seq_lens
        ]


# Every shape another experiment profiles at must be in its device's grid (a test checks
# it): naive_steps, roofline_steps, fusion and flash run at one of these.
GRIDS = {
    "cpu": Grid(1, 4, "float32", (128, 256, 512, 1024), (64, 128), tiled_max_seq_len=1024),
    "cuda": Grid(4, 16, "bfloat16", (512, 1024, 2048, 4096, 8192), (64, 128), 2048),
}


class NotMeasuredError(LookupError):
    """The forward-time table has no row for this implementation at this shape."""


def rows(m) -> list[dict[str, Any]]:
    """The `times` table of a forward_times measurement as records."""
    return m.tables["times"].records()


def _row(m, implementation: str, shape: Shape) -> dict[str, Any]:
    for r in rows(m):
        if r["implementation"] == implementation and Shape.of(r) == shape:
            return r
    raise NotMeasuredError(
        f"forward_times on {m.device_id} has no row for {implementation} at {shape.text()}; "
        f"add the shape to the grid in measurements/forward.py"
    )


def status(m, implementation: str, shape: Shape) -> str:
    """ "ok", or why the implementation did not run at this shape on this device."""
    return _row(m, implementation, shape)["status"]


def timing(m, implementation: str, shape: Shape) -> Timing | None:
    """The implementation's unprofiled forward time at `shape`, or None when it did not run."""
    r = _row(m, implementation, shape)
    if r["status"] != OK:
        return None
    return Timing(
        median_us=r["median_us"],
        iqr_us=0.0,
        runs=r["runs"],
        method=m.facts.get("method", ""),
        rounds_us=(r["low_us"], r["median_us"], r["high_us"]),
    )


def step_timing(m, label: str, shape: Shape) -> Timing | None:
    """One naive step (`attention.softmax`...) timed on its own, without the profiler."""
    return timing(m, STEP_PREFIX + label, shape)
