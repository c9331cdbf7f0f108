# A FlashAttention forward pass written in Triton: the algorithm of tiled.py as one fused GPU
# kernel. This module imports without triton (so that experiments and docs can ask
# `triton_available()` and say why not); the kernel module is imported on first use, on a
# CUDA GPU, or on CPU tensors under Triton's interpreter (TRITON_INTERPRET=1, set before
# the first call), which is how the test suite checks the kernel without a GPU.
#
# `prepare_triton_flash` does every check and choice once and returns a launcher whose call
# only allocates the output and launches the kernel, so that a timing loop times the kernel
# (and Triton's own launch path), not this module's Python.
from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

__all__ = [
    "INPUT_PRECISIONS",
    "FlashLaunch",
    "KernelConfig",
    "kernel_config",
    "launch_grid",
    "prepare_triton_flash",
    "triton_available",
    "triton_flash_attention",
]

LOG2_E = 1.4426950408889634
# What `tl.dot` does with float32 inputs on NVIDIA GPUs: "ieee" exact float32 products (no
# tensor cores), "tf32" tensor cores on inputs rounded to 10 mantissa bits, "tf32x3" three
# TF32 products that recover most of float32's accuracy. 16-bit inputs ignore it.
INPUT_PRECISIONS = ("ieee", "tf32", "tf32x3")
# CUDA's limit on the second and third grid dimensions (the first allows 2³¹ - 1).
MAX_GRID_Y = 65535


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


def launch_grid(batch_size: int, num_heads: int, seq_len: int, block_m: int) -> tuple[int, int]:
    """One program per (query tile, batch·head): `(ceil(seq_len / block_m), batch_size·num_heads)`.

    Query tiles go on the grid's first axis, which CUDA launches fastest, so the programs of
    one head run side by side and share its k and v in L2. The second axis is limited to
    65535, so `batch_size·num_heads` is too.
    """
    heads = batch_size * num_heads
    if heads > MAX_GRID_Y:
        raise ValueError(
            f"batch_size·num_heads = {heads} is more than the {MAX_GRID_Y} programs a CUDA grid "
            "allows on its second axis; split the batch into chunks"
        )
    return (math.ceil(seq_len / block_m), heads)


def _input_precision(dtype: torch.dtype, requested: str | None) -> str | None:
    if requested is not None and requested not in INPUT_PRECISIONS:
        raise ValueError(
            f"input_precision must be one of {', '.join(INPUT_PRECISIONS)}, got {requested!r}"
        )
    if dtype != torch.float32:
        return None  # tensor cores multiply 16-bit inputs as they are; tl.dot ignores it
    return requested or "ieee"


@dataclass(frozen=True, eq=False, slots=True)
class FlashLaunch:
    """A prepared Triton FlashAttention forward: call it to run the kernel.

    Each call allocates the output (and log-sum-exp) and launches the kernel on the tensors
    it was prepared with; the checks, the tile choice, the grid and the argument list were
    settled by `prepare_triton_flash`. The public fields say what was chosen.
    """

    config: KernelConfig
    grid: tuple[int, int]  # programs launched: (query tiles, batch_size·num_heads)
    # What tl.dot does with float32 inputs ("ieee", "tf32", "tf32x3"); None for float16 and
    # bfloat16 inputs, which the tensor cores take as they are.
    input_precision: str | None
    causal: bool
    return_lse: bool
    _inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] = field(repr=False)
    _scalars: tuple = field(repr=False)  # the kernel's strides, sizes and scale
    _meta: dict = field(repr=False)  # its constexprs and launch settings
    _launch: Callable = field(repr=False)  # the kernel bound to the grid
    _out_dtype: torch.dtype = field(repr=False)
    _out_stride: tuple[int, ...] = field(repr=False)

    def __call__(self) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        q = self._inputs[0]
        out = torch.empty_strided(q.shape, self._out_stride, dtype=q.dtype, device=q.device)
        lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
        self._launch(*self._inputs, out, lse, *self._scalars, **self._meta)
        if out.dtype != self._out_dtype:
            out = out.to(self._out_dtype)
        return (out, lse) if self.return_lse else out


