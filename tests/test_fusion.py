# torch.compile on naive attention: the compiled function's numerics, the trace analysis that
# names fused kernels' steps (on small hand-made traces), the three experiments at tiny
# shapes, and their renderers.

import pytest
import torch
from reference import attention_reference
from synthetic_forward import at

from attention_docs.attention.compiled import compiled_attention
from attention_docs.attention.naive import STEPS
from attention_docs.experiments.runner import run_experiment
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
from attention_docs.records.timing import Timing
from attention_docs.records.trace import Span, Trace
from attention_docs.render import fusion


def reference(q, k, v, causal):
    return attention_reference(q, k, v, causal=causal)


TINY = {"batch_size": 1, "num_heads": 2, "seq_len": 64, "head_dim": 16}


@pytest.mark.parametrize(("shape", "causal"), [((2, 3, 17, 16), True), ((1, 2, 33, 8), False)])
def test_compiled_matches_float64_reference(shape, causal):
    torch._dynamo.reset()
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    q, k, v = make_qkv(*shape, seed=seed)
    out = compiled_attention()(q, k, v, causal=causal)
    expected = reference(q, k, v, causal)
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
    return run_experiment("fusion_kernels", TINY, device="cpu")


def test_fusion_kernels_finds_one_fused_kernel_for_scale_mask_softmax(kernels):
    f = kernels.facts
    fused = [r for r in kernels.tables["compiled_work"].records() if r["kind"] == "fused kernel"]
    assert fused, kernels.tables["compiled_work"]
    steps = {s.strip() for r in fused for s in r["steps"].split(",")}
    assert {"attention.scale", "attention.mask", "attention.softmax"} <= steps
    assert f["compiled_work_calls"] < f["eager_work_calls"]
    assert f["step_ranges_in_compiled_trace"] == 0
    assert kernels.timing is None  # forward times are forward_times' job
    text = fusion.fusion_summary(kernels) + fusion.ranges_note(kernels)
    assert fused[0]["name"] in text and "0 of the five" in text
    here = Sourced(kernels, "measured now", "x.json")
    assert "Steps it does" in fusion.compiled_work_table(here)
    assert "attention.mask" in fusion.eager_work_table(here)


def test_the_cold_compile_misses_every_cache_and_the_warm_one_hits(kernels):
    cold, warm = kernels.tables["compiles"].records()
    assert (cold["compile"], warm["compile"]) == ("cold", "warm")
    assert cold["cache_hits"] == 0 and cold["cache_misses"] >= 1
    assert cold["aot_cache_hits"] == 0
    assert warm["cache_misses"] == 0 and (warm["cache_hits"] >= 1 or warm["aot_cache_hits"] >= 1)
    assert cold["seconds"] > warm["seconds"]


def test_break_even_divides_the_compile_by_the_time_saved():
    eager = Timing(10_000.0, 0.0, 9, "test", (9_000.0, 10_000.0, 11_000.0))
    compiled = Timing(4_000.0, 0.0, 9, "test", (3_000.0, 4_000.0, 5_000.0))
    mid, fewest, most = fusion.break_even(6.0, eager, compiled)
    assert mid == pytest.approx(1_000)  # 6 s / 6 ms saved per forward
    assert fewest == pytest.approx(6e6 / 8_000)  # eager's slowest round, compiled's fastest
    assert most == pytest.approx(6e6 / 4_000)


def test_compile_cost_reads_forward_times_and_says_never_on_a_tie(kernels):
    shape = fusion.shape_of(kernels)
    faster = at(
        kernels,
        shape,
        {fwd.NAIVE: (10_000.0, 9_900.0, 10_100.0), fwd.COMPILED: (5_000.0, 4_900.0, 5_100.0)},
    )
    text = fusion.compile_cost(kernels, faster)
    cold = kernels.tables["compiles"].records()[0]["seconds"]
    assert f"{cold * 1e6 / 5_000:,.0f} forwards" in text
    imported = kernels.facts["compiler_import_s"]  # timed in a new interpreter
    assert f"**{imported:.1f} s** here" in text
    assert f"first cold compile after about **{(cold + imported) * 1e6 / 5_000:,.0f}**" in text
    assert 'data-fact="forward;' in text and "2.00× (1.94–2.06×) faster" in text
    tied = at(
        kernels,
        shape,
        {fwd.NAIVE: (10_000.0, 9_000.0, 11_000.0), fwd.COMPILED: (9_500.0, 8_000.0, 10_500.0)},
    )
    assert "within noise" in fusion.compile_cost(kernels, tied)
    table = fusion.compile_table(Sourced(kernels, "measured now", "x.json"), tied)
    assert table.count("never, within noise") == 2


def test_fusion_recompile_compiles_once_per_shape_and_records_the_guard():
    torch._dynamo.reset()
    m = run_experiment("fusion_recompile", {**TINY, "new_seq_len": 40}, device="cpu")
    assert m.tables["calls"].column("new_graphs") == [1, 0, 1, 0, 0]
    assert m.tables["calls"].column("seq_len") == [64, 64, 40, 40, 64]
    assert any("40" in reason for reason in m.facts["guard_failures"])
    claim = fusion.recompile_claim(m)
    assert "from 64 to 40" in claim and "guard" in claim
    assert "New graphs" in fusion.recompile_table(Sourced(m, "measured now", "x.json"))


def test_fusion_speed_memory_shows_the_matrix_fusion_keeps():
    torch._dynamo.reset()
    m = run_experiment("fusion_speed_memory", {**TINY, "seq_len": 256}, device="cpu")
    rows = {r["variant"]: r for r in m.tables["variants"].records()}
    assert set(rows) == {fwd.NAIVE, fwd.COMPILED, fwd.SDPA_FLASH}  # forward_times' names
    eager, comp, sdpa = rows[fwd.NAIVE], rows[fwd.COMPILED], rows[fwd.SDPA_FLASH]
    assert eager["peak_bytes"] > comp["peak_bytes"] > sdpa["peak_bytes"] > 0
    assert comp["peak_in_matrices"] >= 1.0  # the N×N scores are still materialised
    assert m.timing is None and "time_us" not in m.tables["variants"].columns
    times = at(
        m,
        fusion.shape_of(m),
        {
            fwd.NAIVE: (9_000.0, 8_800.0, 9_200.0),
            fwd.COMPILED: (4_500.0, 4_400.0, 4_600.0),
            fwd.SDPA_FLASH: (4_400.0, 4_300.0, 4_700.0),
        },
    )
    table = fusion.speed_memory_table(Sourced(m, "measured now", "x.json"), times)
    assert "9 ms (8.8 ms–9.2 ms over 3 rounds)" in table and "2.00× (1.91–2.09×)" in table
    claim = fusion.speed_claim(m, times)
    assert "naive + torch.compile is 2.00×" in claim
    assert "SDPA flash and naive + torch.compile are within noise" in claim
    assert "SDPA" in fusion.speed_memory_claim(m)
    figure = fusion.speed_figure(Sourced(times, "measured now", "x.json"), m)
    assert "<svg" in figure and "SDPA flash: 4.4 ms (4.3 ms–4.7 ms)" in figure
    assert figure.count("within noise of SDPA flash") == 1  # compiled; eager is clearly slower
