# The FlashAttention chapter: the tiled loop against float64 and SDPA, the tile schedule and
# traffic models, the Triton kernel under Triton's interpreter (in a subprocess, because
# TRITON_INTERPRET must be set before the kernel is defined: tests/interpreted.py), the
# experiments at tiny shapes, and the renderers.
from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import textwrap
from dataclasses import replace
from types import SimpleNamespace

import markdown
import pytest
import synthetic_forward
import torch
from conftest import python_prints
from interpreted import run_interpreted
from recorded import recorded
from reference import attention_reference, rel_err
from timings import measured_in_rounds, stated
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention
from torch.profiler import profile

from attention_docs import render
from attention_docs.analytic import gpu
from attention_docs.analytic.cost import step_costs
from attention_docs.analytic.tiling import (
    COMPUTED,
    DEFAULT_BLOCK,
    DIAGONAL,
    SKIPPED,
    computed_fraction,
    fused_traffic,
    naive_traffic,
    output_rescale_flops,
    programs,
    rows_computed_fraction,
    tile_counts,
    tile_fits,
    tile_grid,
    tile_rows,
    tiled_loop_traffic,
    tiled_step_costs,
    working_set_bytes,
)
from attention_docs.attention.tiled import tiled_attention, tiled_attention_with_lse
from attention_docs.attention.triton_flash import kernel_config, triton_available
from attention_docs.experiments.runner import run_experiment
from attention_docs.findings import flash as fflash
from attention_docs.findings.facts import KERNEL, PUBLISHED, Quantity
from attention_docs.findings.forward import forward_quantity
from attention_docs.inputs import make_qkv, resolve_dtype
from attention_docs.measurements import Sourced, Table
from attention_docs.measurements import forward as fwd
from attention_docs.records.timing import Timing
from attention_docs.render import words


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
        # Computed from the upcast inputs. An absolute floor too: an lse near zero (one key, a
        # few features) has float32 rounding of its O(1) terms, not of itself.
        torch.testing.assert_close(lse.double(), expected_lse, rtol=1e-6, atol=1e-6, msg=where)
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
    with pytest.raises(ValueError, match="share head_dim"):
        tiled_attention(q, k[..., :2], v[..., :2])


# The tile schedule and the traffic models.


def test_tile_grid_counts_the_causal_triangle():
    grid = tile_grid(512, 64, 64, causal=True)
    assert tile_counts(grid) == {"tiles": 64, "computed": 36, "diagonal": 8, "skipped": 28}
    assert [t.state for t in grid[0][:2]] == [DIAGONAL, SKIPPED]
    assert grid[7][0].state == COMPUTED
    assert tile_counts(tile_grid(512, 64, 64, causal=False))["skipped"] == 0


@pytest.mark.parametrize("causal", [True, False])
def test_tile_rows_count_what_tile_grid_lists(causal):
    """The forecasts count long sequences row by row; every count must be the listed grid's,
    lengths that are not multiples of the blocks and more keys than queries included."""
    for n in (1, 7, 50, 64, 100):
        for kv in (None, n + 13, n + 64):
            for bq, bk in ((16, 12), (64, 64), (30, 7), (128, 64)):
                grid = tile_grid(n, bq, bk, causal=causal, kv_seq_len=kv)
                rows = tile_rows(n, bq, bk, causal=causal, kv_seq_len=kv)
                tiles, computed = sum(r.tiles for r in rows), sum(r.visited for r in rows)
                assert {
                    "tiles": tiles,
                    "computed": computed,
                    "diagonal": sum(r.diagonal for r in rows),
                    "skipped": tiles - computed,
                } == tile_counts(grid), (n, kv, bq, bk)
                assert rows_computed_fraction(rows) == pytest.approx(computed_fraction(grid))
                assert [r.width for r in rows] == [
                    sum(t.cols for t in row if t.state != SKIPPED) for row in grid
                ]
    with pytest.raises(ValueError, match="block_k must be at least 1"):
        tile_rows(8, 4, 0, causal=causal)


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


