# torch.compile on naive attention: the compiled function's numerics, the trace analysis that
# names fused kernels' steps (on small hand-made traces), the two experiments at tiny shapes,
# the break-even finding, and the renderers (on recorded and synthetic measurements), with the
# forecast for a GPU checked against the analytic fusion_model.

import functools
from dataclasses import replace

import pytest
import torch
from recorded import recorded, sourced
from reference import attention_reference
from synthetic_forward import at

from attention_docs.attention.compiled import compiled_attention
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments.runner import run_experiment
from attention_docs.findings import compile as fcompile
from attention_docs.inputs import make_qkv
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Sourced
from attention_docs.records.kernels import (
    fused_ops,
    is_bookkeeping,
    names_per_step,
    steps_of,
    work_items,
)
from attention_docs.records.shape import Shape
from attention_docs.records.trace import Span, Trace
from attention_docs.render import fusion, words

TINY = {"batch_size": 1, "num_heads": 2, "seq_len": 64, "head_dim": 16}


def timed(m, naive, compiled, **more):
    """forward_times at `m`'s shape: (median, low, high) µs for naive, compiled and `more`."""
    return at(m, Shape.of(m.params), {fwd.NAIVE: naive, fwd.COMPILED: compiled, **more})


@pytest.mark.parametrize(("shape", "causal"), [((2, 3, 17, 16), True), ((1, 2, 33, 8), False)])
def test_compiled_matches_float64_reference(shape, causal):
    torch._dynamo.reset()
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    q, k, v = make_qkv(*shape, seed=seed)
    out = compiled_attention()(q, k, v, causal=causal)
    expected = attention_reference(q, k, v, causal=causal)
    assert ((out.double() - expected).norm() / expected.norm()).item() < 1e-5, f"seed={seed}"


def span(name, kind, start, dur, depth=0, *, flow=None, lane="CPU thread"):
    return Span(name, kind, lane, start, dur, depth, dur, flow, 1)


def eager_trace():
    """Five ranges with the ops eager attention runs in them (a CPU trace, abridged)."""
    return Trace(
        spans=(
            span("attention.scores", "range", 0, 10),
            span("aten::matmul", "op", 1, 8, 1),
            span("aten::bmm", "op", 2, 6, 2),
            span("attention.scale", "range", 10, 10),
            span("aten::div", "op", 11, 8, 1),
            span("aten::copy_", "op", 12, 1, 2),  # the divisor made a tensor: not the work
            span("attention.mask", "range", 20, 10),
            span("aten::ones", "op", 21, 2, 1),
            span("aten::triu", "op", 23, 2, 1),
            span("aten::masked_fill", "op", 25, 4, 1),
            span("aten::view", "op", 29, 0.5, 1),
            span("attention.softmax", "range", 30, 10),
            span("aten::softmax", "op", 31, 8, 1),
            span("aten::_softmax", "op", 32, 6, 2),
            span("attention.weighted_sum", "range", 40, 10),
            span("aten::matmul", "op", 41, 8, 1),
            span("aten::bmm", "op", 42, 6, 2),
        ),
        lanes=("CPU thread",),
    )


def test_work_items_counts_outermost_ops_and_skips_bookkeeping():
    items = {i.name: i for i in work_items(eager_trace())}
    assert items["aten::matmul"].calls == 2
    assert "aten::div" in items and "aten::copy_" not in items
    assert "aten::view" not in items and "aten::bmm" not in items
    assert sum(i.calls for i in items.values()) == 7


def test_work_items_at_every_depth_count_what_composite_ops_dispatched():
    items = {i.name: i.calls for i in work_items(eager_trace(), every_depth=True)}
    assert items["aten::matmul"] == 2 and items["aten::bmm"] == 2
    assert items["aten::copy_"] == 1 and items["aten::_softmax"] == 1
    assert "aten::view" not in items
    assert sum(items.values()) == 11


