import math
import re
from dataclasses import replace

import pytest
import torch
from reference import attention_reference, rel_err
from timings import measured_in_rounds, spanning

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
from attention_docs.findings import steps as fs
from attention_docs.findings import variants as fv
from attention_docs.inputs import make_qkv, resolve_dtype
from attention_docs.measurements import Sourced, Table
from attention_docs.records.timing import Timing


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
    m = run_experiment("naive_mask_variants", TINY, device_setting="cpu")
    rows = {r["variant"]: r for r in m.tables["variants"].records()}
    matrix = 2 * 32 * 32 * 4
    assert m.facts["matrix_bytes"] == matrix
    assert rows["masked_fill_"]["mask_allocated_bytes"] == 0
    assert rows["masked_fill"]["mask_allocated_bytes"] == matrix
    assert rows["additive"]["mask_allocated_bytes"] == matrix
    # ones(N, N) and its triu: two bool masks, then the masked copy.
    assert rows["rebuild"]["mask_allocated_bytes"] == matrix + 2 * 32 * 32
    assert [rows[v]["prepared_bytes"] for v in MASK_VARIANTS] == [0, 32 * 32, 32 * 32, 32 * 32 * 4]
    for r in rows.values():  # unprofiled, each variant's rounds kept whole
        assert measured_in_rounds(r["mask"]) and measured_in_rounds(r["forward"])
    assert "interleaved rounds" in m.facts["timing_method"]


def test_dtypes_experiment_times_every_step_and_records_what_runs():
    m = run_experiment("naive_dtypes", TINY, device_setting="cpu")
    table = m.tables["dtypes"]
    assert table.columns == ("step", "dtype", "time")
    keys = [(r["step"], r["dtype"]) for r in table.records()]
    assert keys == [(step, d) for d in ("float32", "bfloat16") for step in ("forward", *STEPS)]
    assert all(measured_in_rounds(r["time"]) for r in table.records())
    assert m.facts["cpu_capability"]
    ops = m.tables["step_ops"].records()
    bmm = [r for r in ops if r["name"] == "aten::bmm" and r["step"] == "attention.scores"]
    assert [(r["dtype"], r["calls"]) for r in bmm] == [("float32", 1), ("bfloat16", 1)]
    softmax = {r["dtype"] for r in ops if r["name"] == "aten::_softmax"}
    assert softmax == {"float32", "bfloat16"}


def test_step_shares_experiment_keeps_every_profiled_forward():
    m = run_experiment(
        "naive_step_shares", {"shapes": "16x8,48x32", "num_heads": 1}, device_setting="cpu"
    )
    rows = m.tables["shares"].records()
    assert [(r["shape"], r["forward"]) for r in rows] == [
        (shape, i) for shape in ("16×8", "48×32") for i in (1, 2, 3)
    ]
    assert all(r[label] >= 0 for r in rows for label in STEPS)


def t(*rounds: float) -> Timing:
    return spanning(rounds)


def text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def variants_measurement(m, timings):
    """`m` with a hand-made variants table: variant -> (mask rounds, forward rounds)."""
    rows = tuple(
        (v, 1.0, 100.0, 0, t(*mask), t(*forward)) for v, (mask, forward) in timings.items()
    )
    return replace(
        m,
        tables={"variants": Table(VARIANT_COLUMNS, rows)},
        facts={"matrix_bytes": 100.0, "timing_method": "x, 3 interleaved rounds"},
    )


def test_mask_variant_renderers_call_overlapping_rounds_a_tie(tiny_measurement):
    forward = (950.0, 1000.0, 1050.0)
    m = variants_measurement(
        tiny_measurement,
        {
            "rebuild": ((90.0, 100.0, 110.0), forward),
            "masked_fill": ((45.0, 50.0, 55.0), (940.0, 990.0, 1040.0)),
            "masked_fill_": ((18.0, 20.0, 22.0), (880.0, 900.0, 920.0)),
            "additive": ((19.0, 21.0, 23.0), forward),
        },
    )
    table = text(render.variants.mask_variants(Sourced(m, "now", "x.json")))
    assert "| `masked_fill` | 0.5× (0.409–0.611×) | within noise (0.99×) |" in table
    assert "| `rebuild` | baseline | baseline |" in table
    # A leader within noise of another is not called "the cheapest" (findings/rank: a tie).
    assert "lowest time is `masked_fill_`'s, within noise of `additive`'s" in table
    assert "cheapest" not in table
    found = fv.mask_variants(m)
    assert not found.cheapest.clear
    ratio, _ = found.variants[1].mask
    assert ratio.id.startswith(
        "time ÷ rebuild's;mask step, masked_fill variant;b1 h2 n32 d16 float32 causal;unprofiled;"
    )


def dtypes_measurement(m, timings, ops=()):
    rows = tuple((step, d, t(*r)) for (step, d), r in timings.items())
    return replace(
        m,
        tables={
            "dtypes": Table(("step", "dtype", "time"), rows),
            "step_ops": Table(("dtype", "step", "where", "name", "calls", "time_us"), tuple(ops)),
        },
        facts={"dtypes": "float32,bfloat16", "timing_method": "x, 3 interleaved rounds"},
    )


