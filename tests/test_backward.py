import math
from dataclasses import replace

import pytest
import torch
from recorded import recorded
from recorded import sourced as recorded_sourced
from reference import rel_err
from timings import measured_in_rounds, spanning

from attention_docs.analytic import backward as backward_model
from attention_docs.analytic.gpu import sheet
from attention_docs.attention.backward import (
    IMPLEMENTATIONS,
    forward_backward,
    implementation,
)
from attention_docs.attention.sdpa import why_backend
from attention_docs.experiments.runner import run_experiment
from attention_docs.findings import backward as fb
from attention_docs.findings.facts import COUNTED, MODEL
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Sourced
from attention_docs.profiling.saved import INPUT, INTERNAL, OUTPUT, saved_tensors
from attention_docs.records.shape import Shape
from attention_docs.records.steps import PHASES
from attention_docs.records.timing import Timing


def reference(q, k, v, causal):
    """softmax(q·kᵀ/√d)·v, written independently of the code under test (same-length q, k)."""
    scores = torch.einsum("bhnd,bhmd->bhnm", q, k) / math.sqrt(q.shape[-1])
    if causal:
        n = scores.shape[-1]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    return torch.einsum("bhnm,bhmd->bhnd", scores.softmax(-1), v)


def reference_grads(q, k, v, grad_out, causal):
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    out = reference(*leaves, causal)
    return torch.autograd.grad(out, leaves, grad_out.double())


def runnable(q, k, v, causal) -> list[str]:
    pinned = {x.backend for x in why_backend(q, k, v, causal=causal) if x.runs}
    return [n for n in IMPLEMENTATIONS if n == "naive" or n.removeprefix("sdpa-") in pinned]


TOL = {"float32": 5e-5, "bfloat16": 5e-2}
SHAPES = [(1, 1, 1, 8), (2, 3, 17, 16), (1, 2, 65, 64), (2, 2, 33, 32)]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_gradients_match_float64_autograd(shape, causal, dtype):
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    q, k, v = (t.requires_grad_() for t in make_qkv(*shape, dtype=dtype, seed=seed))
    grad_out = make_qkv(*shape, dtype=dtype, seed=seed + 1)[0]
    expected = reference_grads(q, k, v, grad_out, causal)
    names = runnable(q, k, v, causal)
    assert {"naive", "sdpa-math", "sdpa-flash"} <= set(names)
    for name in names:
        out, grads = forward_backward(implementation(name, causal=causal), q, k, v, grad_out)
        assert out.shape == q.shape
        for which, g, e in zip("qkv", grads, expected, strict=True):
            assert g.dtype == q.dtype and g.shape == e.shape
            if e.norm() == 0:  # one query, causal: dq is zero (softmax over one key)
                assert g.abs().max() < TOL[dtype]
                continue
            assert rel_err(g, e) < TOL[dtype], f"{name} d{which} seed={seed}"


def test_forward_backward_does_not_accumulate_into_grad():
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 2, 8, 4))
    grad_out = torch.ones_like(q)
    _, first = forward_backward(implementation("naive"), q, k, v, grad_out)
    _, second = forward_backward(implementation("naive"), q, k, v, grad_out)
    assert q.grad is None
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a, b)


def test_unknown_implementation_is_a_clear_error():
    with pytest.raises(ValueError, match="choose one of: naive, sdpa-math"):
        implementation("sdpa-fastest")


def saved(name, seq_len, causal=True):
    q, k, v = (t.requires_grad_() for t in make_qkv(1, 2, seq_len, 16))
    attend = implementation(name, causal=causal)
    return saved_tensors(lambda: attend(q, k, v), (q, k, v))


def extra_bytes(saved):
    """Bytes autograd keeps beyond the inputs (the output and everything saved for backward)."""
    return sum(s.bytes for s in saved if s.role != INPUT)


def test_naive_attention_saves_the_score_matrix_flash_saves_logsumexp():
    naive = saved("naive", 64)
    assert any(s.shape[-2:] == (64, 64) and s.role == INTERNAL for s in naive)
    flash = saved("sdpa-flash", 64)
    internal = [s for s in flash if s.role == INTERNAL]
    # FlashAttention keeps the output and one float per query row: the logsumexp.
    assert [s.shape for s in internal] == [(1, 2, 64)]
    assert [s.shape for s in flash if s.role == OUTPUT] == [(1, 2, 64, 16)]
    assert sum(s.role == INPUT for s in flash) == 3
    assert extra_bytes(flash) == 1 * 2 * 64 * 16 * 4 + 1 * 2 * 64 * 4


