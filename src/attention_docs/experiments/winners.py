# "What each trick removed": every implementation the site teaches, profiled once at one
# shape, for the work it makes a forward do (ATen ops at every depth on a CPU, kernels on a
# GPU) and its peak memory. Which implementation is fastest where is not measured here: the
# chapter draws that map from `forward_times`, the one table of forward times, and reads this
# experiment's time column there too.
#
# GPU size (batch 4, 16 heads, seq_len 4096, head_dim 64, bfloat16), estimated on an H200:
# naive + torch.compile and FlexAttention find forward_times' graphs in Inductor's cache (~2-3
# s each: Dynamo still traces), the Triton kernel compiles (~2 s); then per implementation
# one readiness call, one profiled forward and one under the memory profiler, each ≤ ~20 ms
# (naive's N×N scores are 2 GiB in bfloat16; the Python tile loop is skipped above the
# grid's limit, as in forward_times). About 20 s, the process start included.
from __future__ import annotations

import torch

from attention_docs.attention.compiled import KERNEL_PROFILE_OPTIONS
from attention_docs.experiments import forward
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Table
from attention_docs.profiling.memory import peak_memory_bytes, release_cached_memory
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.records.kernels import work_items

MEASURED = (*forward.MEASURED, "records/kernels.py")


def _ready(call) -> str:
    """Call once (compiles, or fails early): "ok", or why it cannot run, in the site's words."""
    try:
        call()
    except Exception as exc:
        reason = forward.unavailable(exc)
        del exc
        release_cached_memory()
        return reason
    return fwd.OK


@experiment(
    "winners_summary",
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
                rows.append((cand.name, cand.trick, None, None, status))
                continue
            run = profile_callable(call, ctx.device, sched=Schedule(1, 1, 1))
            work = sum(item.calls for item in work_items(run.trace, every_depth=True))
            rows.append((cand.name, cand.trick, work, peak_memory_bytes(call, ctx.device), status))
    return Observed(
        tables={
            "summary": Table(
                ("implementation", "trick", "work_per_forward", "peak_bytes", "status"),
                tuple(rows),
                {"peak_bytes": "B"},
            )
        },
        notes=tuple(notes),
        facts={
            "work_counted": "kernels, memcpys and memsets"
            if ctx.device.type == "cuda"
            else "ATen ops at every depth and Inductor's generated kernels, views and "
            "allocations excluded",
            "shape": shape.text(),
        },
    )