INTERPRETED_CASES = [
    ((1, 2, 37, 24), None, False, "float32", (16, 16)),
    ((1, 2, 37, 24), None, True, "float32", (16, 32)),
    ((2, 1, 20, 16), 45, True, "float32", (16, 16)),
    ((1, 2, 33, 32), None, True, "bfloat16", (16, 16)),
    ((1, 1, 48, 16), None, False, "bfloat16", (32, 16)),
]
# The GPU experiment's code path, at tiny shapes.
COMPARISON = textwrap.dedent(
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


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    """The kernel's checks and the GPU comparison, under the interpreter in one new process."""
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    payload = json.dumps([[*c, seed + i] for i, c in enumerate(INTERPRETED_CASES)])
    ran = run_interpreted(
        {"kernel": (INTERPRETED, [payload]), "comparison": (COMPARISON, [])},
        tmp_path_factory.mktemp("interpreted"),
    )
    return SimpleNamespace(seed=seed, **ran)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_triton_kernel_matches_float64_under_the_interpreter(interpreted):
    seed, cases, proc = interpreted.seed, INTERPRETED_CASES, interpreted.kernel
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
def test_gpu_comparison_code_runs_under_the_interpreter(interpreted):
    """The GPU experiment's code path, run on the CPU through the interpreter at tiny shapes."""
    proc = interpreted.comparison
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = Table.from_json(result["table"]).records()
    assert sorted({r["seq_len"] for r in rows}) == [16, 32]
    by = {(r["seq_len"], r["implementation"]): r for r in rows}
    for n in (16, 32):
        tri = by[(n, fwd.TRITON)]
        assert tri["status"] == "ok"
        t = tri["time"]  # a Timing cell, every round kept
        assert isinstance(t, Timing) and t.low_us <= t.time_us <= t.high_us
        assert tri["flops"] == 4 * 16 * n * (n + 1) / 2  # causal: the visible pairs only
        assert by[(n, fwd.SDPA_FLASH)]["status"] == "ok"
        # On the CPU the memory-efficient and cuDNN kernels do not exist: said, not crashed.
        assert "not available" in by[(n, fwd.SDPA_EFFICIENT)]["status"]
        assert by[(n, fwd.SDPA_EFFICIENT)]["time"] is None
    facts = result["facts"]
    assert facts["triton_rel_error"] < 1e-5
    assert facts["input_precision"] == "ieee"  # float32 inputs: exact products by default
    # torch's flash-implementation switch is recorded; FA3 cannot run on this machine.
    assert facts["fa3_status"] != "ok"
    assert any(n.startswith("FlashAttention-3 was not measured") for n in result["notes"])
    assert not any(r["implementation"] == "SDPA flash, FA3" for r in rows)


# The experiments, at tiny shapes: what they record (no assertion on a timing's value).


def test_tiled_vs_naive_experiment_counts_tiles_and_compares_three_ways():
    m = run_experiment(
        "flash_tiled_vs_naive",
        {"seq_len": 48, "num_heads": 2, "head_dim": 16, "block_q": 16, "block_k": 16},
        device_setting="cpu",
    )
    assert m.facts["tiles_computed"] == 6 and m.facts["tiles_skipped"] == 3
    assert m.facts["ops_per_forward"] > 6 * 8  # several ops per tile, and nested ones
    assert m.step("tiled.scores").calls == 6
    assert (
        m.step("tiled.scores").flops
        == tiled_step_costs(1, 2, 48, 16, causal=True, block_q=16, block_k=16)[0].flops
    )
    impl = m.tables["implementations"].records()
    # Named as forward_times names them, and not timed here: that entry holds the times.
    assert [r["implementation"] for r in impl] == [fwd.NAIVE, fwd.TILED, fwd.SDPA_FLASH]
    assert "time_us" not in m.tables["implementations"].columns and m.timing is None
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


def test_block_sweep_experiment_keeps_every_round():
    m = run_experiment(
        "flash_block_sweep",
        {"seq_len": 64, "num_heads": 1, "head_dim": 16, "blocks": "16,32,64"},
        device_setting="cpu",
    )
    t = m.tables["blocks"]
    assert t.column("block") == [16, 32, 64]
    assert t.column("tiles_computed") == [10, 3, 1]
    assert t.column("scores_computed") == [10 * 256 / 4096, 3 * 1024 / 4096, 1.0]
    fused = t.column("fused_bytes")
    assert fused == sorted(fused, reverse=True)
    assert t.column("tile_working_set") == sorted(t.column("tile_working_set"))
    for timing in t.column("time"):  # a Timing cell with its rounds, not rebuilt columns
        assert isinstance(timing, Timing) and measured_in_rounds(timing)
    assert "interleaved" in m.facts["method"]


def test_block_sweep_rejects_unreadable_blocks():
    from attention_docs.experiments.registry import ExperimentError

    with pytest.raises(ExperimentError, match="integers separated by commas"):
        run_experiment(
            "flash_block_sweep", {"seq_len": 16, "blocks": "16,big"}, device_setting="cpu"
        )


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_triton_experiment_on_cpu_checks_the_kernel_under_the_interpreter():
    m = run_experiment(
        "flash_triton_vs_sdpa", {"seq_len": 32, "head_dim": 16}, device_setting="cpu"
    )
    assert m.notes == ("the Triton kernel needs a CUDA GPU (this build ran on CPU)",)
    assert "kernels" not in m.tables and m.facts["interpreter_check"] == "ok"
    rows = {r["dtype"]: r for r in m.tables["interpreter"].records()}
    assert set(rows) == {"float32", "bfloat16"}
    assert rows["float32"]["triton_vs_float64"] < 1e-5
    assert rows["float32"]["sdpa_flash_vs_float64"] < 1e-5
    assert rows["float32"]["triton_vs_sdpa_flash"] < 1e-5
    assert rows["bfloat16"]["triton_vs_float64"] < 1e-2


def test_triton_experiment_without_triton_says_so(monkeypatch):
    import attention_docs.experiments.flash as flash_experiments

    monkeypatch.setattr(flash_experiments.importlib.util, "find_spec", lambda name: None)
    obs = flash_experiments.interpreter_check(1, 1, 16, 16, True)
    assert obs.facts["interpreter_check"] == "not run: triton is not installed"
    assert "interpreter" not in obs.tables


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


# FlashAttention 2 and 3, counted on the tile grid.


def test_programs_fa1_per_head_fa2_per_query_tile():
    assert programs(4, 16, 4096) == 64
    assert programs(4, 16, 4096, 128) == 64 * 32
    assert programs(1, 1, 100, 64) == 2  # a ragged last tile is a program too


def test_output_rescale_flops_by_hand():
    # N=4, D=2, 2×2 tiles, causal: query tile 0 visits 1 key tile, tile 1 visits 2: three
    # visited tiles of 2 rows. FA1: 4 FLOPs per output element per visited tile = 4·2·6;
    # FA2: 2 per element per visited tile + one division per element = 2·2·6 + 2·4.
    r = output_rescale_flops(1, 1, 4, 2, causal=True, block_q=2, block_k=2)
    assert (r.fa1, r.fa2, r.saved) == (48.0, 32.0, 16.0)
    full = output_rescale_flops(2, 3, 4, 2, causal=False, block_q=2, block_k=2)
    assert full.fa1 == 6 * 4 * 2 * 8 and full.fa2 == 6 * (2 * 2 * 8 + 2 * 4)


def test_tile_fits_against_shared_memory():
    fits = {(t.block_q, t.block_k): t for t in tile_fits(227 * 1024, 128, "bfloat16")}
    assert fits[(128, 128)].fits and not fits[(256, 128)].fits
    assert fits[(128, 64)].working_set == working_set_bytes(128, 64, 128, "bfloat16")
    # 256×128 tiles fit shared memory: it is the score tile and accumulator, which FA2/FA3
    # keep in registers, that pass the block's 64 K 32-bit registers.
    tall = fits[(256, 128)]
    assert tall.shared == (256 + 2 * 128) * 128 * 2 <= 227 * 1024
    assert tall.registers == 4 * (256 * 128 + 256 * 128 + 2 * 256) > 4 * 64 * 1024
    # Only q, k and v take shared memory: 128×128 tiles fit 100 KiB, though all of a
    # program's bytes together would not.
    small = {(t.block_q, t.block_k): t for t in tile_fits(100 * 1024, 128, "bfloat16")}
    assert small[(128, 128)].fits and small[(128, 128)].working_set > 100 * 1024
    with pytest.raises(ValueError, match="capacity_bytes must be positive"):
        tile_fits(0, 128, "bfloat16")


def test_generations_are_counted_for_the_forecast_gpu():
    g = fflash.generations()
    s = gpu.FORECAST_SHAPE
    assert gpu.sheet().slug == gpu.FORECAST_GPU
    assert all(f.quantity.shape == s for f in (*g.programs, *g.rescale_us, g.tiles, g.matmul_us))
    assert [f.value for f in g.programs] == [
        programs(s.batch_size, s.num_heads, s.seq_len),
        programs(s.batch_size, s.num_heads, s.seq_len, gpu.FLASH_BLOCK_Q),
    ]
    assert g.per_sm[1].value == g.programs[1].value / gpu.sheet().sm_count
    assert g.per_sm[0].value < 1 < g.per_sm[1].value  # FA1 leaves SMs idle at this shape
    r = output_rescale_flops(*s.dims, causal=True, block_q=128, block_k=64)
    assert (g.rescale_flops[0].value, g.rescale_flops[1].value) == (r.fa1, r.fa2)
    assert g.rescale_us[1].value == pytest.approx(r.fa2 / gpu.vector_peak(gpu.sheet()) * 1e6)
    counts = tile_counts(tile_grid(s.seq_len, 128, 64, causal=True))
    assert (g.tiles.value, g.skipped.value) == (counts["tiles"], counts["skipped"])
    assert g.matmul_us.value == pytest.approx(gpu.flash_forward(gpu.sheet()).compute_us)
    assert all(f.quantity.device_id == "spec:h200" for f in (*g.per_sm, *g.rescale_us))


def test_tiles_and_bytes_for_the_forecast_gpu():
    t = fflash.tiles()
    assert t.capacity.value == gpu.sheet().shared_memory_per_block_kb * 1024
    assert t.register_capacity.value == 4 * 64 * 1024
    assert [fit.fits for fit, *_ in t.rows] == [
        shared.value <= t.capacity.value and registers.value <= t.register_capacity.value
        for _, shared, registers, *_ in t.rows
    ]
    naive = fflash.naive_bytes().value
    assert naive == sum(k.bytes for k in gpu.naive_steps(gpu.sheet()))
    traffic = [moved.value for *_, moved, _ in t.rows]
    assert traffic == sorted(traffic, reverse=True)  # taller tiles re-read k and v less
    assert all(fewer.value == pytest.approx(naive / moved.value) for *_, moved, fewer in t.rows)


def forward_entry(device_id_of, rows, *, base):
    """A forward_times measurement with `rows` ((implementation, shape, median), ...), each
    median's rounds 2% either side of it."""
    rows = [synthetic_forward.row(n, s, t, t * 0.98, t * 1.02) for n, s, t in rows]
    return device_id_of(synthetic_forward.forward_times(base, rows))


def as_device(m, kind, name, capability=None):
    from attention_docs.records.device import DeviceInfo

    info = DeviceInfo(kind=kind, name=name, capability=capability)
    return replace(m, provenance=replace(m.provenance, device=info, device_id=""))


def test_the_gpu_forecast_box_sets_a_stored_h200_entry_beside_its_forecast():
    base = recorded("flash_tiled_vs_naive")
    s = gpu.FORECAST_SHAPE
    cpu_only = fflash.gpu_forecast([base])
    assert cpu_only.floor.measured is None and cpu_only.floor.forecast.value == pytest.approx(
        gpu.flash_forward(gpu.sheet()).floor_us
    )
    # The headline time is the realistic range, never the floor at one published share.
    r = gpu.flash_range(gpu.sheet(), s)
    realistic = cpu_only.floor.realistic
    assert (realistic.low, realistic.high) == (r.low_us, r.high_us)
    # The L2 assumption is stated beside the ratio before any L2 reuse, which is smaller.
    assert cpu_only.l2_serves_rereads
    assert "L2" in cpu_only.fewer_bytes.forecast.quantity.detail
    assert 1 < cpu_only.fewer_bytes_from_hbm.forecast.value < cpu_only.fewer_bytes.forecast.value
    h200 = forward_entry(
        lambda m: as_device(m, "cuda", "NVIDIA H200", "90"),
        [(fwd.SDPA_FLASH, s, 600.0), (fwd.TRITON, s, 900.0)],
        base=base,
    )
    assert h200.device_id == "cuda-h200"
    found = fflash.gpu_forecast([base, h200])
    assert found.floor.measured.value == 600.0
    assert found.floor.ratio == pytest.approx(600.0 / found.floor.forecast.value)
    assert found.triton_floor.measured.value == 900.0
    assert found.naive_bytes.measured is None  # bytes are modelled: no counter measured them
    box = render.flash.gpu_forecast_box(
        [Sourced(base, "now", "x.json"), Sourced(h200, "from the store", "y.json")]
    )
    assert "Measured on the NVIDIA H200" in box and "Measured ÷ forecast" in box
    assert box.count("not in the store") == 4  # the four byte rows (the range is its floor's)
    other = forward_entry(
        lambda m: as_device(m, "cuda", "NVIDIA H100 80GB HBM3", "90"),
        [(fwd.SDPA_FLASH, s, 600.0)],
        base=base,
    )
    assert fflash.gpu_forecast([base, other]).floor.measured is None  # another GPU checks nothing
    assert "Measured on" not in render.flash.gpu_forecast_box([Sourced(other, "x", "y.json")])


def test_published_figures_are_cited_facts_and_ranges_read_as_ranges():
    for key in ("fa1-a100-share", "fa2-a100-share", "fa2-h100-share", "fa3-fp16", "fa3-fp8"):
        f = fflash.cited(key)
        assert f.quantity.clock == PUBLISHED and f.quantity.device_id.startswith("paper:")
    text = render.flash.fa2_papers()
    assert (
        ">50–73%</span>" in text and ">25–40%</span>" in text and "arxiv.org/abs/2307.08691" in text
    )
    three = render.flash.fa3_papers()
    assert ">740 TFLOP/s</span>" in three and ">75%</span>" in three and ">1.5–2×</span>" in three
    assert "arxiv.org/abs/2407.08608" in three
    # Each figure is the reference dataset's constant, not a number typed in findings/.
    from attention_docs.records.published import dataset

    c = dataset().constant("fa2-a100-share")
    fa2 = fflash.cited("fa2-a100-share")
    assert (fa2.low, fa2.high) == (c.low, c.high)
    assert fflash.cited("fa3-fp16").value == dataset().constant("fa3-fp16").value
    assert "[Dao, 2023](https://arxiv.org/abs/2307.08691)" in text


def test_relative_errors_are_said_without_exponent_notation():
    assert words.relative_error(2.617e-7) == "2.6 × 10⁻⁷"
    assert words.relative_error(9.97e-8) == "1 × 10⁻⁷"
    assert words.relative_error(0.0042) == "0.0042"
    assert "e-" not in words.relative_error(1.2e-12)


# Renderers, on recorded and synthetic measurements.


def cpu_times(base, rows):
    return forward_entry(lambda m: m, rows, base=base)


def test_the_finding_states_memory_time_and_the_forecast_as_facts():
    flash = recorded("flash_tiled_vs_naive")
    shape = fwd.Shape.of(flash.params)
    times = cpu_times(
        flash, [(fwd.NAIVE, shape, 14000.0), (fwd.TILED, shape, 19500.0), (fwd.SDPA_FLASH, shape, 3200.0)]
    )  # fmt: skip
    s = Sourced(flash, "from the store", "x.json")
    text = render.flash.finding(s, Sourced(times, "x", "y.json"))
    claim, caption = text.split('<p class="ad-caption">')
    # One claim in two numbers, the peaks; the ratio and the times go in the caption.
    assert claim.count('class="ad-fact"') == 2 and "peak memory from" in claim
    assert len(re.findall(r"[.!?](?=\s+[A-Z]|\s*$)", re.sub(r"<[^>]+>", "", claim))) == 1
    ids = facts_in(markdown.markdown(caption))
    assert any(i.startswith("peak memory ratio;") for i in ids)
    assert "naive (eager) is 1.39× (1.34–1.45×) faster than tiled (Python loop)" in caption
    assert "SDPA flash is 4.38×" in caption and "raw data (JSON)" in caption
    # Another device's forward times are not this measurement's: no speed is claimed.
    elsewhere = as_device(times, "cuda", "NVIDIA H200", "90")
    other = render.flash.finding(s, Sourced(elsewhere, "x", "y.json"))
    assert "faster" not in other and "peak memory" in other


def test_implementations_table_reads_times_from_forward_times():
    flash = recorded("flash_tiled_vs_naive")
    shape = fwd.Shape.of(flash.params)
    times = cpu_times(flash, [(fwd.NAIVE, shape, 14000.0), (fwd.TILED, shape, 19500.0)])
    table = render.flash.implementations_table(Sourced(flash, "x", "x.json"), times)
    fid = forward_quantity(times, fwd.TILED, shape).id
    assert fid in facts_in(markdown.markdown(table, extensions=["tables"]))
    assert "19.5 ms (19.1–19.9 ms)" in table
    # Useful FLOPs (the causal mask's visible pairs) over the unprofiled time, 19.5 ms.
    rate = fflash.useful_flops(shape) / 19.5e-3
    assert words.per_second(rate, "FLOP") in table
    assert "— (not in forward_times' grid)" in table  # SDPA flash has no row here
    assert "× 10⁻" in table and "e-0" not in table  # errors without exponent notation


def test_block_table_and_claim_rank_within_the_noise():
    m = recorded("flash_block_sweep")

    def sweep_of(times):
        rows = tuple(
            (*r[:3], stated(t, t - 40, t + 40), *r[4:])
            for r, t in zip(m.tables["blocks"].rows, times, strict=False)
        )
        return replace(m, tables={"blocks": Table(m.tables["blocks"].columns, rows)})

    n = len(m.tables["blocks"].rows)
    tie = sweep_of([10750.0, 3033.0, *([3062.0] * (n - 2))])
    claim = render.flash.block_claim(tie)
    blocks = tie.tables["blocks"].column("block")
    # A leader within noise of others is never called "fastest" (findings/rank: a tie).
    assert f"lowest time is with {blocks[1]}×{blocks[1]} tiles" in claim
    assert "(tied for fastest)" in claim and "is fastest" not in claim
    assert "within noise of it" in claim and "faster" not in claim
    clear = sweep_of([10750.0, 3033.0, *([4000.0 + 100 * i for i in range(n - 2)])])
    clear_claim = render.flash.block_claim(clear)
    assert "within noise" not in clear_claim
    assert f"The loop is fastest with {blocks[1]}×{blocks[1]} tiles" in clear_claim
    table = render.flash.block_table(Sourced(tie, "x", "x.json"))
    assert "(tied for fastest: within noise)" in table and "10.8 ms (10.7–10.8 ms)" in table
    # A clear leader is the fastest, and no "within noise" is said of it.
    alone = render.flash.block_table(Sourced(clear, "x", "x.json"))
    assert alone.count("(fastest)") == 1 and "within noise" not in alone


def test_triton_section_on_cpu_shows_the_interpreter_check():
    m = recorded("flash_triton_vs_sdpa")
    section = render.flash.triton_section(Sourced(m, "x", "x.json"))
    if HAS_TRITON or "interpreter" in m.tables:
        assert "Triton (interpreted) vs float64" in section and "× 10⁻" in section
    missing = replace(m, tables={}, facts={"interpreter_check": "not run: triton is not installed"})
    text = render.flash.triton_section(Sourced(missing, "x", "x.json"))
    assert text.startswith('!!! info "Measured on CPU') and "not installed" in text


def on_gpu(m, **changes):
    """`m` as if measured on an H100 (its device id recomputed)."""
    return replace(as_device(m, "cuda", "NVIDIA H100 80GB HBM3", "90"), **changes)


def kernel_row(n, name, median, spread=0.01, flops=1e12):
    t = stated(median, median * (1 - spread), median * (1 + spread))
    return (n, name, flops, t, "ok")


def gpu_kernels(base, rows, dtype="bfloat16"):
    from attention_docs.experiments.flash import KERNEL_COLUMNS

    return on_gpu(
        base,
        experiment="flash_triton_vs_sdpa",
        params={**base.params, "dtype": dtype},
        tables={"kernels": Table(KERNEL_COLUMNS, tuple(rows))},
        facts={
            "fa3_status": "not offered",
            "flash_impls_offered": ["FA2"],
            "triton_rel_error": 0.0031,
            "kernel_config": "128×64 tiles, 4 warps, 3 stages",
        },
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
        },
    )


