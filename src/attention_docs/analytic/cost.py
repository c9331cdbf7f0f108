# The cost model: floating-point operations and the minimum bytes each attention step must
# move, as functions of the shape and dtype. Pure arithmetic (no torch) so that experiments,
# renderers and tests share one definition. "Minimum bytes" means each input read once and
# each output written once: real kernels move at least this much, and the gap is a lesson.
from __future__ import annotations

from dataclasses import dataclass

ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}

# Per element of the N×M score matrix, softmax does: max, subtract, exp, sum, divide.
SOFTMAX_FLOPS_PER_ELEMENT = 5


@dataclass(frozen=True)
class StepCost:
    label: str
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP per byte."""
        return self.flops / self.bytes if self.bytes else 0.0


def itemsize(dtype: str) -> int:
    try:
        return ITEMSIZE[dtype]
    except KeyError:
        raise ValueError(
            f"no item size for dtype {dtype!r}; known: {', '.join(ITEMSIZE)}"
        ) from None


def score_matrix_bytes(
    batch_size: int,
    num_heads: int,
    seq_len: int,
    dtype: str = "float32",
    *,
    kv_len: int | None = None,
) -> int:
    """Bytes of one batch_size×num_heads×seq_len×kv_len score matrix: the tensor naive
    attention materialises (twice at its peak), and fused kernels never write."""
    m = seq_len if kv_len is None else kv_len
    return batch_size * num_heads * seq_len * m * itemsize(dtype)


# --8<-- [start:costs]
def step_costs(
    batch_size: int,
    num_heads: int,
    seq_len: int,
    head_dim: int,
    dtype: str = "float32",
    *,
    causal: bool = False,
    kv_seq_len: int | None = None,
) -> tuple[StepCost, ...]:
    """FLOPs and minimum bytes for each of the five steps of naive attention.

    The N×M matrices (scores, probs) are what makes attention quadratic: every step but the
    two matmuls' operands touches all B·H·N·M of them. Causal masking does not reduce the
    naive work: the masked entries are computed, then overwritten.
    """
    m = seq_len if kv_seq_len is None else kv_seq_len
    e = itemsize(dtype)
    bh = batch_size * num_heads
    nm = bh * seq_len * m  # elements of the score matrix
    q_elems = bh * seq_len * head_dim
    kv_elems = bh * m * head_dim
    matmul_flops = 2.0 * nm * head_dim
    mask_bytes = (nm * e * 2 + seq_len * m) if causal else 0.0  # read+write scores, read bool mask
    return (
        StepCost("attention.scores", matmul_flops, (q_elems + kv_elems + nm) * e),
        StepCost("attention.scale", float(nm), 2.0 * nm * e),
        # A select, not arithmetic: no FLOPs, but a full pass over the N×M matrix.
        StepCost("attention.mask", 0.0, float(mask_bytes)),
        StepCost("attention.softmax", float(SOFTMAX_FLOPS_PER_ELEMENT * nm), 2.0 * nm * e),
        StepCost("attention.weighted_sum", matmul_flops, (nm + kv_elems + q_elems) * e),
    )


# --8<-- [end:costs]


def attention_flops(
    batch_size: int, num_heads: int, seq_len: int, head_dim: int, *, kv_seq_len: int | None = None
) -> float:
    """FLOPs of the two matmuls over every (query, key) pair (4·B·H·N·M·D): what naive
    attention computes, masked or not."""
    m = seq_len if kv_seq_len is None else kv_seq_len
    return 4.0 * batch_size * num_heads * seq_len * m * head_dim


def visible_pairs(seq_len: int, kv_seq_len: int | None = None, *, causal: bool) -> int:
    """The (query, key) pairs a mask leaves visible, per batch and head.

    Causal masks are aligned bottom-right, as everywhere on this site (naive.causal_mask,
    FlashAttention ≥ 2.1): with N queries and M keys, query `i` sees keys
    `0 .. i + M - N`, none when that is negative. So N ≤ M gives N·M − N·(N−1)/2 pairs
    (N·(N+1)/2 when square; one query over a cache of M keys sees all M), and N > M gives
    M·(M+1)/2 (the first N − M queries see nothing).
    """
    m = seq_len if kv_seq_len is None else kv_seq_len
    if seq_len < 1 or m < 1:
        raise ValueError(f"seq_len and kv_seq_len must be at least 1, got {seq_len} and {m}")
    if not causal:
        return seq_len * m
    if m >= seq_len:
        return seq_len * m - seq_len * (seq_len - 1) // 2
    return m * (m + 1) // 2


def useful_flops(
    batch_size: int,
    num_heads: int,
    seq_len: int,
    head_dim: int,
    *,
    causal: bool,
    kv_seq_len: int | None = None,
) -> float:
    """FLOPs of the two matmuls over the visible (query, key) pairs only: 4·B·H·D per pair.

    The figure achieved FLOP/s are quoted against. FlashAttention's benchmarks halve
    4·B·H·N²·D for a square causal mask, the triangle's area; this counts its pairs, the
    diagonal included (N·(N+1)/2), a relative difference of 1/N. Unlike a halving, it is
    right for rectangular shapes: one query over M cached keys does 4·B·H·M·D.
    """
    pairs = visible_pairs(seq_len, kv_seq_len, causal=causal)
    return 4.0 * batch_size * num_heads * head_dim * pairs
