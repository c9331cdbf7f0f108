# The FlashAttention chapter: the tiled loop against float64 and SDPA, the tile schedule and
# traffic models, the Triton kernel under Triton's interpreter (in a subprocess, because
# TRITON_INTERPRET must be set before the kernel is defined), the experiments at tiny
# shapes, and the renderers.
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest
import torch
from conftest import ROOT
from reference import attention_reference, rel_err
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention
from torch.profiler import profile

from attention_docs import render
from attention_docs.attention.tiled import tiled_attention, tiled_attention_with_lse
from attention_docs.attention.triton_flash import kernel_config, triton_available
from attention_docs.cost import step_costs
from attention_docs.experiments.runner import run_experiment
from attention_docs.inputs import make_qkv, resolve_dtype
from attention_docs.measurements import Sourced, Table
from attention_docs.tiling import (
    COMPUTED,
    DIAGONAL,
    SKIPPED,
    computed_fraction,
    fused_traffic,
    naive_traffic,
    tile_counts,
    tile_grid,
    tiled_loop_traffic,
    tiled_step_costs,
    working_set_bytes,
)


def reference(q, k, v, causal):
    return attention_reference(q, k, v, causal=causal, lse=True)


HAS_TRITON = importlib.util.find_spec("triton") is not None


TOL = {"float32": 1e-5, "bfloat16": 1e-2}
SHAPES = [(1, 1, 1, 8), (2, 3, 17, 16), (1, 2, 100, 32), (3, 2, 33, 24)]
BLOCKS = [(16, 16), (7, 13), (64, 32), (128, 128)]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_tiled_matches_float64_and_sdpa_math(shape, causal, dtype):
    seed = int(torch.randint(0, 2**31 - 1, ()).item())  # fresh inputs every run
    q, k, v = make_qkv(*shape, dtype=dtype, seed=seed)
    expected, expected_lse = reference(q, k, v, causal)
    with sdpa_kernel(SDPBackend.MATH):
        sdpa = scaled_dot_product_attention(q, k, v, is_causal=causal)
    for block_q, block_k in BLOCKS:
        out, lse = tiled_attention_with_lse(
            q, k, v, causal=causal, block_q=block_q, block_k=block_k
        )
        assert out.dtype == resolve_dtype(dtype) and out.shape == q.shape
        assert lse.dtype == torch.float32 and lse.shape == q.shape[:-1]
        where = f"seed={seed}, blocks={block_q}×{block_k}"
        assert rel_err(out, expected) < TOL[dtype], where
        assert rel_err(lse, expected_lse) < 1e-6, where  # computed from the upcast inputs
        assert rel_err(out, sdpa.double()) < 2 * TOL[dtype], where


@pytest.mark.parametrize("causal", [False, True])
def test_tiled_with_more_keys_than_queries(causal):
    q, k, v = make_qkv(2, 2, 19, 16, kv_seq_len=45, seed=int(torch.randint(0, 999, ()).item()))
    expected, _ = reference(q, k, v, causal)
    out = tiled_attention(q, k, v, causal=causal, block_q=8, block_k=16)
    assert rel_err(out, expected) < 1e-5


def test_tiled_in_float64_is_exact_to_rounding():
    q, k, v = make_qkv(1, 2, 70, 16, dtype="float64", seed=5)
    expected, _ = reference(q, k, v, True)
    assert rel_err(tiled_attention(q, k, v, causal=True, block_q=16, block_k=8), expected) < 1e-13


def test_tiled_causal_means_no_future_leaks():
    q, k, v = make_qkv(1, 1, 40, 8, seed=3)
    out = tiled_attention(q, k, v, causal=True, block_q=16, block_k=16)
    v2 = v.clone()
    v2[..., 20:, :] += 100.0  # change only the future of rows 0..19
    out2 = tiled_attention(q, k, v2, causal=True, block_q=16, block_k=16)
    torch.testing.assert_close(out[..., :20, :], out2[..., :20, :])
    assert not torch.allclose(out[..., 20:, :], out2[..., 20:, :])


def test_tiled_rejects_what_it_cannot_compute():
    q, k, v = make_qkv(1, 1, 8, 4)
    with pytest.raises(ValueError, match="block_q must be a positive integer"):
        tiled_attention(q, k, v, block_q=0)
    short_k, short_v = k[..., :4, :], v[..., :4, :]
    with pytest.raises(ValueError, match="fewer keys"):
        tiled_attention(q, short_k, short_v, causal=True)
    with pytest.raises(ValueError, match="share head_dim"):
        tiled_attention(q, k[..., :2], v[..., :2])


