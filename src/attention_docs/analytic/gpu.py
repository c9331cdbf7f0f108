# Forecasts for a named GPU from its data sheet (records/device.py) and the analytic models:
# what a chapter's question predicts on hardware the build may not have.
#
# A roofline per kernel, max(FLOPs / peak, bytes / bandwidth): the tensor cores' peak for a
# bf16/fp16 matmul, the FP32 CUDA-core peak for a float32 matmul (PyTorch leaves TF32 off)
# and for element-wise work. Launch costs, L2 reuse and sub-boost clocks are left out, so it
# is a floor. The realistic range divides compute and memory time by the efficiencies of
# records/published.toml and adds KERNEL_FIXED_US per kernel; a FlashAttention-2 kernel
# computes whole tiles, on no more SMs than it launches thread blocks.
# Naive attention is priced from the ATen ops its code records (records/ops.py), so the
# forecast follows the code as written: a rebuilt mask or a `masked_fill` copy is a kernel.
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attention_docs.analytic.cost import (
    SOFTMAX_FLOPS_PER_ELEMENT,
    attention_flops,
    itemsize,
)
from attention_docs.analytic.decode import decode_cost
from attention_docs.analytic.memory import max_seq_len
from attention_docs.analytic.tiling import fused_traffic, rows_computed_fraction, tile_rows
from attention_docs.records.device import SPEC_SHEETS, SpecSheet
from attention_docs.records.forecast import FORECAST_GPU, FORECAST_SHAPE
from attention_docs.records.ops import OpList, RecordedOp, TensorArg, recording
from attention_docs.records.published import ANY, FLASH_2, FLOAT32, dataset
from attention_docs.records.shape import Shape
from attention_docs.records.steps import STEPS

# The tiles a fused kernel is modelled with (FlashAttention 2's forward uses 128-row query
# tiles; 64 keys per tile keeps q, k, v and the score tile inside one block's shared memory).
FLASH_BLOCK_Q = 128
FLASH_BLOCK_K = 64
# What a kernel costs on the GPU's clock whatever its work (starting its thread blocks,
# draining them): the shortest kernel in TraceLens's three H100 traces took 1.47 µs
# (tests/test_gpu_trace.py reads it there). Recorded on an H100 and taken for every GPU.
KERNEL_FIXED_US = 1.47
KERNEL_FIXED = (
    f"Each realistic range adds {KERNEL_FIXED_US} µs per kernel, the shortest kernel in "
    "TraceLens's H100 traces."
)


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
    """Device memory in bytes: the driver's total where the sheet records it
    (`reported_mib`, MiB of 2²⁰ bytes), else the data sheet's GB taken as 10⁹ bytes, which
    for a Hopper part is below what the driver reports (141 GB against 143,771 MiB)."""
    if gpu.reported_mib is not None:
        return float(gpu.reported_mib * 2**20)
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
    op: str = ""  # the ATen op that launches it, where one does
    kernel: str = ANY  # its kind, for the efficiencies on record (records/published.py)
    # Bytes it reads again after its compulsory `bytes` (softmax's extra passes over a row):
    # the cache may serve them, so the floor leaves them out and the realistic range counts
    # them as memory traffic.
    reread: float = 0.0
    # Where its tiling is known: the FLOPs of the whole tiles it computes (a partial tile
    # costs a full one), and the thread blocks it launches. The floor keeps `flops`.
    tile_flops: float = 0.0
    programs: int = 0

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
    def passes_us(self) -> float:
        """Memory time with the rereads: what the realistic range divides."""
        return (self.bytes + self.reread) / self.bandwidth * 1e6

    def busy_us(self, sm_count: int | None) -> float:
        """Compute time over its whole tiles, on the share of the SMs its thread blocks
        occupy when they are fewer than the SMs: what the realistic range divides."""
        flops = self.tile_flops or self.flops
        fill = min(1.0, self.programs / sm_count) if self.programs and sm_count else 1.0
        return flops / self.peak * 1e6 / fill

    @property
    def floor_us(self) -> float:
        return max(self.compute_us, self.memory_us)

    @property
    def limit(self) -> str:
        """ "compute" or "memory": which ceiling sets the floor."""
        return "compute" if self.compute_us >= self.memory_us else "memory"