def test_a_flop_rate_above_the_measured_matmul_ceiling_is_refused():
    # 1e12 FLOPs in 2 ms is 500 TFLOP/s; in 0.8 ms, 1,250 TFLOP/s: above an 800 TFLOP/s
    # matmul. No attention kernel outruns the matmul it is built from: suspect, no share.
    base = recorded("flash_triton_vs_sdpa")
    m = gpu_kernels(
        base, [kernel_row(1024, fwd.TRITON, 2000.0), kernel_row(2048, fwd.TRITON, 800.0)]
    )
    found = {k.seq_len: k for k in fflash.kernels(m, ceilings_of(m)).rows}
    assert found[1024].share.value == pytest.approx(500 / 800) and not found[1024].suspect
    assert found[2048].suspect and found[2048].share is None
    table = render.flash.kernel_table(Sourced(m, "x", "x.json"), ceilings_of(m))
    assert "62.5%" in table and "suspect: above the measured matmul ceiling" in table
    assert "156%" not in table
    # Inside the ceiling's own round range is not above it.
    edge = gpu_kernels(base, [kernel_row(1024, fwd.TRITON, 1e12 / 805e12 * 1e6)])
    assert not fflash.kernels(edge, ceilings_of(edge)).rows[0].suspect
    # A ceiling measured on another device is no ceiling for this one.
    assert fflash.kernels(m, ceilings_of(base)).rows[0].share is None


