# What a measurement ran on, as plain data: the device description a Measurement carries,
# the GPU data sheets the site knows, and the short device id that names store files. No
# torch: renderers, findings and forecasts read these; profiling/device.py describes the
# local device with torch.
from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass

DEVICE_CHOICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class SpecSheet:
    """A GPU's vendor data-sheet figures, and the names CUDA reports for it.

    Tensor-core figures are dense (no structured sparsity): where a data sheet lists only the
    with-sparsity figure, half of it. `fp32_tflops` is the non-tensor FP32 peak, which is what
    a float32 matmul gets when TF32 is off (PyTorch's default for matmuls).
    """

    slug: str  # short name for `device_id`: "cuda-" + slug
    names: tuple[str, ...]  # exactly as torch.cuda.get_device_name() reports them
    bf16_tflops: float
    fp16_tflops: float
    tf32_tflops: float
    fp32_tflops: float
    hbm_gbs: float  # memory bandwidth, GB/s (10^9 B/s)
    memory_gb: float  # memory capacity, GB as the data sheet states it
    source: str
    # A regex for reported names beyond `names`, matched whole against the name lowercased
    # with single spaces.
    pattern: str | None = None
    # The chip: compute capability ("90"), streaming multiprocessors, L2 cache in MB (data
    # sheet or architecture whitepaper). Shared memory per SM and per block follow from the
    # capability (SHARED_MEMORY_KB). None where not recorded.
    capability: str | None = None
    sm_count: int | None = None
    l2_mb: float | None = None
    # The memory total the driver reports (nvidia-smi's "MiB" column, torch's
    # total_memory / 2**20), where recorded: REPORTED_MIB_SOURCE. A data sheet's "141 GB" is
    # neither 141·10⁹ bytes nor 141 GiB.
    reported_mib: int | None = None

    @property
    def label(self) -> str:
        """The part's name as a reader knows it: "NVIDIA H200"."""
        return self.names[0]

    @property
    def shared_memory_per_block_kb(self) -> int | None:
        """The most shared memory one thread block (one FlashAttention program) may use."""
        return SHARED_MEMORY_KB.get(self.capability or "", (None, None))[1]

    def matches(self, name: str) -> bool:
        key = _normalise(name)
        if key in (_normalise(n) for n in self.names):
            return True
        return self.pattern is not None and re.fullmatch(self.pattern, key) is not None

    def to_spec(self) -> dict[str, float | str]:
        """The figures as `DeviceInfo.spec` stores them."""
        return {
            "bf16_tflops": self.bf16_tflops,
            "fp16_tflops": self.fp16_tflops,
            "tf32_tflops": self.tf32_tflops,
            "fp32_tflops": self.fp32_tflops,
            "hbm_gbs": self.hbm_gbs,
            "memory_gb": self.memory_gb,
            "source": self.source,
        }


# Shared memory per SM and the most one thread block may use, in KB, by compute capability:
# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability".
SHARED_MEMORY_KB = {"80": (164, 163), "86": (100, 99), "89": (100, 99), "90": (228, 227)}

REPORTED_MIB_SOURCE = (
    "nvidia-smi's memory total as its users post it: 143771MiB on an H200 SXM (e.g. "
    "github.com/bigstack-oss/cubecos/issues/312 and many others), 81559MiB on an H100 SXM and "
    "81920MiB on an A100 80GB (github.com/modal-labs/modal-client/pull/2797)"
)

_HOPPER = "NVIDIA H100 Tensor Core GPU data sheet"
_A100 = "NVIDIA A100 Tensor Core GPU data sheet"
_HALVED = "; tensor figures are half the with-sparsity ones"