def test_saved_bytes_grow_quadratically_for_naive_and_linearly_for_flash():
    assert extra_bytes(saved("naive", 128)) / extra_bytes(saved("naive", 64)) > 3.5
    assert extra_bytes(saved("sdpa-flash", 128)) / extra_bytes(saved("sdpa-flash", 64)) == 2


def test_saved_tensors_counts_a_storage_once():
    x = torch.randn(4, 4, requires_grad=True)
    # `y * y` saves y twice (both operands); it is one storage.
    result = saved_tensors(lambda: x.exp() * x.exp(), (x,))
    exp_saves = [s for s in result if s.role == INTERNAL]
    assert len(exp_saves) == 2 and all(s.bytes == 64 for s in exp_saves)
    y = x.exp()
    again = saved_tensors(lambda: y * y, (x,))
    assert len(again) == 1 and again[0].bytes == 64


TINY = {"batch_size": 1, "num_heads": 2, "seq_len": 32, "head_dim": 16}


def test_backward_compare_counts_and_times_every_implementation():
    m = run_experiment("backward_compare", TINY, device_setting="cpu")
    rows = {r["implementation"]: r for r in m.tables["compare"].records()}
    assert list(rows) == list(IMPLEMENTATIONS)
    shape = Shape.of(m.params)
    one = backward_model.matmul_flops(shape)
    for name in ("naive", "sdpa-math", "sdpa-flash"):
        r = rows[name]
        assert r["status"] == "ok"
        for phase in ("forward", "backward"):
            t = r[phase]
            assert isinstance(t, Timing) and t.low_us <= t.time_us <= t.high_us
            assert measured_in_rounds(t)
        assert r["step_peak_bytes"] >= r["forward_peak_bytes"] > 0
    # The chain rule counted twice: matmul ops in the profile, FLOPs by torch's counter.
    for name in ("naive", "sdpa-math"):
        assert (rows[name]["forward_matmuls"], rows[name]["backward_matmuls"]) == (2, 4)
        assert rows[name]["forward_flops"] == 2 * one
        assert rows[name]["backward_flops"] == 4 * one
    flash = rows["sdpa-flash"]
    assert (flash["forward_matmuls"], flash["backward_matmuls"]) == (0, 0)  # one fused op each
    assert flash["forward_flops"] is None and flash["backward_flops"] is None  # no CPU formula
    for name in ("sdpa-efficient", "sdpa-cudnn"):
        assert rows[name]["status"] == "not available" and rows[name]["backward"] is None
    assert m.notes == (
        "sdpa-efficient: not available on this device for these inputs",
        "sdpa-cudnn: not available on this device for these inputs",
    )
    assert rows["naive"]["saved_internal_bytes"] > flash["saved_internal_bytes"]
    assert flash["saved_internal_bytes"] == 2 * 32 * 4  # logsumexp, float32
    nodes = m.tables["autograd_nodes"].records()
    assert any(n["implementation"] == "naive" and n["node"] == "SoftmaxBackward0" for n in nodes)
    flash_nodes = [n["node"] for n in nodes if n["implementation"] == "sdpa-flash"]
    assert flash_nodes == ["ScaledDotProductFlashAttentionForCpuBackward0"]
    assert {s.name for s in m.timeline.spans if s.kind == "range"} >= set(PHASES)
    assert m.facts["profiled"] == "sdpa-flash"


# --- the count: analytic ------------------------------------------------------------------


def test_a_backward_runs_twice_the_forwards_matmul_flops_and_flash_recomputes_one_more():
    s = Shape(2, 3, 40, 8, "float32", causal=True)
    forward, backward = backward_model.passes(s, recompute=False)
    assert (forward.matmuls, backward.matmuls) == (2, 4)
    assert forward.flops == 2 * 2 * 2 * 3 * 40 * 40 * 8
    assert backward_model.flop_ratio(s, recompute=False) == 2
    assert backward_model.flop_ratio(s, recompute=True) == 2.5
    grouped = Shape(1, 4, 16, 8, num_kv_heads=2, kv_len=64)
    assert backward_model.matmul_flops(grouped) == 2 * 4 * 16 * 64 * 8


