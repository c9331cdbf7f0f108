"""The reference dataset on the site (issue 28, item 2): every published GPU point beside
the forecast for its GPU and shape, with the ratio, and the model's accuracy said plainly."""

import re

import markdown
import pytest
import site_facts
from conftest import ROOT

from attention_docs.analytic import gpu
from attention_docs.findings import published as fpublished
from attention_docs.records.ops import recording
from attention_docs.records.published import dataset
from attention_docs.records.shape import Shape
from attention_docs.render import published as rp

A100 = "a100-sxm4-80gb"


def test_every_point_stands_beside_a_forecast_with_its_ratio():
    found = fpublished.every_point()
    assert len(found) == len(dataset().points) >= 12
    assert len({b.gpu.slug for b in found}) >= 3
    for b in found:
        assert b.ratio.value is not None or b.ratio.low <= b.ratio.high
        assert b.published.quantity.clock == "published"
        assert b.forecast.quantity.device_id == f"spec:{b.point.gpu}"


def test_a_forecast_is_the_one_for_the_points_gpu_and_shape():
    b = fpublished.on(A100, "naive, masked_fill_", "ms")
    r = gpu.naive_range(gpu.sheet(A100), b.point.shape, recording(gpu.IN_PLACE))
    assert (b.forecast.low, b.forecast.high) == (r.low_us, r.high_us)
    assert b.ratio.low == pytest.approx(1955 / r.high_us)
    assert b.ratio.high == pytest.approx(1955 / r.low_us)
    flash = fpublished.on(A100, "SDPA flash", "µs")
    assert flash.forecast.low == gpu.flash_range(gpu.sheet(A100), flash.point.shape).low_us


def test_where_each_published_value_falls_is_decided_once():
    # Hugging Face's in-place naive forward and SDPA flash took longer than the range allows;
    # SDPA math, priced from its recorded float32 ops at the CUDA cores' efficiency (not the
    # tensor cores'), lies just above its range.
    assert fpublished.on(A100, "naive, masked_fill_", "ms").where == fpublished.ABOVE
    assert fpublished.on(A100, "SDPA flash", "µs").where == fpublished.ABOVE
    math = fpublished.on(A100, "SDPA math", "ms")
    assert math.where == fpublished.ABOVE and math.ratio.low < 1.05
    assert fpublished.on(A100, "naive, masked_fill", "kernels").where == fpublished.SAME_COUNT
    assert fpublished.on(A100, "SDPA math", "kernels").where == fpublished.MORE
    # A point that is the efficiency a range divides by tests nothing.
    fa3 = fpublished.on("h100-sxm", "FlashAttention-3 forward, FP16", "TFLOP/s")
    assert fa3.where == fpublished.OWN_SOURCE
    fa4 = fpublished.on("b200", "FlashAttention-4 forward, BF16", "TFLOP/s")
    assert fa4.where == fpublished.NO_RANGE and fa4.forecast.value == gpu.matmul_peak(
        fa4.gpu, "bfloat16"
    )
    a = fpublished.accuracy()
    assert len(a.tested) == len(a.where(fpublished.WITHIN)) + len(a.where(fpublished.ABOVE)) + len(
        a.where(fpublished.BELOW)
    )


def test_a_point_the_forecast_cannot_price_is_an_error():
    from dataclasses import replace

    point = replace(dataset().points[0], subject="some kernel")
    with pytest.raises(fpublished.UnforecastPointError, match="some kernel"):
        fpublished.beside(point)


def _page(*parts: str) -> str:
    return markdown.markdown("\n\n".join(parts), extensions=["tables", "admonition"])


