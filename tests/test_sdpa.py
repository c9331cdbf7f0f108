import math
from dataclasses import replace

import pytest
import torch
from recorded import recorded, sourced
from reference import attention_reference, rel_err
from synthetic_forward import at, forward_times, row
from timings import stated
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention

from attention_docs import render
from attention_docs.analytic.sdpa_dispatch import why_variants
from attention_docs.attention.naive import causal_mask, naive_attention
from attention_docs.attention.sdpa import (
    BACKENDS,
    CHOSEN,
    ELIGIBLE,
    REJECTED,
    STATUSES,
    UNAVAILABLE,
    additive_mask,
    backend_of_op,
    chosen_backend,
    keep_mask,
    sdpa_attention,
    why_backend,
)
from attention_docs.experiments.runner import run_experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements import Table
from attention_docs.measurements.schema import Sourced
from attention_docs.records.shape import Shape


def reference(q, k, v, causal):
    return attention_reference(q, k, v, causal=causal, top_left=True)  # SDPA's is_causal


def fresh_seed() -> int:
    return int(torch.randint(0, 2**31 - 1, ()).item())


def runnable_backends(q, k, v, **kwargs) -> list[str]:
    return [x.backend for x in why_backend(q, k, v, **kwargs) if x.runs]


TOL = {"float32": 2e-5, "bfloat16": 2e-2}
SHAPES = [(1, 1, 1, 8), (2, 3, 17, 16), (1, 2, 65, 64), (3, 2, 33, 32)]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_every_runnable_backend_matches_float64(shape, causal, dtype):
    seed = fresh_seed()
    q, k, v = make_qkv(*shape, dtype=dtype, seed=seed)
    expected = reference(q, k, v, causal)
    backends = runnable_backends(q, k, v, causal=causal)
    assert {"math", "flash"} <= set(backends) or q.device.type != "cpu"
    for backend in [None, *backends]:
        out = sdpa_attention(q, k, v, causal=causal, backend=backend)
        assert out.shape == q.shape and out.dtype == q.dtype
        assert rel_err(out, expected) < TOL[dtype], f"backend={backend} seed={seed}"


@pytest.mark.parametrize("backend", ["math", "flash"])
def test_bool_mask_true_means_take_part(backend):
    q, k, v = make_qkv(2, 2, 19, 16, seed=fresh_seed())
    expected = reference(q, k, v, causal=True)
    keep = keep_mask(19)
    assert keep.dtype == torch.bool and keep[0, 0] and not keep[0, 1]
    for mask in (keep, additive_mask(19)):
        out = sdpa_attention(q, k, v, attn_mask=mask, backend=backend)
        assert rel_err(out, expected) < TOL["float32"]
    # masked_fill's convention (True = hide) silently computes something else.
    wrong = sdpa_attention(q, k, v, attn_mask=causal_mask(19), backend=backend)
    assert rel_err(wrong.nan_to_num(), expected) > 0.1


def test_masks_agree_with_naive_attention_conventions():
    q, k, v = make_qkv(1, 2, 12, 8, seed=fresh_seed())
    naive = naive_attention(q, k, v, causal=True)  # masked_fill(causal_mask, -inf)
    torch.testing.assert_close(sdpa_attention(q, k, v, attn_mask=keep_mask(12)), naive)
    assert torch.equal(keep_mask(5), ~causal_mask(5))
    assert torch.equal(additive_mask(5) == 0, keep_mask(5))
    assert torch.isneginf(additive_mask(5)[~keep_mask(5)]).all()