def test_dtype_renderers_state_only_differences_beyond_noise(tiny_measurement):
    f32 = (95.0, 100.0, 105.0)
    timings = {
        ("forward", "float32"): f32,
        ("forward", "bfloat16"): (290.0, 300.0, 310.0),
        ("attention.scores", "float32"): f32,
        ("attention.scores", "bfloat16"): (680.0, 700.0, 720.0),
        ("attention.weighted_sum", "float32"): f32,
        ("attention.weighted_sum", "bfloat16"): (2300.0, 2400.0, 2500.0),
        ("attention.softmax", "float32"): f32,
        ("attention.softmax", "bfloat16"): (96.0, 102.0, 108.0),
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
    ops = render.variants.dtypes(Sourced(m, "now", "x.json"))
    assert "takes **3× (2.76–3.26×)** float32's time: slower." in text(ops)
    # 6 selects for batch_size × num_heads = 1 × 2 matrices: 3 per matrix.
    said = text(ops)  # the counts are facts now: no "6×" outside a fact span
    assert (
        "6 calls of `aten::select`" in said and "3 `aten::select` per matrix of the batch" in said
    )
    assert 'data-fact="calls per forward;aten::select;' in ops
    assert "the same path" in ops and "is not measured here" in ops
    table = text(ops)
    assert "| `attention.scores` | 7× (6.48–7.58×) | `aten::bmm` | `aten::bmm` |" in table
    assert "| `attention.softmax` | within noise (1.02×) |" in table
    # Different extra work in the two matmuls is named as the measured difference.
    copy = [("bfloat16", "attention.weighted_sum", "CPU", "aten::copy_", 1.0, 900.0)]
    assert "the measured difference" in render.variants.dtypes(
        Sourced(dtypes_measurement(tiny_measurement, timings, bmm + selects + copy), "n", "x")
    )
    same = dict(timings)
    same[("attention.weighted_sum", "bfloat16")] = (690.0, 710.0, 730.0)
    said = render.variants.dtypes(
        Sourced(dtypes_measurement(tiny_measurement, same, bmm), "n", "x")
    )
    assert "Their bfloat16 ÷ float32 ratios are within noise of each other." in said
    # A ratio, not a "slowdown": on a CPU with bf16 arithmetic the matmuls speed up.
    faster = {k: (v if k[1] == "float32" else tuple(t / 4 for t in v)) for k, v in same.items()}
    said = render.variants.dtypes(
        Sourced(dtypes_measurement(tiny_measurement, faster, bmm), "n", "x")
    )
    assert "float32's time: faster." in said and "slow" not in said.split("faster.")[1]


def shares_measurement(m, per_shape):
    """A naive_step_shares entry: shape -> one tuple of step times per profiled forward."""
    rows = []
    for (n, d), forwards in per_shape.items():
        for i, times in enumerate(forwards, 1):
            rows.append((f"{n}×{d}", n, d, i, *times))
    table = Table(("shape", "seq_len", "head_dim", "forward", *STEPS), tuple(rows))
    params = {"batch_size": 1, "num_heads": 2, "dtype": "float32", "causal": True}
    return replace(m, experiment="naive_step_shares", params=params, tables={"shares": table})


def naive_at(m, forwards):
    """`m` (naive_steps at 32×16) with its profiled forwards replaced."""
    rows = tuple((i, *times) for i, times in enumerate(forwards, 1))
    return replace(m, tables={"per_forward": Table(("forward", *STEPS), rows)})


def test_the_shares_sweep_reads_naive_steps_point(tiny_measurement):
    """Issue 16: one shape, one share. The sweep's row at naive_steps' shape gives way to
    naive_steps' own forwards, so both figures state the same share."""
    naive = naive_at(tiny_measurement, [(10.0, 5.0, 5.0, 20.0, 10.0)] * 3)
    sweep = shares_measurement(
        tiny_measurement,
        {
            (16, 8): [(10.0, 5.0, 5.0, 9.5, 10.0), (11.0, 5.0, 5.0, 10.0, 9.0)],
            (32, 16): [(10.0, 5.0, 5.0, 5.0, 10.0)] * 2,  # a different profile of that shape
            (64, 64): [(50.0, 5.0, 5.0, 20.0, 30.0)] * 2,
        },
    )
    found = fs.shares_by_shape(sweep, naive)
    assert [s.label for s in found] == ["16×8", "32×16", "64×64"]
    point = found[1]
    assert point.shares["attention.softmax"].value == pytest.approx(0.4)  # naive_steps', not 0.14
    table = fs.steps(naive)
    assert point.shares["attention.softmax"].id == table.step("attention.softmax").share.id
    assert point.matmuls.id == table.matmul_time.id
    claim = text(render.variants.step_shares_claim(sweep, naive))
    assert "16×8: `attention.scores`, 26.4% (25.3–27.5%) (within noise: " in claim
    assert "32×16: `attention.softmax`, 40%;" in claim
    assert "64×64: `attention.scores`, 45.5%." in claim
    assert "The two matmuls together take 50.3% (50–50.6%) at 16×8 and 72.7% at 64×64" in claim
    svg = render.variants.step_shares_figure(
        Sourced(sweep, "now", "x.json"), Sourced(naive, "now", "y.json")
    )
    assert "32×16: " in svg and "attention.softmax 40%" in svg
    with pytest.raises(ValueError, match="naive_steps ran at"):
        fs.shares_by_shape(replace(sweep, params={**sweep.params, "num_heads": 8}), naive)
