import math
import re
from dataclasses import replace

import markdown
import pytest
import site_facts
import torch
from recorded import sourced as stored
from synthetic_decode import (
    H200,
    LABELS,
    ceilings,
    decode_steps,
    measurement,
    prefill_vs_decode,
    timing,
)
from timings import measured_in_rounds, stated
from torch.profiler import profile

from attention_docs import render
from attention_docs.analytic.cost import itemsize
from attention_docs.analytic.decode import (
    batch_filling_gpu,
    decode_blocks,
    decode_cost,
    num_splits,
    queries_to_ridge,
)
from attention_docs.analytic.gpu import sheet
from attention_docs.attention.decode import (
    IMPLS,
    KVCache,
    cached_attention,
    decode_step,
    grouped_attention,
    prefill,
    repeat_kv,
)
from attention_docs.experiments.decode import (
    DECODE,
    FLOOR,
    PREFILL,
    PROFILED,
    per_layer,
    step_points,
)
from attention_docs.experiments.registry import ExperimentError, get
from attention_docs.experiments.runner import run_experiment
from attention_docs.findings import decode as fdecode
from attention_docs.findings import sweep as fsw
from attention_docs.inputs import make_qkv, resolve_dtype
from attention_docs.measurements import Sourced
from attention_docs.records.timing import Timing


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


# --- the GPU models: FlashAttention 2's split-KV rule, the ridge ------------------------------


def test_split_kv_follows_flashattention_2s_published_example():
    # flash_api.cpp: "batch * n_heads = 48 and we have 108 SMs, having 2 splits (efficiency =
    # 0.89) is better than having 3 splits (efficiency = 0.67)" — 108 block slots = 54 SMs × 2.
    assert num_splits(48, 54, cache_len=16384, head_dim=128) == 2
    assert num_splits(216, 132, cache_len=16384, head_dim=128) == 1  # 80% of 264 slots filled
    assert num_splits(8, 132, cache_len=4096, head_dim=128) == 32  # capped by the cache's blocks


@pytest.mark.parametrize(("kv_heads", "batch"), [(32, 7), (8, 27), (1, 212)])
def test_the_batch_that_fills_an_h200_without_split_kv(kv_heads, batch):
    assert batch_filling_gpu(32, kv_heads, 132) == batch
    slots = 2 * 132
    assert (
        decode_blocks(batch, 32, kv_heads) >= 0.8 * slots > decode_blocks(batch - 1, 32, kv_heads)
    )


def test_queries_to_ridge_is_the_first_token_count_past_the_ridge():
    t = queries_to_ridge(32, 8, 128, "bfloat16", ridge=200.0, cache_len=16384)
    at = decode_cost(1, 32, 16384, 128, "bfloat16", num_kv_heads=8, q_len=t).intensity
    before = decode_cost(1, 32, 16384, 128, "bfloat16", num_kv_heads=8, q_len=t - 1).intensity
    assert before < 200.0 <= at
    # A short cache never gets there: the queries and outputs are most of the bytes.
    assert queries_to_ridge(32, 32, 128, "bfloat16", ridge=200.0, cache_len=64) is None


# --- the experiments, at tiny shapes (each runs once per module) ----------------------------

TINY = {"num_heads": 4, "head_dim": 8, "gqa_kv_heads": 2, "working_set_mb": 1, "cache_len": 32,
        "min_cache_len": 16, "max_cache_len": 64, "max_batch_size": 2}  # fmt: skip


@pytest.fixture(scope="module")
def steps():
    return run_experiment("decode_steps", TINY, device_setting="cpu")


@pytest.fixture(scope="module")
def measured_pvd():
    params = {"num_heads": 4, "head_dim": 8, "num_kv_heads": 2, "prompt_len": 24}
    return run_experiment("decode_prefill_vs_decode", params, device_setting="cpu")


