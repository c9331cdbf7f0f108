import math

import pytest
import torch

from attention_docs import render
from attention_docs.analytic.cost import itemsize
from attention_docs.analytic.decode import decode_cost
from attention_docs.attention.decode import (
    IMPLS,
    KVCache,
    cached_attention,
    decode_step,
    grouped_attention,
    prefill,
    repeat_kv,
)
from attention_docs.inputs import make_qkv, resolve_dtype


def reference(q, k, v):
    """Causal attention of the last q.size(2) positions, in float64, with k/v heads repeated
    for the query heads that share them — written independently of the code under test."""
    q, k, v = (t.double() for t in (q, k, v))
    groups = q.shape[1] // k.shape[1]
    k = torch.cat([k[:, h : h + 1].expand(-1, groups, -1, -1) for h in range(k.shape[1])], 1)
    v = torch.cat([v[:, h : h + 1].expand(-1, groups, -1, -1) for h in range(v.shape[1])], 1)
    scores = torch.einsum("bhnd,bhmd->bhnm", q, k) / math.sqrt(q.shape[-1])
    n, m = scores.shape[-2:]
    keep = torch.arange(m)[None, :] <= torch.arange(n)[:, None] + (m - n)
    scores = scores.where(keep, -math.inf)
    return torch.einsum("bhnm,bhmd->bhnd", scores.softmax(-1), v)


def rel_err(actual, expected):
    return ((actual.double() - expected).norm() / expected.norm()).item()


TOL = {"float32": 1e-5, "bfloat16": 2e-2}
# (batch_size, num_heads, num_kv_heads, head_dim): multi-head, grouped-query, multi-query.
HEADS = [(2, 4, 4, 16), (1, 8, 2, 32), (3, 6, 1, 8)]


def fresh_seed() -> int:
    return int(torch.randint(0, 2**31 - 1, ()).item())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("heads", HEADS, ids=["mha", "gqa", "mqa"])
def test_prefill_then_decode_steps_equal_full_causal_attention(heads, impl, dtype):
    batch_size, num_heads, num_kv_heads, head_dim = heads
    prompt, steps = 13, 6  # odd lengths on purpose
    total = prompt + steps
    seed = fresh_seed()
    q, k, v = make_qkv(
        batch_size, num_heads, total, head_dim, dtype=dtype, seed=seed, num_kv_heads=num_kv_heads
    )
    expected = reference(q, k, v)  # every position recomputed from scratch
    cache = KVCache.empty(batch_size, num_kv_heads, total + 3, head_dim, dtype=resolve_dtype(dtype))
    outs = [prefill(q[:, :, :prompt], k[:, :, :prompt], v[:, :, :prompt], cache, impl=impl)]
    for t in range(prompt, total):
        s = slice(t, t + 1)
        outs.append(decode_step(q[:, :, s], k[:, :, s], v[:, :, s], cache, impl=impl))
        # Each step on its own is the last row of full causal attention over t + 1 tokens.
        assert rel_err(outs[-1], expected[:, :, s]) < TOL[dtype], f"seed={seed}, step {t}"
    out = torch.cat(outs, dim=2)
    assert out.dtype == resolve_dtype(dtype)
    assert cache.length == total
    assert rel_err(out, expected) < TOL[dtype], f"seed={seed}"
    torch.testing.assert_close(cache.keys, k)  # the cache holds exactly the tokens seen


@pytest.mark.gpu
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("heads", HEADS, ids=["mha", "gqa", "mqa"])
def test_prefill_then_decode_on_cuda_in_bfloat16(heads, impl):
    batch_size, num_heads, num_kv_heads, head_dim = heads
    seed = fresh_seed()
    q, k, v = make_qkv(
        batch_size, num_heads, 40, head_dim, dtype="bfloat16", seed=seed, num_kv_heads=num_kv_heads
    )
    expected = reference(q, k, v)
    q, k, v = (t.cuda() for t in (q, k, v))
    cache = KVCache.empty(
        batch_size, num_kv_heads, 40, head_dim, dtype=torch.bfloat16, device="cuda"
    )
    outs = [prefill(q[:, :, :32], k[:, :, :32], v[:, :, :32], cache, impl=impl)]
    for t in range(32, 40):
        s = slice(t, t + 1)
        outs.append(decode_step(q[:, :, s], k[:, :, s], v[:, :, s], cache, impl=impl))
    assert rel_err(torch.cat(outs, dim=2).cpu(), expected) < TOL["bfloat16"], f"seed={seed}"


