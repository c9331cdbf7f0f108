# The tile schedule of FlashAttention and the bytes it moves, as pure arithmetic (no torch),
# so that the tiled implementation's tests, the experiments, the tile-grid figure and the
# prose all count the same tiles. Three traffic models sit side by side: naive attention's
# five unfused steps, the tiled loop run as one PyTorch op per line (tiles, but every
# intermediate still goes through memory), and a fused kernel that keeps each tile on chip.
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from attention_docs.analytic.cost import SOFTMAX_FLOPS_PER_ELEMENT, StepCost, itemsize, step_costs
from attention_docs.records.steps import TILED_STEPS

COMPUTED = "computed"
DIAGONAL = "diagonal"  # computed, then partly masked: the tile crosses the causal diagonal
SKIPPED = "skipped"  # entirely in the future of every query in its row: never computed

# tiled_attention's default tiles: the ones forward_times times the loop with.
DEFAULT_BLOCK = 64


@dataclass(frozen=True)
class Tile:
    """One block of the seq_len × kv_seq_len score matrix: rows `q0:q1`, columns `k0:k1`."""

    row: int
    col: int
    q0: int
    q1: int
    k0: int
    k1: int
    state: str

    @property
    def rows(self) -> int:
        return self.q1 - self.q0

    @property
    def cols(self) -> int:
        return self.k1 - self.k0


def tile_state(q0: int, q1: int, k0: int, k1: int, *, causal: bool, offset: int) -> str:
    """Whether a tile is computed, computed and masked, or skipped.

    Query `i` sees keys `0 .. i + offset` (`offset = kv_seq_len - seq_len`).
    """
    if not causal:
        return COMPUTED
    if k0 > q1 - 1 + offset:  # its first key is in the future of its last query
        return SKIPPED
    if k1 - 1 > q0 + offset:  # its last key is in the future of its first query
        return DIAGONAL
    return COMPUTED


def _checked(seq_len: int, block_q: int, block_k: int, kv_seq_len: int | None) -> int:
    """The key length (`seq_len` unless given), every length and block checked to be >= 1."""
    kv_len = seq_len if kv_seq_len is None else kv_seq_len
    for name, value in (
        ("seq_len", seq_len),
        ("kv_seq_len", kv_len),
        ("block_q", block_q),
        ("block_k", block_k),
    ):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    return kv_len


def tile_grid(
    seq_len: int,
    block_q: int,
    block_k: int,
    *,
    causal: bool,
    kv_seq_len: int | None = None,
) -> tuple[tuple[Tile, ...], ...]:
    """The score matrix cut into `block_q × block_k` tiles, one tuple of tiles per query tile.

    The last row and column of tiles are smaller when the lengths are not multiples of the
    blocks.
    """
    kv_len = _checked(seq_len, block_q, block_k, kv_seq_len)
    offset = kv_len - seq_len
    rows = []
    for r, q0 in enumerate(range(0, seq_len, block_q)):
        q1 = min(q0 + block_q, seq_len)
        rows.append(
            tuple(
                Tile(r, c, q0, q1, k0, min(k0 + block_k, kv_len), "")
                for c, k0 in enumerate(range(0, kv_len, block_k))
            )
        )
    return tuple(
        tuple(
            Tile(
                t.row,
                t.col,
                t.q0,
                t.q1,
                t.k0,
                t.k1,
                tile_state(t.q0, t.q1, t.k0, t.k1, causal=causal, offset=offset),
            )
            for t in row
        )
        for row in rows
    )


@dataclass(frozen=True)
class TileRow:
    """One query tile's row of the grid, summarised: `rows` queries, the `visited` key tiles
    it computes (the first ones: a causal mask skips a suffix), `diagonal` of them partly
    masked, `width` keys in the visited tiles, out of `tiles` key tiles and `kv_len` keys."""

    rows: int
    tiles: int
    visited: int
    diagonal: int
    width: int
    kv_len: int


