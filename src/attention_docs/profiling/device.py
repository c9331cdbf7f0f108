# Which device a run uses, and a plain description of it for provenance and for the cost
# model. Spec-sheet peaks are looked up by name for known GPUs only; a CPU's ceilings are
# measured by the roofline experiment, never guessed. torch is imported inside functions so
# that DeviceInfo can be read by the renderers, which never import torch.
from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

DEVICE_CHOICES = ("auto", "cpu", "cuda")

# Dense tensor-core peaks (no sparsity) in TFLOP/s and HBM bandwidth in GB/s, from the vendors'
# data sheets. Keys are matched as substrings of torch.cuda.get_device_name().
SPEC_SHEETS: dict[str, dict[str, float]] = {
    "H200": {"bf16_tflops": 989.0, "fp16_tflops": 989.0, "fp32_tflops": 67.0, "hbm_gbs": 4800.0},
    "H100 SXM": {
        "bf16_tflops": 989.0,
        "fp16_tflops": 989.0,
        "fp32_tflops": 67.0,
        "hbm_gbs": 3350.0,
    },
    "H100 PCIe": {
        "bf16_tflops": 756.0,
        "fp16_tflops": 756.0,
        "fp32_tflops": 51.0,
        "hbm_gbs": 2000.0,
    },
    "A100": {"bf16_tflops": 312.0, "fp16_tflops": 312.0, "fp32_tflops": 19.5, "hbm_gbs": 2039.0},
    "L4": {"bf16_tflops": 121.0, "fp16_tflops": 121.0, "fp32_tflops": 30.3, "hbm_gbs": 300.0},
    "RTX 4090": {
        "bf16_tflops": 165.0,
        "fp16_tflops": 165.0,
        "fp32_tflops": 82.6,
        "hbm_gbs": 1008.0,
    },
}


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


@dataclass(frozen=True)
class DeviceInfo:
    """What a measurement ran on."""

    kind: str  # "cpu" or "cuda"
    name: str
    threads: int | None = None
    capability: str | None = None
    memory_bytes: int | None = None
    spec: dict[str, float] | None = None

    @property
    def label(self) -> str:
        if self.kind == "cpu":
            return f"CPU: {self.name}, {self.threads} threads"
        return f"GPU: {self.name} (sm_{self.capability})"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> DeviceInfo:
        return cls(**data)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:  # noqa: PTH123 - Linux only, tiny
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def spec_for(name: str) -> dict[str, float] | None:
    """Spec-sheet peaks for a GPU name, or None when we do not know the part."""
    for key, spec in SPEC_SHEETS.items():
        if key in name:
            return dict(spec)
    return None


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


def device_id(info: DeviceInfo) -> str:
    """A stable short name for a device, used in store file names: `cpu-amd-epyc-7b13`."""
    import re

    name = re.sub(r"\((?:r|tm)\)|\bcpu\b|@.*$|\bnvidia\b|\bgeforce\b", " ", info.name.lower())
    words = re.findall(r"[a-z0-9]+", name)
    return "-".join([info.kind, *words])[:40].rstrip("-")
