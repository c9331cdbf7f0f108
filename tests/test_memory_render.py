import re
from dataclasses import replace

import pytest

from attention_docs import render
from attention_docs.experiments.runner import run_experiment
from attention_docs.measurements import Measurement, Sourced


@pytest.fixture(scope="module")
def timeline():
    return run_experiment("memory_timeline", {"seq_len": 40, "head_dim": 16}, device="cpu")


@pytest.fixture(scope="module")
def peak():
    return run_experiment("memory_peak", {"start": 16, "max_measured": 64}, device="cpu")


@pytest.fixture(scope="module")
def variants():
    return run_experiment(
        "naive_mask_variants", {"num_heads": 1, "seq_len": 24, "head_dim": 8}, device="cpu"
    )


@pytest.fixture(scope="module")
def dtypes():
    return run_experiment(
        "naive_dtypes", {"num_heads": 1, "seq_len": 24, "head_dim": 8}, device="cpu"
    )


def sourced(m: Measurement) -> Sourced:
    return Sourced(m, "measured now", "x.json", base="")


def roundtrip(m: Measurement) -> Measurement:
    return Measurement.loads(m.dumps())


def test_memory_timeline_figure_is_byte_stable_and_described(timeline):
    svg = render.memory.memory_timeline_svg(timeline)
    assert svg == render.memory.memory_timeline_svg(roundtrip(timeline))
    assert "<metadata>" not in svg and 'role="img"' in svg
    matrix = 4 * 40 * 40 * 4
    assert f"one N×N matrix is {matrix / 1e3:.3g} kB" in svg
    assert "attention.mask: 3 allocations" in svg
    html = render.memory.memory_timeline_figure(sourced(timeline))
    assert html.startswith('<figure class="ad-figure">') and "Allocations of one forward." in html


def test_memory_step_table_and_claims(timeline):
    table = render.memory.memory_step_table(sourced(timeline))
    assert "| `attention.softmax` | 1 | 1 |" in table
    assert render.memory.allocation_claim(timeline).startswith(
        "One forward creates **4** N×N tensors"
    )
    assert "but never more than **2** are live at once" in render.memory.allocation_claim(timeline)
    claim = render.memory.peak_claim(timeline)
    assert "it matches exactly" in claim and "2 × 25.6 kB (N×N)" in claim
    off = replace(timeline, facts={**timeline.facts, "measured_peak_bytes": 70000})
    assert "within " in render.memory.peak_claim(off)


def test_live_matrices_are_counted_by_size_not_by_bytes_live():
    # head_dim 64 > seq_len 16: the output (1·2·16·64·4 = 8 kB) is larger than one score
    # matrix (1·2·16·16·4 = 2 kB); it must not count as one, nor make the peak read as four.
    m = run_experiment(
        "memory_timeline", {"seq_len": 16, "head_dim": 64, "num_heads": 2}, device="cpu"
    )
    assert m.facts["output_bytes"] > m.facts["matrix_bytes"]
    assert [r["score_sized"] for r in m.tables["steps"].records()] == [1, 1, 1, 1, 0]
    assert render.memory.live_matrices(m) == 2
    assert m.facts["measured_peak_bytes"] // m.facts["matrix_bytes"] > 2  # the old reading


def test_peak_table_figure_and_oom_claim(peak):
    table = render.memory.peak_table(sourced(peak))
    assert "| too large for the free memory |" in table and "| 16 |" in table
    assert "GiB" not in table
    figure = render.memory.peak_figure(sourced(peak))
    assert figure == render.memory.peak_figure(sourced(roundtrip(peak)))
    assert re.search(r"predicted \(slope [\d.]+\)", figure)
    claim = render.memory.oom_claim(peak)
    assert "of system RAM" in claim and "equals the prediction to the byte" in claim
    assert "of it free when the sweep began" in claim
    assert "would fit but was not run" in claim
    last = peak.tables["peak"].records()[-1]
    assert f"**seq_len = {last['seq_len']:,}** was not tried" in claim
    ran = [r for r in peak.tables["peak"].records() if r["measured_peak_bytes"] is not None]
    slope = render.plots.loglog_slope(
        [r["seq_len"] for r in ran], [r["measured_peak_bytes"] for r in ran]
    )
    assert slope < 1.9  # at 16 to 64 tokens the output is a large part of the peak
    text = render.memory.peak_slope_claim(peak)
    assert f"fitted slope of **{slope:.2f}** over the whole sweep, below 2" in text
    assert "It is below 2 because not all of the peak is N×N" in text
    failed = replace(peak, facts={**peak.facts, "first_out_of_memory_seq_len": 64})
    assert "The first length that really ran out of memory was **64**." in render.memory.oom_claim(
        failed
    )


def test_mask_variant_renderers(variants):
    table = render.variants.mask_variants(sourced(variants))
    assert table.count("\n| `") == 4
    assert "the cheapest mask step is" in table
    assert table == render.variants.mask_variants(sourced(roundtrip(variants)))


def test_dtype_renderers(dtypes):
    table = render.variants.dtypes(sourced(dtypes))
    assert "bfloat16 ÷ float32 (unprofiled)" in table and "\n| forward |" in table
    claim = re.sub(r"<[^>]+>", "", table)
    assert re.search(
        r"In bfloat16 the unprofiled forward (takes \*\*[\d.]+× \([\d.]+–[\d.]+×\)\*\* "
        r"float32's time: (slower|faster)|is \*\*within noise \([\d.]+×\)\*\* of float32's)",
        claim,
    )
    assert "best vector instruction set" in claim
