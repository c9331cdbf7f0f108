# The Triton FlashAttention forward kernel. Kept apart from triton_flash.py because importing
# it imports triton, and `@triton.jit` decides at import time whether the kernel is compiled
# for a GPU or run by Triton's interpreter (TRITON_INTERPRET=1, CPU tensors): only import it
# once that choice is made. The loop is tiled.py's loop, fused: the tiles live in registers
# and shared memory, and only q, k, v, the output and the log-sum-exp touch GPU memory.
# Offsets are int64 (head_offset, tile_offsets): tensors of more than 2**31 elements exist.
import triton
import triton.language as tl


# --8<-- [start:kernel]
@triton.jit
def head_offset(bh, num_heads, stride_b, stride_h):
    # Where (batch, head) number bh starts, in elements. In int64: batch × stride passes
    # 2**31 (4 GiB of bfloat16) on large inputs, and int32 arithmetic would wrap around.
    bh = bh.to(tl.int64)
    return (bh // num_heads) * stride_b + (bh % num_heads) * stride_h


@triton.jit
def tile_offsets(index, dims, stride_n, stride_d):
    # A (rows × head_dim) tile within one head, in int64 too: with a (batch, seq, heads,
    # head_dim) layout a row's stride is num_heads·head_dim, and seq_len rows of it can pass 2**31.
    return index.to(tl.int64)[:, None] * stride_n + dims.to(tl.int64)[None, :] * stride_d


@triton.jit
def flash_forward_kernel(
    Q, K, V, O, LSE,  # pointers; LSE: float32, one value per query
    sq_b, sq_h, sq_n, sq_d, sk_b, sk_h, sk_n, sk_d,  # strides of q and k
    sv_b, sv_h, sv_n, sv_d, so_b, so_h, so_n, so_d,  # strides of v and the output
    num_heads, seq_len, kv_len, head_dim, qk_scale,  # qk_scale = log2(e) / sqrt(head_dim)
    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr, PRECISION: tl.constexpr,  # PRECISION: tl.dot's on float32 inputs
):
    tile, bh = tl.program_id(0), tl.program_id(1)  # this program: (query tile, batch·head)
    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, BLOCK_D)  # head_dim padded to a power of two, padding masked
    q_mask = (rows[:, None] < seq_len) & (dims[None, :] < head_dim)
    q = tl.load(Q + head_offset(bh, num_heads, sq_b, sq_h) + tile_offsets(rows, dims, sq_n, sq_d),
                mask=q_mask, other=0.0)
    K = K + head_offset(bh, num_heads, sk_b, sk_h)  # this head's k and v
    V = V + head_offset(bh, num_heads, sv_b, sv_h)
    # Running max (log2 units), from the lowest finite float32 rather than -inf, so that a
    # query whose keys so far are all masked gets exp2(-inf - lowest) = 0, never NaN.
    m = tl.full([BLOCK_M], -3.4028234663852886e38, tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)  # running sum of exp
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)  # running sum of p·v
    offset = kv_len - seq_len  # query i sees keys 0 .. i + offset
    kv_end = kv_len
    if CAUSAL:  # key tiles past this query tile's diagonal are never loaded
        kv_end = tl.minimum(kv_len, (tile + 1) * BLOCK_M + offset)
    for k0 in range(0, kv_end, BLOCK_N):
        keys = k0 + cols
        kv_mask = (keys[:, None] < kv_len) & (dims[None, :] < head_dim)
        k = tl.load(K + tile_offsets(keys, dims, sk_n, sk_d), mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        visible = keys[None, :] < kv_len
        if CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None] + offset)
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m - m_new)  # rescales what was summed under the old max
        l = l * alpha + tl.sum(p, 1)
        v = tl.load(V + tile_offsets(keys, dims, sv_n, sv_d), mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m = m_new
    # A query that saw no key (causal, more queries than keys) has l = 0 and acc = 0: its
    # output is 0, as FlashAttention's, and its log-sum-exp -inf (lowest + log2(0)).
    out = (acc / tl.where(l == 0.0, 1.0, l)[:, None]).to(O.dtype.element_ty)
    tl.store(O + head_offset(bh, num_heads, so_b, so_h) + tile_offsets(rows, dims, so_n, so_d),
             out, mask=q_mask)
    lse = (m + tl.log2(l)) * 0.6931471805599453  # from log2 back to natural log
    tl.store(LSE + bh.to(tl.int64) * seq_len + rows, lse, mask=rows < seq_len)
# --8<-- [end:kernel]
