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

import markdown
import pytest
import torch
from conftest import ROOT, python_prints
from reference import attention_reference, rel_err
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention
from torch.profiler import profile

from attention_docs import render
from attention_docs.analytic.cost import attention_flops, step_costs
from attention_docs.analytic.tiling import (
    COMPUTED,
    DEFAULT_BLOCK,
    DIAGONAL,
    OUTSIDE_RANGES,
    SKIPPED,
    TILED_STEPS,
    computed_fraction,
    fused_traffic,
    naive_traffic,
    tile_counts,
    tile_grid,
    tiled_loop_traffic,
    tiled_step_costs,
    working_set_bytes,
)
from attention_docs.attention.tiled import tiled_attention, tiled_attention_with_lse
from attention_docs.attention.triton_flash import kernel_config, triton_available
from attention_docs.experiments.runner import run_experiment
from attention_docs.inputs import make_qkv, resolve_dtype
from attention_docs.measurements import Sourced, Table
from attention_docs.measurements import forward as fwd


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
    rows = Table.from_json(result["table"]).records()
    assert sorted({r["seq_len"] for r in rows}) == [16, 32]
    by = {(r["seq_len"], r["implementation"]): r for r in rows}
    for n in (16, 32):
        tri = by[(n, fwd.TRITON)]
        assert tri["status"] == "ok"
        assert tri["low_us"] <= tri["median_us"] <= tri["high_us"]
        assert tri["flops"] == attention_flops(1, 1, n, 16) / 2  # causal: half the FLOPs
        assert by[(n, fwd.SDPA_FLASH)]["status"] == "ok"
        # On the CPU the memory-efficient and cuDNN kernels do not exist: said, not crashed.
        assert "not available" in by[(n, fwd.SDPA_EFFICIENT)]["status"]
        assert by[(n, fwd.SDPA_EFFICIENT)]["median_us"] is None
    facts = result["facts"]
    assert facts["triton_rel_error"] < 1e-5
    assert facts["input_precision"] == "ieee"  # float32 inputs: exact products by default
    # torch's flash-implementation switch is recorded; FA3 cannot run on this machine.
    assert facts["fa3_status"] != "ok"
    assert any(n.startswith("FlashAttention-3 was not measured") for n in result["notes"])
    assert not any(r["implementation"] == "SDPA flash, FA3" for r in rows)


# The experiments, at tiny shapes.


def test_tiled_vs_naive_experiment_counts_tiles_and_compares_three_ways():
    m = run_experiment(
        "flash_tiled_vs_naive",
        {"seq_len": 48, "num_heads": 2, "head_dim": 16, "block_q": 16, "block_k": 16},
        device="cpu",
    )
    assert m.facts["tiles_computed"] == 6 and m.facts["tiles_skipped"] == 3
    assert m.facts["ops_per_forward"] > 6 * 8  # several ops per tile, and nested ones
    no_times = replace(m, experiment="forward_times", tables={"times": Table(fwd.COLUMNS, ())})
    overhead = render.flash.profiler_overhead(m, no_times)
    assert "6 tiles" not in overhead and "ATen ops" in overhead
    assert "this shape is not in forward_times' grid" in overhead
    assert m.step("tiled.scores").calls == 6
    assert (
        m.step("tiled.scores").flops
        == tiled_step_costs(1, 2, 48, 16, causal=True, block_q=16, block_k=16)[0].flops
    )
    impl = m.tables["implementations"].records()
    # Named as forward_times names them, and not timed here: that entry holds the times.
    assert [r["implementation"] for r in impl] == [fwd.NAIVE, fwd.TILED, fwd.SDPA_FLASH]
    assert "peak_bytes" in m.tables["implementations"].columns
    assert "time_us" not in m.tables["implementations"].columns and m.timing is None
    assert all(r["status"] == "ok" and r["rel_error"] < 1e-5 and r["peak_bytes"] > 0 for r in impl)
    memory = m.tables["memory_by_seq_len"]
    assert memory.column("seq_len") == [6, 12, 24, 48]
    naive = memory.column("naive_peak")
    assert naive == sorted(naive) and naive[-1] > naive[0]
    # What is live at each peak, at the shortest length, adds up to that peak.
    live = m.tables["live_at_peak"].records()
    for name, column in ((fwd.NAIVE, "naive_peak"), (fwd.TILED, "tiled_peak")):
        groups = [r for r in live if r["implementation"] == name]
        assert {r["seq_len"] for r in groups} == {6}
        assert sum(r["bytes"] for r in groups) == memory.records()[0][column], name
    assert {r["phase"] for r in live if r["implementation"] == fwd.TILED} <= {
        *TILED_STEPS,
        OUTSIDE_RANGES,
    }
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
    assert "| naive (eager) | — (this shape is not in" in render.flash.implementations_table(
        s, no_times
    )
    assert "| 0–15 |" in render.flash.online_softmax_table(s)
    assert "slope" in render.flash.memory_claim(m)
    above = [r["seq_len"] for r in memory.records() if r["tiled_peak"] > r["naive_peak"]]
    crossing = render.flash.peak_crossing_claim(m)
    if above:  # explained from what was live, not left unmentioned
        assert f"at seq_len {above[0]}" in crossing and "tensors" in crossing
    else:
        assert crossing == ""
    assert "seq_len swept 6–48" in render.flash.memory_figure(s)
    assert "<svg" in render.flash.tile_grid_figure(s)


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
    for r in t.records():  # interleaved rounds: a median inside its round range
        assert r["low_us"] <= r["time_us"] <= r["high_us"]
    assert m.facts["rounds"] == 3 and "interleaved" in m.facts["method"]
    text = render.flash.block_claim(m)
    assert "10 → 1 tiles" in text
    s = Sourced(m, "now", "x.json")
    assert "block_q = block_k swept 16–64 at seq_len=64" in render.flash.block_time_figure(s)
    assert "block_q = block_k swept 16–64" in render.flash.block_table(s)
    assert "<svg" in render.flash.block_bytes_figure(s)