def test_fused_kernel_names_map_to_the_steps_whose_ops_they_absorbed():
    names = names_per_step(eager_trace(), STEPS)
    assert "aten::_softmax" in names["attention.softmax"]
    cpu = "graph_0_cpp_fused__softmax_div_masked_fill_ones_triu_view_0"
    assert fused_ops(cpu) == "_softmax_div_masked_fill_ones_triu_view"
    assert steps_of(cpu, names) == ["attention.scale", "attention.mask", "attention.softmax"]
    assert steps_of("triton_per_fused__softmax_div_0", names) == [
        "attention.scale",
        "attention.softmax",
    ]
    assert steps_of("aten::bmm", names) == ["attention.scores", "attention.weighted_sum"]
    assert steps_of("some_vendor_gemm_kernel", names) == []
    assert fused_ops("aten::bmm") is None


def test_gpu_trace_work_is_kernels_and_steps_follow_launches():
    lane = "GPU stream 7"
    trace = Trace(
        spans=(
            span("attention.softmax", "range", 0, 10),
            span("cudaLaunchKernel", "runtime", 1, 1, 1, flow=5),
            span("softmax_warp_forward", "kernel", 20, 3, 0, flow=5, lane=lane),
            span("triton_per_fused__softmax_0", "kernel", 30, 2, 0, flow=6, lane=lane),
        ),
        lanes=("CPU thread", lane),
    )
    names = names_per_step(trace, ["attention.softmax"])
    assert names["attention.softmax"] == {"softmax_warp_forward"}
    assert [i.name for i in work_items(trace)] == [
        "softmax_warp_forward",
        "triton_per_fused__softmax_0",
    ]
    assert is_bookkeeping("Torch-Compiled Region: 0/0") and not is_bookkeeping("aten::bmm")


@pytest.fixture(scope="module")
def kernels():
    torch._dynamo.reset()
    return run_experiment("fusion_kernels", TINY, device_setting="cpu")


def test_fusion_kernels_finds_one_fused_kernel_for_scale_mask_softmax(kernels):
    f = kernels.facts
    fused = [r for r in kernels.tables["compiled_work"].records() if r["kind"] == "fused kernel"]
    assert fused, kernels.tables["compiled_work"]
    steps = {s.strip() for r in fused for s in r["steps"].split(",")}
    assert {"attention.scale", "attention.mask", "attention.softmax"} <= steps
    assert f["compiled_work_calls"] < f["eager_work_calls"]
    assert f["step_ranges_in_compiled_trace"] == 0
    assert kernels.timing is None  # forward times are forward_times' job


def test_the_cold_compile_misses_every_cache_and_the_warm_one_hits(kernels):
    cold, warm = kernels.tables["compiles"].records()
    assert (cold["compile"], warm["compile"]) == ("cold", "warm")
    assert cold["cache_hits"] == 0 and cold["cache_misses"] >= 1
    assert cold["aot_cache_hits"] == 0
    assert warm["cache_misses"] == 0 and (warm["cache_hits"] >= 1 or warm["aot_cache_hits"] >= 1)


def test_fusion_kernels_measures_the_matrix_fusion_keeps(kernels):
    peaks = {r["variant"]: r for r in kernels.tables["peaks"].records()}
    assert set(peaks) == {fwd.NAIVE, fwd.COMPILED}  # forward_times' names
    assert peaks[fwd.NAIVE]["peak_bytes"] > peaks[fwd.COMPILED]["peak_bytes"] > 0
    assert peaks[fwd.COMPILED]["peak_in_matrices"] >= 1.0  # the N×N scores are still there


def test_the_work_tables_and_the_ranges_note_read_the_traces():
    here = sourced("fusion_kernels")
    m = here.measurement
    compiled = fusion.work_table(here, "compiled")
    assert "Steps it does" in compiled and "*fused kernel*" in compiled
    assert 'data-fact="time per forward;compiled: ' in compiled and "(profiled)" in compiled
    assert "`attention.mask`" in fusion.work_table(here, "eager")
    assert "**0 of the five**" in fusion.ranges_note(m)


