# Experiments for "Naive attention, deeper": four ways to apply the causal mask, fp32 against
# bf16 step by step, and which step dominates at which shape. All of them profile the same
# five labelled steps, so their tables line up with the chapter's first table.
from __future__ import annotations

from attention_docs.attention.masking import MASK_VARIANTS, masked_attention, prepare_mask
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.cost import step_costs
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments.registry import ExperimentError, Observed, Param, experiment
from attention_docs.inputs import make_qkv, resolve_dtype
from attention_docs.measurements.schema import Table
from attention_docs.profiling.memory import step_allocations, timeline_from_chrome
from attention_docs.profiling.profile import Schedule

SHAPE_PARAMS = {
    "batch_size": Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    "num_heads": Param(4, gpu_default=16, minimum=1, help="attention heads"),
    "seq_len": Param(256, gpu_default=2048, minimum=1, help="tokens per sequence (N)"),
    "head_dim": Param(64, minimum=1, help="features per head (D)"),
}
SCHED = Schedule(wait=1, warmup=2, active=3)
STEP_UNITS = dict.fromkeys(STEPS, "µs")


@experiment(
    "naive_mask_variants",
    summary="Four ways to apply the causal mask: the mask step's time and allocations, and the forward's time.",
    measures=("attention/masking.py", "attention/naive.py", "inputs.py", "profiling/memory.py"),
    **SHAPE_PARAMS,
    dtype=Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
)
def naive_mask_variants(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    rows = []
    for variant in MASK_VARIANTS:
        prepared = prepare_mask(variant, seq_len, dtype=resolve_dtype(dtype), device=ctx.device)
        observed = observe_forward(
            lambda variant=variant, prepared=prepared: masked_attention(
                q, k, v, variant=variant, prepared=prepared
            ),
            ctx,
            labels=STEPS,
            sched=SCHED,
        )
        timeline = timeline_from_chrome(observed.chrome, STEPS, ctx.device.type)
        mask = step_allocations(timeline, STEPS)["attention.mask"]
        step_time = {s.label: s.time_us for s in observed.steps}
        rows.append(
            (
                variant,
                step_time["attention.mask"],
                mask["allocations"] / SCHED.active,
                mask["allocated"] / SCHED.active,
                sum(step_time.values()),
                observed.timing.median_us,
                observed.timing.iqr_us,
                0 if prepared is None else prepared.numel() * prepared.element_size(),
            )
        )
    table = Table(
        columns=(
            "variant",
            "mask_us",
            "mask_allocations",
            "mask_allocated_bytes",
            "steps_us",
            "forward_us",
            "forward_iqr_us",
            "prepared_bytes",
        ),
        rows=tuple(rows),
        units={
            "mask_us": "µs",
            "mask_allocated_bytes": "B",
            "steps_us": "µs",
            "forward_us": "µs",
            "forward_iqr_us": "µs",
            "prepared_bytes": "B",
        },
    )
    return Observed(
        tables={"variants": table},
        facts={
            "matrix_bytes": batch_size * num_heads * seq_len * seq_len * q.element_size(),
            "profiled_steps": SCHED.active,
        },
    )


@experiment(
    "naive_dtypes",
    summary="The five steps in float32 and in bfloat16 (and float16 on a GPU), side by side.",
    measures=("attention/naive.py", "inputs.py", "cost.py"),
    **SHAPE_PARAMS,
    causal=Param(True, help="mask the future (decoder-style attention)"),
)
def naive_dtypes(ctx, *, batch_size, num_heads, seq_len, head_dim, causal) -> Observed:
    dtypes = (
        ("float32", "bfloat16", "float16") if ctx.device.type == "cuda" else ("float32", "bfloat16")
    )
    per_dtype = {}
    forward = {}
    for dtype in dtypes:
        q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
        observed = observe_forward(
            lambda q=q, k=k, v=v: naive_attention(q, k, v, causal=causal),
            ctx,
            labels=STEPS,
            costs=step_costs(batch_size, num_heads, seq_len, head_dim, dtype, causal=causal),
            sched=SCHED,
        )
        per_dtype[dtype] = {s.label: s.time_us for s in observed.steps}
        forward[dtype] = observed.timing.median_us
    rows = [(label, *(per_dtype[d][label] for d in dtypes)) for label in STEPS]
    rows.append(("forward (unprofiled)", *(forward[d] for d in dtypes)))
    table = Table(
        columns=("step", *(f"{d}_us" for d in dtypes)),
        rows=tuple(rows),
        units={f"{d}_us": "µs" for d in dtypes},
    )
    facts = {"dtypes": ",".join(dtypes)}
    if ctx.device.type == "cpu":
        import torch

        facts["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    return Observed(tables={"dtypes": table}, facts=facts)


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """'64x64,1024x16' -> [(64, 64), (1024, 16)]: (seq_len, head_dim) pairs."""
    shapes = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            n, d = (int(x) for x in part.lower().split("x"))
        except ValueError:
            raise ExperimentError(
                f"shape {part!r} is not SEQ_LENxHEAD_DIM (for example 1024x64)"
            ) from None
        if n < 1 or d < 1:
            raise ExperimentError(f"shape {part!r} must have a positive seq_len and head_dim")
        shapes.append((n, d))
    if not shapes:
        raise ExperimentError("shapes is empty; give SEQ_LENxHEAD_DIM pairs such as 64x64,1024x64")
    return shapes


@experiment(
    "naive_step_shares",
    summary="Which of the five steps dominates at which seq_len and head_dim.",
    measures=("attention/naive.py", "inputs.py"),
    batch_size=Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    num_heads=Param(4, gpu_default=16, minimum=1, help="attention heads"),
    shapes=Param(
        "64x64,256x64,1024x64,1024x16,1024x256",
        gpu_default="256x64,1024x64,4096x64,4096x16,4096x256",
        help="comma-separated SEQ_LENxHEAD_DIM pairs",
    ),
    dtype=Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
    causal=Param(True, help="mask the future (decoder-style attention)"),
)
def naive_step_shares(ctx, *, batch_size, num_heads, shapes, dtype, causal) -> Observed:
    rows = []
    for seq_len, head_dim in parse_shapes(shapes):
        q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
        observed = observe_forward(
            lambda q=q, k=k, v=v: naive_attention(q, k, v, causal=causal),
            ctx,
            labels=STEPS,
            sched=Schedule(wait=1, warmup=1, active=2),
        )
        times = {s.label: s.time_us for s in observed.steps}
        rows.append((f"{seq_len}×{head_dim}", seq_len, head_dim, *(times[s] for s in STEPS)))
    table = Table(
        columns=("shape", "seq_len", "head_dim", *STEPS),
        rows=tuple(rows),
        units={"shape": "seq_len×head_dim", **STEP_UNITS},
    )
    return Observed(tables={"shares": table})