def test_causal_aligns_bottom_right_when_lengths_differ_unlike_bare_is_causal():
    # With fewer queries than keys, SDPA's bare is_causal masks as if the queries came first
    # (query i sees keys 0..i); sdpa_attention(causal=True) aligns the diagonal to the end,
    # as naive attention and every other implementation here do.
    q, _, _ = make_qkv(1, 2, 3, 8, seed=fresh_seed())
    _, k, v = make_qkv(1, 2, 7, 8, seed=fresh_seed())
    with sdpa_kernel(SDPBackend.MATH):
        top_left = scaled_dot_product_attention(q, k, v, is_causal=True)
    assert rel_err(top_left, reference(q, k, v, causal=True)) < TOL["float32"]
    out = sdpa_attention(q, k, v, causal=True, backend="math")
    assert rel_err(out, attention_reference(q, k, v, causal=True)) < TOL["float32"]
    torch.testing.assert_close(out, naive_attention(q, k, v, causal=True))
    assert rel_err(out, top_left) > 0.05
    with pytest.raises(ValueError, match="not both"):
        sdpa_attention(q, k, v, causal=True, attn_mask=keep_mask(3, 7))


def test_unknown_backend_is_a_clear_error():
    q, k, v = make_qkv(1, 1, 4, 8)
    with pytest.raises(ValueError, match="choose one of: math, flash, efficient, cudnn"):
        sdpa_attention(q, k, v, backend="fastest")


def test_backend_of_op_reads_every_backend_op_name():
    assert backend_of_op("aten::_scaled_dot_product_flash_attention_for_cpu") == "flash"
    assert backend_of_op("aten::_scaled_dot_product_flash_attention") == "flash"
    assert backend_of_op("aten::_scaled_dot_product_efficient_attention") == "efficient"
    assert backend_of_op("aten::_scaled_dot_product_cudnn_attention") == "cudnn"
    assert backend_of_op("aten::_scaled_dot_product_attention_math") == "math"
    assert backend_of_op("aten::bmm") is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"causal": True},
        {"attn_mask": keep_mask(16)},
        {"attn_mask": additive_mask(16)},
        {"dropout_p": 0.3},
    ],
)
def test_why_backend_gives_a_verdict_for_every_backend(kwargs):
    q, k, v = make_qkv(1, 2, 16, 8, seed=fresh_seed())
    verdicts = why_backend(q, k, v, **kwargs)
    assert [x.backend for x in verdicts] == list(BACKENDS)
    assert all(x.status in STATUSES for x in verdicts)
    assert sum(x.status == CHOSEN for x in verdicts) == 1
    for x in verdicts:
        if x.status in (REJECTED, UNAVAILABLE):
            assert x.reason.strip() and not x.runs and x.op is None
        else:
            assert x.runs and backend_of_op(x.op) == x.backend
    # The chosen backend is the one SDPA really runs: pinning it gives the same numbers.
    chosen = chosen_backend(verdicts)
    torch.manual_seed(0)
    free = sdpa_attention(q, k, v, **kwargs)
    torch.manual_seed(0)
    pinned = sdpa_attention(q, k, v, backend=chosen, **kwargs)
    torch.testing.assert_close(free, pinned)


def test_why_backend_on_cpu_names_what_is_missing_and_why_dropout_needs_math():
    q, k, v = make_qkv(1, 2, 16, 8)
    verdicts = {x.backend: x for x in why_backend(q, k, v, dropout_p=0.1)}
    assert verdicts["math"].status == CHOSEN
    assert verdicts["flash"].status == REJECTED
    assert "dropout" in verdicts["flash"].reason  # torch's own words, captured from its warning
    for name in ("efficient", "cudnn"):
        assert verdicts[name].status == UNAVAILABLE
        assert verdicts[name].reason.startswith("not available on this device")
    plain = {x.backend: x for x in why_backend(q, k, v)}
    assert plain["flash"].status == CHOSEN and plain["math"].status == ELIGIBLE


TINY = {"batch_size": 1, "num_heads": 2, "seq_len": 32, "head_dim": 16}


@pytest.fixture(scope="module")
def backends_measurement():
    return run_experiment("sdpa_backends", TINY, device_setting="cpu")