def test_break_even_divides_the_compile_by_the_time_saved():
    m = recorded("fusion_kernels")
    shape = Shape.of(m.params)
    times = timed(m, (10_000.0, 9_000.0, 11_000.0), (4_000.0, 3_000.0, 5_000.0))
    compile = fcompile.first_call("f", m.device_id, shape, 6.0, "cold caches")
    b = fcompile.break_even(compile, times, fwd.COMPILED, fwd.NAIVE, shape)
    assert b.never is None and b.forwards.value == pytest.approx(1_000)  # 6 s / 6 ms saved
    assert b.forwards.low == pytest.approx(6e6 / 8_000)  # eager's slowest round, compiled's fastest
    assert b.forwards.high == pytest.approx(6e6 / 4_000)
    assert b.forwards.quantity.detail == "cold caches"
    tied = timed(m, (10_000.0, 9_000.0, 11_000.0), (9_500.0, 8_000.0, 10_500.0))
    assert fcompile.break_even(compile, tied, fwd.COMPILED, fwd.NAIVE, shape).never == fcompile.TIE
    slower = timed(m, (5_000.0, 4_900.0, 5_100.0), (9_000.0, 8_900.0, 9_100.0))
    assert (
        fcompile.break_even(compile, slower, fwd.COMPILED, fwd.NAIVE, shape).never
        == fcompile.SLOWER
    )
    elsewhere = fcompile.first_call("f", "cuda-h200", shape, 6.0, "cold caches")
    with pytest.raises(ValueError, match="needs its entries from one device"):
        fcompile.break_even(elsewhere, times, fwd.COMPILED, fwd.NAIVE, shape)


def test_the_compile_table_and_the_finding_read_forward_times():
    m, backends = recorded("fusion_kernels"), recorded("sdpa_backends")
    faster = timed(m, (10_000.0, 9_900.0, 10_100.0), (5_000.0, 4_900.0, 5_100.0))
    here = Sourced(faster, "from the store", "t.json")
    cold = m.tables["compiles"].records()[0]["seconds"]
    table = fusion.compile_table(sourced("fusion_kernels"), here)
    assert words.value(cold * 1e6 / 5_000, "forwards") in table
    assert 'data-fact="forwards to repay the compile;naive + torch.compile;' in table
    assert "import Dynamo and Inductor" in table
    claim, caption = fusion.finding(sourced("fusion_kernels"), here, backends).split(
        '<p class="ad-caption">'
    )
    assert "naive + torch.compile is 2× faster" in claim and claim.count('class="ad-fact"') == 1
    assert "naive + torch.compile is 2× (1.94–2.06×) faster" in caption
    assert "HBM bytes saved by fusion" in caption and "raw data (JSON)" in caption
    tied = timed(m, (10_000.0, 9_000.0, 11_000.0), (9_500.0, 8_000.0, 10_500.0))
    table = fusion.compile_table(sourced("fusion_kernels"), Sourced(tied, "x", "t.json"))
    assert table.count("never: within noise") == 2


def test_fusion_recompile_compiles_once_per_shape_and_records_the_guard():
    torch._dynamo.reset()
    m = run_experiment("fusion_recompile", {**TINY, "new_seq_len": 40}, device_setting="cpu")
    assert m.tables["calls"].column("new_graphs") == [1, 0, 1, 0, 0]
    assert m.tables["calls"].column("seq_len") == [64, 64, 40, 40, 64]
    assert any("40" in reason for reason in m.facts["guard_failures"])
    claim = fusion.recompile_claim(m)
    assert "from 64 to 40" in claim and "guard" in claim
    table = fusion.recompile_table(Sourced(m, "measured now", "x.json"))
    assert "New graphs" in table and 'data-fact="first-call time;' in table


