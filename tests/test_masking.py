import math

import pytest
import torch
from reference import attention_reference, rel_err

from attention_docs.attention.masking import (
    MASK_FUNCTIONS,
    MASK_VARIANTS,
    masked_attention,
    prepare_mask,
)
from attention_docs.attention.naive import naive_attention
from attention_docs.experiments.naive_variants import parse_shapes
from attention_docs.experiments.registry import ExperimentError
from attention_docs.experiments.runner import run_experiment
from attention_docs.inputs import make_qkv, resolve_dtype


def reference(q, k, v, causal):
    return attention_reference(q, k, v, causal=causal)


TOL = {"float32": 1e-5, "bfloat16": 2e-2}
# (batch_size, num_heads, seq_len, head_dim, kv_seq_len): odd lengths, one query, longer keys.
SHAPES = [(1, 1, 1, 8, 1), (2, 3, 17, 16, 17), (1, 4, 64, 64, 64), (3, 2, 33, 32, 45)]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("variant", MASK_VARIANTS)
def test_every_mask_variant_matches_the_causal_float64_reference(variant, shape, dtype):
    seed = int(torch.randint(0, 2**31 - 1, ()).item())  # fresh inputs every run
    b, h, n, d, m = shape
    q, k, v = make_qkv(b, h, n, d, dtype=dtype, seed=seed, kv_seq_len=m)
    prepared = prepare_mask(variant, n, m, dtype=resolve_dtype(dtype))
    out = masked_attention(q, k, v, variant=variant, prepared=prepared)
    assert out.dtype == resolve_dtype(dtype) and out.shape == q.shape
    assert rel_err(out, reference(q, k, v, causal=True)) < TOL[dtype], f"seed={seed}"


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("variant", ["masked_fill", "masked_fill_", "additive"])
def test_a_mask_that_hides_nothing_gives_unmasked_attention(variant, dtype):
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    q, k, v = make_qkv(2, 3, 19, 16, dtype=dtype, seed=seed)
    nothing = torch.zeros(19, 19, dtype=torch.bool)
    prepared = nothing if variant != "additive" else torch.zeros(19, 19, dtype=q.dtype)
    out = masked_attention(q, k, v, variant=variant, prepared=prepared)
    assert rel_err(out, reference(q, k, v, causal=False)) < TOL[dtype], f"seed={seed}"


def test_variants_agree_with_naive_attention_and_in_place_reuses_the_scores():
    q, k, v = make_qkv(1, 2, 23, 8, seed=5)
    expected = naive_attention(q, k, v, causal=True)
    for variant in MASK_VARIANTS:
        prepared = prepare_mask(variant, 23)
        torch.testing.assert_close(
            masked_attention(q, k, v, variant=variant, prepared=prepared), expected
        )
    scores = torch.randn(2, 4, 4)
    mask = prepare_mask("masked_fill_", 4)
    assert MASK_FUNCTIONS["masked_fill_"](scores, mask) is scores
    assert MASK_FUNCTIONS["masked_fill"](scores.clone(), mask) is not scores


def test_prepared_masks_have_the_promised_types():
    assert prepare_mask("rebuild", 8) is None
    assert prepare_mask("masked_fill", 8).dtype == torch.bool
    bias = prepare_mask("additive", 8, dtype=torch.bfloat16)
    assert bias.dtype == torch.bfloat16
    assert bias[0, 1] == -math.inf and bias[1, 0] == 0


def test_bad_variants_are_explained():
    q, k, v = make_qkv(1, 1, 4, 4)
    with pytest.raises(ValueError, match="choose one of: rebuild, masked_fill"):
        masked_attention(q, k, v, variant="nope")
    with pytest.raises(ValueError, match="needs the tensor prepare_mask"):
        masked_attention(q, k, v, variant="additive")


def test_parse_shapes():
    assert parse_shapes("64x64, 1024X16") == [(64, 64), (1024, 16)]
    with pytest.raises(ExperimentError, match="SEQ_LENxHEAD_DIM"):
        parse_shapes("64-64")
    with pytest.raises(ExperimentError, match="empty"):
        parse_shapes(" , ")


TINY = {"num_heads": 2, "seq_len": 32, "head_dim": 16}


def test_mask_variants_experiment_counts_what_each_variant_allocates():
    m = run_experiment("naive_mask_variants", TINY, device="cpu")
    rows = {r["variant"]: r for r in m.tables["variants"].records()}
    matrix = 2 * 32 * 32 * 4
    assert m.facts["matrix_bytes"] == matrix
    assert rows["masked_fill_"]["mask_allocated_bytes"] == 0
    assert rows["masked_fill"]["mask_allocated_bytes"] == matrix
    assert rows["additive"]["mask_allocated_bytes"] == matrix
    # ones(N, N) and its triu: two bool masks, then the masked copy.
    assert rows["rebuild"]["mask_allocated_bytes"] == matrix + 2 * 32 * 32
    assert [rows[v]["prepared_bytes"] for v in MASK_VARIANTS] == [0, 32 * 32, 32 * 32, 32 * 32 * 4]
    assert all(r["mask_us"] > 0 and r["forward_us"] > 0 for r in rows.values())


def test_dtypes_experiment_has_every_step_in_every_dtype():
    m = run_experiment("naive_dtypes", TINY, device="cpu")
    table = m.tables["dtypes"]
    assert table.columns == ("step", "float32_us", "bfloat16_us")
    assert len(table.rows) == 6 and table.rows[-1][0] == "forward (unprofiled)"
    assert all(t > 0 for row in table.rows for t in row[1:])
    assert m.facts["cpu_capability"]


def test_step_shares_experiment_profiles_each_shape():
    m = run_experiment("naive_step_shares", {"shapes": "16x8,48x32", "num_heads": 1}, device="cpu")
    rows = m.tables["shares"].records()
    assert [r["shape"] for r in rows] == ["16×8", "48×32"]
    assert all(r["attention.softmax"] > 0 for r in rows)