def test_triton_experiment_on_cpu_says_why_and_checks_the_interpreter():
    m = run_experiment("flash_triton_vs_sdpa", {"seq_len": 32, "head_dim": 16}, device="cpu")
    assert m.notes == ("the Triton kernel needs a CUDA GPU (this build ran on CPU)",)
    assert "kernels" not in m.tables
    if HAS_TRITON:
        assert m.facts["interpreter_check"] == "ok"
        assert m.facts["interpreter_rel_error_float32"] < 1e-5
        assert m.facts["interpreter_rel_error_bfloat16"] < 1e-2
        assert m.facts["interpreter_input_precision"] == "ieee"
        assert "input precision `ieee`" in render.flash.triton_section(Sourced(m, "now", "x.json"))
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


def on_gpu(m, **changes):
    """`m` as if measured on an H100 (its device id recomputed)."""
    from attention_docs.records.device import DeviceInfo

    gpu = DeviceInfo(kind="cuda", name="NVIDIA H100", capability="90")
    return replace(m, provenance=replace(m.provenance, device=gpu, device_id=""), **changes)


def kernel_row(n, name, median, spread=0.01, flops=1e12):
    return (n, name, flops, median, median * (1 - spread), median * (1 + spread), "ok")


def gpu_kernels(tiny_measurement, rows, dtype="bfloat16"):
    from attention_docs.experiments.flash import KERNEL_COLUMNS

    return on_gpu(
        tiny_measurement,
        experiment="flash_triton_vs_sdpa",
        params={**tiny_measurement.params, "dtype": dtype},
        tables={"kernels": Table(KERNEL_COLUMNS, tuple(rows))},
        facts={"triton_rel_error": 1e-3, "input_precision": None, "kernel_config": "128×64"},
    )


def ceilings_of(m, peak=800e12):
    return replace(
        m,
        experiment="machine_ceilings",
        tables={},
        facts={
            "peak_flops_bfloat16": peak,
            "peak_flops_bfloat16_low": peak * 0.99,
            "peak_flops_bfloat16_high": peak * 1.01,
            "bandwidth_bs": 4e12,
        },
    )


def test_a_flop_rate_above_the_measured_matmul_ceiling_is_refused(tiny_measurement):
    # 1e12 FLOPs in 2 ms is 500 TFLOP/s; in 0.8 ms, 1250 TFLOP/s: 156% of an 800 TFLOP/s
    # matmul. No attention kernel outruns the matmul it is built from: the page must say
    # the measurement is suspect instead of printing a share above 100%.
    m = gpu_kernels(
        tiny_measurement,
        [kernel_row(1024, fwd.TRITON, 2000.0), kernel_row(1024, fwd.SDPA_FLASH, 800.0)],
    )
    ceilings = ceilings_of(m)
    s = Sourced(m, "from the store", "x.json")
    rates = render.flash.kernel_rate_table(s, ceilings)
    assert "500 TFLOP/s (62% of the matmul ceiling)" in rates
    assert "suspect: 1250 TFLOP/s is above the measured matmul ceiling" in rates
    assert "156%" not in rates
    claim = render.flash.kernel_claim(m, ceilings)
    assert "**Suspect measurement:** SDPA flash" in claim and "156%" not in claim
    assert 'data-fact="ceiling;' in claim  # the ceiling is machine_ceilings' marked fact
    section = render.flash.triton_section(s, ceilings)
    assert "156%" not in section and "suspect" in section
    assert "suspect" in render.flash.kernel_figure(s, ceilings)
    # Inside the ceiling's own round range it is not above the ceiling.
    assert "suspect" not in render.flash.flop_rate_text(805e12, (800e12, 808e12))
    # A ceiling measured on another device is no ceiling for this one.
    elsewhere = ceilings_of(tiny_measurement)
    assert "% of the matmul ceiling" not in render.flash.kernel_rate_table(s, elsewhere)
    assert "No matmul ceiling" in render.flash.kernel_claim(m, elsewhere)


