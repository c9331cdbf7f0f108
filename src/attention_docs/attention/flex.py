# FlexAttention: one fused attention kernel, specialised by two small Python functions.
# A `score_mod` rewrites each score (a bias such as ALiBi); a `mask_mod` says which
# query/key pairs may attend, and `create_block_mask` turns it into a BlockMask: which
# 128×128 tiles are empty (skipped), full (no mask work) or partial (mask applied). Next to
# each mod is the explicit dense tensor it replaces, which is what SDPA would need as
# `attn_mask` and what the tests check the mods against.
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
ScoreMod = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor
]


# --8<-- [start:causal]
def causal(b, h, q_idx, kv_idx):
    """A query sees itself and the keys before it."""
    return q_idx >= kv_idx


# --8<-- [end:causal]


# --8<-- [start:causal_lower_right]
def causal_lower_right(q_len: int, kv_len: int) -> MaskMod:
    """`causal` for `q_len` queries that end a sequence of `kv_len` keys: query `i` sees keys
    `0 .. i + kv_len - q_len`, aligned bottom-right like `causal_mask` and every other
    implementation here. `causal` compares positions as they are, which aligns top-left
    when the lengths differ; with equal lengths the two are one mask. A query that sees no
    key (more queries than keys) gets 0 from flex_attention."""
    offset = kv_len - q_len

    def mask_mod(b, h, q_idx, kv_idx):
        return q_idx + offset >= kv_idx

    return mask_mod


# --8<-- [end:causal_lower_right]


# --8<-- [start:sliding_window]
def sliding_window(window: torch.Tensor) -> MaskMod:
    """Causal, and at most `window - 1` tokens back (Mistral-style local attention).

    `window` is a tensor, not an int: a tensor the mod closes over becomes an input of the
    compiled kernel, so another width reuses the kernel instead of compiling a new one.
    """

    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window)

    return mask_mod


# --8<-- [end:sliding_window]


# --8<-- [start:alibi]
def alibi_slopes(num_heads: int, device=None) -> torch.Tensor:
    """ALiBi's per-head slopes: a geometric sequence 2^(-8/H), 2^(-16/H), ... (Press et al.)."""
    exponents = torch.arange(1, num_heads + 1, dtype=torch.float32, device=device)
    return torch.exp2(-8.0 * exponents / num_heads)


def alibi(slopes: torch.Tensor) -> ScoreMod:
    """Add a linear penalty for distance: head h's score drops by slopes[h] per token back."""

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + slopes[h] * (kv_idx - q_idx)

    return score_mod


# --8<-- [end:alibi]


# --8<-- [start:document]
def document_ids(lengths: Sequence[int], device=None) -> torch.Tensor:
    """For sequences packed end to end, the index of the document each token belongs to."""
    return torch.repeat_interleave(
        torch.arange(len(lengths), device=device), torch.tensor(lengths, device=device)
    )


def document(doc_ids: torch.Tensor) -> MaskMod:
    """Causal within each packed document; nothing across documents."""

    def mask_mod(b, h, q_idx, kv_idx):
        return (doc_ids[q_idx] == doc_ids[kv_idx]) & (q_idx >= kv_idx)

    return mask_mod


# --8<-- [end:document]


def split_lengths(seq_len: int, documents: int, *, seed: int = 0) -> list[int]:
    """`documents` uneven lengths that sum to `seq_len` (seeded), for a packed batch."""
    if not 1 <= documents <= seq_len:
        raise ValueError(f"cannot split seq_len={seq_len} into {documents} non-empty documents")
    generator = torch.Generator().manual_seed(seed)
    cuts = torch.randperm(seq_len - 1, generator=generator)[: documents - 1] + 1
    edges = [0, *sorted(cuts.tolist()), seq_len]
    return [b - a for a, b in itertools.pairwise(edges)]


# --8<-- [start:block_mask]
def block_mask_for(
    mask_mod: MaskMod, seq_len: int, device, *, kv_len: int | None = None
) -> BlockMask:
    """Evaluate `mask_mod` on every (query, key) pair once and keep only per-tile summaries.

    `B=None, H=None` broadcasts the mask over batch and heads (the mods above ignore them);
    `kv_len` defaults to `seq_len`.
    """
    keys = seq_len if kv_len is None else kv_len
    return create_block_mask(mask_mod, None, None, seq_len, keys, device=device)


# --8<-- [end:block_mask]


def block_counts(block_mask: BlockMask) -> dict[str, int]:
    """Tiles of the (first batch and head of the) BlockMask: total, skipped, partial, full."""
    partial = int(block_mask.kv_num_blocks[0, 0].sum())
    full = (
        int(block_mask.full_kv_num_blocks[0, 0].sum())
        if block_mask.full_kv_num_blocks is not None
        else 0
    )
    q_len, kv_len = block_mask.seq_lengths
    q_block, kv_block = block_mask.BLOCK_SIZE
    total = math.ceil(q_len / q_block) * math.ceil(kv_len / kv_block)
    return {"total": total, "skipped": total - partial - full, "partial": partial, "full": full}


# --8<-- [start:compiled]
_compiled_flex: dict[bool, Callable[..., torch.Tensor]] = {}


def compiled_flex_attention(*, dynamic: bool = False) -> Callable[..., torch.Tensor]:
    """`flex_attention` through torch.compile: the mods are traced into one fused kernel.

    Called without torch.compile, flex_attention runs an unfused reference path that
    materialises the whole score matrix (and warns about it). `dynamic=False` keeps every
    kernel specialised to its shapes (one compile per shape): after a few different mods,
    the default would switch to shape-generic kernels. `dynamic=True` asks for the
    shape-generic kernels from the start, so that a sweep over many sequence lengths pays a
    handful of compiles instead of one per shape.
    """
    if dynamic not in _compiled_flex:
        _compiled_flex[dynamic] = torch.compile(flex_attention, dynamic=dynamic)
    return _compiled_flex[dynamic]


# --8<-- [end:compiled]


# --8<-- [start:explicit]
def explicit_mask(
    kind: str, seq_len: int, *, window: int = 0, doc_ids: torch.Tensor | None = None, device=None
) -> torch.Tensor:
    """The dense (seq_len, seq_len) boolean mask, True where a query may attend."""
    i = torch.arange(seq_len, device=device)[:, None]
    j = torch.arange(seq_len, device=device)[None, :]
    allowed = j <= i
    if kind == "sliding_window":
        allowed &= i - j < window
    elif kind == "document":
        if doc_ids is None:
            raise ValueError("explicit_mask('document') needs doc_ids")
        allowed &= doc_ids[:, None] == doc_ids[None, :]
    elif kind not in ("causal", "alibi"):
        raise ValueError(f"unknown mask kind {kind!r}")
    return allowed


def explicit_alibi_bias(slopes: torch.Tensor, seq_len: int) -> torch.Tensor:
    """The dense (num_heads, seq_len, seq_len) ALiBi bias: slopes[h] · (j - i)."""
    distance = torch.arange(seq_len)[None, :] - torch.arange(seq_len)[:, None]
    return slopes[:, None, None].cpu().double() * distance.double()


# --8<-- [end:explicit]