# The recordings the naive forecasts price (profiling/ops.py records them).
NAIVE_CODE = "naive_attention"
NAIVE_CODE_FULL = "naive_attention, no mask"
IN_PLACE = "masked_fill_"
# SDPA's math backend, the composite ATen op: recorded in bfloat16, since it upcasts q, k and
# v to float32 and runs its matmuls and softmax there (its kernels are float32 kernels).
SDPA_MATH = "SDPA math"

# ATen ops that launch one CUDA kernel each, by what the kernel moves. An op inside one of
# these is how the CPU implements it (bmm's `select`s), not a kernel of its own.
MATMUL_OPS = frozenset({"aten::bmm", "aten::mm"})
# Element-wise: reads each tensor input once, writes an output the size of the largest;
# FLOPs per output element.
POINTWISE_OPS = {
    "aten::div": 1, "aten::mul": 1, "aten::add": 1, "aten::add_": 1, "aten::sub": 1,
    "aten::where": 0, "aten::triu": 0, "aten::tril": 0, "aten::masked_fill_": 0,
    "aten::isneginf": 1, "aten::_softmax": SOFTMAX_FLOPS_PER_ELEMENT,
}  # fmt: skip
BOOL_OUT_OPS = frozenset({"aten::isneginf"})  # element-wise, writing a bool per element
# Reductions: read their input, write one value per row (nothing next to an N×N read).
REDUCE_OPS = frozenset({"aten::all", "aten::any"})
COPY_OPS = frozenset({"aten::copy_"})  # copy_(dst, src): reads src, writes dst
FILL_OPS = frozenset({"aten::fill_", "aten::zero_"})  # writes its tensor
# Ops that move no data on a GPU: views, allocations, and composites whose work the ops
# inside them do (and are priced as).
FREE_OPS = frozenset({
    "aten::as_strided", "aten::expand", "aten::view", "aten::reshape", "aten::_reshape_alias",
    "aten::_unsafe_view", "aten::transpose", "aten::t", "aten::resolve_conj", "aten::select",
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::matmul", "aten::softmax",
    "aten::masked_fill", "aten::clone", "aten::ones", "aten::zeros", "aten::to",
    "aten::_to_copy", "aten::contiguous", "aten::detach", "aten::alias", "aten::lift_fresh",
    "aten::scalar_tensor", "aten::_safe_softmax", "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_attention_math",
})  # fmt: skip


class UnpricedOpError(ValueError):
    """A recorded op the GPU forecast does not know: it cannot say whether it is a kernel."""


@dataclass(frozen=True)
class Scaling:
    """Maps a recording's tensor dims to the forecast shape's."""

    recorded: Shape
    target: Shape

    def __post_init__(self) -> None:
        r, g = self.recorded, self.target
        # A square recording (as many keys as queries) scales to square shapes only: its
        # dims cannot say which of the two lengths a tensor has.
        square = r.seq_len == r.keys
        dims = (r.seq_len, *(() if square else (r.keys,)), r.head_dim, r.batch_size * r.num_heads)
        if len(set(dims)) < len(dims) or 1 in dims:
            raise ValueError(f"a recording needs distinct dimensions to scale; got {r.text()}")
        if square and g.seq_len != g.keys:
            raise ValueError(
                f"a recording with as many keys as queries ({r.text()}) scales to such shapes "
                f"only; got {g.text()}"
            )

    def numel(self, t: TensorArg) -> int:
        r, g = self.recorded, self.target
        if not t.dims:
            return 0
        # A 1 is a reduced dimension (a row's `all`): no dimension of a recording is 1.
        trailing = {r.seq_len: g.seq_len, r.keys: g.keys, r.head_dim: g.head_dim, 1: 1}
        lead = 1
        for d in t.dims[:-2]:
            lead *= d
        heads = {1: 1, r.batch_size * r.num_heads: g.batch_size * g.num_heads}
        try:
            n = heads[lead]
            for d in t.dims[-2:]:
                n *= trailing[d]
        except KeyError:
            raise ValueError(f"cannot scale dims {t.dims} recorded at {r.text()}") from None
        return n

    def dtype(self, t: TensorArg) -> str:
        """`t`'s dtype at the target: the target's where it was the recording's (a float32
        tensor of a bfloat16 recording stays float32: an upcast)."""
        return self.target.dtype if t.dtype == self.recorded.dtype else t.dtype

    def itemsize(self, t: TensorArg) -> int:
        return 1 if t.dtype == "bool" else itemsize(self.dtype(t))

    def bytes(self, t: TensorArg) -> float:
        return float(self.numel(t) * self.itemsize(t))


