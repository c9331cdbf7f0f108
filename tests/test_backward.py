import math
from dataclasses import replace

import pytest
import torch
from reference import rel_err

from attention_docs.attention.backward import IMPLEMENTATIONS, forward_backward, implementation
from attention_docs.attention.sdpa import why_backend
from attention_docs.experiments.runner import run_experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Sourced
from attention_docs.profiling.saved import INPUT, INTERNAL, OUTPUT, extra_bytes, saved_tensors


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


def test_backward_compare_measures_every_implementation():
    m = run_experiment("backward_compare", TINY, device="cpu")
    rows = {r["implementation"]: r for r in m.tables["compare"].records()}
    assert list(rows) == list(IMPLEMENTATIONS)
    for name in ("naive", "sdpa-math", "sdpa-flash"):
        r = rows[name]
        assert r["status"] == "ok"
        for prefix in ("forward", "backward", "profiled_forward", "profiled_backward"):
            assert r[f"{prefix}_low_us"] <= r[f"{prefix}_us"] <= r[f"{prefix}_high_us"]
        assert r["step_peak_bytes"] >= r["forward_peak_bytes"] > 0
    for name in ("sdpa-efficient", "sdpa-cudnn"):
        assert rows[name]["status"] == "not available" and rows[name]["backward_us"] is None
    assert m.notes == (
        "sdpa-efficient: not available on this device for these inputs",
        "sdpa-cudnn: not available on this device for these inputs",
    )
    assert m.facts["rounds"] == 3 and m.facts["profiled_clock"] == "CPU time of the labelled ranges"
    assert rows["naive"]["saved_internal_bytes"] > rows["sdpa-flash"]["saved_internal_bytes"]
    assert rows["sdpa-flash"]["saved_internal_bytes"] == 2 * 32 * 4  # logsumexp, float32
    nodes = m.tables["autograd_nodes"].records()
    assert any(n["implementation"] == "naive" and n["node"] == "SoftmaxBackward0" for n in nodes)
    flash_nodes = [n["node"] for n in nodes if n["implementation"] == "sdpa-flash"]
    assert flash_nodes == ["ScaledDotProductFlashAttentionForCpuBackward0"]
    assert [s.label for s in m.steps] == ["attention.forward", "attention.backward"]
    from attention_docs import render

    here = Sourced(m, "measured now", "x.json")
    table = render.backward.backward_table(here)
    assert "`sdpa-flash`" in table and table.count("unavailable") == 2
    assert table.splitlines()[0].count("|") == 7  # six columns
    assert "sdpa-cudnn: not available" in render.backward.unavailable_implementations(here)
    assert "ScaledDotProductFlashAttentionForCpuBackward0" in render.backward.autograd_nodes_table(
        here
    )
    assert "of the step in the backward" in render.backward.backward_claims(m)
    assert "on the CPU time of the two labelled ranges" in render.backward.phase_claim(m)
    timeline = render.backward.step_timeline(here)
    assert "Timeline of one forward + backward." in timeline and ">backward<" in timeline


def compare_row(forward, backward, prefix="") -> dict:
    """A compare row with (median, low, high) for the forward and the backward."""
    row = {"implementation": "sdpa-flash", "status": "ok"}
    for phase, (med, low, high) in (("forward", forward), ("backward", backward)):
        row |= {f"{prefix}{phase}_us": med, f"{prefix}{phase}_low_us": low}
        row[f"{prefix}{phase}_high_us"] = high
    return row


def test_ratio_and_share_of_the_backward_carry_their_noise():
    from attention_docs.render.backward import backward_share, ratio

    apart = compare_row((100.0, 95.0, 105.0), (250.0, 240.0, 260.0))
    assert ratio(apart) == "2.50× (2.29–2.74×)"
    assert backward_share(apart) == "71.4% (69.6%–73.2%)"
    close = compare_row((100.0, 80.0, 120.0), (105.0, 85.0, 125.0))
    assert ratio(close) == "within noise (1.05×)"
    assert backward_share(close).endswith(", within noise of half)")


@pytest.fixture(scope="module")
def cuda_trace():
    import json

    from conftest import DATA

    from attention_docs.records.trace import Trace, trim_chrome

    chrome = json.loads((DATA / "cuda_trace_kineto.json").read_text())
    return chrome, Trace.from_chrome(trim_chrome(chrome))


def test_per_call_phase_times_on_a_cuda_trace_count_the_autograd_threads_kernels(cuda_trace):
    """What backward_compare reads per profiled call on a GPU: the backward's kernels, all
    launched from the autograd engine's thread, count for `attention.backward`."""
    from attention_docs.attention.backward import PHASES
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


def test_the_phase_claim_on_a_gpu_uses_the_kernel_clock(cuda_trace, tiny_measurement):
    from attention_docs import render
    from attention_docs.attention.backward import PHASES
    from attention_docs.measurements import Table
    from attention_docs.records.device import DeviceInfo
    from attention_docs.records.trace import step_span_rounds

    _, trace = cuda_trace
    rounds = step_span_rounds(trace, PHASES)
    f, b = sorted(rounds[PHASES[0]]), sorted(rounds[PHASES[1]])
    row = compare_row((f[0], f[0], f[-1]), (b[-1], b[0], b[-1]), prefix="profiled_")
    gpu = DeviceInfo(kind="cuda", name="NVIDIA H200", capability="9.0", memory_bytes=10**11)
    m = replace(
        tiny_measurement,
        experiment="backward_compare",
        provenance=replace(tiny_measurement.provenance, device=gpu),
        tables={"compare": Table(tuple(row), (tuple(row.values()),))},
        facts={"profiled": "sdpa-flash"},
    )
    claim = render.backward.phase_claim(m)
    assert "on the GPU's kernel clock" in claim and "across threads" in claim
    share = b[-1] / (b[-1] + f[0])
    assert f"spends {100 * share:.1f}% (" in claim
    assert "within noise of half" not in claim  # the fixture's backward is ~3× its forward


def test_backward_saved_tensors_sweep_and_figure():
    m = run_experiment(
        "backward_saved_tensors",
        {"num_heads": 2, "head_dim": 16, "max_seq_len": 512},
        device="cpu",
    )
    table = m.tables["saved"]
    assert table.column("seq_len") == [128, 256, 512]
    naive, flash = table.column("naive"), table.column("sdpa-flash")
    assert naive[-1] / naive[0] > 12 and flash[-1] / flash[0] == 4
    detail = m.tables["detail"].records()
    assert {r["implementation"] for r in detail} == {"naive", "sdpa-math", "sdpa-flash"}
    from attention_docs import render

    here = Sourced(m, "measured now", "x.json")
    assert "<svg" in render.backward.saved_figure(here) and "slope" in render.backward.saved_figure(
        here
    )
    assert "logsumexp" not in render.backward.saved_detail_table(here)  # roles, not guesses
    assert "`sdpa-flash`" in render.backward.saved_claims(m)
