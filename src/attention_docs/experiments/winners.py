# Chapter 12's own measurements: `train_times`, the map's training view (its forward view is
# `forward_times`', its decode cell `decode_steps`'), never at `backward_compare`'s shape
# (chapter 09 owns that one); `winners_summary`, each implementation profiled once for the
# work and the peak memory of a forward.
from __future__ import annotations

import functools

import torch

from attention_docs.attention.backward import forward_backward
from attention_docs.attention.compiled import KERNEL_PROFILE_OPTIONS
from attention_docs.experiments import forward
from attention_docs.experiments.registry import Observed, Param, Work, count_items, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Table
from attention_docs.profiling.memory import peak_memory_bytes, release_cached_memory
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.timing import time_callables
from attention_docs.records.kernels import work_items
from attention_docs.records.shape import Shape

MEASURED = (*forward.MEASURED, "records/kernels.py")


def _ready(call, *, training: bool = False) -> str:
    """Call once (compiles, or fails early): "ok", or why it cannot run, in the site's words
    (a training step that fails for another reason than availability has no backward)."""
    try:
        call()
    except Exception as exc:
        reason = forward.unavailable(exc)
        del exc
        release_cached_memory()
        if training and not reason.startswith("not available"):
            return f"no backward: {reason}"
        return reason
    return fwd.OK


@experiment(
    "winners_summary",
    # forward_times' graphs and Triton kernel, from the on-disk caches.
    gpu_work=lambda p: Work(warm_compiles=3, profiles=9, device_s=1.0),
    summary="What each trick removed at one shape: the work a forward does (ops at every depth, "
    "or kernels) and its peak memory.",
    measures=MEASURED,
    seq_len=Param(1024, gpu_default=4096, minimum=1),
    head_dim=Param(64, minimum=1),
    batch_size=Param(1, gpu_default=4, minimum=1),
    num_heads=Param(4, gpu_default=16, minimum=1),
    dtype=Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
    causal=Param(True),
)
def winners_summary(ctx, *, seq_len, head_dim, batch_size, num_heads, dtype, causal) -> Observed:
    shape = fwd.Shape(batch_size, num_heads, seq_len, head_dim, dtype, causal)
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    rows = []
    # Inductor's generated C++ kernels appear in a CPU profile only with kernel profiling on;
    # without it a compiled forward would count as no work at all. The option applies when a
    # graph is compiled: forget graphs this process compiled without it. (A GPU profile shows
    # Triton kernels by name anyway; leaving the option off there keeps Inductor's cache keys
    # those of forward_times' compiles, so they are cache hits.)
    profiled = ctx.device.type == "cpu"
    if profiled:
        torch._dynamo.reset()
    with torch._inductor.config.patch(KERNEL_PROFILE_OPTIONS if profiled else {}):
        impls, notes = forward.candidates(ctx.device)
        for cand in impls:
            fn = cand.build(causal)

            def call(fn=fn):
                return fn(q, k, v)

            limit = fwd.GRIDS[ctx.device.type].tiled_max_seq_len
            if cand.name == fwd.TILED and seq_len > limit:
                # As in forward_times: thousands of small ops, seconds per forward.
                status = f"not run above seq_len {limit}: the Python loop is too slow"
            else:
                status = _ready(call)
            if status != fwd.OK:
                rows.append((cand.name, None, None, status))
                continue
            run = profile_callable(call, ctx.device, sched=Schedule(1, 1, 1))
            work = sum(item.calls for item in work_items(run.trace, every_depth=True))
            rows.append((cand.name, work, peak_memory_bytes(call, ctx.device), status))
    return Observed(
        tables={
            "summary": Table(
                ("implementation", "work_per_forward", "peak_bytes", "status"),
                tuple(rows),
                {"peak_bytes": "B"},
            )
        },
        notes=tuple(notes),
        facts={"shape": shape.text()},
    )


def train_shapes(params) -> list[Shape]:
    """The training view's shapes: the map slice's batch, heads and head_dim, causal, at each
    of the requested sequence lengths and dtypes."""
    seq_lens = [int(n) for n in str(params["seq_lens"]).split(",")]
    dtypes = [d.strip() for d in str(params["dtypes"]).split(",")]
    return [
        Shape(params["batch_size"], params["num_heads"], n, params["head_dim"], dtype, True)
        for dtype in dtypes
        for n in seq_lens
    ]


_MAP = fwd.GRIDS["cpu"].slices[1], fwd.GRIDS["cuda"].slices[1]


@experiment(
    "train_times",
    # A backward graph per dtype for the compiled and FlexAttention paths.
    gpu_work=lambda p: Work(
        compiles=(d := count_items(p["dtypes"])),
        flex_compiles=d,
        timed=7 * d * (s := count_items(p["seq_lens"])),
        device_s=1.0 * d * s,
    ),
    summary="One training step (forward + backward to q, k, v) of every implementation that "
    "has a backward, at the map slice's shapes, unprofiled, in interleaved rounds.",
    measures=(*forward.MEASURED, "attention/backward.py"),
    estimate_bytes=lambda p: (
        6 * max(s.batch_size * s.num_heads * s.seq_len**2 * 4 for s in train_shapes(p))
    ),
    batch_size=Param(_MAP[0].batch_size, gpu_default=_MAP[1].batch_size, minimum=1),
    num_heads=Param(_MAP[0].num_heads, gpu_default=_MAP[1].num_heads, minimum=1),
    head_dim=Param(_MAP[0].head_dims[0], gpu_default=_MAP[1].head_dims[0], minimum=1),
    # On a GPU not 4096: backward_compare owns the training passes at the forecast shape
    # (4 × 16 × 4096 × 128, bfloat16); one quantity, one experiment.
    seq_lens=Param("512", gpu_default="1024", help="comma-separated sequence lengths"),
    dtypes=Param("float32,bfloat16", help="comma-separated dtypes"),
)
def train_times(ctx, **params) -> Observed:
    impls, notes = forward.candidates(ctx.device)
    rows = []
    for shape in train_shapes(params):
        q, k, v = (
            t.requires_grad_() for t in make_qkv(*shape.dims, dtype=shape.dtype, device=ctx.device)
        )
        grad_out = make_qkv(*shape.dims, dtype=shape.dtype, device=ctx.device, seed=1)[0]
        calls, statuses = {}, {}
        for cand in impls:
            if cand.name == fwd.TILED:  # its backward is autograd through thousands of tiny ops
                statuses[cand.name] = "not timed: the Python loop's backward takes seconds"
                continue
            call = functools.partial(forward_backward, cand.build(shape.causal), q, k, v, grad_out)
            statuses[cand.name] = _ready(call, training=True)
            if statuses[cand.name] == fwd.OK:
                calls[cand.name] = call
        timings = time_callables(calls, ctx.device, min_run_time=0.1, cuda_runs=30)
        for name, status in statuses.items():
            dims = tuple(getattr(shape, c) for c in fwd.SHAPE_COLUMNS)
            rows.append((name, *dims, timings.get(name), status))
    return Observed(
        tables={"times": Table(fwd.COLUMNS, tuple(rows), {"time": "µs"})},
        notes=tuple(notes),
        facts={},
    )
