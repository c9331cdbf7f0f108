# Seeded q/k/v factories. Every experiment and test builds its inputs here so that two runs
# with the same parameters see the same numbers, and no input is ever all zeros (a zero
# tensor hides masking and softmax bugs).
from __future__ import annotations

import torch

from attention_docs.records.shape import Shape

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """Turn `"bfloat16"` (or a `torch.dtype`) into a `torch.dtype`.

    Raises:
        ValueError: the name is not one of `DTYPES`.
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype]
    except KeyError:
        valid = ", ".join(DTYPES)
        raise ValueError(f"unknown dtype {dtype!r}; choose one of: {valid}") from None


def dtype_name(dtype: torch.dtype) -> str:
    """The short name of a dtype, as used in parameters and captions (`"bfloat16"`)."""
    return str(dtype).removeprefix("torch.")


def make_qkv(
    batch_size: int = 1,
    num_heads: int = 4,
    seq_len: int = 128,
    head_dim: int = 64,
    *,
    dtype: str | torch.dtype = "float32",
    device: str | torch.device = "cpu",
    seed: int = 0,
    kv_seq_len: int | None = None,
    num_kv_heads: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded random `q`, `k`, `v` of shape `(batch_size, num_heads, seq_len, head_dim)`.

    Values are drawn in float32 from a CPU generator (so CPU and GPU runs see the same
    numbers), then cast and moved. `kv_seq_len` and `num_kv_heads` give k and v a different
    length (decoding against a cache) or fewer heads (grouped-query attention).
    """
    shape = Shape(batch_size, num_heads, seq_len, head_dim)
    kv_len = seq_len if kv_seq_len is None else kv_seq_len
    kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    Shape(batch_size, kv_heads, kv_len, head_dim)  # validates the k/v dimensions
    generator = torch.Generator().manual_seed(seed)
    target = resolve_dtype(dtype)

    def draw(*dims: int) -> torch.Tensor:
        return torch.randn(*dims, generator=generator).to(device=device, dtype=target)

    q = draw(*shape.dims)
    k = draw(batch_size, kv_heads, kv_len, head_dim)
    v = draw(batch_size, kv_heads, kv_len, head_dim)
    return q, k, v