def test_triton_against_sdpa_flash_is_a_ratio_with_its_noise(tiny_measurement):
    m = gpu_kernels(
        tiny_measurement,
        [
            kernel_row(1024, fwd.TRITON, 2000.0),
            kernel_row(1024, fwd.SDPA_FLASH, 1000.0),
            kernel_row(2048, fwd.TRITON, 1000.0, spread=0.05),
            kernel_row(2048, fwd.SDPA_FLASH, 1020.0, spread=0.05),
            (2048, fwd.SDPA_CUDNN, 1e12, None, None, None, "not available on this device"),
        ],
    )
    s = Sourced(m, "from the store", "x.json")
    rates = render.flash.kernel_rate_table(s, ceilings_of(m))
    assert "| 1024 |" in rates and "2.00× (1.96–2.04×)" in rates
    assert "within noise (0.98×)" in rates  # 2 % apart inside a ±5 % spread: a tie
    claim = render.flash.kernel_claim(m, ceilings_of(m))
    assert "within noise of each other" in claim and "faster" not in claim
    assert "tensor cores" in claim  # bfloat16: no fp32 input precision to state
    times = render.flash.kernel_table(s)
    assert "not available on this device" in times and "SDPA cudnn (ms)" in times
    fp32 = gpu_kernels(tiny_measurement, [kernel_row(1024, fwd.TRITON, 2000.0)], dtype="float32")
    fp32 = replace(fp32, facts={**fp32.facts, "input_precision": "ieee"})
    assert 'input_precision="ieee"' in render.flash.kernel_claim(fp32, None)


def test_block_claim_calls_a_difference_inside_the_noise_a_tie(tiny_measurement):
    cols = ("block", "tiles_computed", "scores_computed", "time_us", "low_us", "high_us",
            "peak_bytes", "loop_bytes", "fused_bytes", "tile_working_set", "status")  # fmt: skip

    def sweep_of(last_time):
        rows = (
            (32, 36, 0.5625, 10750.0, 10600.0, 10900.0, 464896, 1.7e7, 2887680.0, 37120, "ok"),
            (128, 3, 0.75, 3033.0, 2990.0, 3080.0, 1587200, 1.2e7, 1314816.0, 197632, "ok"),
            (256, 1, 1.0, last_time, last_time - 40, last_time + 40, 3952640, 1.4e7, 1.0e6, 526336, "ok"),
        )  # fmt: skip
        return replace(
            tiny_measurement,
            params={**tiny_measurement.params, "causal": True},
            tables={"blocks": Table(cols, rows)},
        )

    tie = render.flash.block_claim(sweep_of(3062.0))  # 1 % above the best, ranges overlap
    assert "256×256 is within noise of that best time" in tie
    assert "slower again" not in tie and "rises" not in tie and "because" not in tie
    assert "falls from **10.8 ms** to **3.03 ms**" in tie
    slower = render.flash.block_claim(sweep_of(4000.0))
    assert "At 256×256 it is slower again: 4 ms" in slower and "within noise" not in slower


