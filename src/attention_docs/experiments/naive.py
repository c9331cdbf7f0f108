# Experiments on naive attention: the five steps profiled one forward at a time. Profiled
# times are for shares and structure; each profiled forward is kept apart (the `per_forward`
# table) so that a share or a "largest step" carries the spread between forwards. The
# unprofiled forward and step times are `forward_times`' (one fact, one number).
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from attention_docs.analytic.cost import step_costs
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.records.trace import Trace, step_span_times

SHAPE_PARAMS = {
    "batch_size": Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    "num_heads": Param(4, gpu_default=16, minimum=1, help="attention heads"),
    "seq_len": Param(256, gpu_default=2048, minimum=1, help="tokens per sequence (N)"),
    "head_dim": Param(64, minimum=1, help="features per head (D)"),
    "dtype": Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
}


def per_forward_table(chrome: Mapping, labels: Iterable[str]) -> Table:
    """Each profiled forward's time per labelled step (kernel time on a GPU, CPU time on a
    CPU), one row per forward: the spread behind a profiled share or sum."""
    labels = list(labels)
    trace = Trace.from_chrome(chrome)
    rows = []
    for i, step in enumerate(trace.steps, start=1):
        times = step_span_times(trace.in_step(step.step), labels)
        rows.append((i, *(round(times[label]["device_us"], 3) for label in labels)))
    return Table(("forward", *labels), tuple(rows), dict.fromkeys(labels, "µs"))


def with_per_forward(observed: Observed, labels: Iterable[str]) -> Observed:
    """`observed` with its `per_forward` table added (from its own Chrome trace)."""
    table = per_forward_table(observed.chrome or {}, labels)
    return replace(observed, tables={**observed.tables, "per_forward": table})


@experiment(
    "naive_steps",
    summary="Naive attention's five steps under torch.profiler: time, FLOPs and bytes per step.",
    measures=("attention/naive.py", "inputs.py", "analytic/cost.py"),
    **SHAPE_PARAMS,
    causal=Param(True, help="mask the future (decoder-style attention)"),
)
def naive_steps(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal) -> Observed:
    # GPU (4×16×2048², bf16): one forward moves ~3 GiB (~1 ms at 4 TB/s); 6 profiled
    # forwards plus the profiler's start: about 2 s.
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    observed = observe_forward(
        lambda: naive_attention(q, k, v, causal=causal),
        ctx,
        labels=STEPS,
        costs=step_costs(batch_size, num_heads, seq_len, head_dim, dtype, causal=causal),
    )
    return with_per_forward(observed, STEPS)
