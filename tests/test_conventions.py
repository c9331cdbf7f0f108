# The site's conventions, checked across every implementation (issue 28, item 5):
# - one causal alignment, bottom-right (query i of N sees keys 0 .. i + M - N, as
#   naive.causal_mask and FlashAttention >= 2.1 align it), on rectangular shapes both ways;
# - one behaviour for a query that sees no key (causal, N > M): output 0, log-sum-exp -inf;
# - useful FLOPs count the visible (query, key) pairs (analytic/cost.py).
# Each implementation is compared with naive attention and with the float64 reference of
# tests/reference.py, on fresh random inputs.
import json
import textwrap

import pytest
import torch
from interpreted import run_interpreted
from reference import attention_reference, rel_err
from torch.nn.attention.flex_attention import flex_attention

from attention_docs.analytic.cost import attention_flops, useful_flops, visible_pairs
from attention_docs.attention import flex
from attention_docs.attention.backward import forward_backward, implementation
from attention_docs.attention.compiled import compiled_attention
from attention_docs.attention.decode import cached_attention
from attention_docs.attention.masking import MASK_VARIANTS, masked_attention, prepare_mask
from attention_docs.attention.naive import causal_mask, naive_attention, naive_step_calls
from attention_docs.attention.sdpa import sdpa_attention
from attention_docs.attention.tiled import tiled_attention_with_lse
from attention_docs.findings import flash as fflash
from attention_docs.inputs import make_qkv
from attention_docs.records.shape import Shape

HAS_TRITON = __import__("importlib").util.find_spec("triton") is not None

# (queries, keys): fewer queries than keys (a chunk against a cache), one query (decoding),
# square, and more queries than keys (the first ones see no key).
FEWER, ONE, SQUARE, MORE = (5, 13), (1, 9), (11, 11), (13, 5)
SHAPES = [FEWER, ONE, SQUARE, MORE]
TOL = 1e-5


def fresh_seed() -> int:
    return int(torch.randint(0, 2**31 - 1, ()).item())


def qkv(n, m, *, seed, heads=2, head_dim=16):
    return make_qkv(2, heads, n, head_dim, kv_seq_len=m, seed=seed)


def empty_rows(n, m) -> int:
    """How many queries see no key under the bottom-right alignment."""
    return max(0, n - m)


def test_causal_mask_is_bottom_right_both_ways():
    # Query i of N sees keys 0 .. i + M - N: the last query sees every key.
    assert (~causal_mask(2, 5)).sum(-1).tolist() == [4, 5]
    assert (~causal_mask(5, 2)).sum(-1).tolist() == [0, 0, 0, 1, 2]
    assert torch.equal(causal_mask(4, 4), torch.ones(4, 4, dtype=torch.bool).triu(1))


@pytest.mark.parametrize(("n", "m"), SHAPES)
def test_naive_matches_the_reference_and_zeroes_empty_rows(n, m):
    seed = fresh_seed()
    q, k, v = qkv(n, m, seed=seed)
    out = naive_attention(q, k, v, causal=True)
    assert not out.isnan().any(), f"seed={seed}"
    assert rel_err(out, attention_reference(q, k, v, causal=True)) < TOL, f"seed={seed}"
    assert torch.equal(
        out[..., : empty_rows(n, m), :], torch.zeros_like(out[..., : empty_rows(n, m), :])
    )
    # The step calls chapter 01 times in sequence compute the same forward.
    calls = list(naive_step_calls(q, k, v, causal=True).values())
    torch.testing.assert_close(calls[-1](), out)


@pytest.mark.parametrize("backend", ["math", "flash"])  # the two SDPA backends of a CPU
@pytest.mark.parametrize(("n", "m"), SHAPES)
def test_sdpa_attention_agrees_with_naive(n, m, backend):
    seed = fresh_seed()
    q, k, v = qkv(n, m, seed=seed)
    out = sdpa_attention(q, k, v, causal=True, backend=backend)
    torch.testing.assert_close(out, naive_attention(q, k, v, causal=True), msg=f"seed={seed}")
    rows = out[..., : empty_rows(n, m), :]
    assert torch.equal(rows, torch.zeros_like(rows))


