import pytest
import torch
from reference import attention_reference, rel_err
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention

from attention_docs.attention.naive import STEPS, causal_mask, naive_attention
from attention_docs.inputs import make_qkv, resolve_dtype


def reference(q, k, v, causal):
    return attention_reference(q, k, v, causal=causal)


TOL = {"float32": 1e-5, "bfloat16": 2e-2}
SHAPES = [(1, 1, 1, 8), (2, 3, 17, 16), (1, 4, 64, 64), (3, 2, 33, 32)]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_naive_matches_float64_reference_and_sdpa_math(shape, causal, dtype):
    seed = int(torch.randint(0, 2**31 - 1, ()).item())  # fresh inputs every run
    q, k, v = make_qkv(*shape, dtype=dtype, seed=seed)
    expected = reference(q, k, v, causal)
    out = naive_attention(q, k, v, causal=causal)
    assert out.dtype == resolve_dtype(dtype)
    assert out.shape == q.shape
    assert rel_err(out, expected) < TOL[dtype], f"seed={seed}"
    with sdpa_kernel(SDPBackend.MATH):
        sdpa = scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert rel_err(sdpa, expected) < TOL[dtype]


def test_causal_means_no_future_leaks():
    q, k, v = make_qkv(1, 1, 8, 4, seed=3)
    out = naive_attention(q, k, v, causal=True)
    v2 = v.clone()
    v2[..., 5:, :] += 100.0  # change only the future of rows 0..4
    out2 = naive_attention(q, k, v2, causal=True)
    torch.testing.assert_close(out[..., :5, :], out2[..., :5, :])
    assert not torch.allclose(out[..., 5:, :], out2[..., 5:, :])


def test_causal_mask_with_longer_keys_shifts_the_diagonal():
    mask = causal_mask(2, 5)
    # Query 0 is position 3 of 5: it sees keys 0..3; query 1 sees all five.
    assert mask.tolist() == [[False, False, False, False, True], [False] * 5]


def test_steps_are_labelled_in_order():
    assert STEPS == (
        "attention.scores",
        "attention.scale",
        "attention.mask",
        "attention.softmax",
        "attention.weighted_sum",
    )


def test_inputs_are_seeded_and_never_zero():
    a = make_qkv(1, 2, 8, 4, seed=1)
    b = make_qkv(1, 2, 8, 4, seed=1)
    c = make_qkv(1, 2, 8, 4, seed=2)
    for x, y, z in zip(a, b, c, strict=True):
        torch.testing.assert_close(x, y)
        assert not torch.equal(x, z)
        assert x.abs().sum() > 0


def test_inputs_for_grouped_query_and_cache():
    q, k, v = make_qkv(2, 8, 1, 16, kv_seq_len=10, num_kv_heads=2)
    assert q.shape == (2, 8, 1, 16)
    assert k.shape == v.shape == (2, 2, 10, 16)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seq_len": 0}, "seq_len must be a positive integer"),
        ({"dtype": "float8"}, "unknown dtype 'float8'"),
    ],
)
def test_bad_inputs_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_qkv(**kwargs)
