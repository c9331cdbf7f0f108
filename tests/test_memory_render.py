# Renderers of the memory chapter (and the dtype and mask-variant tables of the naive-attention
# chapters), on recorded measurements: no experiment runs here, and no assertion reads a live
# timing. Synthetic edits of a recorded entry test the sentences' other branches.
import re
from dataclasses import replace

import pytest
from recorded import recorded, sourced

from attention_docs import render
from attention_docs.analytic import gpu as gpus
from attention_docs.analytic.memory import fused_peak, naive_peak
from attention_docs.findings import memory as fmemory
from attention_docs.findings import wall as fwall
from attention_docs.findings.facts import UNPROFILED
from attention_docs.measurements import Measurement, Sourced, Table
from attention_docs.records.device import DeviceInfo

FACT = re.compile(r'<span class="ad-fact" data-fact="([^"]*)">(.*?)</span>')


def plain(text: str) -> str:
    """Text with the fact spans reduced to what a reader sees."""
    return FACT.sub(lambda m: m.group(2), text)


@pytest.fixture(scope="module")
def timeline() -> Measurement:
    return recorded("memory_timeline")


@pytest.fixture(scope="module")
def peak() -> Measurement:
    return recorded("memory_peak")


def test_timeline_figure_is_byte_stable_and_described(timeline):
    html = render.memory.memory_timeline_figure(sourced("memory_timeline"))
    assert html == render.memory.memory_timeline_figure(sourced("memory_timeline"))
    assert (
        "<metadata>" not in html and 'role="img"' in html and "Allocations of one forward." in html
    )
    size = naive_peak(*fmemory.shape(timeline).dims, "float32", causal=True).matrix_bytes
    assert f"one N×N matrix is {render.words.nbytes(size)}" in html
    assert "attention.mask: 3 allocations" in html


def test_step_table_and_claims_state_facts(timeline):
    table = render.memory.memory_step_table(sourced("memory_timeline"))
    assert "| `attention.softmax` | 1 | 1 |" in plain(table)
    claim = plain(render.memory.allocation_claim(timeline))
    assert claim.startswith("One forward creates **4** N×N tensors")
    assert "but never more than **2** are live at once" in claim
    text = render.memory.peak_claim(timeline)
    assert "It matches to the byte." in text and 'data-fact="peak memory;naive (eager);' in text


def test_live_matrices_are_counted_by_size_not_by_bytes_live(timeline):
    # An output larger than a score matrix (head_dim > seq_len) must not count as one.
    m = replace(timeline, facts={**timeline.facts, "matrix_bytes": 1024})
    events = Table(
        ("t_us", "bytes", "live_bytes", "step", "op", "scratch"),
        ((0, 1024, 1024, "s", None, False), (1, 1024, 2048, "s", None, False),
         (2, 4096, 6144, "s", None, False), (3, -1024, 5120, "s", None, False)),
    )  # fmt: skip
    assert (
        fmemory.matrices(replace(m, tables={**m.tables, "events": events})).live_at_once.value == 2
    )


def with_dtypes(m: Measurement, scratch: int) -> Measurement:
    """The recorded timeline with its bfloat16 row given `scratch` bytes of oneDNN scratch."""
    rows = []
    bf16 = {"backend": "oneDNN", "kernel": "brg_matmul:avx10_1_512_amx", "isa": "Intel AMX"}
    for r in m.tables["dtypes"].records():
        if r["dtype"] == "bfloat16":
            bf16["measured_peak_bytes"] = r["tensor_peak_bytes"] + scratch
            rows.append(tuple({**r, **bf16}.values()))
        else:
            rows.append(tuple(r.values()))
    scratch_rows = (
        (("bfloat16", "attention.weighted_sum", "aten::bmm", 1, scratch),) if scratch else ()
    )
    tables = {**m.tables, "dtypes": Table(m.tables["dtypes"].columns, tuple(rows)),
              "scratch": Table(m.tables["scratch"].columns, scratch_rows)}  # fmt: skip
    return replace(m, tables=tables)


def test_scratch_is_stated_per_backend_and_the_tensors_still_match(timeline):
    text = plain(render.memory.scratch_claim(with_dtypes(timeline, 42_624)))
    assert text.startswith("In float32 the model matches the allocator to the byte.")
    assert (
        "In bfloat16, oneDNN `brg_matmul:avx10_1_512_amx` (at the instruction-set level oneDNN "
        "calls “Intel AMX”) allocates scratch per call" in text
    )
    assert "this CPU's Intel" not in text  # oneDNN's name for a level, not the CPU's vendor
    assert "`aten::bmm` in `attention.weighted_sum` 42.6 kB" in text and "it adds 42.6 kB" in text
    none = plain(render.memory.scratch_claim(with_dtypes(timeline, 0)))
    assert none == "In float32 and bfloat16 the model matches the allocator to the byte."
    opening = render.memory.finding(Sourced(with_dtypes(timeline, 42_624), "x", "x.json"))
    claim, caption = opening.split('<p class="ad-caption">')
    # One plain claim, at most two numbers and no machine name; the rest in its caption.
    assert claim.count('class="ad-fact"') == 2 and "exact to the byte" in plain(claim)
    assert timeline.provenance.device.label not in claim
    assert "scratch adds 42.6 kB" in plain(caption) and "raw data (JSON)" in caption
    none = render.memory.finding(Sourced(with_dtypes(timeline, 0), "x", "x.json"))
    assert "no backend adds scratch" in plain(none)
    table = plain(render.memory.dtype_table(sourced("memory_timeline")))
    assert table.count("\n| float32 |") == table.count("\n| bfloat16 |") == 1