def test_the_section_states_every_number_as_a_fact_with_one_text():
    page = _page(rp.accuracy(), rp.reference_table())
    found = site_facts.read_page(f"<article>{page}</article>")
    assert found.unmarked == [] and len(found.marked) >= 3 * len(dataset().points)
    texts: dict[str, set[str]] = {}
    for fact_id, text in re.findall(r'data-fact="([^"]+)">(.*?)</span>', page):
        texts.setdefault(fact_id, set()).add(re.sub(r"<[^>]+>", "", text))
    assert all(len(t) == 1 for t in texts.values()), texts
    # Labelled, linked and quoted as published.
    assert "published, not measured here" in page
    for source in dataset().sources.values():
        if any(p.source == source for p in dataset().points):
            assert source.url in page
    assert "1.955 ms" in page and "146.8 µs" in page and "7.239 ms" in page
    assert ">1 kernel</span>" in page and "1 kernels" not in page  # a count reads as one
    # One table per source, its source said once above it.
    assert page.count("<table>") == len({p.source.key for p in dataset().points})


def test_the_accuracy_sentence_says_where_each_point_falls():
    text = re.sub(r"<[^>]+>", "", rp.accuracy())
    assert "naive, masked_fill_ on the `NVIDIA A100-SXM4-80GB`, 1.955 ms against" in text
    assert "above it" in text and "by construction" in text
    assert "SDPA math launched 20 kernels where the forecast prices 17 kernels" in text


def test_chapter_02_sets_the_variants_kernels_beside_hugging_faces_counts():
    r = fpublished.in_place()
    counts = {v.variant: v.count.value for v in r.variants}
    assert counts == {"rebuild": 8, "masked_fill": 6, "masked_fill_": 5}
    published = {v.variant: v.published and v.published.published.value for v in r.variants}
    assert published == {"rebuild": None, "masked_fill": 6, "masked_fill_": 5}
    # The code under study's extra kernels are its mask rebuild; in place also drops the copy.
    assert r.extra_over_published == ("aten::fill_", "aten::triu")
    assert r.saved_ops == ("aten::fill_", "aten::triu", "aten::copy_")
    mask = gpu.naive_kernels(gpu.sheet(), gpu.FORECAST_SHAPE)
    mask = {k.op: k.bytes for k in mask if k.label == "attention.mask"}
    assert r.saved_bytes.value == pytest.approx(sum(mask[op] for op in r.saved_ops))
    assert 0 < r.saved_time.low < r.saved_time.high
    page = _page(rp.mask_kernels())
    found = site_facts.read_page(f"<article>{page}</article>")
    assert found.unmarked == []
    assert "8 kernels" in page and "published, not measured here" in page


def test_flexattention_against_flashattention_shows_what_the_model_cannot_tell_apart():
    """FlexAttention's published shares of FlashAttention's throughput: the model prices
    both as one fused kernel (100%), so each share is how far the model misses."""
    from dataclasses import replace

    from attention_docs.records.published import DatasetError, parse

    a = fpublished.accuracy()
    relative = a.relative
    assert len(relative) >= 4 and {b.gpu.slug for b in relative} >= {A100, "h100-sxm"}
    assert not set(relative) & set(a.tested)  # not a time against a range
    for b in relative:
        assert b.forecast.value == 1.0 and b.point.baseline.startswith("FlashAttention")
        assert b.where == (fpublished.SLOWER if b.published.value < 1 else fpublished.FASTER)
    worst = max(abs(b.published.value - 1) for b in relative)
    assert a.relative_miss.value == pytest.approx(worst)
    said = re.sub(r"<[^>]+>", "", rp.accuracy())
    assert "cannot tell two kernels of one algorithm apart" in said
    assert "90% of FlashAttention-2" in said  # the source's digits, as a share
    # A share of a baseline the model does not price alike is an error, and the dataset
    # refuses a share that names no baseline.
    odd = replace(relative[0].point, baseline="cuDNN")
    with pytest.raises(fpublished.UnforecastPointError, match="cuDNN"):
        fpublished.beside(odd)
    text = (
        '[[source]]\nkey = "s"\ntitle = "t"\nurl = "u"\nsoftware = "x"\n'
        '[[point]]\nsource = "s"\ngpu = "h100-sxm"\nsubject = "FlexAttention forward"\n'
        'statistic = "share"\nvalue = 90\nunit = "% of baseline"\nsweep = "w"\n'
    )
    with pytest.raises(DatasetError, match="names none"):
        parse(text)


