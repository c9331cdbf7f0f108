# What fusing naive attention's element-wise steps saves on a GPU, from its data sheet: the
# eager forward runs scale, mask and softmax as three kernels, each reading and writing the
# N×N matrix through HBM; torch.compile's fused kernel reads the scores once and writes the
# probabilities once (the mask becomes an index comparison, the scale a multiply in
# registers). On a GPU those passes are bound by memory bandwidth, so the saving is their
# bytes. Pure arithmetic on analytic/gpu.py's roofline; no torch.
from __future__ import annotations

from attention_docs.analytic.cost import SOFTMAX_FLOPS_PER_ELEMENT, itemsize, score_matrix_bytes
from attention_docs.analytic.gpu import (
    FORECAST_SHAPE,
    KernelForecast,
    Range,
    bandwidth,
    naive_steps,
    realistic,
    vector_peak,
)
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape
from attention_docs.records.steps import ELEMENTWISE, MATMULS

FUSED = "fused scale + mask + softmax"


def eager_elementwise(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE) -> tuple[KernelForecast, ...]:
    """Scale, mask and softmax as the eager forward runs them: one kernel each."""
    return tuple(k for k in naive_steps(gpu, shape) if k.label in ELEMENTWISE)


def fused_elementwise(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE) -> KernelForecast:
    """The three as one kernel: the scores read once, the probabilities written once."""
    matrix = score_matrix_bytes(
        shape.batch_size, shape.num_heads, shape.seq_len, shape.dtype, kv_len=shape.kv_len
    )
    elements = matrix / itemsize(shape.dtype)
    # The scale's multiply and softmax's five operations per element; the mask compares indices.
    flops = (1 + SOFTMAX_FLOPS_PER_ELEMENT) * elements
    return KernelForecast(FUSED, flops, 2.0 * matrix, vector_peak(gpu), bandwidth(gpu))


def compiled_steps(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE) -> tuple[KernelForecast, ...]:
    """The compiled forward: the two matmuls (library calls, as in eager) around the fused
    kernel."""
    scores, weighted = (k for k in naive_steps(gpu, shape) if k.label in MATMULS)
    return (scores, fused_elementwise(gpu, shape), weighted)


def compiled_floor_us(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE) -> float:
    """The compiled forward's floor: its three kernels one after another."""
    return sum(k.floor_us for k in compiled_steps(gpu, shape))


def bytes_saved(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE) -> float:
    """HBM bytes the fused kernel does not move that the three eager kernels do."""
    eager = sum(k.bytes for k in eager_elementwise(gpu, shape))
    return eager - fused_elementwise(gpu, shape).bytes


def compiled_range(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE) -> Range:
    """The compiled forward's realistic range: each kernel's floor over cited efficiencies."""
    return realistic(gpu, compiled_steps(gpu, shape))


def time_saved_range(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE) -> Range:
    """The time fusion saves, realistically: the eager element-wise kernels' range less the
    fused kernel's (all bound by HBM bandwidth, so each end divides by the same
    efficiency)."""
    eager, fused = (
        realistic(gpu, eager_elementwise(gpu, shape)),
        realistic(gpu, (fused_elementwise(gpu, shape),)),
    )
    if None in (eager.low_us, eager.high_us, fused.low_us, fused.high_us):
        return Range(eager.floor_us - fused.floor_us, None, None, eager.sources)
    return Range(
        eager.floor_us - fused.floor_us,
        eager.low_us - fused.low_us,
        eager.high_us - fused.high_us,
        tuple(dict.fromkeys(eager.sources + fused.sources)),
    )