def test_peak_table_and_oom_claim(peak):
    table = plain(render.memory.peak_table(sourced("memory_peak")))
    assert "| too large for the free memory |" in table and "GiB" not in table
    first = peak.tables["peak"].records()[0]
    assert f"| {first['seq_len']} |" in table
    figure = render.memory.peak_figure(sourced("memory_peak"))
    assert figure == render.memory.peak_figure(sourced("memory_peak"))
    assert re.search(r"predicted \(slope [\d.]+\)", figure)
    claim = plain(render.memory.oom_claim(peak))
    assert "of system RAM" in claim and "equals the model's to the byte" in claim
    assert f"{peak.facts['predicted_max_seq_len_free']:,} tokens" in claim
    failed = replace(peak, facts={**peak.facts, "first_out_of_memory_seq_len": 4096})
    assert "really ran out of memory was **4,096**" in render.memory.oom_claim(failed)


def test_the_forecast_is_the_analytic_model_of_the_h200():
    box = render.memory.forecast()
    s, h200 = gpus.FORECAST_SHAPE, gpus.sheet("h200")
    assert box.startswith('!!! example "On a GPU: forecast for the NVIDIA H200')
    text = plain(box)
    assert f"{fmemory.longest_forecast(h200).value:,} tokens" in text and "past about" in text
    assert 0 <= gpus.longest_naive_seq_len(h200) - fmemory.longest_forecast(h200).value < 1000
    assert render.words.nbytes(naive_peak(*s.dims, s.dtype, causal=True).peak_bytes) in text
    assert render.words.nbytes(fused_peak(*s.dims, s.dtype)) in text
    assert "Measured" not in text and "predictions only" in text
    # Device memory as the driver reports it, in bytes, MiB and GiB, beside the data sheet's
    # "141 GB" (which is not 141·10⁹ bytes of what the driver reports).
    assert gpus.memory_bytes(h200) == h200.reported_mib * 2**20 > h200.memory_gb * 1e9
    assert "as the driver reports it" in text and f"{h200.reported_mib:,} MiB" in text
    assert f"{h200.reported_mib / 1024:.1f} GiB" in text
    assert render.words.nbytes(h200.memory_gb * 1e9) in text  # the data sheet's, labelled
    # A sheet without the driver's figure falls back to its GB and says so.
    bare = replace(h200, reported_mib=None)
    assert gpus.memory_bytes(bare) == bare.memory_gb * 1e9
    assert "memory MiB" not in fmemory.forecasts(bare)


def test_the_forecast_shows_a_stored_h200_timeline_beside_it(timeline):
    s = gpus.FORECAST_SHAPE
    params = {**timeline.params, **{k: getattr(s, k) for k in ("batch_size", "num_heads", "seq_len", "head_dim", "dtype", "causal")}}  # fmt: skip
    predicted = naive_peak(*s.dims, s.dtype, causal=True).peak_bytes
    device = DeviceInfo("cuda", "NVIDIA H200", capability="90", memory_bytes=141 * 10**9)
    gpu = replace(
        timeline, params=params, facts={**timeline.facts, "measured_peak_bytes": predicted + 2**25},
        provenance=replace(timeline.provenance, device=device, device_id="cuda-h200"),
    )  # fmt: skip
    assert gpu.device_id == "cuda-h200"
    local = Sourced(timeline, "from the store", "x.json", base="")
    box = plain(render.memory.forecast([local, Sourced(gpu, "from the store", "y.json", base="")]))
    assert "Measured on the NVIDIA H200" in box and "not in the store" in box
    assert render.words.times((predicted + 2**25) / predicted) in box
    assert fmemory.forecasts(gpus.sheet(), gpu)["naive peak"].measured.quantity.clock != UNPROFILED


def test_mask_variant_renderers():
    table = render.variants.mask_variants(sourced("naive_mask_variants"))
    assert table.count("\n| `") == 4
    assert "the cheapest mask step is" in table
    assert table == render.variants.mask_variants(sourced("naive_mask_variants"))


def test_dtype_renderers():
    table = render.variants.dtypes(sourced("naive_dtypes"))
    assert "bfloat16 ÷ float32 (unprofiled)" in table and "\n| forward |" in table
    claim = plain(table)
    assert re.search(
        r"In bfloat16 the unprofiled forward (takes \*\*[\d.]+× \([\d.]+–[\d.]+×\)\*\* "
        r"float32's time: (slower|faster)|is \*\*within noise \([\d.]+×\)\*\* of float32's)",
        claim,
    )
    assert "best vector instruction set" in claim


def test_both_chapters_state_the_longest_naive_seq_len_on_a_gpu_with_one_fact():
    """The memory and the wall chapters forecast where naive attention stops fitting: one
    quantity, so one fact id and one value, at the forecast shape without its seq_len."""
    h200 = gpus.sheet("h200")
    memory, (wall, _) = fmemory.forecasts(h200)["longest"].forecast, fwall.forecasts(h200)
    assert memory == wall and memory.value == gpus.longest_naive_seq_len(h200) // 1000 * 1000
    assert memory.quantity.detail == "b4 h16 d128 bfloat16 causal; all memory"
    s = gpus.FORECAST_SHAPE
    model = naive_peak(*s.dims, s.dtype, causal=True)
    assert fmemory.nxn_bytes(s) == 2 * model.matrix_bytes + model.mask_bytes
