# The float64 reference every parity test compares against, written once and independently
# of the code under test: einsum, an explicit mask, softmax.
from __future__ import annotations

import math

import torch


def attention_reference(q, k, v, *, causal=False, top_left=False, keep=None, bias=None, lse=False):
    """softmax(q·kᵀ/√d + bias)·v in float64 (and the row log-sum-exp when `lse`).

    A causal mask aligns the last query with the last key (a query block at the end of a
    longer sequence), unless `top_left`, which is how SDPA's `is_causal` aligns it.
    `keep` is an explicit boolean mask (True: take part), broadcast over batch and heads.
    A query the mask leaves no key gets the site's convention: output 0 (the empty sum),
    log-sum-exp -inf.
    """
    q, k, v = (t.double() for t in (q, k, v))
    scores = torch.einsum("bhnd,bhmd->bhnm", q, k) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias.double()
    if causal:
        n, m = scores.shape[-2:]
        shift = 0 if top_left else m - n
        scores = scores.where(
            torch.arange(m)[None, :] <= torch.arange(n)[:, None] + shift, -math.inf
        )
    if keep is not None:
        scores = scores.where(keep, -math.inf)
    empty = torch.isneginf(scores).all(-1, keepdim=True)
    probs = scores.softmax(-1).masked_fill(empty, 0.0)
    out = torch.einsum("bhnm,bhmd->bhnd", probs, v)
    return (out, scores.logsumexp(-1)) if lse else out


def rel_err(actual, expected) -> float:
    """‖actual − expected‖ / ‖expected‖, computed in float64."""
    return ((actual.double() - expected).norm() / expected.norm()).item()
