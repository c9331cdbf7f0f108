# A FlashAttention forward pass written in Triton: the algorithm of tiled.py as one fused GPU
# kernel. This module imports without triton (so that experiments and docs can ask
# `triton_available()` and say why not); the kernel module is imported on first use, on a
# CUDA GPU, or on CPU tensors under Triton's interpreter (TRITON_INTERPRET=1, set before
# the first call), which is how the test suite checks the kernel without a GPU.
from __future__ import annotations

import importlib.util
import math
import os
from dataclasses import dataclass

import torch

__all__ = ["KernelConfig", "kernel_config", "triton_available", "triton_flash_attention"]

LOG2_E = 1.4426950408889634


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "").lower() in ("1", "true", "on", "yes")


def triton_available() -> tuple[bool, str]:
    """Whether `triton_flash_attention` can run here, and why (or why not), in words."""
    if importlib.util.find_spec("triton") is None:
        return False, "triton is not installed (pip install triton)"
    if _interpreting():
        return True, "Triton's interpreter (TRITON_INTERPRET=1) runs the kernel on the CPU"
    if not torch.cuda.is_available():
        return False, "the Triton kernel needs a CUDA GPU, and this machine has none"
    major, minor = torch.cuda.get_device_capability()
    if major < 8:
        return (
            False,
            f"the kernel needs compute capability 8.0 or newer; this GPU has {major}.{minor}",
        )
    return True, f"CUDA GPU {torch.cuda.get_device_name()} (sm_{major}{minor})"


@dataclass(frozen=True)
class KernelConfig:
    """Tile sizes and launch settings of one kernel launch."""

    block_m: int  # queries per program (block_q)
    block_n: int  # keys per loop iteration (block_k)
    block_d: int  # head_dim rounded up to a power of two
    num_warps: int
    num_stages: int


def kernel_config(
    head_dim: int, dtype: torch.dtype, *, block_m: int | None = None, block_n: int | None = None
) -> KernelConfig:
    """Tiles that fit in shared memory: 128×64 for 2-byte inputs, 64×32 for float32.

    The Q tile and `num_stages` K and V tiles must fit in the SM's shared memory
    (about 228 KB on an H100); float32 tiles are twice as large, so they are smaller.
    """
    block_d = max(16, 1 << (head_dim - 1).bit_length())
    if block_d > 256:
        raise ValueError(f"head_dim={head_dim} is larger than this kernel supports (256)")
    two_bytes = dtype in (torch.float16, torch.bfloat16)
    m = block_m or (128 if two_bytes else 64)
    n = block_n or (64 if two_bytes else 32)
    for name, value in (("block_m", m), ("block_n", n)):
        if value < 16 or value & (value - 1):
            raise ValueError(f"{name} must be a power of two of at least 16, got {value}")
    return KernelConfig(
        block_m=m,
        block_n=n,
        block_d=block_d,
        num_warps=8 if two_bytes and block_d >= 128 else 4,
        num_stages=2 if block_d > 128 or not two_bytes else 3,
    )


def triton_flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    block_m: int | None = None,
    block_n: int | None = None,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """softmax(q·kᵀ/√head_dim)·v in one fused Triton kernel.

    Args:
        q: `(batch_size, num_heads, seq_len, head_dim)`, float16, bfloat16 or float32.
        k, v: `(batch_size, num_heads, kv_seq_len, head_dim)`. Causal with
            `kv_seq_len > seq_len` treats the queries as the last positions.
        causal: mask the future; key tiles past the diagonal are never loaded.
        block_m, block_n: tile sizes (powers of two ≥ 16); defaults from `kernel_config`.
        return_lse: also return the float32 log-sum-exp, `(batch_size, num_heads, seq_len)`.

    Raises:
        RuntimeError: triton cannot run here (the message says why).
        ValueError: shapes, dtypes or tile sizes this kernel does not handle.
    """
    ok, why = triton_available()
    if not ok:
        raise RuntimeError(f"triton_flash_attention cannot run: {why}")
    if q.dim() != 4 or k.shape != v.shape or q.shape[:2] != k.shape[:2]:
        raise ValueError(
            "q must be (batch_size, num_heads, seq_len, head_dim) and k, v "
            f"(batch_size, num_heads, kv_seq_len, head_dim); got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.size(-1) != k.size(-1) or not (q.dtype == k.dtype == v.dtype):
        raise ValueError("q, k and v must share head_dim and dtype")
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"the kernel takes float16, bfloat16 or float32, not {q.dtype}")
    batch_size, num_heads, seq_len, head_dim = q.shape
    kv_len = k.size(-2)
    if causal and kv_len < seq_len:
        raise ValueError("causal attention needs at least as many keys as queries")
    cfg = kernel_config(head_dim, q.dtype, block_m=block_m, block_n=block_n)
    dtype = q.dtype
    if _interpreting() and dtype == torch.bfloat16:
        # Triton 3.9's interpreter multiplies bfloat16 tiles wrongly in tl.dot (NumPy has no
        # bfloat16): run it on float32 copies, which a bfloat16 value converts to exactly.
        q, k, v = q.float(), k.float(), v.float()
    from attention_docs.attention._flash_kernel import flash_forward_kernel

    out = torch.empty_like(q)
    lse = torch.empty(batch_size, num_heads, seq_len, dtype=torch.float32, device=q.device)
    grid = (math.ceil(seq_len / cfg.block_m), batch_size * num_heads)
    flash_forward_kernel[grid](
        q, k, v, out, lse,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        num_heads, seq_len, kv_len, head_dim, LOG2_E / math.sqrt(head_dim),
        CAUSAL=causal, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_D=cfg.block_d,
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    out = out.to(dtype)
    return (out, lse) if return_lse else out
