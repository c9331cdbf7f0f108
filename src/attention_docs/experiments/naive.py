# Experiments on naive attention: the five steps profiled one forward at a time.
from __future__ import annotations

from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.cost import step_costs
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv

SHAPE_PARAMS = {
    "batch_size": Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    "num_heads": Param(4, gpu_default=16, minimum=1, help="attention heads"),
    "seq_len": Param(256, gpu_default=2048, minimum=1, help="tokens per sequence (N)"),
    "head_dim": Param(64, minimum=1, help="features per head (D)"),
    "dtype": Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
}


@experiment(
    "naive_steps",
    summary="Naive attention's five steps under torch.profiler: time, FLOPs and bytes per step.",
    measures=("attention/naive.py", "inputs.py", "cost.py"),
    **SHAPE_PARAMS,
    causal=Param(True, help="mask the future (decoder-style attention)"),
)
def naive_steps(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    return observe_forward(
        lambda: naive_attention(q, k, v, causal=causal),
        ctx,
        labels=STEPS,
        costs=step_costs(batch_size, num_heads, seq_len, head_dim, dtype, causal=causal),
    )
