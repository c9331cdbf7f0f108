# Which backend ran a CPU matmul, as oneDNN reports it: its verbose mode prints the
# instruction set it dispatched on and the kernel it chose for each primitive it executes.
# The memory chapter needs it because oneDNN's bfloat16 matmul asks PyTorch's allocator for a
# scratchpad (`attr-scratchpad:user`) on CPUs with AVX-512 bf16 or AMX, and not on others:
# the peak of a forward depends on the instruction set, and the page must say which it was.
from __future__ import annotations

import contextlib
import ctypes
import os
import tempfile
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class OneDnnMatmul:
    """What oneDNN said about one matmul: its ISA line and the kernel it ran (None: the
    matmul did not go through oneDNN)."""

    isa: str | None  # "Intel AVX10.1 and Intel AMX with bfloat16 and 8-bit integer support"
    kernel: str | None  # "brg_matmul:avx10_1_512_amx"
    user_scratchpad: bool  # the scratchpad comes from PyTorch's allocator


def _fflush() -> None:
    # No C library to flush (not Linux): nothing is buffered there.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


def onednn_matmul(a: torch.Tensor, b: torch.Tensor) -> OneDnnMatmul:
    """Run `torch.bmm(a, b)` once on the CPU with oneDNN's verbose mode on, and read what it
    printed (to the process's stdout, captured here)."""
    if not torch.backends.mkldnn.is_available():
        return OneDnnMatmul(None, None, False)
    torch.bmm(a, b)  # created before, so the verbose run only executes it
    with tempfile.TemporaryFile() as captured:
        _fflush()
        saved = os.dup(1)
        try:
            os.dup2(captured.fileno(), 1)
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                torch.bmm(a, b)
            _fflush()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        captured.seek(0)
        lines = captured.read().decode(errors="replace").splitlines()
    isa = next((line.split("isa:", 1)[1] for line in lines if ",cpu,isa:" in line), None)
    fields = next((line.split(",") for line in lines if ",exec,cpu,matmul," in line), None)
    kernel = fields[fields.index("matmul") + 1] if fields else None
    return OneDnnMatmul(isa, kernel, bool(fields) and "attr-scratchpad:user" in fields)
