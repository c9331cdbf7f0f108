import math

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
        assert r["status"] == "ok" and r["forward_us"] > 0 and r["backward_us"] > 0
        assert r["step_us"] > 0 and r["backward_per_forward"] > 0
        assert r["step_peak_bytes"] >= r["forward_peak_bytes"] > 0
    for name in ("sdpa-efficient", "sdpa-cudnn"):
        assert rows[name]["status"] == "not available" and rows[name]["step_us"] is None
    assert len(m.notes) == 2 and all("not available on this device" in n for n in m.notes)
    assert rows["naive"]["saved_internal_bytes"] > rows["sdpa-flash"]["saved_internal_bytes"]
    assert rows["sdpa-flash"]["saved_internal_bytes"] == 2 * 32 * 4  # logsumexp, float32
    nodes = m.tables["autograd_nodes"].records()
    assert any(n["implementation"] == "naive" and n["node"] == "SoftmaxBackward0" for n in nodes)
    flash_nodes = [n["node"] for n in nodes if n["implementation"] == "sdpa-flash"]
    assert flash_nodes == ["ScaledDotProductFlashAttentionForCpuBackward0"]
    assert [s.label for s in m.steps] == ["attention.forward", "attention.backward"]
    from attention_docs import render

    here = Sourced(m, "measured now", "x.json")
    table = render.backward_table(here)
    assert "`sdpa-flash`" in table and table.count("unavailable") == 2
    assert "sdpa-cudnn: not available" in render.unavailable_implementations(here)
    assert "ScaledDotProductFlashAttentionForCpuBackward0" in render.autograd_nodes_table(here)
    assert "less" in render.backward_claims(m)
    assert "attention.backward" in render.phase_claim(m)
    timeline = render.step_timeline(here)
    assert "Timeline of one forward + backward." in timeline and ">backward<" in timeline


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
    assert "<svg" in render.saved_figure(here) and "slope" in render.saved_figure(here)
    assert "logsumexp" not in render.saved_detail_table(here)  # roles, not guesses
    assert "`sdpa-flash`" in render.saved_claims(m)
