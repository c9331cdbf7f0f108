# What autograd keeps alive between forward and backward. `saved_tensors_hooks` sees every
# tensor a node saves for its backward; several nodes often save views of the same storage
# (a matmul saves its operand, the next op saves the same buffer reshaped), so tensors are
# counted once per storage, by the bytes of the storage they keep alive.
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

INPUT = "input"
OUTPUT = "output"
INTERNAL = "saved for backward"


@dataclass(frozen=True)
class SavedTensor:
    """One storage that autograd keeps for the backward, and what it is."""

    shape: tuple[int, ...]
    dtype: str
    bytes: int
    role: str  # "input" (q, k, v: alive anyway), "output", or "saved for backward"


def saved_tensors(
    fn: Callable[[], torch.Tensor], inputs: Sequence[torch.Tensor]
) -> list[SavedTensor]:
    """Storages saved for backward while `fn()` runs, once each, largest first.

    `inputs` are the tensors the caller keeps alive anyway (q, k, v): a saved view of one of
    them costs no extra memory and is marked as such.
    """
    seen: dict[int, torch.Tensor] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen.setdefault(t.untyped_storage().data_ptr(), t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    input_ptrs = {t.untyped_storage().data_ptr() for t in inputs}
    out_ptr = out.untyped_storage().data_ptr()
    result = []
    for ptr, t in seen.items():
        role = INPUT if ptr in input_ptrs else OUTPUT if ptr == out_ptr else INTERNAL
        result.append(
            SavedTensor(
                tuple(t.shape),
                str(t.dtype).removeprefix("torch."),
                t.untyped_storage().nbytes(),
                role,
            )
        )
    return sorted(result, key=lambda s: (-s.bytes, s.role))
