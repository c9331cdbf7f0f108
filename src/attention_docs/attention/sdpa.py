# torch.nn.functional.scaled_dot_product_attention (SDPA) with its backend made explicit.
# SDPA is one call that dispatches to one of several kernels; which one depends on the
# device, dtype, mask, head_dim, dropout and the GPU's compute capability, and PyTorch says
# why it skipped a kernel only when that kernel is the only one allowed. `why_backend` asks
# it exactly that way: it pins each backend in turn and keeps what torch said.
#
# `why_backend` runs one call under torch.profiler to see which op SDPA dispatched to: the op
# name is the only public witness of the choice. It is the one exception to "no profiling in
# attention/", kept here because the verdict is part of the API other chapters call.
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

import torch
from torch.nn import functional
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile, record_function

from attention_docs.attention.naive import causal_mask

BACKENDS: tuple[str, ...] = ("math", "flash", "efficient", "cudnn")

SDP_BACKENDS: dict[str, SDPBackend] = {
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}

# The ATen op each backend dispatches to (checked in this order: the fused names contain
# no common prefix with the math one, but `_flash_attention` is a prefix of the CPU variant).
BACKEND_OPS: tuple[tuple[str, str], ...] = (
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "flash"),
    ("aten::_scaled_dot_product_flash_attention", "flash"),
    ("aten::_scaled_dot_product_efficient_attention", "efficient"),
    ("aten::_scaled_dot_product_cudnn_attention", "cudnn"),
    ("aten::_scaled_dot_product_attention_math", "math"),
)

KERNEL_NAMES = {
    "math": "math (decomposed)",
    "flash": "FlashAttention",
    "efficient": "memory-efficient",
    "cudnn": "cuDNN",
}

CHOSEN = "chosen"
ELIGIBLE = "eligible"
REJECTED = "rejected"
UNAVAILABLE = "not available"
STATUSES = (CHOSEN, ELIGIBLE, REJECTED, UNAVAILABLE)


def backend_of_op(name: str) -> str | None:
    """The backend an ATen op belongs to (`"flash"` for `..._flash_attention_for_cpu`), or None."""
    for prefix, backend in BACKEND_OPS:
        if name.startswith(prefix):
            return backend
    return None


# --8<-- [start:masks]
def keep_mask(seq_len: int, kv_seq_len: int | None = None, *, device=None) -> torch.Tensor:
    """Causal mask in SDPA's boolean convention: True where a query **may** look.

    This is the opposite of `masked_fill`'s convention (True = hide), used by
    `causal_mask` and naive attention: pass `~causal_mask(...)` to SDPA, never `causal_mask`.
    """
    return ~causal_mask(seq_len, kv_seq_len, device=device)


def additive_mask(
    seq_len: int, kv_seq_len: int | None = None, *, dtype=torch.float32, device=None
) -> torch.Tensor:
    """Causal mask as a float tensor added to the scores: 0 where a query may look, -inf elsewhere."""
    hidden = causal_mask(seq_len, kv_seq_len, device=device)
    return torch.zeros(hidden.shape, dtype=dtype, device=device).masked_fill(hidden, float("-inf"))


# --8<-- [end:masks]


# --8<-- [start:call]
def sdpa_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    backend: str | None = None,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """softmax(q·kᵀ/√head_dim + mask)·v in one call, on `backend` or on SDPA's own choice.

    Args:
        q, k, v: `(batch_size, num_heads, seq_len, head_dim)` tensors; k and v may have
            another length, `kv_seq_len`.
        causal: mask the future, aligned bottom-right as `causal_mask` is: query `i` sees
            keys `0 .. i + kv_seq_len - seq_len`. Square shapes pass `is_causal` (no mask
            tensor); others pass `causal_lower_right`, because `is_causal` alone aligns
            top-left (query `i` sees keys `0 .. i`). A query that sees no key gets 0.
        backend: one of `BACKENDS` to pin it with `sdpa_kernel`; None lets SDPA choose.
        attn_mask: a boolean mask (True = take part in attention) or a float mask added
            to the scores, broadcastable to `(batch_size, num_heads, seq_len, kv_seq_len)`.
        dropout_p: dropout on the attention probabilities.

    An unknown `backend`, or `causal` with an `attn_mask`, raises `ValueError`; a pinned
    backend that cannot run these inputs on this device raises torch's `RuntimeError`
    (`why_backend` explains why).
    """
    allowed = list(SDP_BACKENDS.values()) if backend is None else [_sdp_backend(backend)]
    is_causal = causal and q.size(-2) == k.size(-2)
    if causal and not is_causal:
        if attn_mask is not None:
            raise ValueError(
                "pass causal=True or an attn_mask, not both; fold the one into the other"
            )
        attn_mask = _lower_right(q.size(-2), k.size(-2))
    with record_function("attention.sdpa"), sdpa_kernel(allowed):
        return functional.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal
        )


# --8<-- [end:call]


