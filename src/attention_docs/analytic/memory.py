# The memory model of naive attention: which buffers are live at once during one forward,
# and so the peak it needs above its inputs and the longest sequence a device can hold.
# Pure arithmetic (no torch), shared by the experiments that compare it with the allocator
# and by the tests. The allocation timeline in the memory chapter is its justification.
from __future__ import annotations

import math
from dataclasses import dataclass

from attention_docs.analytic.cost import itemsize


@dataclass(frozen=True)
class PeakModel:
    """Bytes live at the peak of one naive forward, above its inputs q, k and v."""

    matrices: int  # how many B·H·N·M score-sized tensors are live at once
    matrix_bytes: int  # bytes of one of them
    mask_bytes: int  # the boolean causal mask (N·M bytes), 0 without masking
    output_bytes: int  # the result, B·H·N·D
    inputs_bytes: int  # q, k and v: live before the call, not part of the peak

    @property
    def peak_bytes(self) -> int:
        """The peak above what was live before the call."""
        return self.matrices * self.matrix_bytes + self.mask_bytes + self.output_bytes

    @property
    def total_bytes(self) -> int:
        """The peak plus the inputs: what the device must hold at once."""
        return self.peak_bytes + self.inputs_bytes


# The cuBLAS workspace PyTorch sets for each handle and stream on a Hopper GPU: the size the
# cuBLAS API reference recommends there (cublasSetWorkspace; PyTorch PR 120925). PyTorch
# allocates it through its caching allocator on a stream's first matmul and keeps it.
CUBLAS_WORKSPACE_HOPPER = 32 * 2**20

# CUDA's caching allocator hands out blocks in multiples of 512 bytes (the CPU's events carry
# the exact tensor size), so two sizes are "the same tensor size" when they round alike.
ALLOCATION_GRANULE = 512


def is_matrix_sized(nbytes: int, matrix_bytes: int) -> bool:
    """True when an allocation (or a free, negative) is the size of one score matrix.

    Like with like: the mask (N·M bytes) and the output (B·H·N·D elements) are other sizes,
    and are not counted, even when one of them is larger than a matrix (head_dim > seq_len).
    They are indistinguishable only when head_dim equals seq_len.
    """

    def granules(n: int) -> int:
        return -(-abs(n) // ALLOCATION_GRANULE)

    return nbytes != 0 and granules(nbytes) == granules(matrix_bytes)


# --8<-- [start:peak]
def naive_peak(
    batch_size: int,
    num_heads: int,
    seq_len: int,
    head_dim: int,
    dtype: str = "float32",
    *,
    causal: bool = False,
    kv_seq_len: int | None = None,
) -> PeakModel:
    """The live buffers at the peak of `naive_attention`, in bytes.

    Two N×M matrices are live at once: each element-wise step reads one and writes a new one
    (scale: raw and scaled scores; mask: scaled and masked; softmax: masked scores and probs),
    and the last of them stays referenced until the function returns, so it is still live
    when `attention.weighted_sum` allocates the output beside the probabilities. Causal
    masking adds the boolean mask (one byte per query-key pair, not per head).
    """
    m = seq_len if kv_seq_len is None else kv_seq_len
    e = itemsize(dtype)
    bh = batch_size * num_heads
    return PeakModel(
        matrices=2,
        matrix_bytes=bh * seq_len * m * e,
        mask_bytes=seq_len * m if causal else 0,
        output_bytes=bh * seq_len * head_dim * e,
        inputs_bytes=bh * (seq_len + 2 * m) * head_dim * e,
    )


# --8<-- [end:peak]


def max_seq_len(
    memory_bytes: int,
    batch_size: int,
    num_heads: int,
    head_dim: int,
    dtype: str = "float32",
    *,
    causal: bool = False,
) -> int:
    """The longest self-attention `seq_len` whose inputs and peak fit in `memory_bytes`.

    Solves total(N) = a·N² + b·N <= memory for the largest whole N, where a counts the
    score-sized matrices (and the mask) and b the inputs and the output.
    """
    if memory_bytes <= 0:
        return 0
    e = itemsize(dtype)
    bh = batch_size * num_heads
    a = 2 * bh * e + (1 if causal else 0)
    b = 4 * bh * head_dim * e
    n = int((-b + math.sqrt(b * b + 4 * a * memory_bytes)) / (2 * a))

    def fits(length: int) -> bool:
        model = naive_peak(batch_size, num_heads, length, head_dim, dtype, causal=causal)
        return model.total_bytes <= memory_bytes

    while n > 0 and not fits(n):  # float rounding can overshoot by one
        n -= 1
    while fits(n + 1):
        n += 1
    return n


def fused_peak(
    batch_size: int, num_heads: int, seq_len: int, head_dim: int, dtype: str = "float32"
) -> int:
    """What a fused (FlashAttention-style) forward keeps above its inputs: the output and the
    float32 log-sum-exp of each query row (saved for the backward). Its scores live one tile
    at a time in on-chip memory and never reach the device's memory, so nothing is N×N."""
    bh = batch_size * num_heads
    return bh * seq_len * head_dim * itemsize(dtype) + bh * seq_len * 4