def test_decode_steps_times_every_point_once(steps):
    rows = steps.tables["steps"].records()
    keys = [(r["variant"], r["impl"], r["batch_size"], r["cache_len"]) for r in rows]
    assert keys == step_points(steps.params)
    assert len(set(keys)) == len(keys)  # one quantity, one row
    # The base point, the cache sweep and the batch sweep meet at GQA · sdpa, batch 1, 32: once.
    assert keys.count(("GQA", "sdpa", 1, 32)) == 1
    assert ("GQA", "sdpa", 1, 16) in keys and ("GQA", "sdpa", 2, 32) in keys
    assert ("MHA", "naive_repeat_kv", 1, 32) not in keys  # nothing to repeat
    for r in rows:
        assert r["status"] == "ok" and isinstance(r["time"], Timing)
        assert measured_in_rounds(r["time"])
        cache = 2 * r["batch_size"] * r["num_kv_heads"] * r["cache_len"] * 8 * 4
        assert r["layers"] == min(128, math.ceil(1e6 / cache))
    assert {r["num_kv_heads"] for r in rows} == {4, 2, 1}
    # What SDPA ran: on the CPU its flash kernel takes grouped k/v as it is.
    for names in steps.facts["sdpa_ops"].values():
        assert names == ["aten::_scaled_dot_product_flash_attention_for_cpu"]


def test_the_table_the_cache_sweep_and_the_batch_sweep_share_their_points():
    for kind in ("cpu", "cuda"):
        p = get("decode_steps").resolve({}, kind)
        points = step_points(p)
        assert len(points) == len(set(points)), kind
        base = ("GQA", "sdpa", p["batch_size"], p["cache_len"])
        assert base in points and ("GQA", "sdpa", 1, p["cache_len"]) in points
        # The H200 forecast's points are measured by the GPU entry itself.
        for b, c in ((1, 4096), (8, 16384)):
            assert kind == "cpu" or all((v, "sdpa", b, c) in points for v in ("MHA", "GQA", "MQA"))


def test_decode_steps_refuses_a_group_that_does_not_divide():
    with pytest.raises(ExperimentError, match="gqa_kv_heads=3 must divide num_heads=4"):
        run_experiment("decode_steps", {**TINY, "gqa_kv_heads": 3}, device_setting="cpu")


def test_per_layer_divides_every_round():
    t = per_layer(stated(40.0, 36.0, 44.0), 4)
    assert (t.time_us, t.low_us, t.high_us) == (10.0, 9.0, 11.0)


def test_prefill_vs_decode_times_every_mode_in_the_same_rounds(measured_pvd):
    rows = {r["mode"]: r for r in measured_pvd.tables["times"].records()}
    assert set(rows) == {PREFILL, DECODE, FLOOR, PROFILED}
    assert rows[FLOOR]["cache_len"] == 1 and rows[PROFILED]["cache_len"] == 24
    assert all(measured_in_rounds(r["time"]) for r in rows.values())
    labels = [s.label for s in measured_pvd.steps]
    assert labels[0] == "decode.append" and "attention.softmax" in labels
    assert measured_pvd.tables["per_forward"].columns[1:] == tuple(labels)
    assert measured_pvd.timeline is not None


# --- facts and verdicts, on measurements made up with known answers -----------------------


def sourced(m):
    return Sourced(m, "from the store", "x.json")


def fact_values(html: str) -> dict[str, set[str]]:
    """Each data-fact id in `html` with the values (first number and unit) it is stated with."""
    found: dict[str, set[str]] = {}
    for fact_id, text in re.findall(r'data-fact="([^"]+)">(.*?)</span>', html):
        value = re.search(r"\d[\d.,]*\s?[^\s(]*", _plain(text)).group(0)
        found.setdefault(fact_id, set()).add(value)
    return found