def test_sdpa_backends_has_a_row_per_backend_and_rows_for_missing_ones(backends_measurement):
    m = backends_measurement
    rows = {r["backend"]: r for r in m.tables["backends"].records()}
    assert list(rows) == list(BACKENDS)
    assert "time_us" not in m.tables["backends"].columns  # forward_times' fact, not this one's
    assert m.facts["chosen"] == "flash"
    assert m.facts["chosen_op"] == "aten::_scaled_dot_product_flash_attention_for_cpu"
    assert rows["flash"]["status"] == CHOSEN and rows["math"]["status"] == ELIGIBLE
    assert backend_of_op(rows["math"]["op"]) == "math"
    # math decomposes into many ATen ops; flash is one fused op plus views.
    assert rows["math"]["ops_per_call"] > rows["flash"]["ops_per_call"]
    assert rows["math"]["peak_bytes"] > rows["flash"]["peak_bytes"] > 0
    for name in ("efficient", "cudnn"):
        assert rows[name]["status"] == UNAVAILABLE and rows[name]["ops_per_call"] is None
    assert len(m.notes) == 2 and all("not available on this device" in n for n in m.notes)
    # Each backend's four ops with the most self time, most first: which four is the
    # machine's to say (a busy moment reorders a tiny shape's ops), that they are ops is not.
    math = [r for r in m.tables["backend_ops"].records() if r["backend"] == "math"]
    assert len(math) == 4 and all(r["name"].startswith("aten::") for r in math)
    assert [r["self_us"] for r in math] == sorted((r["self_us"] for r in math), reverse=True)
    assert [s.label for s in m.steps] == ["attention.sdpa"]
    assert m.timeline is not None


def test_what_this_torch_offers_is_read_from_it(backends_measurement):
    from torch.nn import attention

    f = backends_measurement.facts
    assert f["torch_version"] == torch.__version__
    # The CPU selector has a fixed order of its own: asked to try math first, it keeps flash.
    assert set(f["sdpa_priority"]) >= {"math", "flash", "efficient", "cudnn"}
    assert f["set_priority_supported"] and f["set_priority_math_first"] == "flash"
    assert f["flash_impls"] == list(attention.list_flash_attention_impls())
    assert f["flash_impl_active"] is None


def test_the_priority_claim_says_what_the_measurement_recorded():
    m = recorded("sdpa_backends")
    f = m.facts
    claim = render.sdpa.priority_claim(m)
    assert " → ".join(f"`{b}`" for b in f["sdpa_priority"]) in claim
    assert "dispatched to `flash`: its selector keeps a fixed order of its own" in claim
    follows = replace(m, facts={**f, "set_priority_math_first": "math"})
    assert "its selector follows the order" in render.sdpa.priority_claim(follows)
    older = replace(m, facts={**f, "sdpa_priority": None, "set_priority_supported": False})
    assert render.sdpa.priority_claim(older) == ""  # nothing recorded, nothing claimed


def test_torchs_guess_about_turned_off_kernels_never_reaches_a_reason():
    from attention_docs.experiments.sdpa import site_reason

    said = (
        'torch gave no reason beyond "No viable backend for scaled_dot_product_attention was '
        'found. This is likely due to turning off both the math kernel and the fused kernels."'
    )
    cleaned = site_reason(said)
    assert "This is likely due" not in cleaned and cleaned.endswith('was found."')


