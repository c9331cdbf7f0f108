# Forecasts for a named GPU, from its data sheet (records/device.py) and this package's
# analytic models: what a chapter's question predicts on hardware the build may not have.
# Pure arithmetic, no torch. Every chapter forecasts for the same GPU at the same shape, so
# one forecast quantity has one value across the site; findings/forecast.py sets a forecast
# beside a measurement of the same quantity when the store holds one.
#
# The model is a roofline per kernel: a kernel takes at least max(FLOPs / peak, bytes /
# bandwidth), where the peak is the tensor cores' for a matmul in bf16/fp16, the non-tensor
# FP32 peak for a float32 matmul (PyTorch leaves TF32 off for matmuls by default) and for
# element-wise work (it runs on the CUDA cores, accumulating in float32). Launch costs, L2
# reuse and clocks below boost are not modelled: a forecast is a floor.
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.analytic.cost import StepCost, attention_flops, itemsize, step_costs
from attention_docs.analytic.decode import decode_cost
from attention_docs.analytic.memory import max_seq_len
from attention_docs.analytic.tiling import fused_traffic, rows_computed_fraction, tile_rows
from attention_docs.records.device import SPEC_SHEETS, SpecSheet
from attention_docs.records.shape import Shape
from attention_docs.records.steps import MATMULS

# The GPU every chapter forecasts for: the one the site is published from when a GPU is lent
# (so that a stored measurement can check the forecast), at a realistic training shape.
FORECAST_GPU = "h200"
FORECAST_SHAPE = Shape(
    batch_size=4, num_heads=16, seq_len=4096, head_dim=128, dtype="bfloat16", causal=True
)
# The tiles a fused kernel is modelled with (FlashAttention 2's forward uses 128-row query
# tiles; 64 keys per tile keeps q, k, v and the score tile inside one block's shared memory).
FLASH_BLOCK_Q = 128
FLASH_BLOCK_K = 64


class UnknownGpuError(LookupError):
    """No data sheet for that GPU slug."""


def sheet(slug: str = FORECAST_GPU) -> SpecSheet:
    """The data sheet of the GPU named by its slug ("h200", "h100-sxm", "a100-sxm4-80gb")."""
    for s in SPEC_SHEETS:
        if s.slug == slug:
            return s
    known = ", ".join(s.slug for s in SPEC_SHEETS)
    raise UnknownGpuError(f"no data sheet for GPU {slug!r}; known: {known}")


def matmul_peak(gpu: SpecSheet, dtype: str) -> float:
    """FLOP/s a matmul in `dtype` can reach: tensor cores for bf16/fp16, else FP32."""
    tflops = {"bfloat16": gpu.bf16_tflops, "float16": gpu.fp16_tflops}.get(dtype, gpu.fp32_tflops)
    return tflops * 1e12


def vector_peak(gpu: SpecSheet) -> float:
    """FLOP/s of element-wise work: the CUDA cores' FP32 rate."""
    return gpu.fp32_tflops * 1e12


def bandwidth(gpu: SpecSheet) -> float:
    """HBM bandwidth in bytes per second."""
    return gpu.hbm_gbs * 1e9


def memory_bytes(gpu: SpecSheet) -> float:
    return gpu.memory_gb * 1e9


def ridge(gpu: SpecSheet, dtype: str) -> float:
    """FLOP per byte where a `dtype` matmul's peak meets the memory bandwidth."""
    return matmul_peak(gpu, dtype) / bandwidth(gpu)


@dataclass(frozen=True)
class KernelForecast:
    """One kernel's roofline on a GPU: its work, the ceiling that limits it, its floor time."""

    label: str
    flops: float
    bytes: float
    peak: float  # FLOP/s of the unit it runs on
    bandwidth: float  # B/s

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def ridge(self) -> float:
        return self.peak / self.bandwidth

    @property
    def compute_us(self) -> float:
        return self.flops / self.peak * 1e6

    @property
    def memory_us(self) -> float:
        return self.bytes / self.bandwidth * 1e6

    @property
    def floor_us(self) -> float:
        return max(self.compute_us, self.memory_us)

    @property
    def limit(self) -> str:
        """ "compute" or "memory": which ceiling sets the floor."""
        return "compute" if self.compute_us >= self.memory_us else "memory"


def _kernel(gpu: SpecSheet, cost: StepCost, dtype: str) -> KernelForecast:
    peak = matmul_peak(gpu, dtype) if cost.label in MATMULS else vector_peak(gpu)
    return KernelForecast(cost.label, cost.flops, cost.bytes, peak, bandwidth(gpu))