@pytest.mark.parametrize("blocks", [(4, 4), (8, 3), (64, 64)])
@pytest.mark.parametrize(("n", "m"), SHAPES)
def test_tiled_agrees_with_naive_and_gives_minus_inf_lse_to_empty_rows(n, m, blocks):
    seed = fresh_seed()
    q, k, v = qkv(n, m, seed=seed)
    out, lse = tiled_attention_with_lse(q, k, v, causal=True, block_q=blocks[0], block_k=blocks[1])
    torch.testing.assert_close(out, naive_attention(q, k, v, causal=True), msg=f"seed={seed}")
    _, expected_lse = attention_reference(q, k, v, causal=True, lse=True)
    e = empty_rows(n, m)
    assert torch.isneginf(lse[..., :e]).all()
    torch.testing.assert_close(lse[..., e:].double(), expected_lse[..., e:], rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize(("n", "m"), SHAPES)
def test_flex_lower_right_agrees_with_naive(n, m):
    seed = fresh_seed()
    q, k, v = qkv(n, m, seed=seed)
    block_mask = flex.block_mask_for(flex.causal_lower_right(n, m), n, "cpu", kv_len=m)
    out = flex_attention(q, k, v, block_mask=block_mask)
    torch.testing.assert_close(out, naive_attention(q, k, v, causal=True), msg=f"seed={seed}")


def test_flex_causal_is_the_square_case_of_lower_right():
    i, j = torch.meshgrid(torch.arange(7), torch.arange(7), indexing="ij")
    assert torch.equal(flex.causal(0, 0, i, j), flex.causal_lower_right(7, 7)(0, 0, i, j))
    i, j = torch.meshgrid(torch.arange(3), torch.arange(7), indexing="ij")
    assert torch.equal(flex.causal_lower_right(3, 7)(0, 0, i, j), ~causal_mask(3, 7))


@pytest.mark.parametrize("impl", ["naive", "naive_repeat_kv", "sdpa"])
@pytest.mark.parametrize(("n", "m"), [FEWER, ONE, SQUARE])
def test_decoding_agrees_with_naive_and_refuses_a_cache_shorter_than_the_queries(n, m, impl):
    seed = fresh_seed()
    q, _, _ = make_qkv(1, 4, n, 16, seed=seed)
    _, k, v = make_qkv(1, 2, m, 16, seed=seed + 1)  # grouped: two query heads per k/v head
    out = cached_attention(q, k, v, impl=impl)
    k4, v4 = (t.repeat_interleave(2, dim=1) for t in (k, v))
    torch.testing.assert_close(out, naive_attention(q, k4, v4, causal=True), msg=f"seed={seed}")
    q_long, _, _ = make_qkv(1, 4, m + 1, 16, seed=seed)
    with pytest.raises(ValueError, match="cache must hold the new tokens' keys"):
        cached_attention(q_long, k, v, impl=impl)


@pytest.mark.parametrize("variant", MASK_VARIANTS)
def test_mask_variants_agree_with_naive_or_refuse(variant):
    seed = fresh_seed()
    n, m = FEWER
    q, k, v = qkv(n, m, seed=seed)
    prepared = prepare_mask(variant, n, m)
    out = masked_attention(q, k, v, variant=variant, prepared=prepared)
    torch.testing.assert_close(out, naive_attention(q, k, v, causal=True), msg=f"seed={seed}")
    q, k, v = qkv(*MORE, seed=seed)
    with pytest.raises(ValueError, match="at least as many keys as queries"):
        masked_attention(q, k, v, variant=variant, prepared=prepare_mask(variant, *MORE))


@pytest.mark.parametrize("name", ["naive", "sdpa-math", "sdpa-flash"])
@pytest.mark.parametrize(("n", "m"), SHAPES)
def test_backward_agrees_with_float64_autograd(n, m, name):
    seed = fresh_seed()
    q, k, v = (t.requires_grad_() for t in qkv(n, m, seed=seed))
    grad_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(seed))
    out, grads = forward_backward(implementation(name, causal=True), q, k, v, grad_out)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    expected = attention_reference(*leaves, causal=True)
    expected_grads = torch.autograd.grad(expected, leaves, grad_out.double())
    assert rel_err(out, expected) < TOL, f"seed={seed}"
    for got, want in zip(grads, expected_grads, strict=True):
        assert not got.isnan().any(), f"{name}, seed={seed}"
        assert rel_err(got, want) < 1e-4, f"{name}, seed={seed}"
    e = empty_rows(n, m)
    assert torch.equal(grads[0][..., :e, :], torch.zeros_like(grads[0][..., :e, :]))


@pytest.mark.parametrize(("n", "m"), [FEWER, MORE])
def test_compiled_agrees_with_naive(n, m):
    torch._dynamo.reset()
    seed = fresh_seed()
    q, k, v = qkv(n, m, seed=seed)
    out = compiled_attention()(q, k, v, causal=True)
    torch.testing.assert_close(out, naive_attention(q, k, v, causal=True), msg=f"seed={seed}")


