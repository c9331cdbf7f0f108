# The process a measurement runs in: its torch threads and its malloc. Every worker sets both
# before its experiment (experiments/runner.py); every fingerprint includes this file.
#
# Threads: half the cores this process may use, the rest left to the machine: with a thread
# on every core, any other process stalls one at every barrier (on 2 cores beside one busy
# process, the scale step took 7.9 ms on two threads, 56 µs on one: docs/method.md).
# Memory: PyTorch's CPU allocator frees into glibc's malloc, which by default trims the heap
# and maps blocks above 32 MiB afresh, so the next tensor page-faults on every page it writes
# (on the 2-core guest, ~3 ms of a 5 ms forward). A worker tells malloc to trim nothing and
# map no block of its own, so memory is reused as a GPU's caching allocator reuses it.
from __future__ import annotations

import ctypes
import ctypes.util
import sys

import torch

from attention_docs.profiling.load import cores_available

# glibc's mallopt parameters (malloc.h) and the largest mmap threshold it accepts on a
# 64-bit machine (DEFAULT_MMAP_THRESHOLD_MAX).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_MMAP_MAX = -4
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024
TRIM_NEVER = 2**31 - 1

KEPT = "glibc malloc keeps freed memory (no trimming, no block mapped on its own: all reused)"
DEFAULT = "the C library's default malloc"


def keep_freed_memory() -> str:
    """Make this process's malloc keep the memory it frees (Linux with glibc); returns what
    the allocator now does, in words for the provenance."""
    if not sys.platform.startswith("linux"):
        return DEFAULT
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other C libraries have no mallopt
        return DEFAULT
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if (
        mallopt(M_TRIM_THRESHOLD, TRIM_NEVER)
        and mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)
        and mallopt(M_MMAP_MAX, 0)
    ):
        return KEPT
    return DEFAULT


def set_threads() -> int:
    """Give torch half the cores this process may use as intra-op threads (at least one);
    returns the count (recorded in the provenance and stated in every CPU caption)."""
    torch.set_num_threads(max(1, cores_available() // 2))
    return torch.get_num_threads()