def test_triton_against_sdpa_flash_is_a_ratio_with_its_noise():
    base = recorded("flash_triton_vs_sdpa")
    m = gpu_kernels(
        base,
        [
            kernel_row(1024, fwd.TRITON, 2000.0),
            kernel_row(1024, fwd.SDPA_FLASH, 1000.0),
            kernel_row(2048, fwd.TRITON, 1000.0, spread=0.05),
            kernel_row(2048, fwd.SDPA_FLASH, 1020.0, spread=0.05),
            (2048, fwd.SDPA_CUDNN, 1e12, None, "not available on this device"),
        ],
    )
    at = {k.seq_len: k for k in fflash.kernels(m, None).rows}
    assert at[2048].versus_sdpa.comparison.tie and not at[1024].versus_sdpa.comparison.tie
    table = render.flash.triton_section(Sourced(m, "x", "x.json"), ceilings_of(m))
    assert "2× (1.96–2.04×)" in table and "within noise (0.98×)" in table
    assert "not available on this device" in table and "SDPA cudnn (kernel time)" in table
    assert "FlashAttention-3 was not measured: not offered" in table
    assert "(128×64 tiles, 4 warps, 3 stages) differs from a float64 reference" in table
    assert ">0.0031</span>" in table
    # The kernel sweep is a view (findings/flash.KERNELS): its facts are the kernel times the
    # table states, it ranks the kernels at each length with ties, and it draws them banded.
    text = re.sub(r"<[^>]+>", "", table)
    assert (
        "SDPA flash is fastest at sequence length 1,024 tokens; SDPA flash and Triton (this"
        " site's kernel) are within noise of each other, tied for fastest at sequence length"
        " 2,048 tokens." in text
    )
    assert "each band is the range over the rounds" in table
    assert "as long as" not in text  # the table's ratio column says it: no second id for it
    shape = fwd.Shape.of({**m.params, "seq_len": 2048})
    q = Quantity("kernel time", fwd.TRITON, m.device_id, KERNEL, shape, "L2 flushed")
    assert at[2048].times[fwd.TRITON].id == q.id and f'data-fact="{q.id}"' in html.unescape(table)
    assert at[2048].times[fwd.SDPA_CUDNN] == "not available on this device"


