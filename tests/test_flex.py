# FlexAttention: every mod against a float64 reference built from explicit masks (odd
# lengths, not multiples of the 128-token tile), the BlockMask bookkeeping, the two
# experiments at tiny shapes (which compile every mod), their findings on made-up rounds,
# and the renderers on recorded entries.
import re
from dataclasses import replace

import pytest
import torch
from recorded import recorded
from recorded import sourced as recorded_sourced
from reference import attention_reference, rel_err
from synthetic_forward import at, forward_times, row
from timings import measured_in_rounds, stated
from torch.nn.attention import flex_attention as flex_module
from torch.nn.attention.flex_attention import flex_attention

from attention_docs.attention import flex
from attention_docs.experiments.flex import unavailable
from attention_docs.experiments.registry import ExperimentError
from attention_docs.experiments.runner import run_experiment
from attention_docs.findings import flex as fflex
from attention_docs.findings.forward import forward_quantity as fwd_quantity
from attention_docs.inputs import make_qkv
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Sourced, Table
from attention_docs.records.timing import Timing
from attention_docs.render import flex as render_flex

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def masks_for(n, heads, doc_lengths, window):
    """Each mod, and the explicit mask/bias it must equal, written with plain loops' logic."""
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    doc = torch.repeat_interleave(torch.arange(len(doc_lengths)), torch.tensor(doc_lengths))
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / heads) for h in range(heads)])
    bias = slopes[:, None, None].double() * (j - i).double()
    sliding = flex.sliding_window(torch.tensor(window))
    document = flex.document(flex.document_ids(doc_lengths))
    return {
        "causal": (flex.causal, None, j <= i, None),
        "sliding_window": (sliding, None, (j <= i) & (j > i - window), None),
        "alibi": (flex.causal, flex.alibi(flex.alibi_slopes(heads)), j <= i, bias),
        "document": (document, None, (j <= i) & (doc[:, None] == doc[None, :]), None),
    }


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("n", [1, 17, 130, 257])
@pytest.mark.parametrize("kind", ["causal", "sliding_window", "alibi", "document"])
def test_every_mod_matches_explicit_float64_reference(kind, n, dtype):
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    q, k, v = make_qkv(2, 3, n, 16, dtype=dtype, seed=seed)
    lengths = flex.split_lengths(n, min(3, n), seed=seed)
    mask_mod, score_mod, keep, bias = masks_for(n, 3, lengths, window=max(n // 3, 1))[kind]
    block_mask = flex.block_mask_for(mask_mod, n, "cpu")
    out = flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
    tol = 1e-5 if dtype == "float32" else 2e-2
    assert rel_err(out, attention_reference(q, k, v, keep=keep, bias=bias)) < tol, f"seed={seed}"


@pytest.mark.parametrize("kind", ["causal", "sliding_window", "alibi", "document"])
def test_explicit_masks_match_the_mods(kind):
    n, window = 200, 37
    ids = flex.document_ids(flex.split_lengths(n, 4))
    mask_mod, *_ = masks_for(n, 2, flex.split_lengths(n, 4), window)[kind]
    dense = flex.block_mask_for(mask_mod, n, "cpu").to_dense()  # per tile, so compare tiles
    explicit = flex.explicit_mask(kind, n, window=window, doc_ids=ids)
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    assert torch.equal(mask_mod(0, 0, i, j), explicit)
    tiles = torch.zeros(dense.shape[-2:], dtype=torch.bool)
    for a in range(tiles.shape[0]):
        for b in range(tiles.shape[1]):
            tiles[a, b] = explicit[a * 128 : (a + 1) * 128, b * 128 : (b + 1) * 128].any()
    assert torch.equal(dense[0, 0].bool(), tiles)


def test_block_counts_of_a_causal_mask_over_two_tiles():
    counts = flex.block_counts(flex.block_mask_for(flex.causal, 256, "cpu"))
    assert counts == {"total": 4, "skipped": 1, "partial": 2, "full": 1}


def test_alibi_slopes_and_document_helpers():
    assert flex.alibi_slopes(8).tolist() == [2.0**-i for i in range(1, 9)]
    lengths = flex.split_lengths(100, 5, seed=1)
    assert sum(lengths) == 100 and len(lengths) == 5 and min(lengths) >= 1
    assert flex.document_ids([2, 3]).tolist() == [0, 0, 1, 1, 1]
    with pytest.raises(ValueError, match="non-empty documents"):
        flex.split_lengths(3, 4)
    with pytest.raises(ValueError, match="unknown mask kind"):
        flex.explicit_mask("nope", 4)


def test_unavailable_names_the_error():
    text = unavailable(RuntimeError("no kernel for bfloat16\nmore detail"))
    assert text == "not available on this device: RuntimeError: no kernel for bfloat16"


# Compiled flex_attention on the CPU (torch 2.13) can return wrong values, even NaN, from one
# run to the next when seq_len is not a multiple of its 128-token block: the compiled-path
# tests use whole blocks. The eager path is checked at odd lengths above.
TINY = {"batch_size": 1, "num_heads": 2, "seq_len": 256, "head_dim": 16}


def test_flex_masks_compiles_each_mask_sweeps_sparsity_and_profiles_one_step():
    # flex_attention warns once per process; earlier tests here have used the fallback.
    flex_module._WARNINGS_SHOWN.discard("flex_attention_performance")
    # 512 tokens: four query tiles, so that a narrower window skips more of them. Two masks:
    # each compile of FlexAttention's CPU kernel costs 10-15 s from a cold compile cache.
    # (Every mod's result is checked against float64 in this file, uncompiled; the site's
    # entry, recorded in tests/data, holds the four masks' compiled rows.)
    params = {**TINY, "seq_len": 512, "window": 256, "documents": 3, "min_window": 256}
    m = run_experiment(
        "flex_masks", {**params, "masks": "sliding_window,causal"}, device_setting="cpu"
    )
    rows = {r["mask"]: r for r in m.tables["masks"].records()}
    assert list(rows) == ["causal", "sliding_window"]  # in the table's order
    for r in rows.values():
        assert r["status"] == "ok", r
        assert r["rel_err_vs_float64"] < 1e-5
        assert r["compile_s"] > 0 and r["total_blocks"] == 16 and r["first_build_us"] > 0
        for name in ("eager", "sdpa_dense"):
            assert isinstance(r[name], Timing) and measured_in_rounds(r[name])
    # Plain causal compiled FlexAttention is forward_times' row: not timed twice.
    assert rows["causal"]["compiled"] is None
    assert m.facts["compiled_timed_in_forward_times"] == ["causal"]
    assert rows["sliding_window"]["skipped_fraction"] >= rows["causal"]["skipped_fraction"]
    assert "torch.compile" in m.facts["fallback_warning"]
    # The sweep passes through the masks' window: that point is the masks table's time.
    sweep = {r["window"]: r for r in m.tables["sweep"].records()}
    assert list(sweep) == [256, 512]
    assert sweep[256]["time"] == rows["sliding_window"]["compiled"]
    computed = [r["computed_fraction"] for r in sweep.values()]
    assert computed == sorted(computed) and computed[0] < computed[-1]
    # Every width in the same interleaved rounds: one count of rounds, one method, for all.
    timed = [r["time"] for r in sweep.values()]
    assert all(measured_in_rounds(t) for t in timed)
    assert len({(len(t.rounds_us), t.method) for t in timed}) == 1
    assert sweep[512]["proportional_us"] == pytest.approx(sweep[512]["time"].time_us)
    # One profiled step: the BlockMask build, then the compiled call, which ran generated code.
    ranges = {s.name for s in m.timeline.spans if s.kind == "range"}
    assert {"flex.block_mask", "flex.compiled"} <= ranges
    assert m.facts["compiled_ran"] and fflex.fused(m)


@pytest.mark.parametrize(
    ("masks", "message"),
    [
        ("causal,sliding_window,banded", "unknown mask 'banded'; masks are causal, sliding_window"),
        ("causal,alibi", "masks must include sliding_window: the sparsity sweep times its kernel"),
    ],
)
def test_flex_masks_refuses_masks_it_cannot_run(masks, message):
    with pytest.raises(ExperimentError, match=message):
        run_experiment("flex_masks", {**TINY, "masks": masks}, device_setting="cpu")


def test_the_recorded_entry_holds_every_mask_compiled():
    rows = recorded("flex_masks").tables["masks"].records()
    assert [r["mask"] for r in rows] == ["causal", "sliding_window", "alibi", "document"]
    assert all(r["status"] == "ok" and r["rel_err_vs_float64"] < 1e-4 for r in rows)


def masks_entry(base, rows):
    """A flex_masks entry holding made-up mask rows (Timing cells from (median, low, high))."""
    columns = tuple(rows[0])
    return replace(
        base,
        experiment="flex_masks",
        params={**base.params, "window": 64, "documents": 2, "min_window": 32},
        tables={"masks": Table(columns, tuple(tuple(r[c] for c in columns) for r in rows))},
        facts={"compiled_timed_in_forward_times": ["causal"]},
    )


def mask_row(mask, compiled, eager, dense):
    """A flex_masks row; each timing (median, low, high) or None: not timed here."""
    row = {"mask": mask, "status": "ok", "compile_s": 1.0, "fx_cache": "hit"}
    row |= {"rel_err_vs_float64": 1e-7, "skipped_fraction": 0.25, "first_build_us": 5e3}
    row |= {"partial_blocks": 2, "full_blocks": 1}
    for name, t in (("compiled", compiled), ("eager", eager), ("sdpa_dense", dense)):
        row[name] = None if t is None else stated(t[0], t[1], t[2])
    return row


def test_each_mask_compares_compiled_with_its_fallback_and_dense_sdpa(tiny_measurement):
    rows = [
        mask_row("causal", None, (900.0, 880.0, 920.0), (150.0, 140.0, 160.0)),
        mask_row("alibi", (100.0, 95.0, 105.0), (104.0, 98.0, 110.0), (50.0, 49.0, 51.0)),
    ]
    m = masks_entry(tiny_measurement, rows)
    times = at(tiny_measurement, fflex.shape(m), {fwd.FLEX: (100.0, 98.0, 102.0)})
    causal, alibi = fflex.masks(m, times)
    # causal: 900/100 from forward_times' row; its range 880/102 – 920/98.
    assert causal.compiled.quantity.id == fwd_quantity(times, fwd.FLEX, fflex.shape(m)).id
    fact, c = causal.versus_fallback.fact, causal.versus_fallback.comparison
    assert (round(c.ratio, 2), round(c.low, 2), round(c.high, 2)) == (9.0, 8.63, 9.39)
    assert not c.tie and fact.value == c.ratio
    assert alibi.versus_fallback.comparison.tie  # 95–105 against 98–110
    assert alibi.versus_dense.comparison.ratio == 0.5  # SDPA with the dense bias is faster here
    assert alibi.compiled.quantity.subject == "FlexAttention, alibi"
    assert fflex.masks(m)[0].compiled is None  # without forward_times, no causal compiled time
    table = render_flex.mask_table(Sourced(m, "s", "x"), Sourced(times, "s", "y"))
    assert "9× (8.63–9.39×)" in table and "within noise (1.04×)" in table


def test_causal_flex_is_compared_with_sdpa_where_both_ran(tiny_measurement):
    shapes = [fwd.Shape(1, 4, n, 64, "float32", True) for n in (128, 256)]
    rows = [row(fwd.FLEX, s, 200.0, 190.0, 210.0) for s in shapes]
    rows += [row(fwd.SDPA_FLASH, shapes[0], 100.0, 95.0, 105.0)]
    rows += [row(fwd.SDPA_FLASH, shapes[1], None, status="out of memory")]
    rows += [row(fwd.SDPA_MATH, shapes[1], None, status="out of memory")]
    times = forward_times(tiny_measurement, rows)
    found = fflex.versus_sdpa(times)
    assert [v.shape for v in found] == shapes[:1]
    v = found[0].versus
    assert v.fact.value == 2 and not v.comparison.tie  # flex takes twice SDPA's
    assert found[0].sdpa == fwd.SDPA_FLASH
    table = render_flex.versus_sdpa_table(Sourced(times, "s", "y"))
    assert table.count("ad-fact") == 3 and "2× (1.81–2.21×)" in table


def test_the_chapter_renders_from_its_recorded_entries():
    fm, times, fc = (
        recorded_sourced(e) for e in ("flex_masks", "forward_times", "flex_block_mask_cost")
    )
    # The opening: one claim in two facts, without their ranges; the ranges in its caption.
    claim, caption = render_flex.finding(fm, times).split('<p class="ad-caption">')
    assert claim.count('class="ad-fact"') == 2 and "in one fused kernel" in claim
    # The verdict is the recorded rounds': a tie where their intervals overlap.
    here = next(
        v for v in fflex.versus_sdpa(times.measurement) if v.shape == fflex.shape(fm.measurement)
    )
    verdict = "within noise of each other" if here.versus.comparison.tie else " faster than "
    assert verdict in claim and "–" not in claim
    assert caption.count('class="ad-fact"') == 3 and "is_causal=True" in caption
    # The causal mask's tiles are timed twice on the page (forward_times' shape-generic
    # kernel, the sweep's whole-sequence window): both are stated, with what differs.
    note = render_flex.whole_window_note(fm, times)
    assert note.count("ad-fact") == 2 and "<code>dynamic=True</code>" in note
    assert note in render_flex.mask_table(fm, times)
    ran = render_flex.ran(fm)
    assert re.search(r"ran a generated, fused kernel: `graph_\d+_kernel`, inside torch", ran)
    assert fm.measurement.provenance.device.label not in ran  # the caption names the machine
    assert "`TorchDynamo Cache Lookup`" in ran.split("inside")[1]
    timeline = render_flex.timeline(fm)
    assert "<svg" in timeline and "flex.compiled" in timeline
    assert "Tiles (128×128) skipped" in render_flex.block_table(fm)
    assert render_flex.fallback_warning(fm.measurement).startswith("!!! warning")
    assert "<svg" in render_flex.sparsity_figure(fm)
    assert render_flex.sparsity_table(fm).count("ad-fact") == 2 * len(
        fm.measurement.tables["sweep"].rows
    )
    assert "<svg" in render_flex.cost_figure(fc)
    assert "BlockMask size" in render_flex.cost_table(fc) and "slope" in render_flex.cost_table(fc)


def test_the_first_and_the_warm_build_of_a_blockmask_are_two_quantities():
    fm, fc = recorded("flex_masks"), recorded("flex_block_mask_cost")
    first = fflex.masks(fm)[0].first_build.quantity
    warm = fflex.build_cost(fc).points[0].time.quantity
    assert first.metric == warm.metric == fflex.BUILD
    assert first.detail == fflex.FIRST_BUILD and warm.detail == fflex.WARM_BUILD
    assert first.id != warm.id


def test_flex_block_mask_cost_is_tiny_next_to_a_dense_mask():
    m = run_experiment("flex_block_mask_cost", {"max_seq_len": 1024}, device_setting="cpu")
    rows = m.tables["cost"].records()
    assert [r["seq_len"] for r in rows] == [256, 512, 1024]
    assert all(r["block_mask_bytes"] < r["dense_mask_bytes"] for r in rows)
    assert rows[-1]["peak_bytes"] >= rows[-1]["dense_mask_bytes"]  # the build is dense
    assert all(isinstance(r["build"], Timing) for r in rows)
    assert fflex.build_cost(m).slope is not None


def _window_sweep(*points) -> Sourced:
    """A flex_masks entry whose sweep holds `points`: (window, partial, full, timing)."""
    base = recorded("flex_masks")
    columns = ("window", "computed_fraction", "partial_blocks", "full_blocks", "time", "status")
    rows = tuple((w, (p + f) / 64, p, f, t, "ok") for w, p, f, t in points)
    sweep = Table((*columns, "proportional_us"), tuple((*r, None) for r in rows), {"time": "µs"})
    return Sourced(replace(base, tables={**base.tables, "sweep": sweep}), "s", "x.json")


def test_the_window_sweep_says_where_time_does_not_follow_the_tiles():
    fm = _window_sweep(
        (64, 15, 0, stated(10.0, 9.5, 10.5)),
        (128, 15, 0, stated(17.0, 16.0, 18.0)),  # same tiles, outside the noise
        (256, 14, 7, stated(22.0, 21.0, 23.0)),  # more tiles, slower: follows
        (512, 12, 18, stated(27.0, 26.0, 28.0)),
        (1024, 8, 28, stated(21.0, 20.0, 22.0)),  # more tiles, faster: does not
    )
    steps = fflex.sparsity(fm.measurement).steps
    assert [(s.narrow, s.wide, s.follows) for s in steps] == [
        (64, 128, False), (128, 256, True), (256, 512, True), (512, 1024, False)
    ]  # fmt: skip
    assert steps[0].same_tiles and not steps[3].same_tiles
    claim = render_flex.sparsity_claim(fm)
    assert "does not follow the tiles" in claim and claim.count("ad-fact") == 2
    assert "windows of 64 and 128 tokens compute the same 15 tiles (15 partial, 0 full)" in claim
    assert "the 1,024-token window computes 36 tiles (8 partial, 28 full) against 30" in claim
    assert "is not measured on this page" in claim


def test_the_window_sweep_follows_the_tiles_within_noise():
    fm = _window_sweep(
        (64, 15, 0, stated(10.0, 9.0, 11.0)),
        (128, 15, 0, stated(10.5, 9.5, 11.5)),  # same tiles, a tie
        (256, 14, 7, stated(14.0, 13.0, 15.0)),
        (512, 12, 18, stated(14.5, 13.5, 15.5)),  # more tiles, a tie: not faster
    )
    assert all(s.follows for s in fflex.sparsity(fm.measurement).steps)
    claim = render_flex.sparsity_claim(fm)
    assert claim.startswith("Timed in the same rounds, the widths' times follow their tiles")