def test_each_kind_of_kernel_takes_its_own_efficiency():
    from attention_docs.records.published import ANY, FLASH_2, FLOAT32

    data = dataset()
    # On Hopper, SDPA's flash backend (FlashAttention-2) is not held to FlashAttention-3's 75%.
    assert data.efficiency("90", "compute", FLASH_2).high == 0.35
    assert data.efficiency("90", "compute", ANY).high == 0.75
    # On an A100 FlashAttention-2's own range is the one on record for every fused kernel.
    assert data.efficiency("80", "compute", FLASH_2) is data.efficiency("80", "compute", ANY)
    # Float32 work has no tensor cores: its efficiency is its own, and stated, not cited.
    fp32 = data.efficiency("90", "compute", FLOAT32)
    assert fp32.kernel == FLOAT32 and fp32.source is None
    h100 = gpu.sheet("h100-sxm")
    assert all(
        k.kernel == FLOAT32 for k in gpu.naive_kernels(h100, Shape(1, 4, 1024, 64, "float32", True))
    )
    flash = gpu.flash_range(h100, Shape(16, 16, 559, 64, "bfloat16", True))
    assert any("FlashAttention-2's 35%" in s for s in flash.sources)
    assert not any("75%" in s for s in flash.sources)


def test_a_kernel_is_held_to_the_slower_of_its_two_ceilings():
    # A short causal FlashAttention forward moves more bytes per FLOP than the ridge allows:
    # its floor is memory's, yet at FlashAttention-2's share of the peak its compute takes
    # longer than its bytes do, and the range says so.
    h100 = gpu.sheet("h100-sxm")
    k = gpu.flash_forward(h100, Shape(16, 16, 559, 64, "bfloat16", True))
    assert k.limit == "memory"
    r = gpu.realistic(h100, (k,))
    busy = k.busy_us(h100.sm_count)  # its whole tiles (1,280 thread blocks fill the SMs)
    assert busy == pytest.approx(k.tile_flops / k.peak * 1e6) and k.tile_flops > k.flops
    assert r.low_us == pytest.approx(busy / 0.35 + gpu.KERNEL_FIXED_US)
    assert r.high_us == pytest.approx(busy / 0.24 + gpu.KERNEL_FIXED_US)
    assert r.floor_us == k.memory_us < r.low_us


def test_the_model_is_checked_against_every_gpu_timing_the_site_holds():
    from attention_docs.findings import model_check

    found = model_check.checks(ROOT / "docs")
    kinds = model_check.by_kind(found)
    sources = {k.source for k in kinds}
    assert sources == {model_check.POINTS, model_check.TRACED, model_check.TRAINING,
                       model_check.PREFILL, model_check.DECODING}  # fmt: skip
    assert {c.gpu for c in found} == {"a100-sxm4-80gb", "a100-pcie-80gb", "h100-sxm", "h200"}
    # Every timing, on GPUs and shapes the model was not built on, lies above its floor.
    assert all(c.above_floor for c in found), [c for c in found if not c.above_floor]
    # The cuDNN forwards on an H200 lie inside the range of cuDNN's generation of kernels.
    (h200,) = [k for k in kinds if k.source == model_check.TRAINING]
    assert h200.inside == len(h200.checks) == 10
    s = model_check.total(kinds)
    assert len(s.checks) == len(found) > 500
    assert s.inside + len(s.above) + len(s.below) == len(found)


def test_a_forecast_box_states_the_record_of_its_kinds_of_kernel(tmp_path, monkeypatch):
    from attention_docs.findings import model_check
    from attention_docs.render.forecast import _record

    monkeypatch.chdir(ROOT)  # a build runs where docs/ is

    record = model_check.records(ROOT / "docs")
    fused = record[model_check.FUSED_FA2]
    assert len(fused.checks) == 4 and fused.above_floor == 4 and fused.worst_over > 2
    assert record[model_check.DECODE].inside > 0
    said = _record((model_check.FUSED_FA2, "a kind nobody checked"))
    assert said.startswith(" Its record against GPU timings others recorded: fused forward")
    assert f"{fused.inside} of {len(fused.checks)} inside the range" in said
    # A notebook run alone has no cited files beside it: the box says nothing of a record.
    assert model_check.records(tmp_path) == {}
