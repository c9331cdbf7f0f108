# `forward_times`: the one experiment that times attention forward passes without the
# profiler. Every implementation the site teaches, at every shape of the device's grid
# (measurements/forward.py), with the implementations interleaved round by round so that a
# slow moment of the machine hurts all of them alike; plus each naive step timed alone.
# Chapters read their forward times and speed-ups from this entry and never time a forward
# pass themselves: one fact, one number.
from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from attention_docs.attention.naive import naive_attention, naive_step_calls
from attention_docs.experiments.registry import Observed, Param, experiment, forward_grid_work
from attention_docs.inputs import make_qkv
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Table
from attention_docs.profiling.memory import is_out_of_memory, release_cached_memory
from attention_docs.profiling.timing import StepSequence, time_callables
from attention_docs.records.timing import Timing

Attention = Callable[..., torch.Tensor]
# Seconds of timing per implementation (and per naive step) at each shape: with 20 rounds,
# a few calls a round at the chapters' shapes, for intervals a tenth of the time wide.
BUDGET_S = 0.2
MEASURED = (
    "attention/naive.py",
    "attention/compiled.py",
    "attention/sdpa.py",
    "attention/flex.py",
    "attention/tiled.py",
    "attention/triton_flash.py",
    "inputs.py",
    "measurements/forward.py",
)


@dataclass(frozen=True)
class Candidate:
    """One implementation: its name and how to build it for a causal flag. (What its trick
    is, in words, is the renderers' to say: render/words.py.)"""

    name: str
    build: Callable[[bool], Attention]  # causal -> fn(q, k, v)
    # (q, k, v, causal) -> a zero-argument call, for implementations with per-call set-up
    # (checks, configuration) that must stay out of the timed region.
    prepare: Callable[..., Callable[[], torch.Tensor]] | None = None


# --8<-- [start:candidates]
def candidates(device: torch.device) -> tuple[list[Candidate], list[str]]:
    """Every implementation the site teaches, and notes on those this device cannot run."""
    notes: list[str] = []
    found = [
        Candidate(
            fwd.NAIVE,
            lambda c: lambda q, k, v: naive_attention(q, k, v, causal=c),
        )
    ]
    compiled = _module("compiled", notes)
    if compiled:
        # One graph with symbolic sizes serves every shape of the grid (a static graph per
        # shape would cost a compile per cell); the causal flag is a constant: two graphs.
        fn = compiled.compiled_attention(dynamic=True)
        found.append(
            Candidate(
                fwd.COMPILED,
                lambda c: lambda q, k, v: fn(q, k, v, causal=c),
            )
        )
    sdpa = _module("sdpa", notes)
    if sdpa:
        for backend in sdpa.BACKENDS:
            found.append(
                Candidate(
                    f"SDPA {backend}",
                    lambda c, b=backend: (
                        lambda q, k, v: sdpa.sdpa_attention(q, k, v, causal=c, backend=b)
                    ),
                )
            )
    flex = _module("flex", notes)
    if flex:
        # Shape-generic kernels: one compile per mask and head_dim, not one per grid cell.
        flex_fn = flex.compiled_flex_attention(dynamic=True)
        masks = functools.cache(lambda n: flex.block_mask_for(flex.causal, n, device))

        def flex_build(c: bool) -> Attention:
            # The block mask is built once per seq_len, outside the timed call, as a model would.
            return lambda q, k, v: flex_fn(q, k, v, block_mask=masks(q.size(-2)) if c else None)

        found.append(
            Candidate(
                fwd.FLEX,
                flex_build,
            )
        )
    tiled = _module("tiled", notes)
    if tiled:
        found.append(
            Candidate(
                fwd.TILED,
                lambda c: lambda q, k, v: tiled.tiled_attention(q, k, v, causal=c),
            )
        )
    triton = _module("triton_flash", notes)
    if triton:
        ok, why = triton.triton_available()
        if ok and device.type == "cuda":
            found.append(
                Candidate(
                    fwd.TRITON,
                    lambda c: lambda q, k, v: triton.triton_flash_attention(q, k, v, causal=c),
                    prepare=lambda q, k, v, c: triton.prepare_triton_flash(q, k, v, causal=c),
                )
            )
        else:
            notes.append(
                f"The Triton kernel is not timed: {why if not ok else 'it needs a CUDA GPU'}."
            )
    return found, notes


# --8<-- [end:candidates]


def _module(name: str, notes: list[str]):
    try:
        return importlib.import_module(f"attention_docs.attention.{name}")
    except ImportError as exc:
        notes.append(f"attention/{name}.py could not be imported here: {exc}")
        return None