KERNEL_OPS = MATMUL_OPS | set(POINTWISE_OPS) | COPY_OPS | FILL_OPS | REDUCE_OPS


def _launches(op: RecordedOp) -> bool:
    return op.name in KERNEL_OPS


def kernel_ops(ops: OpList) -> tuple[RecordedOp, ...]:
    """The recorded ops that launch a CUDA kernel: the outermost op of the kernel tables
    whose tensors are not all 0-dim (a Python scalar stays on the CPU, a kernel argument)."""
    out = []
    for op in ops.ops:
        known = _launches(op) or op.name in FREE_OPS
        if not known:
            raise UnpricedOpError(
                f"{ops.subject} records {op.name} in {op.step}, which analytic/gpu.py does not "
                "price: add it to the kernel tables (or to FREE_OPS if it moves no data)"
            )
        inside_kernel = any(w in KERNEL_OPS for w in op.within)
        if _launches(op) and not inside_kernel and any(t.dims for t in op.inputs):
            out.append(op)
    return tuple(out)


def priced(ops: OpList, gpu: SpecSheet, shape: Shape) -> tuple[KernelForecast, ...]:
    """One KernelForecast per kernel `ops` launches, scaled to `shape`, labelled by step.

    Where the N×N tensors the forward keeps at once (scores and probabilities, and a bool
    mask) fit in the GPU's L2, a kernel may read and write them there: HBM need not see
    them, so the floor leaves them out and the realistic range counts them (`reread`)."""
    scale = Scaling(ops.shape, shape)
    nn = shape.batch_size * shape.num_heads * shape.seq_len * shape.keys
    resident = gpu.l2_mb is not None and nn * (2 * itemsize(shape.dtype) + 1) <= gpu.l2_mb * 1e6
    out = []
    for op in kernel_ops(ops):
        tensors = [t for t in op.inputs if t.dims]
        if op.name in MATMUL_OPS:
            a, b = tensors[:2]
            inner = _dim(scale, a.dims[-1])
            out_elems = scale.numel(a) / inner * _dim(scale, b.dims[-1])
            flops = 2.0 * out_elems * inner
            moved = scale.bytes(a) + scale.bytes(b) + out_elems * scale.itemsize(a)
            written_nn = out_elems * scale.itemsize(a) if out_elems == nn else 0.0
            peak = matmul_peak(gpu, scale.dtype(a))
        else:
            biggest = max(tensors, key=scale.numel)
            written = scale.bytes(biggest)
            if op.name in COPY_OPS:
                moved, flops = scale.bytes(tensors[1]) + written, 0.0
            elif op.name in FILL_OPS:
                moved, flops = written, 0.0
            elif op.name == "aten::where":
                # where(condition, self, other[, out]): a fourth tensor is the out= it
                # writes; the output takes the values' dtype (a bool mask becomes float).
                read = op.inputs[:3]
                n = max(scale.numel(t) for t in read)
                moved = sum(scale.bytes(t) for t in read) + n * scale.itemsize(read[-1])
                flops = 0.0
            elif op.name in REDUCE_OPS:
                moved, flops = scale.bytes(biggest), float(scale.numel(biggest))
            else:
                if op.name in BOOL_OUT_OPS:
                    written = float(scale.numel(biggest))
                moved = sum(scale.bytes(t) for t in tensors) + written
                flops = float(POINTWISE_OPS[op.name] * scale.numel(biggest))
            written_nn = written if scale.numel(biggest) == nn else 0.0
            peak = vector_peak(gpu)
        kind = FLOAT32 if peak == vector_peak(gpu) else ANY  # the CUDA cores, not tensor cores
        reread = softmax_rereads(scale, tensors[0]) if op.name == "aten::_softmax" else 0.0
        if resident:
            in_l2 = sum(scale.bytes(t) for t in tensors if scale.numel(t) == nn) + written_nn
            in_l2 = min(in_l2, moved)
            moved, reread = moved - in_l2, reread + in_l2
        out.append(
            KernelForecast(op.step, flops, moved, peak, bandwidth(gpu), op.name, kind, reread)
        )
    return tuple(out)