def facts_in(page: str) -> list[str]:
    """The `data-fact` ids of a rendered HTML page, as a browser reads them (unescaped)."""
    return [html.unescape(i) for i in re.findall(r'data-fact="([^"]*)"', page)]


def test_every_table_number_of_the_page_is_a_fact():
    """The renderers' tables, through Markdown, mark every number with a unit."""
    import site_facts

    flash, blocks = recorded("flash_tiled_vs_naive"), recorded("flash_block_sweep")
    shape = fwd.Shape.of(flash.params)
    times = cpu_times(flash, [(fwd.NAIVE, shape, 14000.0), (fwd.TILED, shape, 19500.0),
                              (fwd.SDPA_FLASH, shape, 3200.0)])  # fmt: skip
    s, b = Sourced(flash, "x", "x.json"), Sourced(blocks, "x", "y.json")
    parts = [
        render.flash.implementations_table(s, times),
        render.flash.phase_table(s),
        render.flash.traffic_table(s, times),
        render.flash.block_table(b),
        render.flash.block_claim(blocks),
        render.flash.generations_table(),
        render.flash.causal_claim(),
        render.flash.tiles_table(),
        render.flash.gpu_forecast_box([Sourced(times, "x", "y.json")]),
        render.flash.fa2_papers(),
        render.flash.fa3_papers(),
        render.flash.memory_claim(flash),
        render.flash.tile_summary(flash),
    ]
    page = markdown.markdown("\n\n".join(parts), extensions=["tables", "admonition"])
    found = site_facts.read_page(f"<article>{page}</article>")
    assert found.unmarked == [] and len(found.marked) > 40


