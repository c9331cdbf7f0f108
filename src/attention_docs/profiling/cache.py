# The size of a device's last-level cache, recorded by sweeps whose time bends when the N×N
# matrix stops fitting in it. On Linux the CPU's caches are described under
# /sys/devices/system/cpu/cpu0/cache (what `lscpu` reads too); a CUDA GPU reports its L2.
# Kept apart from device.py: only the experiments that explain a bend need it.
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

SYS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
_SUFFIXES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@dataclass(frozen=True)
class CacheInfo:
    """The last-level cache: its level, size, and where that was read."""

    level: int
    size_bytes: int
    source: str  # "/sys/devices/system/cpu/cpu0/cache/index3" or "CUDA device properties"

    def to_facts(self) -> dict:
        return {
            "llc_level": self.level,
            "llc_bytes": self.size_bytes,
            "llc_source": self.source,
        }


def _size(text: str) -> int | None:
    text = text.strip().upper()
    if not text:
        return None
    scale = _SUFFIXES.get(text[-1], 1)
    digits = text[:-1] if text[-1] in _SUFFIXES else text
    try:
        return int(digits) * scale
    except ValueError:
        return None


def cpu_last_level_cache(root: Path = SYS_CACHE) -> CacheInfo | None:
    """The highest-level data or unified cache of cpu0, or None where sysfs does not say."""
    best: CacheInfo | None = None
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text(encoding="utf-8"))
            kind = (index / "type").read_text(encoding="utf-8").strip()
            size = _size((index / "size").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or size is None:
            continue
        if best is None or level > best.level:
            best = CacheInfo(level, size, f"{root.as_posix()}/{index.name}")
    return best


def last_level_cache(device: torch.device) -> CacheInfo | None:
    """The last-level cache of `device`: the CPU's from sysfs, a CUDA GPU's L2."""
    if device.type == "cuda":
        import torch

        size = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
        return CacheInfo(2, int(size), "CUDA device properties (L2_cache_size)") if size else None
    return cpu_last_level_cache()