# The tile schedule and the traffic models.


def test_tile_grid_counts_the_causal_triangle():
    grid = tile_grid(512, 64, 64, causal=True)
    assert tile_counts(grid) == {"tiles": 64, "computed": 36, "diagonal": 8, "skipped": 28}
    assert [t.state for t in grid[0][:2]] == [DIAGONAL, SKIPPED]
    assert grid[7][0].state == COMPUTED
    assert tile_counts(tile_grid(512, 64, 64, causal=False))["skipped"] == 0


def test_computed_fraction_is_the_area_of_computed_tiles():
    assert computed_fraction(tile_grid(512, 64, 64, causal=True)) == 36 / 64
    assert computed_fraction(tile_grid(512, 512, 512, causal=True)) == 1.0
    assert computed_fraction(tile_grid(100, 30, 30, causal=False)) == 1.0


def test_tile_grid_handles_lengths_that_are_not_multiples():
    grid = tile_grid(50, 16, 12, causal=True)
    assert len(grid) == 4 and len(grid[0]) == 5
    assert grid[-1][0].rows == 2 and grid[0][-1].cols == 2
    # Every score above the diagonal is in a skipped or diagonal tile; every other in a
    # computed or diagonal one.
    for row in grid:
        for t in row:
            future = [j > i for i in range(t.q0, t.q1) for j in range(t.k0, t.k1)]
            if t.state == SKIPPED:
                assert all(future)
            elif t.state == COMPUTED:
                assert not any(future)
            else:
                assert any(future) and not all(future)


@pytest.mark.parametrize(
    ("n", "bq", "bk", "kv"), [(50, 16, 8, None), (33, 7, 13, 40), (9, 64, 64, None)]
)
def test_the_loop_visits_exactly_the_scheduled_tiles(n, bq, bk, kv):
    q, k, v = make_qkv(1, 2, n, 16, kv_seq_len=kv)
    with profile(with_flops=True) as prof:
        tiled_attention(q, k, v, causal=True, block_q=bq, block_k=bk)
    events = {e.key: e for e in prof.key_averages()}
    counts = tile_counts(tile_grid(n, bq, bk, causal=True, kv_seq_len=kv))
    assert events["tiled.scores"].count == counts["computed"]
    assert events["tiled.normalize"].count == len(tile_grid(n, bq, bk, causal=True, kv_seq_len=kv))
    # Both matmuls of every visited tile, as the profiler counts them, match the model.
    model = tiled_step_costs(1, 2, n, 16, causal=True, block_q=bq, block_k=bk, kv_seq_len=kv)
    assert events["aten::bmm"].flops == pytest.approx(2 * model[0].flops)


def test_fused_traffic_by_hand():
    # N=4, D=2, 2×2 tiles, float32: q and out 2·4·2 = 16 elements; k and v read once per
    # query tile: 2 tiles × 4 rows × 2 (k and v) × 2 dims = 32; log-sum-exp 4 × 4 bytes.
    assert fused_traffic(1, 1, 4, 2, causal=False, block_q=2, block_k=2) == 4 * (16 + 32) + 16
    # Causal: query tile 0 reads key tile 0 only; tile 1 reads both: 6 rows of k and of v.
    assert fused_traffic(1, 1, 4, 2, causal=True, block_q=2, block_k=2) == 4 * (16 + 24) + 16
    assert fused_traffic(2, 3, 4, 2, "bfloat16", block_q=2, block_k=2) == 6 * (2 * 48 + 16)


def test_traffic_models_rank_as_the_chapter_says():
    shape = (1, 4, 512, 64)
    naive = naive_traffic(*shape, causal=True)
    assert naive == sum(c.bytes for c in step_costs(*shape, causal=True))
    small = fused_traffic(*shape, causal=True, block_q=32, block_k=32)
    large = fused_traffic(*shape, causal=True, block_q=128, block_k=128)
    assert large < small < naive
    assert tiled_loop_traffic(*shape, causal=True, block_q=64, block_k=64) > naive
    # Non-causal k/v reads grow with seq_len / block_q: doubling block_q nearly halves them.
    once = fused_traffic(1, 1, 4096, 64, block_q=4096)  # one query tile: k and v read once
    extra = [fused_traffic(1, 1, 4096, 64, block_q=b) - once for b in (64, 128)]
    assert extra[0] / extra[1] == pytest.approx((64 - 1) / (32 - 1))