def test_tile_grid_svg_is_deterministic_and_described():
    a = render.flash.tile_grid_svg(100, 32, 16, causal=True, highlight_row=1)
    assert a == render.flash.tile_grid_svg(100, 32, 16, causal=True, highlight_row=1)
    counts = tile_counts(tile_grid(100, 32, 16, causal=True))
    assert f"{counts['tiles']} tiles, {counts['computed']} computed" in a
    assert f"{counts['skipped']} skipped" in a
    assert "none skipped" in render.flash.tile_grid_svg(100, 32, 16, causal=False)


def test_recorded_renderers_state_the_online_softmax_and_tiles():
    flash = recorded("flash_tiled_vs_naive")
    s = Sourced(flash, "x", "x.json")
    assert "Nothing was approximated" in render.flash.online_softmax_claim(flash)
    assert "| 0–63 |" in render.flash.online_softmax_table(s)
    summary = render.flash.tile_summary(flash)
    assert f"**{flash.facts['tiles_skipped']}**" in summary and "as the grid says" in summary
    assert "slope" in render.flash.memory_claim(flash)
    assert "<svg" in render.flash.tile_grid_figure(s) and "<svg" in render.flash.memory_figure(s)


def test_render_does_not_import_torch():
    code = "import sys, attention_docs.render as r; r.flash.tile_grid_svg(64, 16, 16, causal=True); print('torch' in sys.modules)"
    assert python_prints(code) == "False"


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
