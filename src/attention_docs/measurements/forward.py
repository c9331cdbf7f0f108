# The site's forward times, as one fact table. Every page that states how long an
# implementation's forward pass takes at some shape — a chapter's "2.2× faster", chapter 12's
# map, a roofline's "% of peak" — reads it from the one `forward_times` entry of its device,
# so no two places can disagree. This module is the grid (which shapes and implementations
# the entry holds) and the lookups; `experiments/forward.py` measures it. No torch here: the
# renderers read it.
from __future__ import annotations

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

# `time` holds a Timing (median and every round), or None when the implementation did not
# run; `status` says why not.
COLUMNS = (
    "implementation",
    "batch_size",
    "num_heads",
    "seq_len",
    "head_dim",
    "dtype",
    "causal",
    "time",
    "status",
)
SHAPE_COLUMNS = COLUMNS[1:7]
OK = "ok"


@dataclass(frozen=True)
class Slice:
    """A block of the grid: every combination of its dtypes, seq_lens, head_dims and masks
    at one batch_size and num_heads. `steps`: each naive step is also timed alone there."""

    batch_size: int
    num_heads: int
    dtypes: tuple[str, ...]
    seq_lens: tuple[int, ...]
    head_dims: tuple[int, ...]
    causal: tuple[bool, ...] = (True, False)
    steps: bool = True

    def shapes(self) -> list[Shape]:
        return [
            Shape(self.batch_size, self.num_heads, n, d, dtype, causal)
            for dtype in self.dtypes
            for causal in self.causal
            for d in self.head_dims
            for n in self.seq_lens
        ]


@dataclass(frozen=True)
class Grid:
    """The shapes the site's forward-time table holds on one kind of device: the teaching
    slice every chapter profiles at, and the wider slice of the map (more heads, both
    dtypes). A shape in two slices is measured once."""

    slices: tuple[Slice, ...]
    tiled_max_seq_len: int  # the Python tile loop is too slow beyond this

    @property
    def teaching(self) -> Slice:
        """The first slice: the shapes the chapters profile at."""
        return self.slices[0]

    def shapes(self) -> list[Shape]:
        return list(dict.fromkeys(s for part in self.slices for s in part.shapes()))

    def times_steps(self, shape: Shape) -> bool:
        """Whether each naive step is timed alone at `shape`."""
        return any(part.steps and shape in part.shapes() for part in self.slices)


# Every shape another experiment profiles at must be in its device's grid (a test checks
# it): naive_steps, profile_first_calls, fusion and flash run at one of the teaching shapes.
# The CPU's map slice is small on purpose: 16 heads in two dtypes at two lengths keep the
# cold CPU build within its budget.
GRIDS = {
    "cpu": Grid(
        (
            Slice(1, 4, ("float32",), (128, 256, 512, 1024), (64, 128)),
            Slice(1, 16, ("float32", "bfloat16"), (512, 1024), (128,), (True,), steps=False),
        ),
        tiled_max_seq_len=1024,
    ),
    "cuda": Grid(
        (
            Slice(4, 16, ("bfloat16",), (512, 1024, 2048, 4096, 8192), (64, 128)),
            Slice(4, 16, ("float32",), (1024, 4096), (128,), (True,), steps=False),
        ),
        tiled_max_seq_len=2048,
    ),
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
    return r["time"]


def step_timing(m, label: str, shape: Shape) -> Timing | None:
    """One naive step (`attention.softmax`...) timed on its own, without the profiler."""
    return timing(m, STEP_PREFIX + label, shape)
