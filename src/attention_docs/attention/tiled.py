# FlashAttention's forward algorithm in plain PyTorch: the score matrix is computed one
# block_q × block_k tile at a time and never exists whole, thanks to the online softmax
# (a running max and a running sum per query, and a rescale of the partial output when the
# max grows). Written for reading, not speed: each line is an eager op, so the tiles still
# travel through memory (see tiling.tiled_step_costs); a fused kernel (triton_flash.py) keeps
# them on chip. Batch and heads are handled by broadcasting, as a GPU kernel's grid would.
from __future__ import annotations

import math

import torch
from torch.profiler import record_function

from attention_docs.records.steps import TILED_STEPS

__all__ = ["TILED_STEPS", "tiled_attention", "tiled_attention_with_lse"]


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, blocks) -> None:
    if q.dim() < 2 or k.shape != v.shape or q.shape[:-2] != k.shape[:-2]:
        raise ValueError(
            "tiled attention wants q of shape (..., seq_len, head_dim) and k, v of the same shape "
            f"(..., kv_seq_len, head_dim); got q {tuple(q.shape)}, k {tuple(k.shape)}, "
            f"v {tuple(v.shape)}"
        )
    if q.size(-1) != k.size(-1):
        raise ValueError(f"q and k must share head_dim; got {q.size(-1)} and {k.size(-1)}")
    for name, value in blocks.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def tiled_attention_with_lse(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q·kᵀ/√head_dim)·v computed tile by tile, and the log-sum-exp of each query's scores.

    Args:
        q: `(..., seq_len, head_dim)`.
        k, v: `(..., kv_seq_len, head_dim)`. With `causal`, the mask is aligned
            bottom-right, as `causal_mask` is: query `i` sees keys up to
            `i + kv_seq_len - seq_len`.
        causal: mask the future; tiles entirely in the future are skipped, never computed.
            With more queries than keys the first `seq_len - kv_seq_len` queries see no
            key: their output is 0 (the empty sum) and their log-sum-exp -inf, as
            FlashAttention gives, and as naive attention and SDPA give.
        block_q, block_k: tile height (queries) and width (keys). Any lengths work: the last
            tiles are smaller.

    Returns:
        The output, shaped and typed like `q`, and the log-sum-exp `(..., seq_len)` in the
        accumulation dtype: what FlashAttention saves for its backward pass.

    Inputs in float16 or bfloat16 are computed in float32, as FlashAttention keeps its
    running statistics and accumulator in float32.
    """
    _check(q, k, v, causal, {"block_q": block_q, "block_k": block_k})
    seq_len, kv_len = q.size(-2), k.size(-2)
    offset = kv_len - seq_len  # query i sees keys 0 .. i + offset
    acc_dtype = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(q.size(-1))
    lowest = torch.finfo(acc_dtype).min
    out = torch.empty_like(q)
    lse = q.new_empty(q.shape[:-1], dtype=acc_dtype)
    q, k, v = (t.to(acc_dtype) for t in (q, k, v))
    # --8<-- [start:loop]
    for q0 in range(0, seq_len, block_q):  # one query tile (one program of a GPU kernel)
        q1 = min(q0 + block_q, seq_len)
        q_i = q[..., q0:q1, :] * scale
        # The running max starts at the lowest finite value, not -inf: a query whose keys so
        # far are all masked then gets exp(-inf - lowest) = 0, not exp(-inf + inf) = NaN.
        m = torch.full(q_i.shape[:-1], lowest, dtype=acc_dtype, device=q.device)
        l = torch.zeros_like(m)  # running Σ exp(score - m) per query; m: running max
        acc = torch.zeros_like(q_i)  # running Σ exp(score - m) · v
        # Causal: key tiles that start after this tile's last query are never visited.
        kv_end = min(kv_len, q1 + offset) if causal else kv_len
        for k0 in range(0, kv_end, block_k):
            k1 = min(k0 + block_k, kv_len)
            with record_function("tiled.scores"):
                s = q_i @ k[..., k0:k1, :].transpose(-2, -1)  # a block_q × block_k tile
                if causal and k1 - 1 > q0 + offset:  # the tile crosses the diagonal
                    rows = torch.arange(q0, q1, device=q.device)
                    cols = torch.arange(k0, k1, device=q.device)
                    s = s.masked_fill(cols > rows[:, None] + offset, -math.inf)
            with record_function("tiled.online_softmax"):
                m_new = torch.maximum(m, s.amax(dim=-1))
                p = torch.exp(s - m_new[..., None])
                alpha = torch.exp(m - m_new)  # < 1 where the max grew: rescale old sums
                l = alpha * l + p.sum(dim=-1)
                m = m_new
            with record_function("tiled.accumulate"):
                acc = alpha[..., None] * acc + p @ v[..., k0:k1, :]
        with record_function("tiled.normalize"):
            lse[..., q0:q1] = m + torch.log(l)  # -inf for a query that saw no key (l = 0)
            if causal and q0 < -offset:  # such queries are here: out = acc / 1 = 0, not 0/0
                l = l.masked_fill(l == 0, 1.0)
            out[..., q0:q1, :] = acc / l[..., None]
    # --8<-- [end:loop]
    return out, lse


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
) -> torch.Tensor:
    """softmax(q·kᵀ/√head_dim)·v, FlashAttention's way: tiles and an online softmax.

    See `tiled_attention_with_lse` for the arguments; this returns the output only.
    """
    out, _ = tiled_attention_with_lse(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    return out
