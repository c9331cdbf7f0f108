# Experiments on scaled_dot_product_attention: each backend pinned and profiled, why SDPA
# picks the backend it picks for a set of input variants (analytic/sdpa_dispatch.py's, so a
# GPU forecast and a GPU measurement describe the same calls), what this torch offers to
# change that choice, and what each way of masking costs (ratios only: forward times are
# `forward_times`'). A backend this device lacks becomes a row that says so.
from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Callable

import torch
from torch.nn.attention import SDPBackend
from torch.profiler import ProfilerActivity, profile

from attention_docs.analytic.sdpa_dispatch import BOOL_MASK, FLOAT_MASK, IS_CAUSAL, why_variants
from attention_docs.attention.naive import causal_mask, naive_attention
from attention_docs.attention.sdpa import (
    BACKENDS,
    CHOSEN,
    SDP_BACKENDS,
    BackendVerdict,
    additive_mask,
    backend_of_op,
    chosen_backend,
    keep_mask,
    sdpa_attention,
    why_backend,
)
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments.forward import unavailable
from attention_docs.experiments.registry import Observed, Param, Work, experiment, shape_params
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.memory import peak_memory_bytes
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.timing import time_callables
from attention_docs.records.forecast import FORECAST_SHAPE
from attention_docs.records.trace import op_stats, step_span_times

MEASURES = ("attention/sdpa.py", "attention/naive.py", "inputs.py")
LABEL = "attention.sdpa"
SCHED = Schedule(wait=1, warmup=1, active=2)

# A shape of the forward grid's teaching slice, so that each backend's forward time is there.
SHAPE_PARAMS = shape_params(
    seq_len=Param(512, gpu_default=4096, minimum=1, help="tokens per sequence (N)")
)


# torch's "No viable backend" error goes on to guess why ("This is likely due to turning off
# both the math kernel and the fused kernels."): true of a user who turned them off, wrong for
# a backend pinned on purpose. The site keeps the first sentence and says the rest itself.
_TORCH_GUESS = re.compile(
    r"\s*This is likely due to turning off both the math kernel and the fused kernels\.?"
)


def site_reason(reason: str) -> str:
    """A verdict's reason as the site states it: torch's guess about the cause left out."""
    return _TORCH_GUESS.sub("", reason).strip()


def _site(verdict: BackendVerdict) -> BackendVerdict:
    return BackendVerdict(verdict.backend, verdict.status, site_reason(verdict.reason), verdict.op)