# The Triton kernel under Triton's interpreter (a new process: TRITON_INTERPRET is read when
# the kernel is defined), against naive attention on the same inputs.
TRITON = textwrap.dedent(
    """
    import json, sys
    import torch
    from attention_docs.attention.naive import naive_attention
    from attention_docs.attention.triton_flash import triton_flash_attention
    from attention_docs.inputs import make_qkv
    results = []
    for n, m, seed in json.loads(sys.argv[1]):
        q, k, v = make_qkv(1, 2, n, 16, kv_seq_len=m, seed=seed)
        out, lse = triton_flash_attention(q, k, v, causal=True, block_m=16, block_n=16,
                                          return_lse=True)
        naive = naive_attention(q.double(), k.double(), v.double(), causal=True)
        results.append({"err": float((out.double() - naive).abs().max()),
                        "nan": bool(out.isnan().any()),
                        "lse": lse.double().tolist()})
    print(json.dumps(results))
    """
)
# Lengths over one tile (16) so that a tile holds both empty and non-empty rows.
TRITON_SHAPES = [(5, 13), (1, 9), (40, 23), (20, 3)]


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_triton_kernel_agrees_with_naive_under_the_interpreter(tmp_path):
    seed = fresh_seed()
    cases = [[n, m, seed + i] for i, (n, m) in enumerate(TRITON_SHAPES)]
    proc = run_interpreted({"kernel": (TRITON, [json.dumps(cases)])}, tmp_path)["kernel"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for (n, m, s), r in zip(cases, results, strict=True):
        q, k, v = make_qkv(1, 2, n, 16, kv_seq_len=m, seed=s)
        _, expected_lse = attention_reference(q, k, v, causal=True, lse=True)
        lse, e = torch.tensor(r["lse"], dtype=torch.float64), empty_rows(n, m)
        assert not r["nan"] and r["err"] < 1e-5, f"{n}×{m}, seed={s}"
        assert torch.isneginf(lse[..., :e]).all(), f"{n}×{m}"
        torch.testing.assert_close(lse[..., e:], expected_lse[..., e:], rtol=1e-5, atol=1e-5)


# --- useful FLOPs ----------------------------------------------------------------------------


def test_visible_pairs_count_the_mask_the_implementations_apply():
    for n in range(1, 13):
        for m in range(1, 13):
            assert visible_pairs(n, m, causal=True) == int((~causal_mask(n, m)).sum()), (n, m)
            assert visible_pairs(n, m, causal=False) == n * m
    with pytest.raises(ValueError, match="at least 1"):
        visible_pairs(0, 4, causal=True)


# FlashAttention's two FLOP conventions, restated here to test against:
# - benchmarks/benchmark_flash_attention.py (FA2), square shapes only:
#   flops(batch, seqlen, headdim, nheads, causal) = 4·batch·seqlen²·nheads·headdim, halved
#   when causal: the triangle's area.
# - hopper/benchmark_attn.py (FA3), rectangular: 2·batch·nheads·seqlen_q·avg·(headdim +
#   headdim_v), avg = (max(0, seqlen_k - seqlen_q) + seqlen_k) / 2 when causal, else seqlen_k.
def fa2_flops(batch, seqlen, headdim, nheads, causal):
    return 4 * batch * seqlen**2 * nheads * headdim / (2 if causal else 1)


def fa3_flops(batch, nheads, seqlen_q, seqlen_k, headdim, *, causal):
    avg = (max(0, seqlen_k - seqlen_q) + seqlen_k) / 2 if causal else seqlen_k
    return batch * nheads * 2 * seqlen_q * avg * (headdim + headdim)


@pytest.mark.parametrize(("b", "h", "d"), [(1, 1, 16), (4, 16, 128)])
def test_useful_flops_against_flash_attentions_flops(b, h, d):
    for n in (1, 7, 512, 4096):
        # Without a mask, all three count every pair.
        assert useful_flops(b, h, n, d, causal=False) == fa2_flops(b, n, d, h, False)
        assert useful_flops(b, h, n, d, causal=False, kv_seq_len=3 * n) == fa3_flops(
            b, h, n, 3 * n, d, causal=False
        )
        # Square causal: FlashAttention halves N², the triangle's area; the visible pairs are
        # N·(N+1)/2, the diagonal's N/2 more, a relative difference of 1/N.
        ours = useful_flops(b, h, n, d, causal=True)
        assert ours - fa2_flops(b, n, d, h, True) == 4 * b * h * d * n / 2
        assert ours / fa2_flops(b, n, d, h, True) == pytest.approx(1 + 1 / n)
    # Fewer queries than keys: FA3's rectangular count, the same diagonal half more.
    for n, m in ((1, 4096), (5, 13), (512, 4096), (4096, 4096)):
        assert useful_flops(b, h, n, d, causal=True, kv_seq_len=m) - fa3_flops(
            b, h, n, m, d, causal=True
        ) == pytest.approx(4 * b * h * d * n / 2)
    # One query over a cache of M keys sees all M: nothing to halve.
    m = 4096
    one = useful_flops(b, h, 1, d, causal=True, kv_seq_len=m)
    assert one == useful_flops(b, h, 1, d, causal=False, kv_seq_len=m) == 4 * b * h * m * d
    assert one == attention_flops(b, h, 1, d, kv_seq_len=m)
    # More queries than keys: FA3's average counts N·M/2 pairs, the first N - M queries'
    # included; they see no key, and the visible pairs are M·(M+1)/2.
    assert useful_flops(b, h, 13, d, causal=True, kv_seq_len=5) == 4 * b * h * d * 15
    assert fa3_flops(b, h, 13, 5, d, causal=True) == 4 * b * h * d * 13 * 5 / 2


def test_the_findings_count_useful_flops_one_way():
    square = Shape(1, 2, 64, 16, causal=True)
    cache = Shape(1, 2, 1, 16, causal=True, kv_len=300)
    assert fflash.useful_flops(square) == 4 * 2 * 16 * 64 * 65 / 2
    assert fflash.useful_flops(cache) == 4 * 2 * 16 * 300  # not halved
