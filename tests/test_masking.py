import math
from dataclasses import replace

import pytest
import torch
from reference import attention_reference, rel_err

from attention_docs import render
from attention_docs.attention.masking import (
    MASK_FUNCTIONS,
    MASK_VARIANTS,
    masked_attention,
    prepare_mask,
)
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments.naive_variants import VARIANT_COLUMNS, parse_shapes
from attention_docs.experiments.registry import ExperimentError
from attention_docs.experiments.runner import run_experiment
from attention_docs.inputs import make_qkv, resolve_dtype
from attention_docs.measurements import Sourced, Table


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
    for r in rows.values():  # unprofiled, with each variant's rounds
        assert r["mask_low_us"] <= r["mask_us"] <= r["mask_high_us"]
        assert r["forward_low_us"] <= r["forward_us"] <= r["forward_high_us"]
    assert "3 interleaved rounds" in m.facts["timing_method"]


def test_dtypes_experiment_times_every_step_and_records_what_runs():
    m = run_experiment("naive_dtypes", TINY, device="cpu")
    table = m.tables["dtypes"]
    assert table.columns == ("step", "dtype", "median_us", "low_us", "high_us")
    keys = [(r["step"], r["dtype"]) for r in table.records()]
    assert keys == [(step, d) for d in ("float32", "bfloat16") for step in ("forward", *STEPS)]
    assert all(r["low_us"] <= r["median_us"] <= r["high_us"] for r in table.records())
    assert m.facts["cpu_capability"]
    ops = m.tables["step_ops"].records()
    bmm = [r for r in ops if r["name"] == "aten::bmm" and r["step"] == "attention.scores"]
    assert [(r["dtype"], r["calls"]) for r in bmm] == [("float32", 1), ("bfloat16", 1)]
    softmax = {r["dtype"] for r in ops if r["name"] == "aten::_softmax"}
    assert softmax == {"float32", "bfloat16"}


def test_step_shares_experiment_profiles_each_shape_with_its_spread():
    m = run_experiment("naive_step_shares", {"shapes": "16x8,48x32", "num_heads": 1}, device="cpu")
    rows = m.tables["shares"].records()
    assert [r["shape"] for r in rows] == ["16×8", "48×32"]
    for r in rows:
        for label in STEPS:
            # The mean over three profiled forwards lies inside their range.
            assert r[f"{label} low"] <= r[label] + 1e-6 and r[label] <= r[f"{label} high"] + 1e-6


def variants_measurement(m, timings):
    """`m` with a hand-made variants table: variant -> (mask (median, low, high), forward)."""
    rows = tuple((v, 1.0, 100.0, 0, *mask, *forward) for v, (mask, forward) in timings.items())
    return replace(
        m,
        tables={"variants": Table(VARIANT_COLUMNS, rows)},
        facts={"matrix_bytes": 100.0, "timing_method": "x, 3 interleaved rounds"},
    )


def test_mask_variant_renderers_call_overlapping_rounds_a_tie(tiny_measurement):
    forward = (1000.0, 950.0, 1050.0)
    m = variants_measurement(
        tiny_measurement,
        {
            "rebuild": ((100.0, 90.0, 110.0), forward),
            "masked_fill": ((50.0, 45.0, 55.0), (990.0, 940.0, 1040.0)),
            "masked_fill_": ((20.0, 18.0, 22.0), (900.0, 880.0, 920.0)),
            "additive": ((21.0, 19.0, 23.0), forward),
        },
    )
    table = render.variants.mask_variants_table(Sourced(m, "now", "x.json"))
    assert "| `masked_fill` | 0.5× (0.409–0.611×) | within noise (0.99×) |" in table
    claim = render.variants.mask_variants_claim(m)
    assert "the cheapest mask step is `masked_fill_`'s, within noise of `additive`'s" in claim
    assert "`masked_fill_`'s forward takes 0.9× (0.838–0.968×) the time of `rebuild`'s" in claim
    assert "`additive`'s forward is within noise of `rebuild`'s (1×)" in claim
    svg = render.variants.mask_variants_figure(Sourced(m, "now", "x.json"))
    assert "masked_fill: 0.5× (0.409–0.611×)." in svg


