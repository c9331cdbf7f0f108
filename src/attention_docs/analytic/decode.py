# The cost model of KV-cache decoding, beside cost.py's model of one attention call: what a
# step that attends a few new tokens to a cache of M must compute and must move. Pure
# arithmetic (no torch), shared by the decode experiments, renderers and tests.
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from attention_docs.analytic.cost import StepCost, attention_flops, itemsize, step_costs


@dataclass(frozen=True)
class DecodeCost:
    """FLOPs and minimum bytes of attending `q_len` new tokens to a cache of `cache_len`."""

    flops: float
    bytes: float
    cache_bytes: float  # the K and V cache alone: the part that grows with every token

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP per byte."""
        return self.flops / self.bytes if self.bytes else 0.0


# --8<-- [start:decode]
def decode_cost(
    batch_size: int,
    num_heads: int,
    cache_len: int,
    head_dim: int,
    dtype: str = "float32",
    *,
    num_kv_heads: int | None = None,
    q_len: int = 1,
) -> DecodeCost:
    """The two matmuls' FLOPs, and the bytes a step cannot avoid: the whole K and V cache
    read once, the queries read and the outputs written. The 1×M scores stay small.

    `num_kv_heads` defaults to `num_heads` (multi-head attention). FLOPs grow with
    `num_heads`, bytes with `num_kv_heads`: with one new token the intensity is about
    2·(num_heads / num_kv_heads) / itemsize FLOP per byte.
    """
    e = itemsize(dtype)
    kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    flops = attention_flops(batch_size, num_heads, q_len, head_dim, kv_seq_len=cache_len)
    cache_bytes = 2.0 * batch_size * kv_heads * cache_len * head_dim * e  # read K and V
    q_and_out = 2.0 * batch_size * num_heads * q_len * head_dim * e
    return DecodeCost(flops=flops, bytes=cache_bytes + q_and_out, cache_bytes=cache_bytes)


# --8<-- [end:decode]


def decode_step_costs(
    batch_size: int,
    num_heads: int,
    cache_len: int,
    head_dim: int,
    dtype: str = "float32",
    *,
    num_kv_heads: int | None = None,
) -> tuple[StepCost, ...]:
    """Per labelled step of one decode step (`decode.append` and the five attention steps).

    cost.step_costs counts k and v with `num_heads` heads; grouped attention reads only
    `num_kv_heads` of them, once per group, so the two matmuls move fewer bytes.
    """
    e = itemsize(dtype)
    kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    saved = batch_size * (num_heads - kv_heads) * cache_len * head_dim * e
    steps = tuple(
        replace(s, bytes=s.bytes - saved)
        if s.label in ("attention.scores", "attention.weighted_sum")
        else s
        for s in step_costs(batch_size, num_heads, 1, head_dim, dtype, kv_seq_len=cache_len)
    )
    token_kv = 2.0 * batch_size * kv_heads * head_dim * e
    return (StepCost("decode.append", 0.0, 2.0 * token_kv), *steps)  # read + write one token


# --- How a GPU kernel spreads one decode step over its SMs ----------------------------------
#
# FlashAttention 2's decode path (csrc/flash_attn/flash_api.cpp, `mha_fwd_kvcache`), as
# published: with one new token and grouped k/v heads it folds each group of query heads into
# the query rows of its k/v head ("seqlenq_ngroups_swapped"), so one step is batch_size ×
# num_kv_heads × ceil(group / 64) thread blocks of 128 threads, two per SM. When those fill
# less than 80% of the slots it splits the cache into `num_splits` parts that run side by
# side and are merged afterwards (split-KV, "flash-decoding"): `num_splits_heuristic` below.
SPLITKV_BLOCK_M = 64  # query rows per block of the split-KV kernel
BLOCKS_PER_SM = 2  # "we multiply number of SMs by 2 ... 128 threads per block"
FILL = 0.8  # below 80% of the slots the step is split
MAX_SPLITS = 128


def splitkv_block_n(head_dim: int) -> int:
    """Keys per block of the split-KV kernel (`set_params_splitkv`)."""
    return 256 if head_dim <= 64 else 128 if head_dim <= 128 else 64


def decode_blocks(batch_size: int, num_heads: int, num_kv_heads: int) -> int:
    """Thread blocks of one unsplit decode step: one per (sequence, k/v head, 64 folded rows)."""
    groups = num_heads // num_kv_heads
    return batch_size * num_kv_heads * -(-groups // SPLITKV_BLOCK_M)


def num_splits(blocks: int, sm_count: int, cache_len: int, head_dim: int) -> int:
    """FlashAttention 2's `num_splits_heuristic`: 1 when the blocks fill 80% of the slots,
    else the fewest splits of the cache within 85% of the best wave efficiency."""
    slots = BLOCKS_PER_SM * sm_count
    if blocks >= FILL * slots:
        return 1
    n_blocks = -(-cache_len // splitkv_block_n(head_dim))
    most = min(MAX_SPLITS, slots, n_blocks)

    def eligible(
        s: int,
    ) -> bool:  # a split that leaves every part as long as one fewer does not count
        return s == 1 or -(-n_blocks // s) != -(-n_blocks // (s - 1))

    def efficiency(s: int) -> float:
        waves = blocks * s / slots
        return waves / math.ceil(waves)

    best = max((efficiency(s) for s in range(1, most + 1) if eligible(s)), default=1.0)
    return next((s for s in range(1, most + 1) if eligible(s) and efficiency(s) >= 0.85 * best), 1)


def batch_filling_gpu(num_heads: int, num_kv_heads: int, sm_count: int) -> int:
    """The smallest batch whose unsplit decode step fills 80% of a GPU's block slots: below
    it, only split-KV keeps every SM reading the cache."""
    per_sequence = decode_blocks(1, num_heads, num_kv_heads)
    return math.ceil(FILL * BLOCKS_PER_SM * sm_count / per_sequence)


def queries_to_ridge(
    num_heads: int, num_kv_heads: int, head_dim: int, dtype: str, *, ridge: float, cache_len: int
) -> int | None:
    """New tokens per step (T) from which attending them to the cache reaches `ridge` FLOP per
    byte; None when no T up to the cache's length does. Batching never gets there (each
    sequence brings its own cache); verifying T drafted tokens at once (speculative decoding)
    can."""

    def intensity(t: int) -> float:
        return decode_cost(
            1, num_heads, cache_len, head_dim, dtype, num_kv_heads=num_kv_heads, q_len=t
        ).intensity

    if intensity(cache_len) < ridge:
        return None
    low, high = 0, cache_len  # intensity(high) reaches the ridge; it grows with t
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if intensity(mid) < ridge else (low, mid)
    return high