def _lower_right(seq_len: int, kv_seq_len: int):
    """torch's bottom-right causal bias, without its warning that more queries than keys
    "will produce NaNs": on the CPU it becomes a boolean mask, and math (`_safe_softmax`) and
    flash return 0 for the queries that see no key (tests/test_attention.py). On a GPU the
    flash path calls FlashAttention's own causal kernel, which returns 0 for them too
    (FlashAttention 2.1's README); the memory-efficient kernel's row is unchecked here."""
    # Imported here: torch.nn.attention.bias imports Dynamo, which a worker that never
    # compiles should not pay for (workers.py starts children with what they declare).
    from torch.nn.attention.bias import causal_lower_right

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Lower right causal bias", category=UserWarning)
        return causal_lower_right(seq_len, kv_seq_len)


def _sdp_backend(backend: str) -> SDPBackend:
    try:
        return SDP_BACKENDS[backend]
    except KeyError:
        raise ValueError(
            f"unknown SDPA backend {backend!r}; choose one of: {', '.join(BACKENDS)}"
        ) from None


@dataclass(frozen=True)
class BackendVerdict:
    """What SDPA does with one backend for given inputs.

    `status` is `"chosen"` (SDPA runs it when free to choose), `"eligible"` (it runs when
    pinned, but SDPA prefers another), `"rejected"` (it exists on this device but refuses
    these inputs) or `"not available"` (this device has no such kernel). `reason` says why
    in torch's own words where torch gives any; `op` is the ATen op it dispatched to.
    """

    backend: str
    status: str
    reason: str
    op: str | None = None

    @property
    def runs(self) -> bool:
        return self.status in (CHOSEN, ELIGIBLE)


# --8<-- [start:why]
def why_backend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> list[BackendVerdict]:
    """For these inputs: which backend SDPA picks, and why each other one was not picked.

    Each backend is pinned in turn; a refusal is explained by the warnings torch emits
    ("Flash attention kernel not used because: ...") and its error. The free choice is read
    from the op SDPA dispatches to under the profiler. Never raises for a backend that
    cannot run: that becomes a verdict.

    It profiles one call itself, so call it outside any active `torch.profiler` session.

    Returns:
        One `BackendVerdict` per name in `BACKENDS`, in that order.
    """
    kwargs = {"causal": causal, "attn_mask": attn_mask, "dropout_p": dropout_p}
    chosen_op = _dispatched_op(lambda: sdpa_attention(q, k, v, **kwargs))
    chosen = backend_of_op(chosen_op) if chosen_op else None
    verdicts = []
    for backend in BACKENDS:
        error, said = _try_pinned(lambda b=backend: sdpa_attention(q, k, v, backend=b, **kwargs))
        if error is None:
            op = _backend_op(backend, q.device)
            if backend == chosen:
                verdicts.append(BackendVerdict(backend, CHOSEN, "SDPA's choice", chosen_op))
            else:
                preferred = f"SDPA prefers {chosen}" if chosen else "SDPA prefers another backend"
                verdicts.append(
                    BackendVerdict(backend, ELIGIBLE, f"runs when pinned; {preferred}", op)
                )
            continue
        status, reason = _explain(backend, error, said, q.device)
        verdicts.append(BackendVerdict(backend, status, reason))
    return verdicts


# --8<-- [end:why]


def chosen_backend(verdicts: list[BackendVerdict]) -> str | None:
    """The name of the backend SDPA picked, from `why_backend`'s verdicts."""
    return next((v.backend for v in verdicts if v.status == CHOSEN), None)


def _dispatched_op(fn) -> str | None:
    """Name of the SDPA backend op `fn` dispatched to, read from a profile of one call."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn()
    for event in prof.events():
        if backend_of_op(event.name):
            return event.name
    return None


def _backend_op(backend: str, device: torch.device) -> str:
    if backend == "flash" and device.type == "cpu":
        return "aten::_scaled_dot_product_flash_attention_for_cpu"
    return next(op for op, b in BACKEND_OPS if b == backend and not op.endswith("_for_cpu"))


def _try_pinned(fn) -> tuple[str | None, list[str]]:
    """Run `fn`; returns (error text or None, the warnings torch emitted on the way)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn()
            error = None
        except RuntimeError as exc:
            error = str(exc)
    return error, [_clean(str(w.message)) for w in caught]


_TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?")


def _clean(message: str) -> str:
    return _TRIGGERED.sub("", message).strip()


def _explain(backend: str, error: str, said: list[str], device: torch.device) -> tuple[str, str]:
    """(status, reason) for a pinned backend that refused to run."""
    headers = ("kernel not used because", "not used because")
    details = [s for s in said if s and not any(s.rstrip(":").endswith(h) for h in headers)]
    first_line = _clean(error).splitlines()[0]
    if "No viable backend" in error and not details:
        where = "the CPU" if device.type == "cpu" else f"this {device.type} build"
        first_sentence = first_line.split(". ")[0].rstrip(".") + "."
        return UNAVAILABLE, (
            f"not available on this device: PyTorch has no {KERNEL_NAMES[backend]} kernel "
            f'for {where} (torch: "{first_sentence}")'
        )
    if details:
        return REJECTED, " ".join(dict.fromkeys(details))
    return REJECTED, f'torch gave no reason beyond "{first_line}"'