# PyTorch's CUDA softmax over the last dimension (aten/src/ATen/native/cuda/SoftMax.cu): a
# row of up to 1,024 elements is held in one warp's registers, a longer one is cached in
# shared memory when it fits in a block's 48 KiB (the CUDA default, less the block's
# reduction buffer of at most 32 floats) and its length is a whole number of 16-byte vector
# loads; otherwise `cunn_SoftMaxForward` reads the row three times (its max, its sum of
# exponentials, then the output) and writes it once.
WARP_SOFTMAX_MAX = 1024
SOFTMAX_SMEM_BYTES = 48 * 1024 - 32 * 4
SOFTMAX_PASSES = 3


def softmax_rereads(scale: Scaling, t: TensorArg) -> float:
    """The bytes softmax reads again over `t`'s rows beyond its one compulsory read."""
    row, size = _dim(scale, t.dims[-1]), scale.itemsize(t)
    cached = row * size <= SOFTMAX_SMEM_BYTES and row % (16 // size) == 0
    if row <= WARP_SOFTMAX_MAX or cached:
        return 0.0
    return (SOFTMAX_PASSES - 1) * scale.bytes(t)


def _dim(scale: Scaling, recorded: int) -> int:
    """A recorded trailing dimension (seq_len, keys or head_dim) at the forecast shape."""
    r, g = scale.recorded, scale.target
    return {r.seq_len: g.seq_len, r.keys: g.keys, r.head_dim: g.head_dim}[recorded]


def code_ops(shape: Shape, subject: str | None = None) -> OpList:
    """The recording a forecast of `shape` prices: `subject`'s, or naive_attention's (with
    or without its mask, as `shape` is causal or not)."""
    if subject is None:
        subject = NAIVE_CODE if shape.causal else NAIVE_CODE_FULL
    return recording(subject)


def naive_kernels(
    gpu: SpecSheet, shape: Shape = FORECAST_SHAPE, ops: OpList | None = None
) -> tuple[KernelForecast, ...]:
    """Every kernel the code under study (or `ops`) launches for one forward at `shape`."""
    return priced(ops or code_ops(shape), gpu, shape)


def naive_steps(
    gpu: SpecSheet, shape: Shape = FORECAST_SHAPE, ops: OpList | None = None
) -> tuple[KernelForecast, ...]:
    """Naive attention's kernels summed per labelled step, in step order (a step's kernels
    are all on one side of the ridge: the mask's are all memory-bound)."""
    kernels = naive_kernels(gpu, shape, ops)
    out = []
    for step in STEPS:
        mine = [k for k in kernels if k.label == step]
        if mine:
            ops_text = " + ".join(k.op for k in mine)
            out.append(KernelForecast(step, sum(k.flops for k in mine),
                                      sum(k.bytes for k in mine), mine[0].peak,
                                      mine[0].bandwidth, ops_text, mine[0].kernel))  # fmt: skip
    return tuple(out)


def naive_floor_us(
    gpu: SpecSheet, shape: Shape = FORECAST_SHAPE, ops: OpList | None = None
) -> float:
    """The naive forward's kernels' floors, one after another."""
    return sum(k.floor_us for k in naive_kernels(gpu, shape, ops))


@dataclass(frozen=True)
class Range:
    """A forecast's realistic range: its floor divided by the cited efficiencies, in µs.

    `sources`: what the efficiencies are (records/published.toml's `what`), for captions;
    None ends where no efficiency is on record for that architecture."""

    floor_us: float
    low_us: float | None
    high_us: float | None
    sources: tuple[str, ...]


def realistic(gpu: SpecSheet, kernels: Sequence[KernelForecast]) -> Range:
    """The range of kernels run one after another. A kernel reaches neither ceiling, so each
    takes the longer of its compute time over the efficiency on record for its kind of
    kernel on its architecture, and its memory time over HBM's (a kernel with a
    memory-bound floor may still be held back by its compute: a fused kernel at short
    sequences), plus the fixed cost every kernel pays."""
    data = dataset()
    low = high = 0.0
    used: list[str] = []
    floor = sum(k.floor_us for k in kernels)
    for k in kernels:
        compute = data.efficiency(gpu.capability, "compute", k.kernel)
        memory = data.efficiency(gpu.capability, "memory", k.kernel)
        if compute is None or memory is None:
            return Range(floor, None, None, tuple(used))
        busy = k.busy_us(gpu.sm_count)
        fast = max((busy / compute.high, compute), (k.passes_us / memory.high, memory),
                   key=lambda t: t[0])  # fmt: skip
        slow = max((busy / compute.low, compute), (k.passes_us / memory.low, memory),
                   key=lambda t: t[0])  # fmt: skip
        low, high = low + fast[0] + KERNEL_FIXED_US, high + slow[0] + KERNEL_FIXED_US
        used.extend(e.what for _, e in (fast, slow) if e.what not in used)
    return Range(floor, low, high, tuple(used))


def naive_range(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE, ops: OpList | None = None) -> Range:
    return realistic(gpu, naive_kernels(gpu, shape, ops))


def flash_range(gpu: SpecSheet, shape: Shape = FORECAST_SHAPE, kernel: str = FLASH_2) -> Range:
    return realistic(gpu, (flash_forward(gpu, shape, kernel=kernel),))


def flash_forward(
    gpu: SpecSheet,
    shape: Shape = FORECAST_SHAPE,
    *,
    block_q: int = FLASH_BLOCK_Q,
    block_k: int = FLASH_BLOCK_K,
    kernel: str = FLASH_2,
) -> KernelForecast:
    """A fused FlashAttention forward as one kernel: the matmuls' FLOPs over the tiles it
    computes (a causal mask skips the tiles above the diagonal) and the bytes it moves from
    HBM; the N×N scores never leave the chip. `kernel`: FlashAttention-2's generation (SDPA's
    flash and memory-efficient backends) unless another fused kernel (cuDNN's) is meant.

    Each query tile re-reads K and V (`tiling.fused_traffic`, the FlashAttention paper's IO
    count). The query tiles of one head run side by side across the SMs, so when the K and V
    of every head in flight fit in L2 those re-reads are served by L2 and HBM sees each
    input once (`l2_serves_rereads`); otherwise the tiled count is the HBM traffic.
    """
    flops = attention_flops(
        shape.batch_size, shape.num_heads, shape.seq_len, shape.head_dim, kv_seq_len=shape.kv_len
    )
    rows = tile_rows(shape.seq_len, block_q, block_k, causal=shape.causal, kv_seq_len=shape.kv_len)
    whole = sum(block_q * r.visited * block_k for r in rows) / (shape.seq_len * shape.keys)
    if l2_serves_rereads(gpu, shape, block_q):
        traffic = compulsory_bytes(shape)
    else:
        # The tiled count per query head; with grouped-query attention a group's query heads
        # are in flight together and read their one K and V tile once (l2_serves_rereads).
        one_head = fused_traffic(
            shape.batch_size,
            1,
            shape.seq_len,
            shape.head_dim,
            shape.dtype,
            causal=shape.causal,
            block_q=block_q,
            block_k=block_k,
            kv_seq_len=shape.kv_len,
        )
        e = itemsize(shape.dtype)
        q_out_lse = shape.batch_size * shape.seq_len * (2 * shape.head_dim * e + 4)
        traffic = shape.num_heads * q_out_lse + shape.kv_heads * (one_head - q_out_lse)
    # FlashAttention-2's grid is a thread block per query tile, head and batch element; its
    # tiles are public, cuDNN's are not (its kernel is priced by the tiles' useful work).
    tiled = kernel == FLASH_2 and shape.dtype != "float32"
    return KernelForecast(
        "flash forward",
        flops * rows_computed_fraction(rows),
        traffic,
        matmul_peak(gpu, shape.dtype),
        bandwidth(gpu),
        kernel=FLOAT32 if shape.dtype == "float32" else kernel,  # the CUDA cores' share
        tile_flops=flops * whole if tiled else 0.0,
        programs=len(rows) * shape.batch_size * shape.num_heads if tiled else 0,
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

    A wave of `sm_count` programs covers ceil(sm_count / query tiles per head) query heads;
    with grouped-query attention a group's query heads (adjacent, so in flight together)
    read one K and V."""
    if gpu.l2_mb is None or gpu.sm_count is None:
        return False
    q_tiles = -(-shape.seq_len // block_q)
    heads_in_flight = -(-gpu.sm_count // q_tiles)
    group = shape.num_heads // shape.kv_heads
    kv_per_head = 2 * shape.keys * shape.head_dim * itemsize(shape.dtype)
    return -(-heads_in_flight // group) * kv_per_head <= gpu.l2_mb * 1e6


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
