# The forecast the site would state for one attention on a named GPU, for any shape: the
# analytic model's kernels (analytic/gpu.py, only called here, never changed), their floor
# and realistic range, the ceiling that bounds them, and whether the GPU can hold the
# shape. No torch, no words: render/gpu_forecast.py says it, forecast_command.py asks.
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.analytic import gpu as gpus
from attention_docs.analytic.gpu import KernelForecast, Range
from attention_docs.findings.memory import peak_model
from attention_docs.records.device import SpecSheet
from attention_docs.records.published import ANY, FLASH_2
from attention_docs.records.shape import Shape

NAIVE, SDPA_MATH, SDPA_FLASH = "naive", "sdpa-math", "sdpa-flash"
SDPA_EFFICIENT, SDPA_CUDNN = "sdpa-efficient", "sdpa-cudnn"
IMPLS = (NAIVE, SDPA_MATH, SDPA_FLASH, SDPA_EFFICIENT, SDPA_CUDNN)
# The model has no kernel of their own for these: like findings/published.py, it prices
# them as the one fused forward kernel FlashAttention is, at FlashAttention-2's efficiency
# but for cuDNN's, whose Hopper kernels are of FlashAttention-3's generation.
AS_FLASH = frozenset({SDPA_EFFICIENT, SDPA_CUDNN})
# How the model priced a case: one decode step, one fused forward, or the kernels of a
# recording of the code's ATen ops (records/recorded_ops.json).
DECODE, FUSED, RECORDED = "decode step", "fused forward", "recorded ops"
COMPUTE, MEMORY, LATENCY = "compute", "memory", "latency"


class ForecastError(ValueError):
    """A case the forecast cannot be made for: printed as one line, exit code 2."""


@dataclass(frozen=True)
class GpuForecast:
    """What the model says of `impl` at `shape` on `gpu`.

    `recording` names the recorded code whose ops were priced (model RECORDED), else "".
    `memory_bytes` is what the GPU must hold at once (`memory_needed`)."""

    gpu: SpecSheet
    impl: str
    shape: Shape
    model: str
    recording: str
    kernels: tuple[KernelForecast, ...]
    range: Range
    memory_bytes: float

    @property
    def bound(self) -> str:
        """ "latency" where the kernels launch fewer thread blocks than the GPU has SMs, or
        their fixed cost is at least half of the range's low end; else "compute" or
        "memory": the ceiling behind the larger share of the floor."""
        sms = self.gpu.sm_count or 0
        fixed = len(self.kernels) * gpus.KERNEL_FIXED_US
        if all(0 < k.programs < sms for k in self.kernels) or (
            self.range.low_us is not None and 2 * fixed >= self.range.low_us
        ):
            return LATENCY
        compute = sum(k.floor_us for k in self.kernels if k.limit == COMPUTE)
        return COMPUTE if compute >= self.range.floor_us - compute else MEMORY

    def to_json(self) -> dict:
        s = self.shape
        return {
            "gpu": self.gpu.slug,
            "impl": self.impl,
            "shape": {
                "batch_size": s.batch_size,
                "num_heads": s.num_heads,
                "num_kv_heads": s.kv_heads,
                "seq_len": s.seq_len,
                "kv_len": s.keys,
                "head_dim": s.head_dim,
                "dtype": s.dtype,
                "causal": s.causal,
            },
            "model": self.model,
            "recording": self.recording or None,
            "floor_us": self.range.floor_us,
            "low_us": self.range.low_us,
            "high_us": self.range.high_us,
            "bound": self.bound,
            "sources": list(self.range.sources),
            "memory_bytes": self.memory_bytes,
            "kernels": [
                {
                    "label": k.label,
                    "op": k.op or None,
                    "flops": k.flops,
                    "bytes": k.bytes,
                    "floor_us": k.floor_us,
                    "bound": k.limit,
                }
                for k in self.kernels
            ],
        }


def forecast(gpu: SpecSheet, impl: str, shape: Shape) -> GpuForecast:
    """The model's forecast of one forward of `impl` at `shape` on `gpu`.

    One query token (seq_len 1) is a decode step whatever the implementation; naive attention
    and SDPA's math backend are the kernels of their recorded ops; the fused backends are one
    FlashAttention forward kernel.

    Raises:
        ForecastError: An unknown `impl`, or a causal shape with fewer keys than queries
            (its first queries would see no key at all).
    """
    if impl not in IMPLS:
        raise ForecastError(f"unknown implementation {impl!r}; choose one of: {', '.join(IMPLS)}")
    if shape.causal and shape.keys < shape.seq_len:
        raise ForecastError(
            f"a causal forward with fewer keys (kv_len {shape.keys}) than queries (seq_len "
            f"{shape.seq_len}) leaves its first queries no key to attend to; give a kv_len of "
            "at least seq_len, or leave out causal"
        )
    recording = ""
    if shape.seq_len == 1:
        model, kernels = DECODE, (gpus.decode_step(gpu, shape),)
    elif impl in (NAIVE, SDPA_MATH):
        model, recording = RECORDED, _recording(impl, shape)
        kernels = gpus.naive_kernels(gpu, shape, gpus.code_ops(shape, recording))
    else:
        kind = ANY if impl == SDPA_CUDNN else FLASH_2
        model, kernels = FUSED, (gpus.flash_forward(gpu, shape, kernel=kind),)
    return GpuForecast(
        gpu,
        impl,
        shape,
        model,
        recording,
        kernels,
        gpus.realistic(gpu, kernels),
        memory_needed(impl, shape),
    )


def too_big(gpu: SpecSheet, impl: str, shape: Shape) -> float | None:
    """The bytes `impl` at `shape` must hold at once, when `gpu` has fewer; else None.
    Cheap: asked before the forecast, whose tiling walks every query tile."""
    need = memory_needed(impl, shape)
    return need if need > gpus.memory_bytes(gpu) else None


def memory_needed(impl: str, shape: Shape) -> float:
    """What the GPU must hold at once: the inputs, and the naive forward's live score
    matrices (naive code, SDPA math) or a fused forward's output and log-sum-exp (everything
    else, and every decode step)."""
    if shape.seq_len == 1 or impl not in (NAIVE, SDPA_MATH):
        return gpus.compulsory_bytes(shape)
    return float(peak_model(shape).total_bytes)


def _recording(impl: str, shape: Shape) -> str:
    """The recording that prices `impl` at `shape`. SDPA's math backend was recorded causal,
    square and in bfloat16 (its ops differ otherwise: a bottom-right mask or none, and no
    upcast in float32); elsewhere its ops are the naive code's, which it decomposes into."""
    if impl == SDPA_MATH and shape.causal and shape.kv_len is None and shape.dtype != "float32":
        return gpus.SDPA_MATH
    return gpus.NAIVE_CODE if shape.causal else gpus.NAIVE_CODE_FULL
