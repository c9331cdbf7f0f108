# The training step of attention: a forward that autograd records, then the backward that
# turns the gradient of the output into gradients of q, k and v. Both halves run inside a
# labelled range so that a profile splits cleanly into forward and backward, and the
# implementations are named so that experiments and tests compare the same set.
from __future__ import annotations

from collections.abc import Callable

import torch
from torch.profiler import record_function

from attention_docs.attention.naive import naive_attention
from attention_docs.attention.sdpa import sdpa_attention

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def implementation(name: str, *, causal: bool = False) -> Attend:
    """`attend(q, k, v)` for `"naive"` or an SDPA backend pinned by name (`"sdpa-flash"`).

    Raises:
        ValueError: `name` is not one of `IMPLEMENTATIONS`.
    """
    if name == "naive":
        return lambda q, k, v: naive_attention(q, k, v, causal=causal)
    backend = name.removeprefix("sdpa-")
    if name.startswith("sdpa-") and backend in ("math", "flash", "efficient", "cudnn"):
        return lambda q, k, v: sdpa_attention(q, k, v, causal=causal, backend=backend)
    raise ValueError(
        f"unknown implementation {name!r}; choose one of: {', '.join(IMPLEMENTATIONS)}"
    )


IMPLEMENTATIONS: tuple[str, ...] = (
    "naive",
    "sdpa-math",
    "sdpa-flash",
    "sdpa-efficient",
    "sdpa-cudnn",
)


# --8<-- [start:step]
def forward_backward(
    attend: Attend,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    grad_out: torch.Tensor,
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """One forward and one backward; returns the output and (dq, dk, dv).

    `q`, `k` and `v` must require grad. `torch.autograd.grad` returns the gradients
    instead of accumulating them into `.grad`, so repeated calls measure the same work.
    """
    with record_function("attention.forward"):
        out = attend(q, k, v)  # autograd records the ops and saves what backward needs
    with record_function("attention.backward"):
        grads = torch.autograd.grad(out, (q, k, v), grad_out)
    return out, grads


# --8<-- [end:step]
