# The machine's two ceilings, measured: a large matmul for FLOP/s per dtype, a large copy
# for memory bandwidth (and a small one for cache bandwidth). This is the ONE routine that
# measures them; the `machine_ceilings` experiment stores its result once per device, and
# every chapter that places something under a roof reads that entry. Timed with interleaved
# rounds like every other timing, so each ceiling carries its spread.
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from attention_docs.records.device import DeviceInfo

if TYPE_CHECKING:
    import torch

# Spec-sheet keys (records/device.py) for the matmul ceiling of each dtype.
SPEC_KEYS = {"bfloat16": "bf16_tflops", "float16": "fp16_tflops", "float32": "fp32_tflops"}
COLUMNS = (
    "kind",
    "dtype",
    "size",
    "flops",
    "bytes",
    "time_us",
    "low_us",
    "high_us",
    "flop_per_s",
    "bytes_per_s",
    "spec_per_s",
)
UNITS = {
    "bytes": "B",
    "time_us": "µs",
    "low_us": "µs",
    "high_us": "µs",
    "flop_per_s": "FLOP/s",
    "bytes_per_s": "B/s",
    "spec_per_s": "/s",
}


def _spec(info: DeviceInfo, key: str, scale: float) -> float | None:
    spec = info.spec or {}
    return spec[key] * scale if spec.get(key) else None


def _itemsize(dtype: str) -> int:
    return {"float32": 4, "bfloat16": 2, "float16": 2}[dtype]


# --8<-- [start:ceilings]
def matmul_ceiling(device: torch.device, n: int, dtype: str) -> dict:
    """FLOP/s of an n×n by n×n matmul: 2·n³ FLOPs (a multiply and an add per term)."""
    import torch

    from attention_docs.inputs import resolve_dtype
    from attention_docs.profiling.timing import time_callable

    a = torch.randn(n, n, device=device).to(resolve_dtype(dtype))
    b = torch.randn(n, n, device=device).to(resolve_dtype(dtype))
    t = time_callable(lambda: a @ b, device, min_run_time=0.3)
    flops = 2.0 * n**3
    return {
        "flops": flops,
        "time_us": t.time_us,
        "low_us": t.low_us,
        "high_us": t.high_us,
        "flop_per_s": flops / t.time_us * 1e6,
    }


def copy_ceiling(device: torch.device, nbytes: int) -> dict:
    """Bytes/s of a copy: each byte read once and written once."""
    import torch

    from attention_docs.profiling.timing import time_callable

    src = torch.randn(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    t = time_callable(lambda: dst.copy_(src), device, min_run_time=0.3)
    moved = 2.0 * src.nbytes
    return {
        "bytes": moved,
        "time_us": t.time_us,
        "low_us": t.low_us,
        "high_us": t.high_us,
        "bytes_per_s": moved / t.time_us * 1e6,
    }


# --8<-- [end:ceilings]


def ceiling_points(*, matmul_size: int, copy_mb: int, dtypes: tuple[str, ...]) -> list[dict]:
    """Matmuls at n/4, n/2 and n per dtype, and copies of copy_mb/64 (cache) and copy_mb."""
    for name in dtypes:
        if name not in SPEC_KEYS:
            raise ValueError(f"dtype {name!r} is not one of: {', '.join(SPEC_KEYS)}")
    points = [
        {"kind": "matmul", "dtype": dtype, "size": size}
        for dtype in dtypes
        for size in sorted({max(matmul_size // 4, 1), max(matmul_size // 2, 1), matmul_size})
    ]
    points += [
        {"kind": "copy", "dtype": "float32", "size": mb * 2**20}
        for mb in sorted({max(copy_mb // 64, 1), copy_mb})
    ]
    return points


def measure_point(device: torch.device, info: DeviceInfo, point: Mapping) -> dict:
    """One row of the ceilings table: a matmul or a copy, timed, beside its spec sheet."""
    if point["kind"] == "matmul":
        n, dtype = point["size"], point["dtype"]
        result = matmul_ceiling(device, n, dtype)
        result["bytes"] = 3.0 * n * n * _itemsize(dtype)
        result["spec_per_s"] = _spec(info, SPEC_KEYS[dtype], 1e12)
    else:
        result = copy_ceiling(device, point["size"])
        result["flops"] = 0.0
        result["spec_per_s"] = _spec(info, "hbm_gbs", 1e9)
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}


def ceiling_facts(records: list[Mapping]) -> dict[str, float]:
    """The ceilings as facts: best matmul FLOP/s per dtype, the largest copy's bytes/s."""
    facts: dict[str, float] = {}
    rows = [r for r in records if r["time_us"] is not None]
    for r in rows:
        if r["kind"] == "matmul":
            key = f"peak_flops_{r['dtype']}"
            if r["flop_per_s"] > facts.get(key, 0.0):
                facts[key] = r["flop_per_s"]
                # The same matmul's slowest and fastest round: the ceiling's own noise.
                facts[f"peak_flops_{r['dtype']}_low"] = r["flops"] / r["high_us"] * 1e6
                facts[f"peak_flops_{r['dtype']}_high"] = r["flops"] / r["low_us"] * 1e6
    copies = [r for r in rows if r["kind"] == "copy"]
    if copies:
        big = max(copies, key=lambda r: r["size"])
        facts["bandwidth_bs"] = big["bytes_per_s"]
        facts["bandwidth_bs_low"] = big["bytes"] / big["high_us"] * 1e6
        facts["bandwidth_bs_high"] = big["bytes"] / big["low_us"] * 1e6
        facts["cache_bandwidth_bs"] = min(copies, key=lambda r: r["size"])["bytes_per_s"]
    return facts