def naive_steps(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE) -> tuple[KernelForecast, ...]:
    """Each of naive attention's five steps as its own kernel through HBM."""
    costs = step_costs(
        shape.batch_size,
        shape.num_heads,
        shape.seq_len,
        shape.head_dim,
        shape.dtype,
        causal=shape.causal,
        kv_seq_len=shape.kv_len,
    )
    return tuple(_kernel(gpu, c, shape.dtype) for c in costs)


def naive_floor_us(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE) -> float:
    """The five unfused kernels' floors, one after another."""
    return sum(k.floor_us for k in naive_steps(gpu, shape))


def flash_forward(
    gpu: SpecSheet,
    shape: Shape = FORECAST_SHAPE,
    *,
    block_q: int = FLASH_BLOCK_Q,
    block_k: int = FLASH_BLOCK_K,
) -> KernelForecast:
    """A fused FlashAttention forward as one kernel: the matmuls' FLOPs over the tiles it
    computes (a causal mask skips the tiles above the diagonal) and the bytes it moves from
    HBM; the N×N scores never leave the chip.

    Each query tile re-reads K and V (`tiling.fused_traffic`, the FlashAttention paper's IO
    count). The query tiles of one head run side by side across the SMs, so when the K and V
    of every head in flight fit in L2 those re-reads are served by L2 and HBM sees each
    input once (`l2_serves_rereads`); otherwise the tiled count is the HBM traffic.
    """
    flops = attention_flops(
        shape.batch_size, shape.num_heads, shape.seq_len, shape.head_dim, kv_seq_len=shape.kv_len
    )
    rows = tile_rows(shape.seq_len, block_q, block_k, causal=shape.causal, kv_seq_len=shape.kv_len)
    traffic = (
        compulsory_bytes(shape)
        if l2_serves_rereads(gpu, shape, block_q)
        else fused_traffic(
            shape.batch_size,
            shape.num_heads,
            shape.seq_len,
            shape.head_dim,
            shape.dtype,
            causal=shape.causal,
            block_q=block_q,
            block_k=block_k,
            kv_seq_len=shape.kv_len,
        )
    )
    return KernelForecast(
        "flash forward",
        flops * rows_computed_fraction(rows),
        traffic,
        matmul_peak(gpu, shape.dtype),
        bandwidth(gpu),
    )


def compulsory_bytes(shape: Shape) -> float:
    """q, k and v read once, the output written once, the float32 log-sum-exp written once:
    what any attention forward must move, however it tiles."""
    e = itemsize(shape.dtype)
    q_out = 2 * shape.batch_size * shape.num_heads * shape.seq_len * shape.head_dim * e
    kv = 2 * shape.batch_size * shape.kv_heads * shape.keys * shape.head_dim * e
    lse = 4 * shape.batch_size * shape.num_heads * shape.seq_len
    return float(q_out + kv + lse)


def l2_serves_rereads(gpu: SpecSheet, shape: Shape, block_q: int = FLASH_BLOCK_Q) -> bool:
    """Whether the K and V of all heads in flight at once fit in the GPU's L2.

    A wave of `sm_count` programs covers ceil(sm_count / query tiles per head) heads."""
    if gpu.l2_mb is None or gpu.sm_count is None:
        return False
    q_tiles = -(-shape.seq_len // block_q)
    heads_in_flight = -(-gpu.sm_count // q_tiles)
    kv_per_head = 2 * shape.keys * shape.head_dim * itemsize(shape.dtype)
    return heads_in_flight * kv_per_head <= gpu.l2_mb * 1e6


def longest_naive_seq_len(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE) -> int:
    """The longest seq_len whose naive forward (inputs, two N×N matrices, mask, output) fits
    in the GPU's memory at `shape`'s batch, heads, head_dim and dtype."""
    return max_seq_len(
        int(memory_bytes(gpu)),
        shape.batch_size,
        shape.num_heads,
        shape.head_dim,
        shape.dtype,
        causal=shape.causal,
    )


def decode_step(gpu: SpecSheet, shape: Shape) -> KernelForecast:
    """One decode step (`shape.seq_len` new tokens against `shape.kv_len` cached ones) as
    one kernel: it reads the whole K and V cache once."""
    cost = decode_cost(
        shape.batch_size,
        shape.num_heads,
        shape.keys,
        shape.head_dim,
        shape.dtype,
        num_kv_heads=shape.num_kv_heads,
        q_len=shape.seq_len,
    )
    return KernelForecast(
        "decode step", cost.flops, cost.bytes, matmul_peak(gpu, shape.dtype), bandwidth(gpu)
    )
