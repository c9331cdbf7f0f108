# "Which attention wins where": every implementation on the site, timed over a grid of
# (seq_len, head_dim) and causal or not, on this device. An implementation this device cannot
# run is a row saying why, never an error. A second experiment profiles each one once at a
# single shape to sum up what each trick removed: ops or kernels, memory, time.
from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from attention_docs.attention.naive import naive_attention
from attention_docs.cost import attention_flops
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.kernels import work_items
from attention_docs.profiling.memory import (
    is_out_of_memory,
    peak_memory_bytes,
    release_cached_memory,
)
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.timing import time_callable

Attention = Callable[..., torch.Tensor]
MEASURED = (
    "attention/naive.py",
    "attention/compiled.py",
    "attention/sdpa.py",
    "attention/flex.py",
    "attention/triton_flash.py",
)


@dataclass(frozen=True)
class Candidate:
    """One implementation: how to build it for a causal flag, and what it is."""

    name: str
    build: Callable[[bool], Attention]  # causal -> fn(q, k, v)
    trick: str


# --8<-- [start:candidates]
def candidates(device: torch.device) -> tuple[list[Candidate], list[str]]:
    """Every implementation the site teaches, and notes on those this device cannot run."""
    notes: list[str] = []
    found = [
        Candidate(
            "naive (eager)",
            lambda c: lambda q, k, v: naive_attention(q, k, v, causal=c),
            "none: five ops, the N×N matrix in memory",
        )
    ]
    compiled = _module("compiled", notes)
    if compiled:
        # Each (shape, causal) cell is its own specialised graph, as with static shapes in a
        # model; lift Dynamo's recompile limit so that no cell silently falls back to eager.
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        fn = compiled.compiled_attention()
        found.append(
            Candidate(
                "naive + torch.compile",
                lambda c: lambda q, k, v: fn(q, k, v, causal=c),
                "fusion of the element-wise steps",
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
                    "one fused kernel, no N×N matrix"
                    if backend != "math"
                    else "SDPA's reference decomposition",
                )
            )
    flex = _module("flex", notes)
    if flex:
        flex_fn = flex.compiled_flex_attention()
        masks = functools.cache(lambda n: flex.block_mask_for(flex.causal, n, device))

        def flex_build(c: bool) -> Attention:
            # The block mask is built once per seq_len, outside the timed call, as a model would.
            return lambda q, k, v: flex_fn(q, k, v, block_mask=masks(q.size(-2)) if c else None)

        found.append(
            Candidate(
                "FlexAttention", flex_build, "a kernel generated for the mask; skips masked blocks"
            )
        )
    triton = _module("triton_flash", notes)
    if triton:
        ok, why = triton.triton_available()
        if ok and device.type == "cuda":
            found.append(
                Candidate(
                    "Triton (this site's kernel)",
                    lambda c: lambda q, k, v: triton.triton_flash_attention(q, k, v, causal=c),
                    "tiles and online softmax in one kernel",
                )
            )
        else:
            notes.append(
                f"The Triton kernel is not in the map: {why if not ok else 'it needs a CUDA GPU'}."
            )
    return found, notes


# --8<-- [end:candidates]


def _module(name: str, notes: list[str]):
    try:
        return importlib.import_module(f"attention_docs.attention.{name}")
    except ImportError as exc:
        notes.append(f"attention/{name}.py could not be imported here: {exc}")
        return None


def _try(
    fn: Callable[[], object], device: torch.device, min_run_time: float
) -> tuple[float | None, str]:
    """Median time of `fn`, or None with the reason it cannot run here."""
    try:
        fn()  # the first call compiles or fails; it is not timed
        return time_callable(fn, device, min_run_time=min_run_time).median_us, "ok"
    except Exception as exc:
        if is_out_of_memory(exc):
            release_cached_memory()
            return None, "out of memory"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, f"not available on this device: {first[:160]}"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