def test_backend_times_and_the_finding_come_from_forward_times():
    m, why = recorded("sdpa_backends"), recorded("sdpa_why")
    shape = Shape.of(m.params)
    missing = "not available on this device for these inputs"
    times = forward_times(
        m,
        [
            row("SDPA math", shape, 300.0, 290.0, 310.0),
            row("SDPA flash", shape, 100.0, 95.0, 105.0),
            row("SDPA efficient", shape, None, status=missing),
            row("SDPA cudnn", shape, None, status=missing),
        ],
    )
    table = render.sdpa.backend_times(
        Sourced(times, "from the store", "t.json"), sourced("sdpa_backends")
    )
    assert 'data-fact="forward time;SDPA flash;' in table and "3× (2.76–3.26×)" in table
    rows = [line for line in table.splitlines() if line.startswith("|")]
    assert len({line.count("|") for line in rows}) == 1  # facts in cells split no cell
    assert table.count("not available") == 2
    finding = render.sdpa.finding(Sourced(m, "from the store", "b.json"), times, why)
    claim, caption = finding.split('<p class="ad-caption">')
    assert "SDPA chose its **`flash`** backend" in claim and claim.count(". ") == 0
    assert "SDPA flash is 3× faster than SDPA math" in claim and "2.76" not in claim
    assert "SDPA flash is 3× (2.76–3.26×) faster than SDPA math" in caption
    assert 'data-fact="peak memory;SDPA math;' in caption and "raw data (JSON)" in caption
    assert "picked flash for 7 of 8 input variants here" in caption
    assert "forecast flash for 3 of them (1 when cuDNN comes first)" in caption
    tied = at(m, shape, {"SDPA math": (100.0, 90.0, 110.0), "SDPA flash": (98.0, 95.0, 105.0)})
    tie = render.sdpa.finding(Sourced(m, "from the store", "b.json"), tied, why)
    assert "within noise" in tie.split('<p class="ad-caption">')[0]


def test_the_backend_table_states_counted_facts():
    table = render.sdpa.backend_table(sourced("sdpa_backends"))
    assert "**chosen**" in table and table.count("unavailable") == 2
    assert "Kernels / call" not in table and "CPU-side time" not in table  # a CPU entry
    assert 'data-fact="peak memory;SDPA math;' in table and "`bmm`" in table
    assert table.splitlines()[0].count("|") <= 7  # at most six columns


def test_sdpa_why_explains_each_variant():
    m = run_experiment(
        "sdpa_why", {"seq_len": 16, "head_dim": 8, "big_head_dim": 64}, device_setting="cpu"
    )
    rows = m.tables["verdicts"].records()
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    assert variants == [name for name, _ in why_variants("float32", 8, 64)]
    assert len(rows) == len(variants) * len(BACKENDS)
    chosen = {r["variant"]: r["backend"] for r in rows if r["status"] == CHOSEN}
    assert set(chosen) == set(variants)
    assert chosen["dropout 0.1"] == "math" and chosen["baseline"] == "flash"
    assert all(r["reason"] for r in rows if r["status"] in (REJECTED, UNAVAILABLE))


def test_the_why_tables_and_the_forecast_box_render():
    here = sourced("sdpa_why")
    matrix = render.sdpa.why_matrix(here)
    assert "head_dim 512" in matrix and "dropout 0.1" in matrix and "baseline: float32" in matrix
    reasons = render.sdpa.why_reasons(here)
    assert "dropout" in reasons and "not available on this device" in reasons
    box = render.sdpa.dispatch_forecast([here])
    assert box.startswith('!!! example "On a GPU: forecast for the NVIDIA H200')
    assert "baseline: bfloat16, head_dim 128, no mask" in box
    assert "`efficient` (`flash`: attn_mask)" in box  # a mask rules flash out
    assert "`flash` (`cudnn`: dropout)" in box  # dropout 0.1 is no multiple of 1/16
    assert "predictions only" in box and "Measured on" not in box
    rules_table = render.sdpa.rules_table()
    assert "| `flash` | float16, bfloat16 | ≤ 256 | no |" in rules_table
    assert "ad-caption" in rules_table


def test_the_forecast_box_sets_a_stored_gpu_run_beside_the_forecast():
    cpu = recorded("sdpa_why")
    on_h200 = replace(
        cpu,
        provenance=replace(cpu.provenance, device_id="cuda-h200"),
        tables={
            "verdicts": Table(("variant", "backend", "status"), (("baseline", "cudnn", "chosen"),))
        },
    )
    box = render.sdpa.dispatch_forecast([Sourced(cpu, "x", "x"), Sourced(on_h200, "x", "y")])
    assert "Measured on the NVIDIA H200" in box and "| `cudnn` |" in box
    assert "come from this site's store" in box


