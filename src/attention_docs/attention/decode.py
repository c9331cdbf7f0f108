# KV-cache decoding. A decoder generates one token at a time; the keys and values of every
# earlier token do not change, so they are kept in a cache instead of being recomputed. Each
# step appends one token's k/v to the cache in place and attends the new query to all of
# them. Grouped-query (GQA) and multi-query (MQA) attention share one cached k/v head among
# several query heads, which shrinks the cache — and the bytes each step must read.
# Chapters show this file through pymdown snippets: keep the section markers.
from __future__ import annotations

import math

import torch
from torch.nn.functional import scaled_dot_product_attention
from torch.profiler import record_function

from attention_docs.attention.naive import causal_mask, naive_attention

IMPLS: tuple[str, ...] = ("naive", "naive_repeat_kv", "sdpa")


# --8<-- [start:cache]
class KVCache:
    """Preallocated keys and values of shape `(batch_size, num_kv_heads, max_seq_len, head_dim)`.

    Only the first `length` positions hold tokens. Appending writes into the buffers in place:
    no step allocates or copies the cache, so the cost of a step is reading it.
    """

    def __init__(self, k: torch.Tensor, v: torch.Tensor, length: int = 0) -> None:
        if k.shape != v.shape or k.dim() != 4:
            raise ValueError(
                f"k and v buffers must both be (batch_size, num_kv_heads, max_seq_len, head_dim); "
                f"got {tuple(k.shape)} and {tuple(v.shape)}"
            )
        self.k, self.v = k, v
        self.length = 0
        self.truncate(length)

    @classmethod
    def empty(
        cls,
        batch_size: int,
        num_kv_heads: int,
        max_seq_len: int,
        head_dim: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> KVCache:
        """An empty cache with room for `max_seq_len` tokens."""
        shape = (batch_size, num_kv_heads, max_seq_len, head_dim)
        return cls(
            torch.empty(shape, dtype=dtype, device=device),
            torch.empty(shape, dtype=dtype, device=device),
        )

    @property
    def max_seq_len(self) -> int:
        return self.k.size(2)

    @property
    def keys(self) -> torch.Tensor:
        """The cached keys, `(batch_size, num_kv_heads, length, head_dim)`: a view, not a copy."""
        return self.k[:, :, : self.length]

    @property
    def values(self) -> torch.Tensor:
        return self.v[:, :, : self.length]

    def append(self, k_new: torch.Tensor, v_new: torch.Tensor) -> None:
        """Write the k/v of `k_new.size(2)` new tokens after the cached ones, in place."""
        start, end = self.length, self.length + k_new.size(2)
        if end > self.max_seq_len:
            raise ValueError(
                f"the cache holds {self.max_seq_len} tokens; it has {start} and was given "
                f"{k_new.size(2)} more. Allocate it with a larger max_seq_len."
            )
        self.k[:, :, start:end].copy_(k_new)
        self.v[:, :, start:end].copy_(v_new)
        self.length = end

    def truncate(self, length: int) -> None:
        """Forget the tokens after `length` (a rejected speculative draft; a benchmark rerun)."""
        if not 0 <= length <= self.max_seq_len:
            raise ValueError(f"length must be in 0..{self.max_seq_len}, got {length}")
        self.length = length


# --8<-- [end:cache]


# --8<-- [start:grouped]
def grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention of the last `q.size(2)` positions to all `k.size(2)` cached ones.

    `q` is `(batch_size, num_heads, T, head_dim)`; `k` and `v` are
    `(batch_size, num_kv_heads, M, head_dim)`, and query head `h` uses k/v head
    `h // (num_heads // num_kv_heads)`. The query heads of a group are folded into rows, so each
    k/v head is read once for the whole group and nothing is copied.
    """
    batch_size, num_heads, q_len, head_dim = q.shape
    num_kv_heads, kv_len = k.size(1), k.size(2)
    groups = num_heads // num_kv_heads
    with record_function("attention.scores"):
        # (B, H, T, D) -> (B, Hkv, G·T, D): a view. With T = 1 the "N×N" matrix is 1×M per head.
        rows = q.reshape(batch_size, num_kv_heads, groups * q_len, head_dim)
        scores = rows @ k.transpose(-2, -1)  # (B, Hkv, G·T, M)
    with record_function("attention.scale"):
        scores = scores / math.sqrt(head_dim)
    with record_function("attention.mask"):
        if q_len > 1:  # one new token may see every cached key: nothing to mask
            mask = causal_mask(q_len, kv_len, device=q.device).repeat(groups, 1)
            scores = scores.masked_fill(mask, float("-inf"))
    with record_function("attention.softmax"):
        probs = torch.softmax(scores, dim=-1)
    with record_function("attention.weighted_sum"):
        out = probs @ v  # (B, Hkv, G·T, D)
    return out.reshape(batch_size, num_heads, q_len, head_dim)


# --8<-- [end:grouped]


# --8<-- [start:repeat]
def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """(B, Hkv, M, D) -> (B, Hkv·groups, M, D): every k/v head copied once per query head."""
    return x.repeat_interleave(groups, dim=1)


# --8<-- [end:repeat]


def _check_heads(q: torch.Tensor, k: torch.Tensor) -> int:
    num_heads, num_kv_heads = q.size(1), k.size(1)
    if num_heads % num_kv_heads:
        raise ValueError(
            f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads}): "
            "each k/v head serves a whole group of query heads"
        )
    return num_heads // num_kv_heads


# --8<-- [start:attend]
def cached_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, impl: str = "naive"
) -> torch.Tensor:
    """Attention of new queries (the last positions) to cached k/v, by one of `IMPLS`.

    The causal mask is aligned bottom-right, as `causal_mask` is: the cache holds the new
    tokens' own keys last, so query `i` of `T` sees keys `0 .. M - T + i`. A cache shorter
    than the queries (T > M) cannot hold them and raises `ValueError`.
    """
    groups = _check_heads(q, k)
    q_len, kv_len = q.size(2), k.size(2)
    if q_len > kv_len:
        raise ValueError(
            f"{q_len} new queries against {kv_len} cached keys: the cache must hold the new "
            "tokens' keys too (append them first, as prefill and decode_step do)"
        )
    if impl == "naive":
        return grouped_attention(q, k, v)
    if impl == "naive_repeat_kv":
        k, v = repeat_kv(k, groups), repeat_kv(v, groups)
        return naive_attention(q, k, v, causal=q_len > 1)
    if impl == "sdpa":
        # SDPA's is_causal aligns the diagonal top-left; queries that end a longer sequence
        # need the bottom-right alignment, given as an explicit mask (True = may attend).
        mask = None if q_len in (1, kv_len) else ~causal_mask(q_len, kv_len, device=q.device)
        return scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=q_len == kv_len and q_len > 1, enable_gqa=groups > 1
        )
    raise ValueError(f"unknown implementation {impl!r}; choose one of: {', '.join(IMPLS)}")


# --8<-- [end:attend]


# --8<-- [start:decode]
def prefill(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: KVCache, *, impl: str = "naive"
) -> torch.Tensor:
    """The prompt: all its tokens at once, causally; their k/v fill the cache."""
    with record_function("decode.append"):
        cache.append(k, v)
    return cached_attention(q, cache.keys, cache.values, impl=impl)


def decode_step(
    q: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    cache: KVCache,
    *,
    impl: str = "naive",
) -> torch.Tensor:
    """One generated token: append its k/v, then attend its query to the whole cache."""
    if q.size(2) != 1:
        raise ValueError(f"a decode step takes one new token; q has {q.size(2)} (use prefill)")
    with record_function("decode.append"):
        cache.append(k_new, v_new)
    return cached_attention(q, cache.keys, cache.values, impl=impl)


# --8<-- [end:decode]
