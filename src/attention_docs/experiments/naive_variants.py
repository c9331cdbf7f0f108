# Experiments for "Naive attention, deeper": four ways to apply the causal mask, fp32 against
# bf16 step by step, and which step dominates at which shape, all profiling the same five
# labelled steps. Variants and dtypes are timed against each other in interleaved rounds and
# only their ratios are shown: the naive forward's own times are `forward_times`' facts.
from __future__ import annotations

import math
from collections import defaultdict

from attention_docs.analytic.cost import score_matrix_bytes, step_costs
from attention_docs.attention.masking import (
    MASK_FUNCTIONS,
    MASK_VARIANTS,
    masked_attention,
    prepare_mask,
)
from attention_docs.attention.naive import STEPS, naive_attention, naive_step_calls
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments.naive import CAUSAL, LIGHT, per_forward_table
from attention_docs.experiments.registry import (
    ExperimentError,
    Observed,
    Param,
    Work,
    count_items,
    experiment,
    shape_params,
)
from attention_docs.inputs import make_qkv, resolve_dtype
from attention_docs.measurements.schema import Table
from attention_docs.profiling.memory import step_allocations, timeline_from_chrome
from attention_docs.profiling.profile import Schedule
from attention_docs.profiling.timing import StepSequence, time_callables
from attention_docs.records.trace import GPU_WORK, Trace, attribute

SCHED = Schedule(wait=1, warmup=2, active=3)
VARIANT_COLUMNS = (
    "variant",
    "mask_allocations",
    "mask_allocated_bytes",
    "prepared_bytes",
    "mask",
    "forward",
)


@experiment(
    "naive_mask_variants",
    gpu_work=lambda p: Work(profiles=4, timed=4),
    summary="Four ways to apply the causal mask: the mask step's allocations, and the mask "
    "step and the forward timed without the profiler against rebuilding the mask.",
    measures=(
        "attention/masking.py",
        "attention/naive.py",
        "inputs.py",
        "profiling/memory.py",
        "profiling/timing.py",
    ),
    **shape_params(),
)
def naive_mask_variants(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype) -> Observed:
    # GPU (4×16×2048², bf16: 512 MiB per N×N matrix): 4 × 6 profiled forwards, then 8
    # callables × 53 unprofiled calls of at most ~1 ms: about 2 s.
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    scaled = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
    in_place = scaled.clone()  # masked_fill_ overwrites its input: never the shared one
    prepared = {
        variant: prepare_mask(variant, seq_len, dtype=resolve_dtype(dtype), device=ctx.device)
        for variant in MASK_VARIANTS
    }
    allocations = {}
    calls = {}
    for variant in MASK_VARIANTS:

        def forward(variant=variant):
            return masked_attention(q, k, v, variant=variant, prepared=prepared[variant])

        observed = observe_forward(forward, ctx, labels=STEPS, sched=SCHED)
        timeline = timeline_from_chrome(observed.chrome, STEPS, ctx.device.type)
        allocations[variant] = step_allocations(timeline, STEPS)["attention.mask"]
        scores = in_place if variant == "masked_fill_" else scaled
        calls[f"forward {variant}"] = forward
        calls[f"mask {variant}"] = lambda f=MASK_FUNCTIONS[variant], s=scores, p=prepared[variant]: (
            f(s, p)
        )
    timed = time_callables(calls, ctx.device, cuda_runs=50)
    rows = []
    for variant in MASK_VARIANTS:
        kept = prepared[variant]
        rows.append(
            (
                variant,
                allocations[variant]["allocations"] / SCHED.active,
                allocations[variant]["allocated"] / SCHED.active,
                0 if kept is None else kept.numel() * kept.element_size(),
                timed[f"mask {variant}"],
                timed[f"forward {variant}"],
            )
        )
    table = Table(
        columns=VARIANT_COLUMNS,
        rows=tuple(rows),
        units={"mask": "µs", "forward": "µs", "mask_allocated_bytes": "B", "prepared_bytes": "B"},
    )
    return Observed(
        tables={"variants": table},
        facts={
            "matrix_bytes": score_matrix_bytes(batch_size, num_heads, seq_len, dtype),
            "profiled_steps": SCHED.active,
            "timing_method": timed["forward rebuild"].method,
        },
    )


def step_ops(trace: Trace, labels, forwards: int) -> list[tuple[str, str, str, float, float]]:
    """What ran inside each labelled range, per forward: (step, where, name, calls, µs).

    CPU ops with their self time, GPU work (kernels, copies) with its duration; per name.
    """
    rows = []
    for label, spans in attribute(trace, labels).items():
        per_name: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
        for s in spans:
            if s.kind == "op":
                entry = per_name[("CPU", s.name)]
                entry[1] += s.self_us
            elif s.kind in GPU_WORK:
                entry = per_name[("GPU", s.name)]
                entry[1] += s.dur_us
            else:
                continue
            entry[0] += 1
        for (where, name), (calls, us) in sorted(per_name.items()):
            rows.append((label, where, name, round(calls / forwards, 2), round(us / forwards, 3)))
    return rows