@experiment(
    "winners_map",
    summary="Fastest attention implementation over (seq_len, head_dim), causal or not, on this device.",
    measures=MEASURED,
    seq_lens=Param("256,1024", gpu_default="512,2048,8192", help="comma-separated seq_len values"),
    head_dims=Param("64", gpu_default="64,128", help="comma-separated head_dim values"),
    batch_size=Param(1, gpu_default=4, minimum=1),
    num_heads=Param(4, gpu_default=16, minimum=1),
    dtype=Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
)
def winners_map(ctx, *, seq_lens, head_dims, batch_size, num_heads, dtype) -> Observed:
    impls, notes = candidates(ctx.device)
    min_run = 0.05 if ctx.device.type == "cpu" else 0.1
    rows, best = [], []
    for causal in (True, False):
        built = [(c, c.build(causal)) for c in impls]
        for n in _ints(seq_lens):
            for d in _ints(head_dims):
                q, k, v = make_qkv(batch_size, num_heads, n, d, dtype=dtype, device=ctx.device)
                cell = []
                for cand, fn in built:
                    t, status = _try(lambda fn=fn, q=q, k=k, v=v: fn(q, k, v), ctx.device, min_run)
                    flops = attention_flops(batch_size, num_heads, n, d) / (2 if causal else 1)
                    tflops = flops / (t * 1e-6) / 1e12 if t else None
                    rows.append((n, d, causal, cand.name, t, tflops, status))
                    if t is not None:
                        cell.append((t, cand.name))
                cell.sort()
                if cell:
                    runner = cell[1] if len(cell) > 1 else (None, None)
                    margin = runner[0] / cell[0][0] if runner[0] else None
                    best.append((n, d, causal, cell[0][1], cell[0][0], runner[1], margin))
    return Observed(
        tables={
            "times": Table(
                ("seq_len", "head_dim", "causal", "implementation", "time", "TFLOP/s", "status"),
                tuple(rows),
                {"time": "µs"},
            ),
            "winners": Table(
                ("seq_len", "head_dim", "causal", "fastest", "time", "runner-up", "margin"),
                tuple(best),
                {"time": "µs", "margin": "×"},
            ),
        },
        notes=tuple(notes),
        facts={"implementations": [c.name for c in impls]},
    )


@experiment(
    "winners_summary",
    summary="What each trick removed at one shape: ops or kernels per forward, peak memory, time.",
    measures=MEASURED,
    seq_len=Param(1024, gpu_default=4096, minimum=1),
    head_dim=Param(64, minimum=1),
    batch_size=Param(1, gpu_default=4, minimum=1),
    num_heads=Param(4, gpu_default=16, minimum=1),
    dtype=Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
    causal=Param(True),
)
def winners_summary(ctx, *, seq_len, head_dim, batch_size, num_heads, dtype, causal) -> Observed:
    impls, notes = candidates(ctx.device)
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    rows = []
    baseline = None
    for cand in impls:
        fn = cand.build(causal)
        t, status = _try(lambda fn=fn: fn(q, k, v), ctx.device, 0.1)
        if t is None:
            rows.append((cand.name, cand.trick, None, None, None, None, status))
            continue
        run = profile_callable(lambda fn=fn: fn(q, k, v), ctx.device, sched=Schedule(1, 1, 1))
        launched = sum(item.calls for item in work_items(run.trace))
        peak = peak_memory_bytes(lambda fn=fn: fn(q, k, v), ctx.device)
        baseline = baseline or t
        rows.append((cand.name, cand.trick, launched, peak, t, baseline / t, status))
    return Observed(
        tables={
            "summary": Table(
                (
                    "implementation",
                    "what it removes",
                    "ops or kernels",
                    "peak memory",
                    "time",
                    "speed-up vs naive",
                    "status",
                ),
                tuple(rows),
                {"peak memory": "bytes", "time": "µs", "speed-up vs naive": "×"},
            )
        },
        notes=tuple(notes),
    )