def dtypes_measurement(m, timings, ops=()):
    rows = tuple((step, d, *t) for (step, d), t in timings.items())
    return replace(
        m,
        tables={
            "dtypes": Table(("step", "dtype", "median_us", "low_us", "high_us"), rows),
            "step_ops": Table(("dtype", "step", "where", "name", "calls", "time_us"), tuple(ops)),
        },
        facts={"dtypes": "float32,bfloat16", "timing_method": "x, 3 interleaved rounds"},
    )


def test_dtype_renderers_state_only_differences_beyond_noise(tiny_measurement):
    f32 = (100.0, 95.0, 105.0)
    timings = {
        ("forward", "float32"): f32,
        ("forward", "bfloat16"): (300.0, 290.0, 310.0),
        ("attention.scores", "float32"): f32,
        ("attention.scores", "bfloat16"): (700.0, 680.0, 720.0),
        ("attention.weighted_sum", "float32"): f32,
        ("attention.weighted_sum", "bfloat16"): (2400.0, 2300.0, 2500.0),
        ("attention.softmax", "float32"): f32,
        ("attention.softmax", "bfloat16"): (102.0, 96.0, 108.0),
    }
    bmm = [
        (d, step, "CPU", "aten::bmm", 1.0, 90.0)
        for d in ("float32", "bfloat16")
        for step in ("attention.scores", "attention.weighted_sum")
    ]
    selects = [
        ("bfloat16", step, "CPU", "aten::select", 6.0, 5.0)
        for step in ("attention.scores", "attention.weighted_sum")
    ]
    m = dtypes_measurement(tiny_measurement, timings, bmm + selects)
    claim = render.variants.dtype_claim(m)
    assert "takes **3× (2.76–3.26×)** the time of float32's — slower" in claim
    assert "beyond noise: `attention.weighted_sum` 24×" in claim
    assert "Within noise of float32: `attention.softmax`." in claim
    ops = render.variants.dtype_ops_claim(m)
    # 6 selects for batch_size × num_heads = 2 × 1... matrices: the per-matrix reading.
    assert "6× `aten::select`" in ops and "per matrix of the batch" in ops
    assert "the same path" in ops and "is not measured here" in ops
    table = render.variants.dtype_table(Sourced(m, "now", "x.json"))
    assert (
        "| `attention.scores` | 7× (6.48–7.58×) | `aten::bmm` | `aten::bmm` + 6× `aten::select` |"
        in table
    )
    # Different extra work in the two matmuls is named as the measured difference.
    copy = [("bfloat16", "attention.weighted_sum", "CPU", "aten::copy_", 1.0, 900.0)]
    assert "the measured difference" in render.variants.dtype_ops_claim(
        dtypes_measurement(tiny_measurement, timings, bmm + selects + copy)
    )


def test_shape_shares_claim_names_ties_from_the_profiled_spread(tiny_measurement):
    columns = ("shape", *STEPS, *(f"{s} {end}" for s in STEPS for end in ("low", "high")))

    def row(shape, times, spread):
        return (shape, *times, *(t * f for t in times for f in (1 - spread, 1 + spread)))

    rows = (
        row("64×64", (10.0, 5.0, 5.0, 9.5, 10.0), 0.1),
        row("1024×64", (50.0, 5.0, 5.0, 20.0, 30.0), 0.1),
    )
    m = replace(tiny_measurement, tables={"shares": Table(columns, rows)})
    claim = render.variants.shape_shares_claim(m)
    assert (
        "shape 64×64: `attention.scores`, `attention.softmax`, `attention.weighted_sum` within noise"
        in claim
    )
    assert (
        "shape 1024×64: `attention.scores` (45.5%), beyond the noise of every other step" in claim
    )
    assert "take 50.6% of the five steps' profiled time at shape 64×64" in claim
