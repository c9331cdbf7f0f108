# Attention written out as the five steps the whole site profiles. Each step runs inside a
# `record_function` range whose name is the step label, so profiles, tables and figures all
# speak of the same five things. Chapters show this file through pymdown snippets: keep the
# section markers around the code a reader should see.
from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.profiler import record_function

from attention_docs.records.steps import STEPS

__all__ = ["STEPS", "causal_mask", "naive_attention", "naive_step_calls"]


def causal_mask(seq_len: int, kv_seq_len: int | None = None, *, device=None) -> torch.Tensor:
    """Boolean mask, True where a query may **not** look (a key in its future).

    Aligned bottom-right, the site's one convention (tiled, Triton, SDPA through
    `sdpa_attention`, FlexAttention's `causal_lower_right` and decoding follow it, as
    FlashAttention ≥ 2.1 does): the queries are the last `seq_len` positions of the
    `kv_seq_len` keys, so query `i` sees keys `0 .. i + kv_seq_len - seq_len`. With more
    queries than keys the first `seq_len - kv_seq_len` queries see none (a fully masked row).
    """
    kv_len = seq_len if kv_seq_len is None else kv_seq_len
    return torch.ones(seq_len, kv_len, dtype=torch.bool, device=device).triu(kv_len - seq_len + 1)


# --8<-- [start:steps]
def naive_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False
) -> torch.Tensor:
    """softmax(q·kᵀ / √head_dim) · v, one labelled step at a time.

    `causal` masks bottom-right (see `causal_mask`). A query that sees no key (causal, more
    queries than keys) gets 0, the empty sum, as SDPA's kernels, FlexAttention and
    FlashAttention give: softmax alone would make its row 0/0 = NaN.
    """
    with record_function("attention.scores"):
        scores = q @ k.transpose(-2, -1)  # (..., seq_len, seq_len): the N×N matrix
    with record_function("attention.scale"):
        scores = scores / math.sqrt(q.size(-1))
    with record_function("attention.mask"):
        if causal:
            mask = causal_mask(q.size(-2), k.size(-2), device=q.device)
            scores = scores.masked_fill(mask, float("-inf"))
    with record_function("attention.softmax"):
        probs = torch.softmax(scores, dim=-1)
        if causal and q.size(-2) > k.size(-2):  # the first queries see no key: 0, not NaN
            probs = probs.masked_fill(mask.all(dim=-1, keepdim=True), 0.0)
    with record_function("attention.weighted_sum"):
        return probs @ v


# --8<-- [end:steps]


def naive_step_calls(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False
) -> dict[str, Callable[[], torch.Tensor]]:
    """Each of `naive_attention`'s steps as a call of its own, in order, on inputs the steps
    before it made: run one after another (profiling/timing.py's StepSequence), each call's
    time is that step's time in the forward, without the profiler's.

    The expressions are those of `naive_attention` above; without `causal` there is no
    mask step.
    """
    scores = q @ k.transpose(-2, -1)
    scaled = scores / math.sqrt(q.size(-1))
    masked = scaled
    calls: dict[str, Callable[[], torch.Tensor]] = {
        "attention.scores": lambda: q @ k.transpose(-2, -1),
        "attention.scale": lambda: scores / math.sqrt(q.size(-1)),
    }
    if causal:
        mask = causal_mask(q.size(-2), k.size(-2), device=q.device)
        masked = scaled.masked_fill(mask, float("-inf"))
        calls["attention.mask"] = lambda: scaled.masked_fill(
            causal_mask(q.size(-2), k.size(-2), device=q.device), float("-inf")
        )
    if causal and q.size(-2) > k.size(-2):

        def softmax() -> torch.Tensor:
            return torch.softmax(masked, dim=-1).masked_fill(mask.all(dim=-1, keepdim=True), 0.0)
    else:

        def softmax() -> torch.Tensor:
            return torch.softmax(masked, dim=-1)

    probs = softmax()
    calls["attention.softmax"] = softmax
    calls["attention.weighted_sum"] = lambda: probs @ v
    return calls