def test_the_speed_and_memory_table_reads_each_fact_from_its_home():
    m, backends = recorded("fusion_kernels"), sourced("sdpa_backends")
    flash = {fwd.SDPA_FLASH: (4_400.0, 4_300.0, 4_700.0)}
    times = timed(m, (9_000.0, 8_800.0, 9_200.0), (4_500.0, 4_400.0, 4_600.0), **flash)
    table = fusion.speed_memory_table(
        sourced("fusion_kernels"), Sourced(times, "x", "t.json"), backends
    )
    assert "9 ms (8.8–9.2 ms)" in table and "2× (1.91–2.09×)" in table
    sdpa_peak = next(
        r for r in backends.measurement.tables["backends"].records() if r["backend"] == "flash"
    )
    assert 'data-fact="peak memory;SDPA flash;' in table
    assert (
        words.nbytes(sdpa_peak["peak_bytes"]) in table
    )  # sdpa_backends' value, not measured twice
    other = replace(
        backends,
        measurement=replace(
            backends.measurement, params={**backends.measurement.params, "seq_len": 7}
        ),
    )
    with pytest.raises(ValueError, match="another shape"):
        fusion.speed_memory_table(sourced("fusion_kernels"), Sourced(times, "x", "t.json"), other)


def test_the_fusion_forecast_is_the_analytic_model_for_the_h200():
    from attention_docs.analytic import fusion as fusion_model
    from attention_docs.analytic.cost import score_matrix_bytes
    from attention_docs.analytic.gpu import FORECAST_SHAPE, naive_floor_us, sheet

    gpu, s = sheet("h200"), FORECAST_SHAPE
    matrix = score_matrix_bytes(s.batch_size, s.num_heads, s.seq_len, s.dtype)
    # Eager, as the code records it: scale and softmax read and write the matrix; the mask
    # builds a bool N×N (fill, triu: 3 passes), copies the scores (clone) and fills them in
    # place, reading the mask.
    bools = s.seq_len**2
    assert fusion_model.bytes_saved(gpu) == 6 * matrix + 4 * bools
    assert fusion_model.fused_elementwise(gpu).limit == "memory"
    assert fusion_model.compiled_floor_us(gpu) < naive_floor_us(gpu)
    box = fusion.fusion_forecast([sourced("fusion_kernels")])
    assert box.startswith('!!! example "On a GPU: forecast for the NVIDIA H200')
    assert words.nbytes(8 * matrix + 4 * bools) in box and words.nbytes(2 * matrix) in box
    assert (
        words.time_us(naive_floor_us(gpu)) in box
        and words.time_us(fusion_model.compiled_floor_us(gpu)) in box
    )
    assert "predictions only" in box
    # Each floor beside its realistic range: the floor over cited efficiencies, all memory-
    # bound here, so the saving's range is the eager range less the fused one.
    saved = fusion_model.time_saved_range(gpu)
    assert saved.floor_us < saved.low_us < saved.high_us
    assert "Realistic range" in box and "efficiencies on record (" in box
    from attention_docs.findings.forecast import realistic

    fact = realistic("time saved by fusion", "scale + mask + softmax", gpu, saved, "µs", shape=s)
    assert words.fact(fact) in box


def test_inductors_attention_pass_rewrites_the_code_without_its_mask_and_not_with_it():
    # Chapter 06: Inductor's fuse_attention pass matches fixed op patterns; the unmasked
    # naive code is one of them (it becomes SDPA), the causal mask built with triu and
    # masked_fill is not (the compiled forward keeps its N×N matrix).
    from torch._dynamo.utils import counters
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config

    q, k, v = make_qkv(1, 2, 16, 8)
    found = {}
    # A graph served from a compile cache skips the passes, and their counters: none here.
    with (
        inductor_config.patch(fx_graph_cache=False),
        functorch_config.patch(enable_autograd_cache=False),
    ):
        for causal in (False, True):
            counters.clear()
            torch._dynamo.reset()
            torch.compile(functools.partial(naive_attention, causal=causal))(q, k, v)
            found[causal] = counters["inductor"]["fuse_attention"]
    torch._dynamo.reset()
    assert found == {False: 1, True: 0}