def prepare_triton_flash(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    block_m: int | None = None,
    block_n: int | None = None,
    input_precision: str | None = None,
    return_lse: bool = False,
) -> FlashLaunch:
    """Check the inputs and settle the launch once; the returned `FlashLaunch` runs the kernel.

    Arguments as for `triton_flash_attention`. The launcher keeps references to q, k and v
    (under the interpreter, to float32 copies of bfloat16 ones) and reads them on every call.

    Raises:
        RuntimeError: triton cannot run here (the message says why).
        ValueError: shapes, dtypes, tile sizes or an input precision this kernel does not take.
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
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"q, k and v must be on one device, got {q.device}, {k.device}, {v.device}"
        )
    batch_size, num_heads, seq_len, head_dim = q.shape
    kv_len = k.size(-2)
    cfg = kernel_config(head_dim, q.dtype, block_m=block_m, block_n=block_n)
    precision = _input_precision(q.dtype, input_precision)
    grid = launch_grid(batch_size, num_heads, seq_len, cfg.block_m)
    out_dtype = q.dtype
    if _interpreting() and q.dtype == torch.bfloat16:
        # Triton 3.9's interpreter multiplies bfloat16 tiles wrongly in tl.dot (NumPy has no
        # bfloat16): run it on float32 copies, which a bfloat16 value converts to exactly.
        q, k, v = q.float(), k.float(), v.float()
    from attention_docs.attention._flash_kernel import flash_forward_kernel

    out_stride = torch.empty_like(q, device="meta").stride()  # as empty_like(q) would lay out
    return FlashLaunch(
        config=cfg,
        grid=grid,
        input_precision=precision,
        causal=causal,
        return_lse=return_lse,
        _inputs=(q, k, v),
        _scalars=(
            *q.stride(), *k.stride(), *v.stride(), *out_stride,
            num_heads, seq_len, kv_len, head_dim, LOG2_E / math.sqrt(head_dim),
        ),
        _meta={
            "CAUSAL": causal, "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n,
            "BLOCK_D": cfg.block_d, "PRECISION": precision or "ieee",
            "num_warps": cfg.num_warps, "num_stages": cfg.num_stages,
        },
        _launch=flash_forward_kernel[grid],
        _out_dtype=out_dtype,
        _out_stride=out_stride,
    )  # fmt: skip


def triton_flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    block_m: int | None = None,
    block_n: int | None = None,
    input_precision: str | None = None,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """softmax(q·kᵀ/√head_dim)·v in one fused Triton kernel.

    Prepares and runs the launch in one go; to time the kernel, prepare it once with
    `prepare_triton_flash` and time the launcher.

    Args:
        q: `(batch_size, num_heads, seq_len, head_dim)`, float16, bfloat16 or float32.
        k, v: `(batch_size, num_heads, kv_seq_len, head_dim)`.
        causal: mask the future, aligned bottom-right as `causal_mask` is (the queries are
            the last positions: query `i` sees keys `0 .. i + kv_seq_len - seq_len`); key
            tiles past the diagonal are never loaded. A query that sees no key (more
            queries than keys) gets 0 and a log-sum-exp of -inf, as in FlashAttention.
        block_m, block_n: tile sizes (powers of two ≥ 16); defaults from `kernel_config`.
        input_precision: for float32 inputs, what `tl.dot` does with them: "ieee" (the
            default: exact float32 products), "tf32" or "tf32x3" (tensor cores). Ignored for
            16-bit inputs.
        return_lse: also return the float32 log-sum-exp, `(batch_size, num_heads, seq_len)`.

    Raises:
        RuntimeError: triton cannot run here (the message says why).
        ValueError: shapes, dtypes or tile sizes this kernel does not handle.
    """
    return prepare_triton_flash(
        q,
        k,
        v,
        causal=causal,
        block_m=block_m,
        block_n=block_n,
        input_precision=input_precision,
        return_lse=return_lse,
    )()