@functools.lru_cache(maxsize=256)
def tile_rows(
    seq_len: int,
    block_q: int,
    block_k: int,
    *,
    causal: bool,
    kv_seq_len: int | None = None,
) -> tuple[TileRow, ...]:
    """`tile_grid` row by row without listing its tiles: the same counts in time linear in
    the query tiles, for the forecasts' long sequences (a million tiles at seq_len 131,072)."""
    kv_len = _checked(seq_len, block_q, block_k, kv_seq_len)
    offset = kv_len - seq_len
    ncols = -(-kv_len // block_k)
    rows = []
    for q0 in range(0, seq_len, block_q):
        q1 = min(q0 + block_q, seq_len)
        if not causal:
            visited, full = ncols, ncols
        else:  # key tile c is visited while its first key c·block_k <= q1 - 1 + offset
            visited = min(ncols, max(0, (q1 - 1 + offset) // block_k + 1))
            # ... and fully visible while its last key <= q0 + offset
            full = ncols if q0 + offset >= kv_len - 1 else max(0, (q0 + offset + 1) // block_k)
            full = min(full, visited)
        rows.append(
            TileRow(q1 - q0, ncols, visited, visited - full, min(visited * block_k, kv_len), kv_len)
        )
    return tuple(rows)


def rows_computed_fraction(rows: tuple[TileRow, ...]) -> float:
    """`computed_fraction` from `tile_rows`."""
    total = sum(r.rows * r.kv_len for r in rows)
    return sum(r.rows * r.width for r in rows) / total


def tile_counts(grid: tuple[tuple[Tile, ...], ...]) -> dict[str, int]:
    """How many tiles are computed (masked or not), masked on the diagonal, and skipped."""
    tiles = [t for row in grid for t in row]
    diagonal = sum(t.state == DIAGONAL for t in tiles)
    skipped = sum(t.state == SKIPPED for t in tiles)
    return {
        "tiles": len(tiles),
        "computed": len(tiles) - skipped,
        "diagonal": diagonal,
        "skipped": skipped,
    }


def computed_fraction(grid: tuple[tuple[Tile, ...], ...]) -> float:
    """The share of the score matrix's entries inside computed tiles (masked ones included)."""
    tiles = [t for row in grid for t in row]
    total = sum(t.rows * t.cols for t in tiles)
    return sum(t.rows * t.cols for t in tiles if t.state != SKIPPED) / total


def fused_traffic(
    batch_size: int,
    num_heads: int,
    seq_len: int,
    head_dim: int,
    dtype: str = "float32",
    *,
    causal: bool = False,
    block_q: int = 128,
    block_k: int = 64,
    kv_seq_len: int | None = None,
) -> float:
    """Bytes a fused FlashAttention forward moves between GPU memory (HBM) and the chip.

    Each query tile is read once and its output written once; the K and V tiles it visits are
    read once *per query tile*, so K and V are read about `seq_len / block_q` times (half as
    often under a causal mask); the log-sum-exp (float32, one per query) is written for the
    backward pass. Scores and probabilities never leave the chip. This is the FlashAttention
    paper's IO count, Θ(N²·D²/M) for on-chip memory M, made exact for given blocks.
    """
    # --8<-- [start:fused]
    e = itemsize(dtype)
    rows = tile_rows(seq_len, block_q, block_k, causal=causal, kv_seq_len=kv_seq_len)
    kv_rows_read = sum(r.width for r in rows)
    q_and_out = 2 * seq_len * head_dim  # q read once, the output written once
    k_and_v = 2 * kv_rows_read * head_dim  # each visited k, v tile: once per query tile
    lse = 4 * seq_len  # float32, kept for the backward pass
    return float(batch_size * num_heads * (e * (q_and_out + k_and_v) + lse))
    # --8<-- [end:fused]


def naive_traffic(
    batch_size: int,
    num_heads: int,
    seq_len: int,
    head_dim: int,
    dtype: str = "float32",
    *,
    causal: bool = False,
    kv_seq_len: int | None = None,
) -> float:
    """Minimum bytes of naive attention's five unfused steps (the sum of `step_costs`)."""
    costs = step_costs(
        batch_size, num_heads, seq_len, head_dim, dtype, causal=causal, kv_seq_len=kv_seq_len
    )
    return float(sum(c.bytes for c in costs))


def tiled_step_costs(
    batch_size: int,
    num_heads: int,
    seq_len: int,
    head_dim: int,
    dtype: str = "float32",
    *,
    causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
    kv_seq_len: int | None = None,
) -> tuple[StepCost, ...]:
    """FLOPs and bytes of each phase of `tiled_attention`, one PyTorch op at a time.

    Every op reads its operands from memory and writes its result back, as eager PyTorch
    does: the tiles are small, but every score tile still makes the round trip. The loop
    computes in float32 (float64 for float64 inputs), so tiles move at that item size. Not
    counted: the per-query-tile setup outside the ranges (zeroing the running statistics),
    which is O(seq_len · head_dim) like the inputs themselves.
    """
    a = max(itemsize(dtype), 4)  # the loop's accumulation dtype
    d = head_dim
    # [FLOPs, elements moved] per phase, summed over the tiles the loop visits.
    scores, softmax, accumulate, normalize = ([0.0, 0.0] for _ in range(4))
    grid = tile_grid(seq_len, block_q, block_k, causal=causal, kv_seq_len=kv_seq_len)
    for row in grid:
        r = row[0].rows
        for t in row:
            if t.state == SKIPPED:
                continue
            c = t.cols
            scores[0] += 2.0 * r * c * d
            scores[1] += r * d + c * d + r * c  # q_i, k_j in; the score tile out
            if t.state == DIAGONAL:
                scores[1] += 2 * r * c + 2 * r * c / a  # masked_fill in and out; its bool mask
            # max, subtract, exp and sum over the tile; the running max, sum and rescale factor
            softmax[0] += (SOFTMAX_FLOPS_PER_ELEMENT - 1) * r * c + 5 * r
            softmax[1] += 6 * r * c + 17 * r
            # acc·alpha + p @ v_j
            accumulate[0] += 2.0 * r * c * d + 2 * r * d
            accumulate[1] += r * c + c * d + 6 * r * d + r
        # acc / l, copied into the output; m + log(l), copied into the log-sum-exp
        normalize[0] += r * d + 2 * r
        normalize[1] += 4 * r * d + 8 * r
    bh = batch_size * num_heads
    return tuple(
        StepCost(label, bh * flops, bh * elements * a)
        for label, (flops, elements) in zip(
            TILED_STEPS, (scores, softmax, accumulate, normalize), strict=True
        )
    )


def tiled_loop_traffic(*args, **kwargs) -> float:
    """Total bytes of `tiled_step_costs` (same arguments)."""
    return float(sum(c.bytes for c in tiled_step_costs(*args, **kwargs)))


# The most 32-bit registers one thread block may hold on compute capability 8.x and 9.x
# (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": 64 K).
REGISTERS_PER_BLOCK = 64 * 1024


def shared_bytes(block_q: int, block_k: int, head_dim: int, dtype: str = "bfloat16") -> int:
    """What a FlashAttention-2/3 program keeps in shared memory: its Q tile and one K and V
    tile in the input dtype (one stage; a pipelined kernel holds two or more K/V stages)."""
    return (block_q + 2 * block_k) * head_dim * itemsize(dtype)


def register_bytes(block_q: int, block_k: int, head_dim: int) -> int:
    """What it keeps in registers, in float32, spread over the block's threads: the score
    and probability tile, the output accumulator, and each row's running max and sum."""
    return 4 * (block_q * block_k + block_q * head_dim + 2 * block_q)


def working_set_bytes(block_q: int, block_k: int, head_dim: int, dtype: str = "bfloat16") -> int:
    """On-chip bytes one program of a fused kernel holds: Q, K and V tiles in the input dtype,
    the score tile, the float32 accumulator and the running max and sum."""
    return shared_bytes(block_q, block_k, head_dim, dtype) + register_bytes(
        block_q, block_k, head_dim
    )


def programs(batch_size: int, num_heads: int, seq_len: int, block_q: int | None = None) -> int:
    """Programs (thread blocks) one fused forward launches.

    FlashAttention 1 (`block_q=None`) runs one program per (batch, head), which loops over
    every query tile itself. FlashAttention 2 puts the query tiles in the outer loop: each is
    independent, so each gets its own program, and a launch has `⌈seq_len / block_q⌉` times
    more of them to spread over the streaming multiprocessors.
    """
    per_head = 1 if block_q is None else math.ceil(seq_len / block_q)
    return batch_size * num_heads * per_head


@dataclass(frozen=True)
class RescaleFlops:
    """Element-wise FLOPs on the output block, outside the two matmuls, in each version."""

    fa1: float
    fa2: float

    @property
    def saved(self) -> float:
        return self.fa1 - self.fa2


def output_rescale_flops(
    batch_size: int,
    num_heads: int,
    seq_len: int,
    head_dim: int,
    *,
    causal: bool,
    block_q: int,
    block_k: int,
    kv_seq_len: int | None = None,
) -> RescaleFlops:
    """What deferring the normalisation saves, counted over the tiles a forward visits.

    FlashAttention 1 (its Algorithm 1, line 12) keeps the output normalised after every key
    tile: `diag(l_new)⁻¹ (diag(l) e^(m - m_new) O + e^(m_tile - m_new) P V)`, four FLOPs per
    output element per visited tile (three scalings and an add). FlashAttention 2 (its
    Algorithm 1, lines 10 and 12) keeps the output unnormalised: `e^(m - m_new) O + P V`, two
    FLOPs per element per visited tile, and one division by `l` per query, after the last
    tile. Per-row scalars (`e^(m - m_new)`, `l`) are O(rows) and left out of both.
    """
    rows = tile_rows(seq_len, block_q, block_k, causal=causal, kv_seq_len=kv_seq_len)
    rows_visited = sum(r.rows * r.visited for r in rows)
    per_row = batch_size * num_heads * head_dim  # output elements per query row, all heads
    return RescaleFlops(
        fa1=4.0 * per_row * rows_visited, fa2=per_row * (2.0 * rows_visited + seq_len)
    )


@dataclass(frozen=True)
class TileFit:
    """One tile size against one thread block's on-chip memory: shared memory for the Q, K
    and V tiles, registers for the score tile and the accumulator (as FlashAttention 2 and 3
    keep them)."""

    block_q: int
    block_k: int
    working_set: int  # bytes, working_set_bytes: both together
    shared: int  # bytes, shared_bytes
    registers: int  # bytes, register_bytes

    capacity: int = 0  # the shared memory one block may use
    register_capacity: int = 4 * REGISTERS_PER_BLOCK

    @property
    def fits(self) -> bool:
        return self.shared <= self.capacity and self.registers <= self.register_capacity


def tile_fits(
    capacity_bytes: int,
    head_dim: int,
    dtype: str,
    tiles: tuple[tuple[int, int], ...] = ((64, 64), (128, 64), (128, 128), (256, 128)),
) -> tuple[TileFit, ...]:
    """Each tile's shared-memory and register bytes, and whether both fit one block:
    `capacity_bytes` of shared memory (the most one block may use) and the block's
    `REGISTERS_PER_BLOCK` 32-bit registers. A register count at the limit leaves nothing
    for addresses and indices: a tile that only just fits may spill in a real kernel."""
    if capacity_bytes < 1:
        raise ValueError(f"capacity_bytes must be positive, got {capacity_bytes}")
    out = []
    for block_q, block_k in tiles:
        shared = shared_bytes(block_q, block_k, head_dim, dtype)
        regs = register_bytes(block_q, block_k, head_dim)
        out.append(TileFit(block_q, block_k, shared + regs, shared, regs, capacity_bytes))
    return tuple(out)
