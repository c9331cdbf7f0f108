# The training step of attention, counted: the matmuls and FLOPs of the forward and of the
# backward, for naive attention (which keeps the probabilities for the backward) and for
# FlashAttention (which keeps one log-sum-exp per row and recomputes the probabilities), and
# the floors of both passes on a GPU from its data sheet. Pure arithmetic, no torch.
#
# The chain rule through `out = softmax(q·kᵀ/√d)·v` needs four matmuls of the forward's
# size: dv = pᵀ·dout, dp = dout·vᵀ, dq = ds·k, dk = dsᵀ·q. That is why a backward costs
# twice a forward's matmul FLOPs; recomputing p = exp(q·kᵀ/√d − L) adds a fifth (2.5×).
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.analytic.cost import (
    StepCost,
    attention_flops,
    itemsize,
    score_matrix_bytes,
)
from attention_docs.analytic.gpu import (
    FLASH_BLOCK_K,
    FLASH_BLOCK_Q,
    FORECAST_SHAPE,
    KernelForecast,
    bandwidth,
    flash_forward,
    matmul_peak,
    naive_steps,
    vector_peak,
)
from attention_docs.analytic.tiling import rows_computed_fraction, tile_rows
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape

FORWARD_MATMULS = 2  # q·kᵀ and p·v
BACKWARD_MATMULS = 4  # dv, dp, dq, dk
RECOMPUTE_MATMULS = 1  # FlashAttention's backward recomputes q·kᵀ
# Per element of the score matrix, softmax's backward ds = p ⊙ (dp − rowsum(dp ⊙ p)):
# multiply, sum, subtract, multiply.
SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT = 4


@dataclass(frozen=True)
class PassCount:
    """One pass of attention: how many matmuls of the forward's size it runs, and their
    FLOPs (dense: a causal mask does not shrink naive attention's matmuls)."""

    matmuls: int
    flops: float


def matmul_flops(shape: Shape) -> float:
    """One matmul of attention's size: 2·B·H·N·M·D (half of `attention_flops`)."""
    return attention_flops(*shape.dims, kv_seq_len=shape.kv_len) / FORWARD_MATMULS


def passes(shape: Shape, *, recompute: bool) -> tuple[PassCount, PassCount]:
    """(forward, backward) matmul counts: naive attention (`recompute=False`) or
    FlashAttention, whose backward recomputes the scores."""
    one = matmul_flops(shape)
    backward = BACKWARD_MATMULS + (RECOMPUTE_MATMULS if recompute else 0)
    return PassCount(FORWARD_MATMULS, FORWARD_MATMULS * one), PassCount(backward, backward * one)


def flop_ratio(shape: Shape, *, recompute: bool) -> float:
    """Backward ÷ forward matmul FLOPs: 2 for naive attention, 2.5 with recomputation."""
    forward, backward = passes(shape, recompute=recompute)
    return backward.flops / forward.flops


def naive_backward_costs(shape: Shape) -> tuple[StepCost, ...]:
    """Naive attention's backward as the kernels autograd runs, each through memory: the
    minimum bytes each reads and writes, as `cost.step_costs` counts the forward."""
    e = itemsize(shape.dtype)
    b, h, n, d = shape.dims
    nm = score_matrix_bytes(b, h, n, shape.dtype, kv_len=shape.kv_len)  # one N×M matrix
    elements = nm / e
    q = b * h * n * d * e
    kv = b * shape.kv_heads * shape.keys * d * e
    one = matmul_flops(shape)
    mask = (2 * nm + n * shape.keys) if shape.causal else 0.0
    return (
        StepCost("dv = pᵀ·dout", one, nm + q + kv),
        StepCost("dp = dout·vᵀ", one, q + kv + nm),
        StepCost("softmax backward", SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT * elements, 3 * nm),
        StepCost("mask backward", 0.0, float(mask)),
        StepCost("scale backward", elements, 2 * nm),
        StepCost("dq = ds·k", one, nm + kv + q),
        StepCost("dk = dsᵀ·q", one, nm + q + kv),
    )


def _kernel(gpu: SpecSheet, cost: StepCost, dtype: str) -> KernelForecast:
    matmul = "·" in cost.label
    peak = matmul_peak(gpu, dtype) if matmul else vector_peak(gpu)
    return KernelForecast(cost.label, cost.flops, cost.bytes, peak, bandwidth(gpu))


def naive_backward(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE) -> tuple[KernelForecast, ...]:
    return tuple(_kernel(gpu, c, shape.dtype) for c in naive_backward_costs(shape))


def _causal_fraction(shape: Shape) -> float:
    rows = tile_rows(
        shape.seq_len, FLASH_BLOCK_Q, FLASH_BLOCK_K, causal=shape.causal, kv_seq_len=shape.kv_len
    )
    return rows_computed_fraction(rows)


def flash_backward(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE) -> KernelForecast:
    """A fused FlashAttention backward as one kernel: five matmuls over the tiles it
    computes; it reads q, k, v, the output, dout, the log-sum-exp and rowsum(dout ⊙ out) once
    and writes dq, dk and dv once (re-reads served on chip or by L2: a floor)."""
    e = itemsize(shape.dtype)
    b, h, n, d = shape.dims
    q = b * h * n * d * e
    kv = b * shape.kv_heads * shape.keys * d * e
    rows = 2 * 4 * b * h * n  # log-sum-exp and rowsum(dout ⊙ out), float32
    flops = passes(shape, recompute=True)[1].flops * _causal_fraction(shape)
    traffic = 3 * q + 2 * kv + rows + q + 2 * kv  # q, out, dout, k, v in; dq, dk, dv out
    return KernelForecast(
        "flash backward", flops, float(traffic), matmul_peak(gpu, shape.dtype), bandwidth(gpu)
    )


@dataclass(frozen=True)
class TrainingForecast:
    """Floors of one training step of attention on a GPU, and FlashAttention's trade: the
    matmul it recomputes against the probabilities naive attention writes and reads back."""

    naive_forward_us: float
    naive_backward_us: float
    flash_forward_us: float
    flash_backward_us: float
    recompute_flops: float
    recompute_us: float  # the recomputed q·kᵀ at the matmul peak
    probs_bytes: float  # the probabilities written by the forward and read back once
    probs_us: float  # ... at HBM bandwidth

    @property
    def naive_ratio(self) -> float:
        """Backward ÷ forward floor: bytes set it, memory-bound kernels both ways."""
        return self.naive_backward_us / self.naive_forward_us

    @property
    def flash_ratio(self) -> float:
        return self.flash_backward_us / self.flash_forward_us


def training(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE) -> TrainingForecast:
    recompute = matmul_flops(shape) * _causal_fraction(shape)
    probs = 2 * score_matrix_bytes(
        shape.batch_size, shape.num_heads, shape.seq_len, shape.dtype, kv_len=shape.kv_len
    )
    return TrainingForecast(
        naive_forward_us=sum(k.floor_us for k in naive_steps(gpu, shape)),
        naive_backward_us=sum(k.floor_us for k in naive_backward(gpu, shape)),
        flash_forward_us=flash_forward(gpu, shape).floor_us,
        flash_backward_us=flash_backward(gpu, shape).floor_us,
        recompute_flops=recompute,
        recompute_us=recompute / matmul_peak(gpu, shape.dtype) * 1e6,
        probs_bytes=float(probs),
        probs_us=probs / bandwidth(gpu) * 1e6,
    )


__all__ = [
    "PassCount",
    "TrainingForecast",
    "flash_backward",
    "flop_ratio",
    "matmul_flops",
    "naive_backward",
    "naive_backward_costs",
    "passes",
    "training",
]