@pytest.fixture(scope="module")
def masks_measurement():
    return run_experiment("sdpa_masks", TINY, device_setting="cpu")


def test_sdpa_masks_measures_the_cost_and_the_polarity_trap(masks_measurement):
    m = masks_measurement
    rows = m.tables["masks"].records()
    assert rows[0]["mask"] == "is_causal=True"
    causal, keep, add, wrong = rows
    assert causal["mask_bytes"] == 0
    assert keep["mask_bytes"] == 32 * 32 and add["mask_bytes"] == 4 * 32 * 32
    for r in (causal, keep, add):
        assert r["max_abs_error"] < 1e-4
        assert len(r["time"].rounds_us) >= 3  # a Timing cell, every round kept
    assert wrong["max_abs_error"] is None or wrong["max_abs_error"] > 0.1
    assert "aten::where" in keep["prep_ops"] and causal["prep_ops"] == "none"


def test_mask_times_are_ratios_to_is_causal_with_their_range_or_a_tie():
    m = recorded("sdpa_masks")
    table = m.tables["masks"]
    i = table.columns.index("time")
    # (median, low, high) per variant, is_causal first: 1.5× slower, a tie, the same.
    times = [
        (100.0, 95.0, 105.0),
        (150.0, 140.0, 160.0),
        (103.0, 99.0, 110.0),
        (100.0, 95.0, 105.0),
    ]
    rows = tuple((*r[:i], stated(*t), *r[i + 1 :]) for r, t in zip(table.rows, times, strict=True))
    timed = replace(m, tables={**m.tables, "masks": replace(table, rows=rows)})
    text = render.sdpa.mask_table(Sourced(timed, "x", "x.json"))
    assert "| 1 (baseline) |" in text and "Time ÷ is_causal's (unprofiled)" in text
    assert "1.5× (1.33–1.68×)" in text and "within noise (1.03×)" in text
    assert text.splitlines()[0].count("|") <= 7
    assert "`aten::where`" in render.sdpa.mask_claims(m)


def test_the_empty_row_is_stated_for_the_backends_that_ran_here(masks_measurement):
    m = masks_measurement
    empty = {r["implementation"]: r for r in m.tables["empty_row"].records()}
    assert empty["naive attention (plain softmax)"]["empty_row"] == "NaN"
    assert empty["SDPA math"]["empty_row"] == empty["SDPA flash"]["empty_row"] == "zeros"
    for name in ("SDPA efficient", "SDPA cudnn"):
        assert empty[name]["empty_row"] == "did not run"
        assert empty[name]["why_not_run"] == "not available on this device for these inputs"
    claim = render.sdpa.empty_row_claim(m)
    assert "Measured on this CPU" in claim
    assert "SDPA math and SDPA flash returned zeros" in claim
    assert "naive attention (plain softmax) returned NaN" in claim
    assert "SDPA efficient and SDPA cudnn did not run here (not available on this device" in claim
    assert "leaves not even a NaN" in claim and "This is likely due" not in claim
    # A backend that returned NaN withdraws the "no NaN to notice" sentence.
    rows = tuple(
        (n, "NaN" if n == "SDPA flash" else e, w) for n, e, w in m.tables["empty_row"].rows
    )
    nan = replace(m, tables={**m.tables, "empty_row": replace(m.tables["empty_row"], rows=rows)})
    assert "leaves not even a NaN" not in render.sdpa.empty_row_claim(nan)


@pytest.mark.parametrize("backend", ["math", "flash"])
def test_a_fully_masked_row_gives_zeros_not_nan(backend):
    # What the chapter says about the polarity trap: no NaN betrays it.
    q, k, v = make_qkv(1, 1, 4, 8, seed=fresh_seed())
    keep = keep_mask(4)
    keep[-1] = False
    out = sdpa_attention(q, k, v, attn_mask=keep, backend=backend)
    assert torch.equal(out[0, 0, -1], torch.zeros(8))
    assert torch.softmax(torch.full((4,), -math.inf), dim=-1).isnan().all()  # plain softmax