def test_working_set_grows_with_the_tile():
    assert working_set_bytes(64, 64, 64, "bfloat16") == (64 + 128) * 64 * 2 + 4 * (
        64 * 64 + 64 * 64 + 128
    )
    assert working_set_bytes(128, 128, 128) > working_set_bytes(64, 64, 128)


# The Triton kernel.


def test_triton_availability_says_why():
    ok, why = triton_available()
    assert isinstance(ok, bool) and why
    if not HAS_TRITON:
        assert "not installed" in why
    elif not torch.cuda.is_available() and not os.environ.get("TRITON_INTERPRET"):
        assert not ok and "CUDA" in why


def test_kernel_config_fits_and_rejects():
    bf16 = kernel_config(128, torch.bfloat16)
    assert (bf16.block_m, bf16.block_n, bf16.block_d) == (128, 64, 128)
    assert kernel_config(24, torch.float32).block_d == 32
    with pytest.raises(ValueError, match="power of two"):
        kernel_config(64, torch.float32, block_m=48)
    with pytest.raises(ValueError, match="larger than this kernel supports"):
        kernel_config(300, torch.bfloat16)


INTERPRETED = textwrap.dedent(
    """
    import json, math, sys
    import torch
    from attention_docs.attention.triton_flash import triton_flash_attention
    from attention_docs.inputs import make_qkv
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention
    results = []
    for shape, kv, causal, dtype, blocks, seed in json.loads(sys.argv[1]):
        q, k, v = make_qkv(*shape, kv_seq_len=kv, dtype=dtype, seed=seed)
        out, lse = triton_flash_attention(
            q, k, v, causal=causal, block_m=blocks[0], block_n=blocks[1], return_lse=True
        )
        # SDPA's is_causal aligns the mask top-left; with more keys than queries the kernel
        # (like causal_mask) aligns it bottom-right, so pass that mask explicitly.
        n, m = q.size(-2), k.size(-2)
        keep = torch.ones(n, m, dtype=torch.bool).tril(m - n) if causal else None
        with sdpa_kernel(SDPBackend.MATH):
            sdpa = scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=keep)
        results.append({"out": out.double().tolist(), "lse": lse.double().tolist(),
                        "dtype": str(out.dtype), "shape": list(out.shape),
                        "sdpa_err": float((out.double() - sdpa).norm() / sdpa.norm())})
    print(json.dumps(results))
    """
)


