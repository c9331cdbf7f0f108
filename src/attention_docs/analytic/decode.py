# The cost model of KV-cache decoding, beside cost.py's model of one attention call: what a
# step that attends a few new tokens to a cache of M must compute and must move. Pure
# arithmetic (no torch), shared by the decode experiments, renderers and tests.
from __future__ import annotations

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