def test_one_step_is_one_fact_in_the_table_the_sweeps_and_the_finding():
    """The bug this experiment fixes: the GQA step at batch 1 stated with two values."""
    m = decode_steps()
    c = ceilings(m)
    page = "".join(
        (
            render.decode.finding(sourced(m), sourced(c)),
            render.decode.steps_table(sourced(m), sourced(c)),
            render.decode.batch_table(sourced(m), sourced(c)),
            render.decode.cache_claim(sourced(m), sourced(c)),
        )
    )
    values = fact_values(page)
    gqa = next(i for i in values if i.startswith("decode step time;sdpa;b1 h4 kv2 n1 m64 "))
    assert page.count(f'data-fact="{gqa}"') == 3  # finding, table, batch 1 of the sweep
    assert all(len(v) == 1 for v in values.values()), values


def test_the_opening_is_one_claim_in_one_fact_and_its_caption_holds_the_rest():
    m = decode_steps(lambda v, impl, b, c: 200.0 if v == "MHA" else 100.0)
    c = ceilings(m)
    claim, caption = render.decode.finding(sourced(m), sourced(c)).split('<p class="ad-caption">')
    assert claim.count('class="ad-fact"') == 1 and "–" not in claim
    assert "a grouped-query step is 2× faster than a multi-head step" in _plain(claim)
    assert m.provenance.device.label not in claim  # the caption names the machine
    assert caption.count('class="ad-fact"') == 5 and "(1.92–2.08×)" in caption
    # A tie reads as a tie, never as a win.
    tie = decode_steps(lambda v, impl, b, c: timing(100.0, 95.0, 105.0))
    claim = render.decode.finding(sourced(tie), sourced(ceilings(tie))).split("<p")[0]
    assert "within noise of each other" in claim and "faster" not in claim


def test_rates_and_shares_come_from_unprofiled_times_and_the_cost_model():
    m = decode_steps(lambda v, impl, b, c: timing(100.0, 90.0, 110.0) if v == "MHA" else 50.0)
    c = ceilings(m, bandwidth=20e9)
    p = fdecode.point(m, "MHA")
    cost = decode_cost(1, 4, 64, 8, "float32")
    rate = fdecode.read_rate(m, p)
    assert rate.value == pytest.approx(cost.bytes / 100e-6)
    assert (rate.low, rate.high) == (
        pytest.approx(cost.bytes / 110e-6),
        pytest.approx(cost.bytes / 90e-6),
    )
    assert fdecode.copy_share(m, p, c).value == pytest.approx(cost.bytes / 100e-6 / 20e9)
    assert fdecode.intensity(p).value == pytest.approx(cost.intensity)
    assert fdecode.ridge(m, c) == pytest.approx(100e9 / 20e9)
    # Ceilings from another device place nothing under a roof.

    elsewhere = measurement("machine_ceilings", {}, device=H200, facts={"bandwidth_bs": 1e12})
    assert fdecode.copy_share(m, p, elsewhere) is None
    assert "has no copy bandwidth" in render.decode.bandwidth_claim(sourced(m), sourced(elsewhere))
    assert "<svg" not in render.decode.roofline_figure(sourced(m), sourced(elsewhere))


def test_claims_say_ties_as_ties_and_which_roof_binds():
    tie = decode_steps(lambda v, impl, b, c: timing(100.0, 95.0, 105.0))
    text = render.decode.bandwidth_claim(sourced(tie), sourced(ceilings(tie)))
    assert "GQA · sdpa and MHA · sdpa are within noise" in text or "MHA · sdpa and GQA" in text
    assert "faster" not in text.split("A multi-head step")[0]
    assert "below the measured ridge" in text
    fast = decode_steps(lambda v, impl, b, c: 200.0 if v == "MHA" else 100.0)
    text = render.decode.bandwidth_claim(sourced(fast), sourced(ceilings(fast, peak=1e9)))
    assert "GQA · sdpa is 2× (1.92–2.08×) faster than MHA · sdpa" in text
    assert "above the measured ridge" in text  # 1 GFLOP/s over 20 GB/s: a ridge of 0.05


