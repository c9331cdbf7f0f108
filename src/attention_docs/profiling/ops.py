# Records the ATen ops the code under study runs (names, nesting, tensor inputs), on the CPU
# at a tiny shape, for the GPU forecast to price (analytic/gpu.py): the forecast is of the
# code as written. The dispatcher records the same ATen ops on any device; which of them
# launch a CUDA kernel is the forecast's knowledge, not this module's. The committed
# recordings (records/recorded_ops.json) are rewritten with `rerecord()`; a test re-records
# and compares.
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from attention_docs.attention.masking import MASK_VARIANTS, masked_attention, prepare_mask
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.attention.sdpa import sdpa_attention
from attention_docs.inputs import make_qkv
from attention_docs.profiling.profile import chrome_of
from attention_docs.records.ops import RECORDED_OPS, OpList, committed, dumps, ops_from_chrome
from attention_docs.records.shape import Shape

# Every dimension distinct (batch_size·num_heads = 6 too), so that a recorded tensor's dims
# say which of the shape's dimensions they are and the forecast can scale them to its own.
RECORDING_SHAPE = Shape(2, 3, 16, 8, "float32", causal=True, kv_len=24)
NAIVE = "naive_attention"
NAIVE_FULL = "naive_attention, no mask"
SDPA_MATH = "SDPA math"
SDPA_STEP = "attention.sdpa"  # the range sdpa_attention opens


def record_ops(
    fn: Callable[[], object],
    subject: str,
    shape: Shape = RECORDING_SHAPE,
    steps: tuple[str, ...] = STEPS,
) -> OpList:
    """The ATen ops one call of `fn` records inside the ranges named `steps`, on the CPU."""
    fn()  # the first call pays for lazy initialisation, which records ops of its own
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    events = chrome_of(prof)["traceEvents"]
    return OpList(subject, shape, ops_from_chrome(events, steps))


def code_under_study(shape: Shape = RECORDING_SHAPE) -> list[OpList]:
    """The recordings the forecasts read: naive_attention (causal and not) and each causal
    mask variant; and SDPA's math backend, causal, in bfloat16 (the dtype decides its
    kernels: it upcasts to float32)."""
    with torch.no_grad():
        q, k, v = make_qkv(*shape.dims, dtype=shape.dtype, kv_seq_len=shape.keys)
        out = [
            record_ops(lambda: naive_attention(q, k, v, causal=True), NAIVE, shape),
            record_ops(lambda: naive_attention(q, k, v), NAIVE_FULL, replace(shape, causal=False)),
        ]
        for variant in MASK_VARIANTS:
            prepared = prepare_mask(variant, shape.seq_len, shape.keys, dtype=q.dtype)
            out.append(
                record_ops(
                    lambda variant=variant, prepared=prepared: masked_attention(
                        q, k, v, variant=variant, prepared=prepared
                    ),
                    variant,
                    shape,
                )
            )
        # Square, as the shapes this recording prices are: sdpa_attention passes `is_causal`
        # there and a bottom-right mask otherwise, two different op lists.
        square = replace(shape, dtype="bfloat16", kv_len=None)
        q, k, v = make_qkv(*square.dims, dtype=square.dtype)
        out.append(
            record_ops(
                lambda: sdpa_attention(q, k, v, causal=True, backend="math"),
                SDPA_MATH,
                square,
                (SDPA_STEP,),
            )
        )
    return out


def rerecord(path: Path = RECORDED_OPS) -> Path:
    """Rewrite the committed recordings from the code as it is now."""
    path.write_text(dumps(code_under_study()))
    committed.cache_clear()
    return path