def unavailable(exc: BaseException) -> str:
    """Why an implementation did not run, in the site's words (torch's message shortened)."""
    if is_out_of_memory(exc):
        return "out of memory"
    text = str(exc).strip()
    if "No available kernel" in text or "No viable backend" in text:
        return "not available on this device for these inputs"
    first = text.splitlines()[0] if text else type(exc).__name__
    return f"not available on this device: {first[:120]}"


def _ready(fn: Callable[[], object]) -> str:
    """Call `fn` once (compiles, fails early); "ok" or the reason it cannot run."""
    try:
        fn()
    except Exception as exc:
        reason = unavailable(exc)
        if reason == "out of memory":
            del exc
            release_cached_memory()
        return reason
    return fwd.OK


def _row(name: str, shape: fwd.Shape, t: Timing | None, status: str) -> tuple:
    return (name, *(getattr(shape, c) for c in fwd.SHAPE_COLUMNS), t, status)


def time_shape(
    impls: list[Candidate],
    shape: fwd.Shape,
    device: torch.device,
    *,
    grid: fwd.Grid,
    min_run: float,
) -> list[tuple]:
    """Every implementation (and each naive step) at one shape, interleaved."""
    q, k, v = make_qkv(
        shape.batch_size,
        shape.num_heads,
        shape.seq_len,
        shape.head_dim,
        dtype=shape.dtype,
        device=device,
    )
    fns: dict[str, Callable[[], object]] = {}
    statuses: dict[str, str] = {}
    for cand in impls:
        if cand.name == fwd.TILED and shape.seq_len > grid.tiled_max_seq_len:
            statuses[cand.name] = (
                f"not timed above seq_len {grid.tiled_max_seq_len}: the Python loop is too slow"
            )
            continue
        try:
            fn = (
                cand.prepare(q, k, v, shape.causal)
                if cand.prepare
                else functools.partial(cand.build(shape.causal), q, k, v)
            )
        except Exception as exc:
            statuses[cand.name] = unavailable(exc)
            continue
        statuses[cand.name] = _ready(fn)
        if statuses[cand.name] == fwd.OK:
            fns[cand.name] = fn
    if statuses.get(fwd.NAIVE) == fwd.OK and grid.times_steps(shape):
        # The five steps one after another, as the forward runs them: each step's time is
        # its time in the forward (profiling/timing.py says why not each alone).
        steps = naive_step_calls(q, k, v, causal=shape.causal)
        fns["naive steps"] = StepSequence({fwd.STEP_PREFIX + s: c for s, c in steps.items()})
        statuses.update(dict.fromkeys(fns["naive steps"].steps, fwd.OK))
    try:
        timings = time_callables(fns, device, min_run_time=min_run, cuda_runs=30)
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        del exc
        release_cached_memory()
        timings = {}
        statuses = {n: ("out of memory" if s == fwd.OK else s) for n, s in statuses.items()}
    return [_row(name, shape, timings.get(name), statuses[name]) for name in statuses]


@experiment(
    "forward_times",
    # Nine implementations and the five steps alone per shape; per (dtype, causal, head_dim)
    # one compiled graph, one FlexAttention kernel, one Triton specialisation.
    gpu_work=lambda p: forward_grid_work(
        fwd.GRIDS["cuda"].shapes()[: 2 if p.get("tiny") else None]
    ),
    summary="Every implementation's unprofiled forward time over the device's grid of shapes, "
    "interleaved rounds; each naive step timed alone. The one source of forward times.",
    measures=MEASURED,
    tiny=Param(False, help="two shapes only, at 512 tokens (for tests and rehearsals)"),
)
def forward_times(ctx, *, tiny) -> Observed:
    grid = fwd.GRIDS[ctx.device.type]
    shapes = grid.shapes()
    if tiny:  # the shape the chapters profile at on a CPU, masked and not: a notebook
        # measured at `tiny` still shows its chapter's shape (book.for_notebook)
        shapes = [s for s in grid.teaching.shapes() if s.seq_len == 512 and s.head_dim == 64]
    impls, notes = candidates(ctx.device)
    min_run = BUDGET_S
    rows = []
    for shape in shapes:
        rows.extend(time_shape(impls, shape, ctx.device, grid=grid, min_run=min_run))
    return Observed(
        tables={"times": Table(fwd.COLUMNS, tuple(rows), {"time": "µs"})},
        notes=tuple(notes),
        facts={"implementations": [c.name for c in impls]},
    )