def test_the_training_forecast_is_the_roofline_of_each_kernel():
    from attention_docs.analytic import gpu

    h200 = gpu.sheet("h200")
    s = gpu.FORECAST_SHAPE
    t = backward_model.training(h200, s)
    n2 = s.batch_size * s.num_heads * s.seq_len**2 * 2  # one N×N bf16 matrix
    assert t.probs_bytes == 2 * n2
    assert t.probs_us == pytest.approx(2 * n2 / (h200.hbm_gbs * 1e9) * 1e6)
    # Naive attention's backward: seven kernels, every one memory-bound at this shape.
    kernels = backward_model.naive_backward(h200, s)
    assert len(kernels) == 7 and {k.limit for k in kernels} == {"memory"}
    assert t.naive_backward_us == pytest.approx(sum(k.memory_us for k in kernels))
    assert t.naive_forward_us == pytest.approx(gpu.naive_floor_us(h200, s))
    # The fused backward: five matmuls over the causal tiles, compute-bound in bf16.
    flash = backward_model.flash_backward(h200, s)
    assert flash.limit == "compute"
    assert flash.flops == pytest.approx(2.5 * gpu.flash_forward(h200, s).flops)
    assert t.recompute_us == pytest.approx(t.flash_backward_us / 5)
    assert t.flash_ratio == pytest.approx(2.5) and 1 < t.naive_ratio < 2  # FLOPs vs bytes
    assert fb.limits(h200) == ("memory", "compute")


# --- findings and words, on a recorded entry and on made-up rounds -----------------------


@pytest.mark.parametrize(
    ("backward", "verdict"),
    [
        ((190.0, 200.0, 210.0), fb.AS_COUNTED),
        ((300.0, 310.0, 320.0), fb.SLOWER_PER_FLOP),
        ((120.0, 130.0, 140.0), fb.FASTER_PER_FLOP),
    ],
)
def test_the_measured_ratio_is_judged_against_the_count_with_its_noise(backward, verdict):
    from attention_docs.findings.compare import compare

    c = compare(spanning((95.0, 100.0, 105.0)), spanning(backward))
    assert fb.against_count(c, 2.0) == verdict


def test_passes_state_every_number_as_a_fact_with_its_quantity():
    m = recorded("backward_compare")
    found = {p.implementation: p for p in fb.passes(m)}
    assert list(found) == ["naive", "sdpa-math", "sdpa-flash"]
    naive, flash = found["naive"], found["sdpa-flash"]
    assert naive.ratio.value == pytest.approx(naive.backward.value / naive.forward.value)
    assert naive.flop_ratio.value == 2 and naive.flop_ratio.quantity.clock == COUNTED
    assert flash.flop_ratio.value == 2.5 and flash.flop_ratio.quantity.clock == MODEL
    assert naive.forward.quantity.id != flash.forward.quantity.id
    assert "recording autograd" in naive.forward.quantity.metric


def test_the_chapter_renders_its_finding_tables_and_timeline_from_facts():
    from attention_docs import render

    here = recorded_sourced("backward_compare")
    finding = render.backward.finding(here)
    claim, caption = finding.split('<p class="ad-caption">')
    assert claim.count('class="ad-fact"') == 2 and "FlashAttention keeps" in claim
    assert caption.count('class="ad-fact"') == 6 and "raw data (JSON)" in caption
    count = render.backward.count_table(here)
    assert "no formula" in count and count.count("ad-fact") >= 12
    table = render.backward.time_table(here)
    assert "sdpa-cudnn: not available" in table and table.splitlines()[0].count("|") == 8
    assert "ScaledDotProductFlashAttentionForCpuBackward0" in render.backward.nodes_table(here)
    timeline = render.backward.step_timeline(here)
    assert "Timeline of one forward + backward." in timeline and ">backward<" in timeline


def test_the_forecast_sets_a_stored_h200_entry_beside_the_floor():
    """A made-up H200 entry at the forecast shape: the box shows it and the ratio."""
    from attention_docs import render
    from attention_docs.analytic.gpu import FORECAST_SHAPE
    from attention_docs.records.device import DeviceInfo

    cpu = recorded("backward_compare")
    h200 = DeviceInfo(kind="cuda", name="NVIDIA H200", capability="9.0", memory_bytes=10**11)
    params = {
        **cpu.params,
        **{
            f: getattr(FORECAST_SHAPE, f)
            for f in ("batch_size", "num_heads", "seq_len", "head_dim", "dtype", "causal")
        },
    }
    gpu = replace(cpu, params=params, provenance=replace(cpu.provenance, device=h200, device_id=""))
    box = render.backward.training_forecast([Sourced(cpu, "s", "x"), Sourced(gpu, "s", "y")])
    assert box.startswith('!!! example "On a GPU: forecast for the NVIDIA H200')
    assert "Measured on the NVIDIA H200" in box and "not in the store" in box
    flash = {p.implementation: p for p in fb.passes(gpu)}["sdpa-flash"]
    checks = fb.training_checks(sheet("h200"), [cpu, gpu])
    assert checks[3].measured == flash.backward
    assert checks[3].ratio == pytest.approx(flash.backward.value / checks[3].forecast.value)
    assert checks[5].measured == flash.ratio and checks[6].measured is None
    alone = render.backward.training_forecast([Sourced(cpu, "s", "x")])
    assert "Measured on" not in alone and "predictions only" in alone
    # The naive forward's kernels as its code records them (not five), and the ratios said
    # to be ratios of floors.
    from attention_docs.analytic.gpu import naive_kernels

    kernels = len(naive_kernels(sheet("h200"), FORECAST_SHAPE))
    assert f"forward: {kernels} kernels through HBM, as the code records them" in alone
    assert "five kernels" not in alone and alone.count("a ratio of floors") == 2