# Only parts whose data-sheet figures we are sure of: an unknown GPU gets no spec sheet (the
# roofline experiment measures its ceilings), which is better than a wrong one. Columns: slug,
# reported names, then TFLOP/s for bf16, fp16, tf32 (tensor cores, dense) and fp32 (no tensor
# cores), then GB/s and GB of memory, then the data sheet; then the chip (capability, SMs, L2
# from the same data sheets and NVIDIA's Hopper, Ampere and Ada architecture whitepapers).
SPEC_SHEETS: tuple[SpecSheet, ...] = (
    SpecSheet("h200", ("NVIDIA H200",), 989.5, 989.5, 494.5, 67.0, 4800.0, 141.0,
              f"NVIDIA H200 Tensor Core GPU data sheet, H200 SXM{_HALVED}",
              capability="90", sm_count=132, l2_mb=50.0, reported_mib=143771),
    SpecSheet("h200-nvl", ("NVIDIA H200 NVL",), 835.5, 835.5, 417.5, 60.0, 4800.0, 141.0,
              f"NVIDIA H200 Tensor Core GPU data sheet, H200 NVL{_HALVED}",
              capability="90", sm_count=132, l2_mb=50.0),
    SpecSheet("h100-sxm", ("NVIDIA H100 80GB HBM3",), 989.5, 989.5, 494.5, 67.0, 3350.0, 80.0,
              f"{_HOPPER}, H100 SXM{_HALVED}",
              capability="90", sm_count=132, l2_mb=50.0, reported_mib=81559),
    SpecSheet("h100-pcie", ("NVIDIA H100 PCIe",), 756.5, 756.5, 378.0, 51.0, 2000.0, 80.0,
              f"{_HOPPER}, H100 PCIe{_HALVED}",
              capability="90", sm_count=114, l2_mb=50.0),
    SpecSheet("h100-nvl", ("NVIDIA H100 NVL",), 835.5, 835.5, 417.5, 60.0, 3900.0, 94.0,
              f"{_HOPPER}, H100 NVL (one GPU){_HALVED}",
              capability="90", sm_count=132, l2_mb=50.0),
    SpecSheet("gh200-480gb", ("NVIDIA GH200 480GB",), 990.0, 990.0, 494.0, 67.0, 4000.0, 96.0,
              "NVIDIA GH200 Grace Hopper Superchip data sheet, 96 GB HBM3 version",
              capability="90", sm_count=132, l2_mb=50.0),
    SpecSheet("a100-sxm4-80gb", ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM-80GB"),
              312.0, 312.0, 156.0, 19.5, 2039.0, 80.0, f"{_A100}, A100 80GB SXM",
              capability="80", sm_count=108, l2_mb=40.0, reported_mib=81920),
    SpecSheet("a100-sxm4-40gb", ("NVIDIA A100-SXM4-40GB",),
              312.0, 312.0, 156.0, 19.5, 1555.0, 40.0, f"{_A100}, A100 40GB SXM",
              capability="80", sm_count=108, l2_mb=40.0),
    SpecSheet("a100-pcie-80gb", ("NVIDIA A100 80GB PCIe",),
              312.0, 312.0, 156.0, 19.5, 1935.0, 80.0, f"{_A100}, A100 80GB PCIe",
              capability="80", sm_count=108, l2_mb=40.0),
    SpecSheet("a100-pcie-40gb", ("NVIDIA A100-PCIE-40GB",),
              312.0, 312.0, 156.0, 19.5, 1555.0, 40.0, f"{_A100}, A100 40GB PCIe",
              capability="80", sm_count=108, l2_mb=40.0),
    SpecSheet("b200", ("NVIDIA B200",), 2250.0, 2250.0, 1100.0, 80.0, 8000.0, 180.0,
              "NVIDIA HGX B200 figures (1,000 W) as tabulated at glennklockwood.com/garden/"
              "processors/B200 (dense; memory per GPU: HGX B200's 1.44 TB over 8 GPUs)",
              capability="100"),
    SpecSheet("a10", ("NVIDIA A10",), 125.0, 125.0, 62.5, 31.2, 600.0, 24.0,
              "NVIDIA A10 Tensor Core GPU data sheet",
              capability="86", sm_count=72, l2_mb=6.0),
    SpecSheet("l4", ("NVIDIA L4",), 121.0, 121.0, 60.0, 30.3, 300.0, 24.0,
              f"NVIDIA L4 Tensor Core GPU data sheet{_HALVED}",
              capability="89", sm_count=58, l2_mb=48.0),
    SpecSheet("l40s", ("NVIDIA L40S",), 362.05, 362.05, 183.0, 91.6, 864.0, 48.0,
              "NVIDIA L40S GPU data sheet",
              capability="89", sm_count=142, l2_mb=96.0),
    SpecSheet("rtx-4090", ("NVIDIA GeForce RTX 4090",), 165.2, 165.2, 82.6, 82.6, 1008.0, 24.0,
              "NVIDIA Ada GPU Architecture whitepaper, GeForce RTX 4090; tensor figures with "
              "FP32 accumulate",
              capability="89", sm_count=128, l2_mb=72.0),
)  # fmt: skip