def run_interpreted(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
        env={
            **os.environ,
            "TRITON_INTERPRET": "1",
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        },
    )


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_triton_kernel_matches_float64_under_the_interpreter():
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    cases = [
        ((1, 2, 37, 24), None, False, "float32", (16, 16)),
        ((1, 2, 37, 24), None, True, "float32", (16, 32)),
        ((2, 1, 20, 16), 45, True, "float32", (16, 16)),
        ((1, 2, 33, 32), None, True, "bfloat16", (16, 16)),
        ((1, 1, 48, 16), None, False, "bfloat16", (32, 16)),
    ]
    payload = json.dumps([[*c, seed + i] for i, c in enumerate(cases)])
    proc = run_interpreted(INTERPRETED, payload)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for i, ((shape, kv, causal, dtype, _), r) in enumerate(zip(cases, results, strict=True)):
        q, k, v = make_qkv(*shape, kv_seq_len=kv, dtype=dtype, seed=seed + i)
        expected, expected_lse = reference(q, k, v, causal)
        where = f"{shape}, kv={kv}, causal={causal}, {dtype}, seed={seed}"
        assert r["dtype"] == str(resolve_dtype(dtype)) and r["shape"] == list(shape), where
        assert rel_err(torch.tensor(r["out"]), expected) < TOL[dtype], where
        assert rel_err(torch.tensor(r["lse"]), expected_lse) < 1e-5, where
        assert r["sdpa_err"] < TOL[dtype], where


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_gpu_comparison_code_runs_under_the_interpreter():
    """The GPU experiment's code path, run on the CPU through the interpreter at tiny shapes."""
    code = textwrap.dedent(
        """
        import json
        import torch
        from attention_docs.experiments.flash import compare_kernels
        from attention_docs.experiments.runner import Context
        from attention_docs.profiling.device import describe
        dev = torch.device("cpu")
        obs = compare_kernels(Context(dev, describe(dev)), batch_size=1, num_heads=1,
                              seq_len=32, head_dim=16, dtype="float32", causal=True)
        print(json.dumps({"table": obs.tables["kernels"].to_json(), "facts": obs.facts,
                          "notes": list(obs.notes), "ops": [o.name for o in obs.ops]}))
        """
    )
    proc = run_interpreted(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    table = Table.from_json(result["table"])
    assert table.column("seq_len") == [16, 32]
    assert all(t > 0 for t in table.column("triton_us"))
    assert all(t > 0 for t in table.column("sdpa_flash_tflops"))
    assert result["facts"]["triton_rel_error"] < 1e-5
    assert result["facts"]["matmul_tflops"] > 0


# The experiments, at tiny shapes.


def test_tiled_vs_naive_experiment_counts_tiles_and_compares_three_ways():
    m = run_experiment(
        "flash_tiled_vs_naive",
        {"seq_len": 48, "num_heads": 2, "head_dim": 16, "block_q": 16, "block_k": 16},
        device="cpu",
    )
    assert m.facts["tiles_computed"] == 6 and m.facts["tiles_skipped"] == 3
    assert m.facts["ops_per_forward"] > 6 * 8  # several ops per tile, and nested ones
    assert "6 tiles" not in render.flash.profiler_overhead(m)
    assert "ATen ops" in render.flash.profiler_overhead(m)
    assert m.step("tiled.scores").calls == 6
    assert (
        m.step("tiled.scores").flops
        == tiled_step_costs(1, 2, 48, 16, causal=True, block_q=16, block_k=16)[0].flops
    )
    impl = m.tables["implementations"].records()
    assert [r["implementation"] for r in impl] == [
        "naive (five steps)",
        "tiled (PyTorch loop)",
        "SDPA, flash backend",
    ]
    assert all(r["status"] == "ok" and r["rel_error"] < 1e-5 and r["peak_bytes"] > 0 for r in impl)
    memory = m.tables["memory_by_seq_len"]
    assert memory.column("seq_len") == [6, 12, 24, 48]
    naive = memory.column("naive_peak")
    assert naive == sorted(naive) and naive[-1] > naive[0]
    fused = m.tables["traffic"].column("bytes")[2]
    assert fused < m.tables["traffic"].column("bytes")[0]
    online = m.tables["online_softmax_row"].records()
    assert [r["first_key"] for r in online] == [0, 16, 32] and online[0]["alpha"] == 0.0
    assert all(0 < r["alpha"] <= 1 for r in online[1:])
    assert 0 <= m.facts["online_growths_median"] <= 2
    assert [r["m"] for r in online] == sorted(r["m"] for r in online)  # the max never falls
    assert m.facts["online_lse"] == pytest.approx(m.facts["whole_row_lse"], abs=1e-12)
    assert "Nothing was approximated" in render.flash.online_softmax_claim(m)
    # Rendered without a crash, with the computed numbers in the prose.
    s = Sourced(m, "measured now", "x.json")
    assert "**6**" in render.flash.tile_summary(
        m
    ) and "as the tile count says" in render.flash.tile_summary(m)
    assert "naive (five steps)" in render.flash.implementations_table(s)
    assert "| 0–15 |" in render.flash.online_softmax_table(s)
    assert "slope" in render.flash.memory_claim(m)
    assert "<svg" in render.flash.memory_figure(s) and "<svg" in render.flash.tile_grid_figure(s)


def test_block_sweep_experiment():
    m = run_experiment(
        "flash_block_sweep",
        {"seq_len": 64, "num_heads": 1, "head_dim": 16, "blocks": "16,32,64"},
        device="cpu",
    )
    t = m.tables["blocks"]
    assert t.column("block") == [16, 32, 64]
    assert t.column("tiles_computed") == [10, 3, 1]
    assert t.column("scores_computed") == [10 * 256 / 4096, 3 * 1024 / 4096, 1.0]
    fused = t.column("fused_bytes")
    assert fused == sorted(fused, reverse=True)
    assert t.column("tile_working_set") == sorted(t.column("tile_working_set"))
    text = render.flash.block_claim(m)
    assert "10 → 1 tiles" in text
    assert "<svg" in render.flash.block_bytes_figure(Sourced(m, "now", "x.json"))


def test_triton_experiment_on_cpu_says_why_and_checks_the_interpreter():
    m = run_experiment("flash_triton_vs_sdpa", {"seq_len": 32, "head_dim": 16}, device="cpu")
    assert m.notes == ("the Triton kernel needs a CUDA GPU (this build ran on CPU)",)
    assert "kernels" not in m.tables
    if HAS_TRITON:
        assert m.facts["interpreter_check"] == "ok"
        assert m.facts["interpreter_rel_error_float32"] < 1e-5
        assert m.facts["interpreter_rel_error_bfloat16"] < 1e-2
    section = render.flash.triton_section(Sourced(m, "now", "x.json"))
    assert section.startswith('!!! info "Measured on CPU')
    assert "needs a CUDA GPU" in section
    assert "appears here" in render.flash.kernel_figure_or_note(Sourced(m, "now", "x.json"))


# Renderers.


def test_tile_grid_svg_is_deterministic_and_described():
    a = render.flash.tile_grid_svg(100, 32, 16, causal=True, highlight_row=1)
    assert a == render.flash.tile_grid_svg(100, 32, 16, causal=True, highlight_row=1)
    counts = tile_counts(tile_grid(100, 32, 16, causal=True))
    assert f"{counts['tiles']} tiles, {counts['computed']} computed" in a
    assert f"{counts['skipped']} skipped" in a
    assert "none skipped" in render.flash.tile_grid_svg(100, 32, 16, causal=False)


def test_kernel_table_and_claim_from_a_gpu_measurement(tiny_measurement):
    from attention_docs.profiling.device import DeviceInfo

    cols = (
        "seq_len",
        "flops",
        "triton_us",
        "sdpa_flash_us",
        "triton_tflops",
        "sdpa_flash_tflops",
        "matmul_tflops",
        "triton_pct_of_matmul",
        "sdpa_flash_pct_of_matmul",
        "status",
    )
    rows = ((1024, 1e12, 2000.0, 1000.0, 500.0, 1000.0, 800.0, 62.5, 125.0, "ok"),)
    gpu = DeviceInfo(kind="cuda", name="NVIDIA H100", capability="90")
    m = replace(
        tiny_measurement,
        provenance=replace(tiny_measurement.provenance, device=gpu),
        tables={"kernels": Table(cols, rows)},
        facts={"triton_rel_error": 1e-3},
    )
    s = Sourced(m, "from the store", "x.json")
    assert "| 1024 | 1 T | 2 ms | 1 ms | 500 | 1000 | 62% | 125% |" in render.flash.triton_section(
        s
    )
    claim = render.flash.kernel_claim(m)
    assert "**500 TFLOP/s**" in claim and "62% of the 800 TFLOP/s" in claim
    assert "<svg" in render.flash.kernel_figure_or_note(s)


def test_render_does_not_import_torch():
    code = "import sys, attention_docs.render as r; r.flash.tile_grid_svg(64, 16, 16, causal=True); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_block_sweep_rejects_unreadable_blocks():
    from attention_docs.experiments.registry import ExperimentError

    with pytest.raises(ExperimentError, match="integers separated by commas"):
        run_experiment("flash_block_sweep", {"seq_len": 16, "blocks": "16,big"}, device="cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_triton_kernel_on_cuda_matches_sdpa_flash(head_dim, causal):
    from attention_docs.attention.triton_flash import triton_flash_attention

    if not triton_available()[0]:
        pytest.skip(triton_available()[1])
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    q, k, v = make_qkv(2, 4, 1000, head_dim, dtype="bfloat16", device="cuda", seed=seed)
    out = triton_flash_attention(q, k, v, causal=causal)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        sdpa = scaled_dot_product_attention(q, k, v, is_causal=causal)
    expected, _ = reference(q[:1, :2].cpu(), k[:1, :2].cpu(), v[:1, :2].cpu(), causal)
    assert rel_err(out[:1, :2].cpu(), expected) < 1e-2, f"seed={seed}"
    assert rel_err(out, sdpa.double()) < 1e-2, f"seed={seed}"