def _runs(fn: Callable[[], object]) -> bool:
    """True if `fn` runs; a backend that cannot run these inputs raises RuntimeError."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn()
        except RuntimeError:
            return False
    return True


def _profiled_call(fn: Callable[[], object], device: torch.device) -> dict:
    """Per call: ATen ops dispatched, GPU kernels, CPU-side and device time, top ops/kernels."""
    run = profile_callable(fn, device, sched=SCHED, profile_memory=False, with_flops=False)
    stats = op_stats(run.trace)
    per = float(SCHED.active)
    span = step_span_times(run.trace, [LABEL])[LABEL]
    return {
        "ops_per_call": sum(s["calls"] for s in stats if s["where"] == "CPU") / per,
        "kernels_per_call": sum(s["calls"] for s in stats if s["where"] == "GPU") / per,
        "cpu_us": span["cpu_us"] / per,
        "device_us": span["device_us"] / per,
        "top": stats[:4],
        "entry_op": next(
            (s["name"] for s in stats if s["where"] == "CPU" and backend_of_op(s["name"])), None
        ),
    }


_BACKEND_NAMES = {
    "MATH": "math",
    "FLASH_ATTENTION": "flash",
    "EFFICIENT_ATTENTION": "efficient",
    "CUDNN_ATTENTION": "cudnn",
    "OVERRIDEABLE": "overrideable",
}


def what_torch_offers(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool) -> dict:
    """What this torch says about choosing SDPA's backend, read rather than assumed.

    - `sdpa_priority`: the order SDPA tries backends in, from the private
      `torch._C._get_sdp_priority_order()`, read after a call on this device (a CUDA build
      may reorder it on its first call, e.g. cuDNN first on some GPUs); None where absent.
    - `set_priority_supported`, `set_priority_math_first`: whether `sdpa_kernel` takes
      `set_priority=`, and which backend SDPA then dispatched to when asked to try `math`
      first with every backend allowed (`math` if this device's selector follows the order).
    - `flash_impls`, `flash_impl_active`: `torch.nn.attention.list_flash_attention_impls()`
      and `current_flash_attention_impl()` (alternative flash kernels that
      `activate_flash_attention_impl` switches to); None where this torch lacks them.
    """
    from torch.nn import attention

    names = {int(v): _BACKEND_NAMES.get(n, n.lower()) for n, v in SDPBackend.__members__.items()}
    get_order = getattr(torch._C, "_get_sdp_priority_order", None)
    order = [names.get(int(i), str(i)) for i in get_order()] if get_order else None
    supported = "set_priority" in inspect.signature(attention.sdpa_kernel).parameters
    math_first = None
    if supported:
        ordered = [SDP_BACKENDS["math"], *(SDP_BACKENDS[b] for b in BACKENDS if b != "math")]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with (
                profile(activities=[ProfilerActivity.CPU]) as prof,
                attention.sdpa_kernel(ordered, set_priority=True),
            ):
                torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        op = next((e.name for e in prof.events() if backend_of_op(e.name)), None)
        math_first = backend_of_op(op) if op else None
    impls = getattr(attention, "list_flash_attention_impls", None)
    active = getattr(attention, "current_flash_attention_impl", None)
    return {
        "torch_version": torch.__version__,
        "sdpa_priority": order,
        "set_priority_supported": supported,
        "set_priority_math_first": math_first,
        "flash_impls": list(impls()) if impls else None,
        "flash_impl_active": active() if active else None,
    }


@experiment(
    "sdpa_backends",
    gpu_work=lambda p: Work(profiles=6),
    summary="scaled_dot_product_attention with each backend pinned: ops, kernels, memory; and "
    "what this torch offers to change its choice.",
    measures=MEASURES,
    **SHAPE_PARAMS,
    causal=Param(True, help="mask the future with is_causal"),
)
def sdpa_backends(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    verdicts = {x.backend: _site(x) for x in why_backend(q, k, v, causal=causal)}
    rows, op_rows, notes = [], [], []
    with torch.no_grad():
        for backend in BACKENDS:
            verdict = verdicts[backend]

            def call(b=backend):
                return sdpa_attention(q, k, v, causal=causal, backend=b)

            if not verdict.runs or not _runs(call):
                rows.append((backend, verdict.status, None, None, None, None, None, None))
                notes.append(f"{backend}: {verdict.reason}")
                continue
            seen = _profiled_call(call, ctx.device)
            peak = peak_memory_bytes(call, ctx.device)
            rows.append(
                (
                    backend,
                    verdict.status,
                    seen["entry_op"],
                    seen["ops_per_call"],
                    seen["kernels_per_call"],
                    seen["cpu_us"],
                    seen["device_us"],
                    peak,
                )
            )
            op_rows.extend(
                (
                    backend,
                    s["name"],
                    s["where"],
                    s["calls"] / SCHED.active,
                    s["self_us"] / SCHED.active,
                )
                for s in seen["top"]
            )
        observed = observe_forward(
            lambda: sdpa_attention(q, k, v, causal=causal),
            ctx,
            labels=(LABEL,),
            profile_memory=False,  # a timeline for structure: no bookkeeping in the ops' times
            with_flops=False,
        )
        offers = what_torch_offers(q, k, v, causal=causal)
    table = Table(
        columns=(
            "backend",
            "status",
            "op",
            "ops_per_call",
            "kernels_per_call",
            "cpu_us",
            "device_us",
            "peak_bytes",
        ),
        rows=tuple(rows),
        units={"cpu_us": "µs", "device_us": "µs", "peak_bytes": "B"},
    )
    ops_table = Table(
        columns=("backend", "name", "where", "calls", "self_us"),
        rows=tuple(op_rows),
        units={"self_us": "µs"},
    )
    return Observed(
        steps=observed.steps,
        ops=observed.ops,
        timing=observed.timing,
        timeline=observed.timeline,
        chrome=observed.chrome,
        tables={"backends": table, "backend_ops": ops_table},
        facts={
            **observed.facts,
            "chosen": chosen_backend(list(verdicts.values())),
            "chosen_op": next((x.op for x in verdicts.values() if x.status == CHOSEN), None),
            **offers,
        },
        notes=tuple(notes),
    )


def _mask_kwargs(kind: str, seq_len: int, dtype: torch.dtype, device) -> dict:
    if kind == IS_CAUSAL:
        return {"causal": True}
    if kind == BOOL_MASK:
        return {"attn_mask": keep_mask(seq_len, device=device)}
    if kind == FLOAT_MASK:
        return {"attn_mask": additive_mask(seq_len, dtype=dtype, device=device)}
    return {}


@experiment(
    "sdpa_why",
    gpu_work=lambda p: Work(profiles=8, device_s=1.0),
    summary="Why SDPA picks its backend: each backend pinned over input variants, torch's reasons kept.",
    measures=MEASURES,
    batch_size=Param(1, minimum=1, help="sequences per batch"),
    num_heads=Param(2, minimum=1, help="attention heads"),
    seq_len=Param(128, gpu_default=1024, minimum=1, help="tokens per sequence (N)"),
    # On a GPU, the forecast shape's head_dim: the page's forecast and this run ask about the
    # same inputs there.
    head_dim=Param(
        64,
        gpu_default=FORECAST_SHAPE.head_dim,
        minimum=1,
        help="features per head (D) of the baseline",
    ),
    big_head_dim=Param(512, minimum=1, help="head_dim of the large-head variant"),
    dtype=Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
)
def sdpa_why(ctx, *, batch_size, num_heads, seq_len, head_dim, big_head_dim, dtype) -> Observed:
    rows = []
    for name, i in why_variants(dtype, head_dim, big_head_dim):
        q, k, v = make_qkv(
            batch_size, num_heads, seq_len, i.head_dim, dtype=i.dtype, device=ctx.device
        )
        kwargs = _mask_kwargs(i.mask, seq_len, q.dtype, ctx.device)
        with torch.no_grad():
            verdicts = [_site(x) for x in why_backend(q, k, v, dropout_p=i.dropout_p, **kwargs)]
        rows.extend(
            (name, i.dtype, i.head_dim, i.mask, i.dropout_p, x.backend, x.status, x.op, x.reason)
            for x in verdicts
        )
    table = Table(
        columns=(
            "variant",
            "dtype",
            "head_dim",
            "mask",
            "dropout_p",
            "backend",
            "status",
            "op",
            "reason",
        ),
        rows=tuple(rows),
    )
    return Observed(tables={"verdicts": table})


def _mask_variants(seq_len: int, dtype: torch.dtype, device) -> tuple:
    """(name, sdpa kwargs, mask tensor or None) for each way of asking for causal attention."""
    wrong = causal_mask(seq_len, device=device)  # masked_fill's convention: True = hide
    keep = keep_mask(seq_len, device=device)
    add = additive_mask(seq_len, dtype=dtype, device=device)
    return (
        ("is_causal=True", {"causal": True}, None),
        ("bool, True = take part", {"attn_mask": keep}, keep),
        ("float, 0 / −inf", {"attn_mask": add}, add),
        ("bool, masked_fill polarity", {"attn_mask": wrong}, wrong),
    )


def _naive_with_keep(q, k, v, keep: torch.Tensor) -> torch.Tensor:
    """Naive attention with a keep-mask (True = take part): plain softmax, no safety net."""
    scores = (q @ k.transpose(-2, -1)) / q.size(-1) ** 0.5
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ v


def _empty_row(fn: Callable[[], torch.Tensor]) -> tuple[str, str]:
    """(what the last query row came out as, or why it did not run): the row whose every key
    the mask hides. "zeros", "NaN", or "finite, not zero"."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            row = fn()[..., -1, :]
        except RuntimeError as exc:
            return "did not run", site_reason(unavailable(exc))
    if torch.isnan(row).any():
        return "NaN", ""
    if torch.equal(row, torch.zeros_like(row)):
        return "zeros", ""
    return "finite, not zero", ""


@experiment(
    "sdpa_masks",
    gpu_work=lambda p: Work(profiles=4, timed=4, device_s=1.0),
    summary="Causal attention three ways (is_causal, bool mask, float mask) and one wrong way.",
    measures=MEASURES,
    **SHAPE_PARAMS,
)
def sdpa_masks(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    reference = naive_attention(q.double(), k.double(), v.double(), causal=True)
    rows, calls = [], {}
    with torch.no_grad():
        for name, kwargs, mask in _mask_variants(seq_len, q.dtype, ctx.device):

            def call(kw=kwargs):
                return sdpa_attention(q, k, v, **kw)

            out = call().double()
            bad_rows = int(torch.isnan(out).any(dim=-1).sum())
            err = (out - reference).abs().nan_to_num(nan=float("inf")).max().item()
            seen = _profiled_call(call, ctx.device)
            calls[name] = call
            rows.append(
                [
                    name,
                    backend_of_op(seen["entry_op"] or ""),
                    mask.numel() * mask.element_size() if mask is not None else 0,
                    peak_memory_bytes(call, ctx.device),
                    seen["ops_per_call"],
                    err if err != float("inf") else None,
                    bad_rows,
                    _prep_ops(call),
                ]
            )
        # The variants against one another, interleaved round by round.
        timings = time_callables(calls, ctx.device, min_run_time=0.3, cuda_runs=30)
        wrong = _mask_variants(seq_len, q.dtype, ctx.device)[-1][1]["attn_mask"]
        empty = [
            (
                "naive attention (plain softmax)",
                *_empty_row(lambda: _naive_with_keep(q, k, v, wrong)),
            )
        ]
        for backend in BACKENDS:

            def pinned(b=backend):
                return sdpa_attention(q, k, v, attn_mask=wrong, backend=b)

            empty.append((f"SDPA {backend}", *_empty_row(pinned)))
    table = Table(
        columns=(
            "mask",
            "backend",
            "mask_bytes",
            "peak_bytes",
            "time",
            "ops_per_call",
            "max_abs_error",
            "nan_rows",
            "prep_ops",
        ),
        rows=tuple((*r[:4], timings[r[0]], *r[4:]) for r in rows),
        units={"mask_bytes": "B", "peak_bytes": "B", "time": "µs"},
    )
    empty_table = Table(columns=("implementation", "empty_row", "why_not_run"), rows=tuple(empty))
    return Observed(
        tables={"masks": table, "empty_row": empty_table},
        facts={
            "reference": "naive attention in float64",
            "timing_method": "the four variants in interleaved rounds, no profiler",
        },
    )


def _prep_ops(fn: Callable[[], object]) -> str:
    """The ops SDPA dispatches before its backend op (e.g. turning a bool mask into a float one)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    names: list[str] = []
    for event in prof.events():
        if event.name == "aten::scaled_dot_product_attention":
            names.extend(c.name for c in event.cpu_children if not backend_of_op(c.name))
            break
    return ", ".join(dict.fromkeys(names)) or "none"