def _normalise(name: str) -> str:
    return " ".join(name.split()).casefold()


@dataclass(frozen=True)
class DeviceInfo:
    """What a measurement ran on."""

    kind: str  # "cpu" or "cuda"
    name: str
    threads: int | None = None
    capability: str | None = None
    memory_bytes: int | None = None
    spec: dict[str, float | str] | None = None  # spec_for(name): data-sheet figures

    @property
    def label(self) -> str:
        if self.kind == "cpu":
            return f"CPU: {self.name}, {self.threads} thread{'' if self.threads == 1 else 's'}"
        return f"GPU: {self.name} (sm_{self.capability})"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> DeviceInfo:
        return cls(**data)


def cpu_name(cpuinfo: str) -> str | None:
    """The CPU's model name from the text of /proc/cpuinfo (its first processor), or None.

    A virtual machine often shows only a family name with no model number ("AMD EPYC"),
    which two CPU generations of different speed and instruction sets share: such a name
    gets the CPUID family and model, "AMD EPYC (family 25, model 17)", so that each is a
    device of its own and the store never serves one's numbers as the other's."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip() and fields:
            break  # the end of the first processor's block
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name")
    if not name:
        return None
    family, model = fields.get("cpu family"), fields.get("model")
    if not any(c.isdigit() for c in name) and family and model:
        return f"{name} (family {family}, model {model})"
    return name


def spec_sheet_for(name: str) -> SpecSheet | None:
    """The `SpecSheet` whose reported names include `name` (case and spacing aside), or None.

    Names are matched whole, never as substrings: "NVIDIA GH200 480GB" is not an H200.
    """
    return next((sheet for sheet in SPEC_SHEETS if sheet.matches(name)), None)


def spec_for(name: str) -> dict[str, float | str] | None:
    """Spec-sheet peaks for a GPU name as `torch.cuda.get_device_name()` reports it, or None
    when we do not know the part. Keys: bf16_tflops, fp16_tflops, tf32_tflops, fp32_tflops,
    hbm_gbs, memory_gb, source."""
    sheet = spec_sheet_for(name)
    return sheet.to_spec() if sheet else None


_ID_LENGTH = 40
# Words in CPU model names that name no particular part.
_CPU_NOISE = re.compile(r"\((?:r|tm|c)\)|\b(?:cpu|processor|\d+-core)\b|@.*$", flags=re.IGNORECASE)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.casefold()).strip("-")


def device_id(info: DeviceInfo) -> str:
    """A short, stable name for the device a measurement ran on, e.g. "cuda-h200",
    "cuda-a100-sxm4-80gb", "cpu-amd-epyc-7b13", "cpu-amd-epyc-family-25-model-17".

    Known GPUs use their spec sheet's slug, other GPUs a slug of their name (without the
    vendor prefix "NVIDIA"), CPUs a slug of the model name without trademarks, "CPU",
    "Processor", core counts and clock. Lowercase letters, digits and hyphens, at most 40
    characters: a longer slug is cut and ends in a hash of the whole name, so it stays unique.
    """
    if info.kind == "cuda":
        sheet = spec_sheet_for(info.name)
        slug = sheet.slug if sheet else _slug(re.sub(r"^\s*nvidia\b", "", info.name, flags=re.I))
    else:
        slug = _slug(_CPU_NOISE.sub(" ", info.name))
    prefix = "cuda" if info.kind == "cuda" else "cpu"
    text = f"{prefix}-{slug or 'unknown'}"
    if len(text) <= _ID_LENGTH:
        return text
    digest = hashlib.sha256(info.name.encode()).hexdigest()[:6]
    return f"{text[: _ID_LENGTH - 7].rstrip('-')}-{digest}"
