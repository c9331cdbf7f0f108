# How much memory a new allocation can still get, and how to let go of what a failed attempt
# allocated. A sweep asks the first before each point (on the CPU, going past it gets the
# process killed rather than an exception) and does the second after an out-of-memory: the
# exception's traceback holds the failed code's frames, and they hold its tensors. Kept apart
# from memory.py, whose measurements are fingerprinted by many experiments.
from __future__ import annotations

import traceback
from pathlib import Path

import torch


def drop_traceback(exc: BaseException) -> None:
    """Let go of the locals of every frame an exception passed through.

    A caught out-of-memory's traceback holds the frames of the code that failed, and those
    hold its tensors: until they are cleared, the memory stays allocated however many times
    the cache is emptied. The chained exceptions (`__context__`, `__cause__`) are cleared too.
    """
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        traceback.clear_frames(e.__traceback__)  # skips frames still running (the caller's)
        e.__traceback__ = None
        stack += [e.__context__, e.__cause__]


def free_memory_bytes(device: torch.device | str) -> int | None:
    """Bytes a new allocation on `device` can still get, or None when that cannot be told.

    CUDA: the driver's free memory (`torch.cuda.mem_get_info`) plus what PyTorch's caching
    allocator holds without a tensor in it (it reuses that before asking the driver). CPU:
    `MemAvailable` from /proc/meminfo, capped by the container's memory limit (cgroup v2 or
    v1) where one is set, since going past that gets the process killed, not an exception.
    """
    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(free) + max(0, int(cached))
    if device.type != "cpu":
        return None
    available = _meminfo_available()
    headroom = _cgroup_headroom()
    if available is None or headroom is None:
        return available if headroom is None else headroom
    return min(available, headroom)


def _meminfo_available(path: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # the kernel writes kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_headroom(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The memory limit of this process's cgroup minus its usage, or None without a limit.

    Page cache counts as usage but the kernel reclaims it before it kills anything, so the
    inactive file pages are not counted as used.
    """
    for limit_file, usage_file, inactive_key in (
        ("memory.max", "memory.current", "inactive_file"),  # cgroup v2
        ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes", "total_inactive_file"),
    ):
        try:
            limit_text = (root / limit_file).read_text(encoding="utf-8").strip()
            usage = int((root / usage_file).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if limit_text == "max" or int(limit_text) >= 1 << 60:  # v1 writes "no limit" this way
            return None
        stat = (root / limit_file).with_name("memory.stat")
        inactive = 0
        try:
            for line in stat.read_text(encoding="utf-8").splitlines():
                key, _, value = line.partition(" ")
                if key == inactive_key:
                    inactive = int(value)
        except (OSError, ValueError):
            pass
        return max(0, int(limit_text) - max(0, usage - inactive))
    return None
