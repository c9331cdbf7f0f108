# Four ways to apply a causal mask inside naive attention. They compute the same numbers but
# allocate, read and write differently, and that difference is what the chapter measures.
# Every variant runs the same five labelled steps as naive.py, so that only the contents of
# `attention.mask` change between profiles. Chapters show each variant through its snippet.
from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.profiler import record_function

from attention_docs.attention.naive import causal_mask

MASK_VARIANTS: tuple[str, ...] = ("rebuild", "masked_fill", "masked_fill_", "additive")


# --8<-- [start:rebuild]
def mask_rebuild(scores: torch.Tensor, prepared: None) -> torch.Tensor:
    """Build the boolean mask on every call, then fill out of place (what naive.py does)."""
    mask = causal_mask(scores.size(-2), scores.size(-1), device=scores.device)
    return scores.masked_fill(mask, float("-inf"))


# --8<-- [end:rebuild]


# --8<-- [start:masked_fill]
def mask_masked_fill(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A boolean mask built once; `masked_fill` writes a new N×N tensor."""
    return scores.masked_fill(mask, float("-inf"))


# --8<-- [end:masked_fill]


# --8<-- [start:masked_fill_]
def mask_masked_fill_(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A boolean mask built once; `masked_fill_` overwrites the scores where they are."""
    return scores.masked_fill_(mask, float("-inf"))


# --8<-- [end:masked_fill_]


# --8<-- [start:additive]
def mask_additive(scores: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """A float bias built once (0 where allowed, -inf where masked), added to the scores."""
    return scores + bias


# --8<-- [end:additive]

MASK_FUNCTIONS: dict[str, Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]] = {
    "rebuild": mask_rebuild,
    "masked_fill": mask_masked_fill,
    "masked_fill_": mask_masked_fill_,
    "additive": mask_additive,
}


# --8<-- [start:prepare]
def prepare_mask(
    variant: str,
    seq_len: int,
    kv_seq_len: int | None = None,
    *,
    dtype: torch.dtype = torch.float32,
    device=None,
) -> torch.Tensor | None:
    """What a variant builds once, before any forward: nothing, a bool mask or a float bias."""
    if variant == "rebuild":
        return None
    mask = causal_mask(seq_len, kv_seq_len, device=device)
    if variant == "additive":
        zeros = torch.zeros(mask.shape, dtype=dtype, device=device)
        return zeros.masked_fill(mask, float("-inf"))
    return mask


# --8<-- [end:prepare]


def check_variant(variant: str) -> str:
    """The variant name, or a ValueError that lists the valid ones."""
    if variant not in MASK_FUNCTIONS:
        raise ValueError(
            f"unknown mask variant {variant!r}; choose one of: {', '.join(MASK_VARIANTS)}"
        )
    return variant


def masked_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    variant: str,
    prepared: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal naive attention whose `attention.mask` step applies the mask as `variant` does.

    `prepared` is what `prepare_mask(variant, ...)` built for these shapes (None for "rebuild").
    The mask is aligned bottom-right (`causal_mask`). More queries than keys would leave the
    first queries no key, a row this plain softmax turns into NaN where `naive_attention`
    gives 0: it raises `ValueError` instead.
    """
    apply_mask = MASK_FUNCTIONS[check_variant(variant)]
    if q.size(-2) > k.size(-2):
        raise ValueError(
            f"the mask variants take at least as many keys as queries; got {q.size(-2)} "
            f"queries and {k.size(-2)} keys (naive_attention handles that case)"
        )
    if variant != "rebuild" and prepared is None:
        raise ValueError(f"mask variant {variant!r} needs the tensor prepare_mask() builds for it")
    with record_function("attention.scores"):
        scores = q @ k.transpose(-2, -1)
    with record_function("attention.scale"):
        scores = scores / math.sqrt(q.size(-1))
    with record_function("attention.mask"):
        scores = apply_mask(scores, prepared)
    with record_function("attention.softmax"):
        probs = torch.softmax(scores, dim=-1)
    with record_function("attention.weighted_sum"):
        return probs @ v