@pytest.fixture(scope="module")
def cuda_trace():
    import json

    from conftest import DATA

    from attention_docs.records.trace import Trace, trim_chrome

    chrome = json.loads((DATA / "cuda_trace_kineto.json").read_text())
    return chrome, Trace.from_chrome(trim_chrome(chrome))


def test_matmuls_of_the_backward_are_counted_on_the_autograd_thread(cuda_trace):
    """On a GPU the backward's matmuls run on the autograd engine's thread: they count for
    `attention.backward` all the same (the recorded trace: one bmm forward, two backward)."""
    from attention_docs.experiments.backward import _matmuls

    _, trace = cuda_trace
    assert _matmuls(trace, per=len(trace.steps)) == [1, 2]


def test_per_call_phase_times_on_a_cuda_trace_count_the_autograd_threads_kernels(cuda_trace):
    """What backward_compare reads per profiled call on a GPU: the backward's kernels, all
    launched from the autograd engine's thread, count for `attention.backward`."""
    from attention_docs.records.trace import step_span_rounds

    chrome, trace = cuda_trace
    events = chrome["traceEvents"]
    threads = {e["args"]["name"]: e["tid"] for e in events if e.get("name") == "thread_name"}
    autograd = next(tid for name, tid in threads.items() if "pt_autograd" in name)
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
    }
    work = [
        e
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]

    def windows(name):
        return [
            (e["ts"], e["ts"] + e["dur"])
            for e in events
            if e.get("cat") == "user_annotation" and e["name"] == name
        ]

    expected = {}
    for phase in PHASES:
        per_step = []
        for lo, hi in windows(phase):
            launched = [w for w in work if lo <= launches[w["args"]["correlation"]]["ts"] <= hi]
            per_step.append(sum(w["dur"] for w in launched))
        expected[phase] = per_step
    rounds = step_span_rounds(trace, PHASES)
    for phase in PHASES:
        assert rounds[phase] == pytest.approx(expected[phase])
    from_autograd = sum(
        w["dur"] for w in work if launches[w["args"]["correlation"]]["tid"] == autograd
    )
    # Without the autograd thread's work the backward would be a fill kernel, a few µs.
    assert (
        sum(rounds[PHASES[1]])
        > from_autograd
        > 10
        * sum(
            w["dur"]
            for w in work
            if launches[w["args"]["correlation"]]["tid"] != autograd
            and any(
                lo <= launches[w["args"]["correlation"]]["ts"] <= hi
                for lo, hi in windows(PHASES[1])
            )
        )
    )


def test_backward_saved_tensors_sweep_and_figure():
    m = run_experiment(
        "backward_saved_tensors",
        {"num_heads": 2, "head_dim": 16, "max_seq_len": 512},
        device_setting="cpu",
    )
    table = m.tables["saved"]
    assert table.column("seq_len") == [128, 256, 512]
    naive, flash = table.column("naive"), table.column("sdpa-flash")
    assert naive[-1] / naive[0] > 12 and flash[-1] / flash[0] == 4
    detail = m.tables["detail"].records()
    assert {r["implementation"] for r in detail} == {"naive", "sdpa-math", "sdpa-flash"}
    growth = {g.implementation: g for g in fb.growth(m)}
    assert growth["sdpa-flash"].slope.value == pytest.approx(1.0)
    assert growth["naive"].slope.value > 1.8
    from attention_docs import render

    here = Sourced(m, "measured now", "x.json")
    assert "<svg" in render.backward.saved_figure(here)
    assert "logsumexp" not in render.backward.saved_detail_table(here)  # roles, not guesses
    claim = render.backward.saved_claim(here)
    assert "`sdpa-flash`" in claim and claim.count("ad-fact") == 6