def test_a_working_set_inside_the_last_level_cache_is_said_not_hidden():
    m = decode_steps(lambda v, impl, b, c: 100.0)
    mha = fdecode.point(m, "MHA")
    held = fdecode.working_set(mha).value
    assert held == mha.cost.cache_bytes * mha.layers
    roof = ceilings(m)
    assert fdecode.cache_resident([mha], roof) is None  # no cache recorded: nothing to say
    text = render.decode.bandwidth_claim(sourced(m), sourced(roof))
    assert "last-level" not in text

    def with_llc(size: float):
        return replace(roof, facts={**roof.facts, "llc_level": 3, "llc_bytes": size})

    assert fdecode.cache_resident([mha], with_llc(held - 1)) is None  # outgrows it: memory
    assert fdecode.cache_resident([mha], with_llc(held)).value == held
    text = render.decode.bandwidth_claim(sourced(m), sourced(with_llc(held * 4)))
    assert "fit in the " in text and "last-level cache" in text
    assert "not their roof" in text
    # Variants sized to one working set (as decode_steps sizes its layers): one size, said
    # once, where "67.1 MB, 67.1 MB and 67.1 MB in all" read as three.
    last = [fdecode.cache_series(m, v)[-1] for v in fdecode.VARIANTS]
    assert len(fdecode.working_sets(last)) == 3  # this fixture: 4 layers each, three sizes
    said = _plain(render.decode._resident(last, with_llc(1e12)))
    assert "Its layers (262 kB, 131 kB and 65.5 kB in all)" in said
    same = [replace(p, layers=held // p.cost.cache_bytes) for p in last]
    assert [f.value for f in fdecode.working_sets(same)] == [held]
    said = _plain(render.decode._resident(same, with_llc(1e12)))
    assert f"Each variant's layers ({render.words.nbytes(held)} in all) fit" in said


def test_batching_stops_paying_where_the_time_per_token_stops_falling():
    # Per step: 100 µs at batch 1, then 2 µs per sequence more: per token flat from batch 2.
    flat = decode_steps(lambda v, impl, b, c: 100.0 if b == 1 else 110.0 * b / 2)
    assert fdecode.saturation(flat).shape.batch_size == 2
    assert "From batch 2 on, no larger batch" in render.decode.batch_claim(sourced(flat))
    falling = decode_steps(lambda v, impl, b, c: 100.0 + b)
    assert fdecode.saturation(falling) is None
    assert "still falls" in render.decode.batch_claim(sourced(falling))


def test_a_step_proportional_to_its_bytes_has_slope_one():
    m = decode_steps(lambda v, impl, b, c: 0.01 * c * (4 if v == "MHA" else 1))
    for v in ("MHA", "GQA", "MQA"):
        s = fdecode.tail_slope(m, v)
        assert s.value == pytest.approx(1.0) and s.low < 1.0 < s.high
    assert "cache_len 64–256" in fdecode.tail_slope(m, "MHA").quantity.detail


def test_prefill_against_decode_splits_decode_into_bytes_and_steps_when_it_can():
    m = prefill_vs_decode()  # decode 2,400 µs; 24 steps on a one-token cache of 20 µs
    # Prefill reads the 24 tokens' K/V once, decode t of them at step t; both read q once and
    # write the output once (batch 1, 4 heads, 2 k/v heads, head_dim 8, float32).
    kv_token, q_and_out = 2 * 2 * 8 * 4, 2 * 4 * 24 * 8 * 4
    assert fdecode.moved_bytes(m, fdecode.PREFILL) == kv_token * 24 + q_and_out
    assert fdecode.moved_bytes(m, fdecode.DECODE) == kv_token * 24 * 25 / 2 + q_and_out
    c = ceilings(m, bandwidth=20e9)
    s = fdecode.split(m, c)
    assert s.holds and s.steps_dominate
    assert s.steps_share.value == pytest.approx(24 * 20.0 / 2400.0)
    assert s.bytes_share.value == pytest.approx(
        fdecode.moved_bytes(m, fdecode.DECODE) / 20e9 * 1e6 / 2400.0
    )
    text = render.decode.prefill_claim(sourced(m), sourced(c))
    assert "prefill is 24× (23.1–25×) faster than decode" in text
    assert "Here taking a step costs decode more than its bytes do." in text
    # A one-token step slower than the whole decode's average beyond the noise is no floor.
    slow = prefill_vs_decode({fdecode.FLOOR: 1000.0})
    assert "is not stated" in render.decode.prefill_claim(sourced(slow), sourced(c))
    assert "needs this device's copy bandwidth" in render.decode.prefill_claim(sourced(m), None)


def test_profiled_step_shows_shares_with_their_range_not_rates():
    table = render.decode.step_share_table(sourced(prefill_vs_decode()))
    assert "FLOP/s" not in table and "B/s" not in table
    assert "`attention.softmax` has the largest share" in table
    # softmax: 21–23 µs of 45–47 µs per profiled step.
    assert "47.8% (46.7–48.9%)" in table
    # Two ranges whose shares overlap: no largest is named (issue 27: no max() in render/).

    m = prefill_vs_decode()
    rows = tuple((i, 1.0, 21.0 + 2 * (i - 2), 2.0, 1.0, 20.0 + i, 10.0) for i in (1, 2, 3))
    tied = replace(
        m, tables={**m.tables, "per_forward": replace(m.tables["per_forward"], rows=rows)}
    )
    said = render.decode.step_share_table(sourced(tied))
    assert "has the largest share" not in said and "clears every other's beyond the noise" in said
    assert f"`{LABELS[1]}`" in said.split("under the profiler")[1]


def test_the_h200_forecast_is_bytes_over_bandwidth_and_checks_a_gpu_entry():
    gpu = sheet("h200")
    f = fdecode.floor(gpu, "GQA", 1, 4096)
    moved = 2 * 8 * 4096 * 128 * 2 + 2 * 32 * 128 * 2  # the cache, then q and the output
    assert f.value == pytest.approx(moved / 4.8e12 * 1e6)
    assert f.quantity.clock == "spec-sheet forecast" and f.quantity.device_id == "spec:h200"
    assert fdecode.memory_bound_everywhere(gpu)
    box = render.decode.gpu_forecast([sourced(decode_steps())], sourced(prefill_vs_decode()))
    assert "predictions only" in box and "Measured ÷ forecast" not in box
    # The launch comparison says what its host time is: this CPU's step, not a GPU host's.
    assert "this CPU's eager step with one cached token" in box
    assert "not a GPU host's cost" in box and "one eager step's host cost" not in box
    # A cuda-h200 decode_steps entry at the GPU defaults: every floor gets its measurement.
    gpu_entry = decode_steps(lambda v, impl, b, c: timing(2 * f.value), device=H200)
    checks = fdecode.floor_checks(gpu, gpu_entry)
    assert all(k.measured is not None for *_, k in checks)
    box = render.decode.gpu_forecast(
        [sourced(decode_steps()), sourced(gpu_entry)], sourced(prefill_vs_decode())
    )
    assert "Measured on the NVIDIA H200" in box and 'forecast">2× (1.96–2.04×)</span> |' in box
    assert "27 sequences" in box  # GQA: 8 k/v heads fill 80% of 264 slots from batch 27


def test_the_whole_chapter_from_recorded_entries_states_every_number_as_one_fact():
    """Chapter 11's renderers on the stored entries: every number with a unit is marked, and
    every fact id has one value across the page."""
    steps, pvd = stored("decode_steps"), stored("decode_prefill_vs_decode")
    c = sourced(ceilings(steps.measurement, bandwidth=10e9, peak=50e9))
    r = render.decode
    parts = [
        r.finding(steps, c),
        r.steps_table(steps, c),
        r.bandwidth_claim(steps, c),
        r.repeat_kv_claim(steps),
        r.sdpa_ops_note(steps),
        r.cache_claim(steps, c),
        r.batch_table(steps, c),
        r.batch_claim(steps),
        r.prefill_table(pvd),
        r.prefill_claim(pvd, c),
        r.step_share_table(pvd),
        r.gpu_forecast([steps], pvd),
    ]

    page = markdown.markdown("\n\n".join(parts), extensions=["tables", "admonition"])
    found = site_facts.read_page(f"<article>{page}</article>")
    assert found.unmarked == [] and len(found.marked) > 100
    assert all(len(v) == 1 for v in fact_values(page).values())


def test_the_cache_sweep_is_a_view_whose_facts_are_the_step_facts_of_its_points():
    """findings/decode.CACHE names the cache sweep over the steps table: every cell's fact is
    step_time's for that point (id, value, range), so the figure, the ranking and the table
    state one quantity with one value; the claim ranks the variants per cache length."""
    steps = stored("decode_steps")
    m = steps.measurement
    found = fsw.sweep_findings(m, spec=fdecode.CACHE)
    want = {
        (p.variant, p.shape.keys): fdecode.step_time(m, p)
        for v in fdecode.VARIANTS
        for p in fdecode.cache_series(m, v)
    }
    got = {(v, p.x): p.facts[v] for p in found.points for v in fdecode.VARIANTS}
    assert set(got) == set(want) and len(got) > 6
    for key, fact in got.items():
        assert (fact.id, fact.value, fact.low, fact.high) == (
            want[key].id, want[key].value, want[key].low, want[key].high,
        ), key  # fmt: skip
    claim = _plain(render.decode.cache_claim(steps))
    assert "k/v heads" in claim and "at cache length" in claim
    figure = render.decode.cache_figure(steps)
    assert "each band is the range over the rounds" in figure and "MQA (1 k/v head):" in figure


def test_bytes_are_said_to_set_the_pace_only_where_the_times_follow_them():
    """Issue 28: "bytes set its pace" while GQA, with four times fewer bytes, was no faster."""
    base = decode_steps(lambda v, impl, b, c: 100.0)
    mha, gqa, mqa = (fdecode.point(base, v) for v in fdecode.VARIANTS)
    to_gqa, to_mqa = mha.cost.bytes / gqa.cost.bytes, mha.cost.bytes / mqa.cost.bytes
    assert 1 < to_gqa < to_mqa  # fewer k/v heads, fewer bytes
    # GQA gains the square root of its byte ratio, MQA three times its byte ratio.
    times = {"MHA": 400.0, "GQA": 400.0 / to_gqa**0.5, "MQA": 400.0 / to_mqa / 3}
    m = decode_steps(lambda v, impl, b, c: times[v])
    mha, gqa, mqa = (fdecode.point(m, v) for v in fdecode.VARIANTS)
    short, beyond = fdecode.bytes_test(m, mha, gqa), fdecode.bytes_test(m, mha, mqa)
    assert short.bytes_ratio.value == pytest.approx(to_gqa) and short.side == "short"
    assert beyond.bytes_ratio.value == pytest.approx(to_mqa) and beyond.side == "beyond"
    text = _plain(render.decode.bandwidth_claim(sourced(m), sourced(ceilings(m))))
    assert "bytes set its floor" in text and "bytes set its pace" not in text
    assert "GQA · sdpa gained less than that in every round" in text
    assert "MQA · sdpa gained more than that" in text
    even = decode_steps(lambda v, impl, b, c: 400.0 * fdecode.point(m, v).cost.bytes / mha.cost.bytes)  # fmt: skip
    said = _plain(render.decode.bandwidth_claim(sourced(even), sourced(ceilings(even))))
    assert "Each speed-up holds its byte ratio within the rounds' range" in said


def _plain(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)