def facts_in(page: str) -> list[str]:
    """The `data-fact` ids of a rendered HTML page, as a browser reads them."""
    from html.parser import HTMLParser

    found = []

    class Facts(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.extend(value for name, value in attrs if name == "data-fact")

    Facts().feed(page)
    return found


def test_forward_times_come_from_the_forward_times_entry(tiny_measurement):
    shape = fwd.Shape(1, 4, 512, 64, "float32", True)

    def row(name, median):
        return (name, 1, 4, 512, 64, "float32", True, median, median * 0.98, median * 1.02, 9, "ok")

    times = replace(
        tiny_measurement,
        experiment="forward_times",
        tables={
            "times": Table(
                fwd.COLUMNS,
                (row(fwd.NAIVE, 14000.0), row(fwd.TILED, 19500.0), row(fwd.SDPA_FLASH, 3200.0)),
            )
        },
        facts={"method": "test", "rounds": 3},
    )
    params = {**dict(zip(shape.__dataclass_fields__, vars(shape).values(), strict=True))}
    flash = replace(
        tiny_measurement,
        experiment="flash_tiled_vs_naive",
        params={**params, "block_q": 64, "block_k": 64},
        tables={
            "implementations": Table(
                ("implementation", "peak_bytes", "rel_error", "status"),
                ((fwd.NAIVE, 9e6, 1e-7, "ok"), (fwd.TILED, 1e6, 1e-7, "ok")),
            )
        },
    )
    fact_id = render.compare.forward_fact_id(times, fwd.TILED, shape)
    fid = f'data-fact="{fact_id}"'
    claim = render.flash.time_claim(flash, times)
    assert fid in claim and "19.5 ms" in claim
    assert "naive (eager) is 1.39× (1.34–1.45×) faster than tiled (Python loop)" in claim
    assert "SDPA flash is 4.38×" in claim
    assert "default 64×64" not in claim
    table = render.flash.implementations_table(Sourced(flash, "now", "x.json"), times)
    assert "9.0×" in table
    # Through Markdown's table parser the fact keeps its id: the one the prose states.
    assert fact_id in facts_in(markdown.markdown(table, extensions=["tables"]))
    assert fact_id in facts_in(markdown.markdown(claim))
    # The profile at other tiles says which tiles forward_times used.
    other = replace(flash, params={**flash.params, "block_q": 128})
    assert "default 64×64 tiles; this page's profile used 128×64" in render.flash.time_claim(
        other, times
    )
    # Another device's forward times are not this measurement's.
    gpu = on_gpu(flash)
    assert "no measurement on GPU: NVIDIA H100" in render.flash.time_claim(gpu, times)


def test_live_at_peak_pairs_allocations_with_their_frees():
    from attention_docs.experiments.flash import group_live_at_peak

    def mem(ts, nbytes, addr):
        return {"name": "[memory]", "ts": ts, "args": {"Bytes": nbytes, "Addr": addr}}

    chrome = {
        "traceEvents": [
            {"ph": "X", "cat": "user_annotation", "name": "tiled.scores", "ts": 10, "dur": 10},
            {"ph": "X", "cat": "user_annotation", "name": "tiled.accumulate", "ts": 30, "dur": 10},
            mem(1, 100, 1),  # before the ranges: the output
            mem(12, 50, 2),  # a score tile
            mem(15, 50, 3),  # its masked copy...
            mem(18, -50, 2),  # ...frees the first: peak 200 so far
            mem(32, 80, 2),  # the same address reused in accumulate: peak 280
            mem(35, -80, 2),
            mem(36, -50, 3),
        ]
    }
    assert group_live_at_peak(chrome, TILED_STEPS, "cpu") == [
        ("tiled.scores", 1, 50),
        ("tiled.accumulate", 1, 80),
        (OUTSIDE_RANGES, 1, 100),
    ]


def test_experiment_shapes_sit_on_or_off_the_forward_grid_as_their_times_require():
    """flash_tiled_vs_naive reads its times from forward_times, so its shape must be in the grid
    with the tiled loop timed; the block sweep and the kernel comparison time their own runs,
    so their shapes must not be, or the site would state one forward time twice."""
    from attention_docs.experiments.registry import get

    for kind in ("cpu", "cuda"):
        grid = fwd.GRIDS[kind]
        shapes = set(grid.shapes())
        tiled = get("flash_tiled_vs_naive").resolve({}, kind)
        assert fwd.Shape.of(tiled) in shapes and tiled["seq_len"] <= grid.tiled_max_seq_len
        assert (tiled["block_q"], tiled["block_k"]) == (DEFAULT_BLOCK, DEFAULT_BLOCK)
        blocks = get("flash_block_sweep").resolve({}, kind)
        assert fwd.Shape.of(blocks) not in shapes, kind
        kernels = get("flash_triton_vs_sdpa").resolve({}, kind)
        n = kernels["seq_len"]
        for s in sorted({max(16, n >> i) for i in range(5)}):
            assert fwd.Shape.of({**kernels, "seq_len": s}) not in shapes, (kind, s)


def test_the_default_block_is_tiled_attentions():
    import inspect

    params = inspect.signature(tiled_attention).parameters
    assert params["block_q"].default == params["block_k"].default == DEFAULT_BLOCK


def test_render_does_not_import_torch():
    code = "import sys, attention_docs.render as r; r.flash.tile_grid_svg(64, 16, 16, causal=True); print('torch' in sys.modules)"
    assert python_prints(code) == "False"


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