@pytest.mark.parametrize("heads", HEADS, ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("kv_len", [1, 2, 37])
def test_one_query_against_a_cache_matches_reference(heads, kv_len):
    batch_size, num_heads, num_kv_heads, head_dim = heads
    seed = fresh_seed()
    q, k, v = make_qkv(
        batch_size, num_heads, 1, head_dim, seed=seed, kv_seq_len=kv_len, num_kv_heads=num_kv_heads
    )
    expected = reference(q, k, v)
    for impl in IMPLS:
        assert rel_err(cached_attention(q, k, v, impl=impl), expected) < 1e-5, (impl, seed)


def test_chunked_prefill_masks_with_the_diagonal_at_the_bottom_right():
    # Queries 10..14 of a 15-token sequence: SDPA's is_causal would align them top-left.
    q, k, v = make_qkv(1, 4, 15, 8, seed=fresh_seed(), num_kv_heads=2)
    expected = reference(q, k, v)[:, :, 10:]
    for impl in IMPLS:
        out = cached_attention(q[:, :, 10:], k, v, impl=impl)
        assert rel_err(out, expected) < 1e-5, impl


def test_grouped_attention_copies_nothing_that_repeat_kv_copies():
    _, k, _ = make_qkv(1, 8, 1, 4, kv_seq_len=5, num_kv_heads=2)
    repeated = repeat_kv(k, 4)
    assert repeated.shape == (1, 8, 5, 4)
    assert repeated.untyped_storage().data_ptr() != k.untyped_storage().data_ptr()
    # Head h of the repeated tensor is k/v head h // 4: the layout SDPA's enable_gqa uses.
    for h in range(8):
        torch.testing.assert_close(repeated[:, h], k[:, h // 4])


def test_cache_appends_in_place_and_refuses_to_overflow():
    cache = KVCache.empty(1, 2, 4, 3)
    buffer = cache.k.data_ptr()
    _, k, v = make_qkv(1, 2, 1, 3, kv_seq_len=3)
    cache.append(k, v)
    assert cache.length == 3
    assert cache.keys.data_ptr() == buffer  # a view of the preallocated buffer
    with pytest.raises(ValueError, match="holds 4 tokens; it has 3 and was given 3 more"):
        cache.append(k, v)
    cache.truncate(1)
    assert cache.keys.shape == (1, 2, 1, 3)
    with pytest.raises(ValueError, match=r"length must be in 0\.\.4"):
        cache.truncate(5)


def test_errors_speak_to_the_reader():
    q, k, v = make_qkv(1, 6, 1, 4, kv_seq_len=3, num_kv_heads=4)
    with pytest.raises(ValueError, match=r"num_heads \(6\) must be a multiple of num_kv_heads"):
        cached_attention(q, k, v)
    with pytest.raises(ValueError, match="unknown implementation 'flash'"):
        cached_attention(q[:, :4], k, v, impl="flash")
    cache = KVCache.empty(1, 4, 8, 4)
    with pytest.raises(ValueError, match="a decode step takes one new token"):
        decode_step(torch.ones(1, 4, 2, 4), k[:, :, :2], v[:, :, :2], cache)


def test_grouped_attention_labels_the_five_steps():
    from torch.profiler import profile

    q, k, v = make_qkv(1, 4, 1, 8, kv_seq_len=9, num_kv_heads=2)
    with profile() as prof:
        grouped_attention(q, k, v)
    names = {e.key for e in prof.key_averages()}
    assert {
        "attention.scores",
        "attention.scale",
        "attention.mask",
        "attention.softmax",
        "attention.weighted_sum",
    } <= names


def test_decode_cost_counts_the_cache_once_and_flops_per_query_head():
    c = decode_cost(2, 32, 4096, 128, "bfloat16", num_kv_heads=8)
    assert c.flops == 4 * 2 * 32 * 1 * 4096 * 128
    assert c.cache_bytes == 2 * 2 * 8 * 4096 * 128 * 2
    assert c.bytes == c.cache_bytes + 2 * 2 * 32 * 128 * 2
    # Intensity ≈ 2·(H/Hkv)/itemsize once the cache dwarfs q and the output.
    assert c.intensity == pytest.approx(2 * (32 / 8) / itemsize("bfloat16"), rel=1e-3)
    mha = decode_cost(2, 32, 4096, 128, "bfloat16")
    mqa = decode_cost(2, 32, 4096, 128, "bfloat16", num_kv_heads=1)
    assert mha.cache_bytes == 32 * mqa.cache_bytes
    assert mha.flops == mqa.flops
    assert decode_cost(1, 4, 64, 8, q_len=64).intensity > 16 * decode_cost(1, 4, 64, 8).intensity


# Experiments at tiny shapes: each runs once per module and is checked for what it claims.
TINY = {"num_heads": 4, "head_dim": 8, "working_set_mb": 1}


@pytest.fixture(scope="module")
def variants():
    from attention_docs.experiments.runner import run_experiment

    return run_experiment(
        "decode_mha_gqa_mqa", {**TINY, "gqa_kv_heads": 2, "cache_len": 48}, device="cpu"
    )


@pytest.fixture(scope="module")
def cache_sweep():
    from attention_docs.experiments.runner import run_experiment

    return run_experiment(
        "decode_cache_sweep",
        {**TINY, "gqa_kv_heads": 2, "min_cache_len": 16, "max_cache_len": 128},
        device="cpu",
    )


@pytest.fixture(scope="module")
def batch_sweep():
    from attention_docs.experiments.runner import run_experiment

    return run_experiment(
        "decode_batch_sweep",
        {**TINY, "num_kv_heads": 2, "cache_len": 32, "max_batch_size": 4},
        device="cpu",
    )


@pytest.fixture(scope="module")
def prefill_vs_decode():
    from attention_docs.experiments.runner import run_experiment

    return run_experiment(
        "decode_prefill_vs_decode",
        {"num_heads": 4, "head_dim": 8, "num_kv_heads": 2, "prompt_len": 24},
        device="cpu",
    )


def test_variants_experiment_rows_match_the_cost_model(variants):
    rows = variants.tables["variants"].records()
    assert [r["label"] for r in rows] == [
        "MHA · naive",
        "MHA · sdpa",
        "GQA · naive",
        "GQA · naive_repeat_kv",
        "GQA · sdpa",
        "MQA · naive",
        "MQA · naive_repeat_kv",
        "MQA · sdpa",
    ]
    assert all(r["status"] == "ok" for r in rows)
    for r in rows:
        cost = decode_cost(1, 4, 48, 8, "float32", num_kv_heads=r["num_kv_heads"])
        assert r["cache_mb"] == pytest.approx(cost.cache_bytes / 1e6)
        assert r["intensity"] == pytest.approx(cost.intensity)
        assert r["gbs"] == pytest.approx(cost.bytes / r["time_us"] / 1e3)
        assert r["low_us"] <= r["time_us"] <= r["high_us"]  # the rounds' range around it
        # Enough layers to touch the working set, unless capped.
        assert r["layers"] == min(128, math.ceil(1e6 / (cost.cache_bytes * touched(r))))
    assert {r["num_kv_heads"] for r in rows} == {4, 2, 1}
    # The ceilings are machine_ceilings': none is measured here.
    assert not {"copy_gbs", "matmul_gflops"} & set(variants.facts)
    assert "pct_copy" not in variants.tables["variants"].columns
    # What SDPA ran, per variant: on the CPU its flash kernel takes grouped k/v as it is.
    ops = variants.facts["sdpa_ops"]
    assert set(ops) == {"MHA", "GQA", "MQA"}
    for names in ops.values():
        assert names == ["aten::_scaled_dot_product_flash_attention_for_cpu"]


def touched(r):
    """How many times its cache's bytes a step touches: repeat_kv writes and reads a copy
    per query head."""
    return 1 + 2 * (4 // r["num_kv_heads"]) if r["impl"] == "naive_repeat_kv" else 1


def test_variants_experiment_rejects_a_group_that_does_not_divide():
    from attention_docs.experiments.registry import ExperimentError
    from attention_docs.experiments.runner import run_experiment

    with pytest.raises(ExperimentError, match="gqa_kv_heads=3 must divide num_heads=4"):
        run_experiment("decode_mha_gqa_mqa", {**TINY, "gqa_kv_heads": 3}, device="cpu")


def test_cache_sweep_doubles_the_cache_and_times_every_variant(cache_sweep):
    table = cache_sweep.tables["cache_sweep"]
    assert table.column("cache_len") == [16, 32, 64, 128]
    assert table.column("status") == ["ok"] * 4
    for r in table.records():
        for name in ("MHA", "GQA", "MQA"):
            assert r[f"{name} low"] <= r[name] <= r[f"{name} high"]
    assert (
        cache_sweep.facts["MHA_kv_heads"],
        cache_sweep.facts["GQA_kv_heads"],
        cache_sweep.facts["MQA_kv_heads"],
    ) == (4, 2, 1)


def test_batch_sweep_reports_per_token_time_and_bytes(batch_sweep):
    rows = batch_sweep.tables["batch_sweep"].records()
    assert [r["batch_size"] for r in rows] == [1, 2, 4]
    for r in rows:
        assert r["token_us"] == pytest.approx(r["step_us"] / r["batch_size"])
        assert r["tokens_per_s"] == pytest.approx(1e6 / r["token_us"])
        assert r["step_low_us"] <= r["step_us"] <= r["step_high_us"]
    # Attention has no weights to share: bytes per step grow with the batch exactly.
    assert rows[2]["bytes_mb"] == pytest.approx(4 * rows[0]["bytes_mb"])


def test_prefill_vs_decode_counts_the_same_flops_and_more_bytes_for_decode(prefill_vs_decode):
    pre, dec = prefill_vs_decode.tables["prefill_vs_decode"].records()
    assert pre["tokens"] == dec["tokens"] == 24
    # Same useful FLOPs both ways: their ratio of rates is the inverse ratio of times.
    assert pre["gflops"] * pre["total_ms"] == pytest.approx(dec["gflops"] * dec["total_ms"])
    assert dec["bytes_mb"] > pre["bytes_mb"]
    assert dec["intensity"] < pre["intensity"]
    labels = [s.label for s in prefill_vs_decode.steps]
    assert labels[0] == "decode.append"
    assert "attention.softmax" in labels
    assert prefill_vs_decode.timeline is not None
    assert prefill_vs_decode.facts["profiled_cache_len"] == 24
    f = prefill_vs_decode.facts
    assert f["floor_low_us"] <= f["floor_us"] <= f["floor_high_us"]
    for r in (pre, dec):
        assert r["low_ms"] <= r["total_ms"] <= r["high_ms"]


def sourced(m):
    from attention_docs.measurements import Sourced

    return Sourced(m, "measured in this test", "-", base="")


def ceilings_for(m, bandwidth=20e9, peak=100e9):
    """A machine_ceilings entry on `m`'s device."""
    from dataclasses import replace

    key = f"peak_flops_{m.params.get('dtype', 'float32')}"
    return replace(
        m,
        experiment="machine_ceilings",
        params={},
        tables={},
        facts={
            "bandwidth_bs": bandwidth,
            "bandwidth_bs_low": bandwidth * 0.98,
            "bandwidth_bs_high": bandwidth * 1.02,
            key: peak,
        },
    )


def on_gpu(m):
    from dataclasses import replace

    from attention_docs.records.device import DeviceInfo

    gpu = DeviceInfo(kind="cuda", name="NVIDIA H100", capability="90")
    return replace(m, provenance=replace(m.provenance, device=gpu, device_id=""))


def test_decode_renderers_compute_their_numbers(
    variants, cache_sweep, batch_sweep, prefill_vs_decode
):
    from attention_docs.render.decode import ridge_point

    ceilings = ceilings_for(variants)
    mha = next(r for r in variants.tables["variants"].records() if r["label"] == "MHA · sdpa")
    text = render.decode.decode_bandwidth_claim(variants, ceilings)
    assert f"{100 * mha['gbs'] * 1e9 / 20e9:.0f}% of what a plain copy" in text
    assert ridge_point(variants, ceilings) == pytest.approx(100e9 / 20e9)
    assert "**5 FLOP per byte**" in text
    assert 'data-fact="ceiling;' in text  # machine_ceilings' marked facts, as chapter 03's
    assert "2× smaller" in render.decode.decode_variants_claim(variants)  # 4 heads against 2
    assert "GQA" in render.decode.repeat_kv_claim(
        variants
    ) and "MQA" in render.decode.repeat_kv_claim(variants)
    roof = render.decode.decode_roofline_claim(variants, ceilings)
    assert "Left of the ridge" in roof or "Right of it" in roof
    table = render.decode.decode_variants_table(sourced(variants), ceilings)
    assert table.count("\n| MHA") == 2 and "ad-caption" in table
    assert render.decode.decode_batch_table(sourced(batch_sweep), ceilings).count("\n| ") == 4
    assert "| decode (one at a time) |" in render.decode.prefill_vs_decode_table(
        sourced(prefill_vs_decode)
    )
    assert "log-log slopes are MHA" in render.decode.cache_slope_claim(cache_sweep, ceilings)
    assert "From batch 1 to 4 the bytes per step grow 4×" in render.decode.batch_claim(batch_sweep)
    assert "The same 24 tokens" in render.decode.prefill_vs_decode_claim(prefill_vs_decode)
    assert "of the total" in render.decode.decode_step_overhead(prefill_vs_decode)
    for svg in (
        render.decode.decode_roofline_figure(sourced(variants), ceilings),
        render.decode.decode_variants_figure(sourced(variants)),
        render.decode.decode_cache_figure(sourced(cache_sweep)),
        render.decode.decode_batch_figure(sourced(batch_sweep)),
    ):
        assert "<figure" in svg and 'aria-label="' in svg and "ad-caption" in svg
    assert "cache_len swept 16–128 tokens" in render.decode.decode_cache_figure(
        sourced(cache_sweep)
    )
    # Ceilings measured on another device place nothing under a roof.
    elsewhere = ceilings_for(on_gpu(variants))
    assert "has no copy-bandwidth" in render.decode.decode_bandwidth_claim(variants, elsewhere)
    assert "| — |" in render.decode.decode_variants_table(sourced(variants), elsewhere)
    assert "<svg" not in render.decode.decode_roofline_figure(sourced(variants), elsewhere)


def variants_with(variants, times):
    """`variants` with its SDPA rows' time (and range) and GB/s replaced: {label: (us, gbs)}."""
    from dataclasses import replace

    from attention_docs.measurements import Table

    table = variants.tables["variants"]
    rows = []
    for old in table.records():
        r = old
        if old["label"] in times:
            us, gbs = times[old["label"]]
            r = {**old, "time_us": us, "low_us": us * 0.98, "high_us": us * 1.02, "gbs": gbs}
        rows.append(tuple(r[c] for c in table.columns))
    return replace(variants, tables={"variants": Table(table.columns, tuple(rows), table.units)})


def test_bandwidth_claim_names_the_best_row_once(variants):
    ceilings = ceilings_for(variants)
    best_is_mha = variants_with(variants, {"MHA · sdpa": (100.0, 12.0)})
    text = render.decode.decode_bandwidth_claim(best_is_mha, ceilings)
    assert "**60% of what a plain copy achieves**" in text
    assert "No other row reads faster." in text and "The fastest reader" not in text
    other = variants_with(variants, {"MHA · sdpa": (100.0, 10.0), "GQA · sdpa": (50.0, 15.0)})
    text = render.decode.decode_bandwidth_claim(other, ceilings)
    assert "The fastest reader, `GQA · sdpa`, reaches 75%." in text


def test_variant_speedups_are_ties_inside_the_noise(variants):
    tie = variants_with(variants, {"MHA · sdpa": (100.0, 1.0), "GQA · sdpa": (99.0, 1.0)})
    assert "**within noise of each other (1.01×)**" in render.decode.decode_variants_claim(tie)
    assert "faster" not in render.decode.decode_variants_claim(tie).split("Multi-query")[0]
    apart = variants_with(variants, {"MHA · sdpa": (200.0, 1.0), "GQA · sdpa": (100.0, 1.0)})
    assert "**2.00× (1.92–2.08×) faster**" in render.decode.decode_variants_claim(apart)


def test_sdpa_ops_note_says_what_ran_and_whether_kv_was_copied(variants):
    from dataclasses import replace

    flash = "aten::_scaled_dot_product_flash_attention"
    math_ = "aten::_scaled_dot_product_attention_math"
    native = replace(
        variants,
        facts={**variants.facts, "sdpa_ops": {v: [flash] for v in ("MHA", "GQA", "MQA")}},
    )
    text = render.decode.sdpa_ops_note(native)
    assert f"GQA: `{flash}`" in text and "No `aten::repeat_interleave` ran for GQA or MQA" in text
    copies = {"MHA": [math_], "GQA": [math_, "aten::repeat_interleave"], "MQA": [math_, "aten::repeat_interleave"]}  # fmt: skip
    text = render.decode.sdpa_ops_note(
        replace(variants, facts={**variants.facts, "sdpa_ops": copies})
    )
    assert "For GQA and MQA the profile also shows `aten::repeat_interleave`" in text
    assert "`aten::repeat_interleave`" not in text.split(":", 1)[1].split(".")[0]  # not a kernel


def test_prefill_vs_decode_splits_decode_into_bytes_and_per_step_cost(prefill_vs_decode):
    from dataclasses import replace

    token_us = prefill_vs_decode.tables["prefill_vs_decode"].records()[1]["token_us"]
    floor = 0.25 * token_us  # a step with nothing to read: a quarter of an average one
    m = replace(
        prefill_vs_decode,
        facts={**prefill_vs_decode.facts, "floor_us": floor, "floor_low_us": 0.2 * token_us,
               "floor_high_us": 0.3 * token_us},
    )  # fmt: skip
    dec = m.tables["prefill_vs_decode"].records()[1]
    bw = 20e9
    text = render.decode.prefill_vs_decode_claim(m, ceilings_for(m, bandwidth=bw))
    total_us = dec["total_ms"] * 1e3
    bytes_us = dec["bytes_mb"] * 1e6 / bw * 1e6
    steps_us = 24 * floor
    assert f"{100 * bytes_us / total_us:.1f}%" in text
    assert f"{100 * steps_us / total_us:.1f}%" in text
    assert f"{100 * (bytes_us + steps_us) / total_us:.1f}% of the measured time" in text
    assert "because every step reads the whole cache again" not in text
    # A "floor" slower than the average decode step beyond the noise is no floor: no split.
    slow_floor = replace(m, facts={**m.facts, "floor_us": 1e9, "floor_low_us": 1e9})
    text = render.decode.prefill_vs_decode_claim(slow_floor, ceilings_for(m, bandwidth=bw))
    assert "is not stated" in text and "% of the measured time" not in text
    # Without a bandwidth of this device, no split is claimed.
    assert "has not measured here" in render.decode.prefill_vs_decode_claim(m, None)


def test_batch_claim_says_where_batching_stops_paying_from_the_noise(batch_sweep):
    from dataclasses import replace

    from attention_docs.measurements import Table

    table = batch_sweep.tables["batch_sweep"]

    def with_steps(steps):
        rows = []
        for old, step in zip(table.records(), steps, strict=True):
            b = old["batch_size"]
            r = {**old, "step_us": step, "step_low_us": step * 0.97, "step_high_us": step * 1.03,
                 "token_us": step / b, "tokens_per_s": 1e6 * b / step}  # fmt: skip
            rows.append(tuple(r[c] for c in table.columns))
        return replace(batch_sweep, tables={"batch_sweep": Table(table.columns, tuple(rows))})

    flat = render.decode.batch_claim(
        with_steps([100.0, 110.0, 220.0])
    )  # batch 2 on: same per token
    assert "from batch 2 on no larger batch decodes a token faster beyond the noise" in flat
    falling = render.decode.batch_claim(with_steps([100.0, 110.0, 120.0]))
    assert "still falls beyond the noise up to the largest batch measured (4)" in falling
    assert "gains nothing more" not in falling


def test_cache_claim_checks_a_slow_reader_against_both_ceilings(cache_sweep):
    from dataclasses import replace

    from attention_docs.measurements import Table

    table = cache_sweep.tables["cache_sweep"]
    rows = []
    for old in table.records():
        r = dict(old)
        for name, gbs in (("MHA", 10.0), ("GQA", 5.0), ("MQA", 1.0)):
            r[f"{name} GB/s"] = gbs
        r["MQA"], r["MQA low"], r["MQA high"] = r["MHA"] / 2, r["MHA"] / 2.1, r["MHA"] / 1.9
        r["MHA low"], r["MHA high"] = r["MHA"] * 0.98, r["MHA"] * 1.02
        rows.append(tuple(r[c] for c in table.columns))
    m = replace(cache_sweep, tables={"cache_sweep": Table(table.columns, tuple(rows))})
    text = render.decode.cache_slope_claim(m, ceilings_for(m))
    assert "MQA reads far below the copy bandwidth and computes at" in text
    mha, mqa = (decode_cost(1, 4, 128, 8, "float32", num_kv_heads=h) for h in (4, 1))
    assert f"{mha.bytes / mqa.bytes:.3g}× fewer bytes and does the same FLOPs" in text
    assert "follows neither alone" in text and "its time follows the FLOPs" not in text


def test_tail_slope_reads_the_longer_half(cache_sweep):
    from dataclasses import replace

    from attention_docs.measurements import Table
    from attention_docs.render.decode import tail_slope

    # Flat then linear: the tail slope sees only the linear part.
    rows = ((16, 5.0, "ok"), (32, 5.0, "ok"), (64, 10.0, "ok"), (128, 20.0, "ok"))
    table = Table(columns=("cache_len", "MHA", "status"), rows=rows)
    m = replace(cache_sweep, tables={"cache_sweep": table})
    assert tail_slope(m, "MHA") == pytest.approx(1.0)
