# Which device a run uses, and a description of the local one for provenance. The records
# (DeviceInfo, the spec sheets, device ids) live in records/device.py; this module asks torch.
from __future__ import annotations

import os
import platform
from typing import TYPE_CHECKING

from attention_docs.records.device import DEVICE_CHOICES, DeviceInfo, cpu_name, spec_for

if TYPE_CHECKING:
    import torch


class DeviceError(ValueError):
    """A device was asked for that this machine does not have."""


def resolve_device(device: str = "auto") -> torch.device:
    """`"auto"` -> CUDA if available, else CPU. An unavailable device raises `DeviceError`."""
    import torch

    if device not in DEVICE_CHOICES:
        raise DeviceError(f"unknown device {device!r}; choose one of: {', '.join(DEVICE_CHOICES)}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceError(
            "device 'cuda' was asked for but this machine has no usable CUDA device "
            f"(torch {torch.__version__}, built with CUDA {torch.version.cuda}); use --device cpu"
        )
    return torch.device(device)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:  # noqa: PTH123 - Linux only, tiny
            found = cpu_name(f.read())
    except OSError:
        found = None
    return found or platform.processor() or platform.machine() or "unknown CPU"


def describe(device: torch.device) -> DeviceInfo:
    """A `DeviceInfo` for a resolved device."""
    import torch

    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        return DeviceInfo(
            kind="cuda",
            name=props.name,
            capability=f"{props.major}{props.minor}",
            memory_bytes=int(props.total_memory),
            spec=spec_for(props.name),
        )
    return DeviceInfo(
        kind="cpu",
        name=_cpu_name(),
        threads=torch.get_num_threads(),
        memory_bytes=_cpu_memory_bytes(),
    )


def _cpu_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def synchronize(device: torch.device) -> None:
    """Wait for queued work on `device` (a no-op on the CPU)."""
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)