@experiment(
    "naive_dtypes",
    gpu_work=lambda p: Work(profiles=3, timed=3, device_s=1.0),
    summary="The five steps in float32 and in bfloat16 (and float16 on a GPU): what runs in "
    "each step, and each step's time without the profiler against float32's.",
    measures=("attention/naive.py", "inputs.py", "analytic/cost.py", "profiling/timing.py"),
    **{k: v for k, v in shape_params(causal=CAUSAL).items() if k != "dtype"},
)
def naive_dtypes(ctx, *, batch_size, num_heads, seq_len, head_dim, causal) -> Observed:
    # GPU (4×16×2048²; float32's N×N matrix is 1 GiB): 3 × 6 profiled forwards, then 18
    # callables (forward and each step, per dtype) × 53 unprofiled calls: about 3 s.
    dtypes = (
        ("float32", "bfloat16", "float16") if ctx.device.type == "cuda" else ("float32", "bfloat16")
    )
    ops_rows = []
    calls = {}
    for dtype in dtypes:
        q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)

        def forward(q=q, k=k, v=v):
            return naive_attention(q, k, v, causal=causal)

        observed = observe_forward(
            forward,
            ctx,
            labels=STEPS,
            costs=step_costs(batch_size, num_heads, seq_len, head_dim, dtype, causal=causal),
            sched=SCHED,
        )
        trace = Trace.from_chrome(observed.chrome or {})
        ops_rows += [(dtype, *r) for r in step_ops(trace, STEPS, SCHED.active)]
        calls[f"{dtype}|forward"] = forward
        steps = naive_step_calls(q, k, v, causal=causal)
        calls[f"{dtype}|steps"] = StepSequence({f"{dtype}|{s}": c for s, c in steps.items()})
    timed = time_callables(calls, ctx.device, cuda_runs=50)
    rows = tuple(
        (step, dtype, timed[f"{dtype}|{step}"])
        for dtype in dtypes
        for step in ("forward", *(s for s in STEPS if f"{dtype}|{s}" in timed))
    )
    facts = {
        "dtypes": ",".join(dtypes),
        "timing_method": next(iter(timed.values())).method,
        "profiled_steps": SCHED.active,
    }
    if ctx.device.type == "cpu":
        import torch

        facts["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    return Observed(
        tables={
            "dtypes": Table(("step", "dtype", "time"), rows, {"time": "µs"}),
            "step_ops": Table(
                ("dtype", "step", "where", "name", "calls", "time_us"),
                tuple(ops_rows),
                {"time_us": "µs"},
            ),
        },
        facts=facts,
    )


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
    gpu_work=lambda p: Work(profiles=count_items(p["shapes"]), device_s=1.0),
    summary="Which of the five steps dominates at which seq_len and head_dim (naive_steps "
    "holds the chapter's own shape).",
    measures=("attention/naive.py", "inputs.py", "profiling/profile.py", "experiments/_observe.py"),
    **{k: v for k, v in shape_params(causal=CAUSAL).items() if k not in ("seq_len", "head_dim")},
    shapes=Param(
        "64x64,1024x64,1024x16,1024x256",
        gpu_default="256x64,1024x64,4096x64,4096x16,4096x256",
        help="comma-separated SEQ_LENxHEAD_DIM pairs (naive_steps' own shape is its point)",
    ),
)
def naive_step_shares(ctx, *, batch_size, num_heads, shapes, dtype, causal) -> Observed:
    # GPU: the largest shape (4096×256, 2 GiB per N×N matrix) runs a forward in ~5 ms;
    # 5 shapes × 5 profiled forwards: about 2 s with the profiler's start-ups.
    rows = []
    for seq_len, head_dim in parse_shapes(shapes):
        q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
        observed = observe_forward(
            lambda q=q, k=k, v=v: naive_attention(q, k, v, causal=causal),
            ctx,
            labels=STEPS,
            sched=Schedule(wait=1, warmup=1, active=3),
            **LIGHT,
        )
        # Every profiled forward is a row: a share's range is over forwards.
        for r in per_forward_table(observed.chrome or {}, STEPS).rows:
            rows.append((f"{seq_len}×{head_dim}", seq_len, head_dim, *r))
    table = Table(
        columns=("shape", "seq_len", "head_dim", "forward", *STEPS),
        rows=tuple(rows),
        units={"shape": "seq_len×head_dim", **dict.fromkeys(STEPS, "µs")},
    )
    return Observed(tables={"shares": table})
