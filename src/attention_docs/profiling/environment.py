# The process a measurement runs in: how many threads torch uses, and what the C library's
# malloc does with freed memory. Every worker sets both before its experiment starts
# (experiments/runner.py), and every experiment's fingerprint includes this file, so a change
# here re-measures everything.
#
# Threads: half the cores this process may use (at least one). The other half is left to
# the rest of the machine (the build that asked, a browser, an editor). With a thread on
# every core, any other process stalls one of them and the op waits for it at every barrier:
# on the 2-core machine the site is built on, with one other CPU-bound process running, two
# threads timed the scale step at 7.9 ms and one thread at 56 µs (docs/method.md).
#
# Memory: what the C library's malloc does with memory a worker frees. PyTorch's CPU allocator keeps
# no pool of its own: a tensor's memory goes back to glibc's malloc when it is freed, and by
# default glibc hands large freed blocks back to the operating system (it trims the heap
# and unmaps large blocks), so the next tensor of that size page-faults on every page it
# writes. On the 2-core guest the site is built on a 1 MB score matrix written into fresh
# pages cost about 4 µs per 4 KB page: 737 faults and ~3 ms of a 5 ms forward, noise that
# depends on the hypervisor rather than on attention (a step timed alone in a loop reuses
# its block and faults on none). A worker therefore tells malloc to keep what it frees (no
# trimming) and to map no block of its own (glibc maps a block above 32 MiB afresh on every
# call, and unmaps it when freed: at 2,048 tokens every N×N tensor of four heads is 64 MiB
# and faulted 16,384 pages per call); every block comes from the heap, as a GPU's caching
# allocator keeps its pool. Most warm calls reuse memory; the first calls of a process, or of
# a larger shape, still fault while the heap grows (chapter 01 counts both).
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
