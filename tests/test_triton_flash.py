# The Triton kernel's launch and its 64-bit offsets, checked on the CPU: the kernel runs under
# Triton's interpreter in a subprocess, one for the module (TRITON_INTERPRET must be set before
# the kernel module is imported: tests/interpreted.py), and the launch's checks run here.
from __future__ import annotations

import importlib.util
import json
import textwrap
from types import SimpleNamespace

import pytest
import torch
from interpreted import run_interpreted
from reference import attention_reference, rel_err

from attention_docs.attention.triton_flash import (
    MAX_GRID_Y,
    launch_grid,
    prepare_triton_flash,
)
from attention_docs.inputs import make_qkv

HAS_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")


def test_launch_grid_puts_query_tiles_first_and_respects_cudas_limit():
    assert launch_grid(2, 3, 100, 32) == (4, 6)
    assert launch_grid(1, MAX_GRID_Y, 1, 16) == (1, MAX_GRID_Y)
    with pytest.raises(ValueError, match="split the batch"):
        launch_grid(2, MAX_GRID_Y, 1, 16)


def test_prepare_checks_its_arguments_before_any_launch(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # past the availability check, on the CPU
    q, k, v = make_qkv(1, 1, 8, 16)
    with pytest.raises(ValueError, match="input_precision must be one of ieee, tf32, tf32x3"):
        prepare_triton_flash(q, k, v, input_precision="fp32")
    with pytest.raises(ValueError, match="share head_dim and dtype"):
        prepare_triton_flash(q, k.double(), v.double())


def test_prepare_says_why_it_cannot_run(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    q, k, v = make_qkv(1, 1, 8, 16)
    with pytest.raises(RuntimeError, match="cannot run"):
        prepare_triton_flash(q, k, v)


PREPARED = textwrap.dedent(
    """
    import json, sys
    import torch
    import attention_docs.attention.triton_flash as tf
    from attention_docs.inputs import make_qkv
    results = []
    for shape, kv, causal, dtype, blocks, precision, seed in json.loads(sys.argv[1]):
        q, k, v = make_qkv(*shape, kv_seq_len=kv, dtype=dtype, seed=seed)
        launch = tf.prepare_triton_flash(q, k, v, causal=causal, block_m=blocks[0],
                                         block_n=blocks[1], input_precision=precision,
                                         return_lse=True)
        saved = tf.triton_available, tf.kernel_config, tf.launch_grid
        def boom(*args, **kwargs):
            raise AssertionError("the launcher redid a check or a choice")
        tf.triton_available = tf.kernel_config = tf.launch_grid = boom
        out, lse = launch()
        again, _ = launch()
        tf.triton_available, tf.kernel_config, tf.launch_grid = saved
        results.append({"out": out.double().tolist(), "lse": lse.double().tolist(),
                        "dtype": str(out.dtype), "precision": launch.input_precision,
                        "grid": list(launch.grid), "fresh_output": again is not out,
                        "same": bool(torch.equal(out, again))})
    print(json.dumps(results))
    """
)


PREPARED_CASES = [
    ((2, 2, 37, 24), None, True, "float32", (16, 16), None),
    ((1, 2, 20, 16), 45, True, "float32", (16, 32), "ieee"),
    ((1, 1, 33, 16), None, False, "float32", (16, 16), "tf32"),
    ((1, 2, 33, 32), None, True, "bfloat16", (16, 16), "tf32"),
]


@needs_triton
def test_prepared_launcher_matches_float64_under_the_interpreter(interpreted):
    seed, cases = interpreted.seed, PREPARED_CASES
    proc = interpreted.prepared
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    expected_precision = ["ieee", "ieee", "tf32", None]  # bfloat16 ignores it: None
    for i, ((shape, kv, causal, dtype, blocks, _), r) in enumerate(
        zip(cases, results, strict=True)
    ):
        q, k, v = make_qkv(*shape, kv_seq_len=kv, dtype=dtype, seed=seed + i)
        expected, expected_lse = attention_reference(q, k, v, causal=causal, lse=True)
        where = f"{shape}, kv={kv}, causal={causal}, {dtype}, seed={seed}"
        assert r["precision"] == expected_precision[i], where
        assert r["dtype"] == str(q.dtype) and r["fresh_output"] and r["same"], where
        assert r["grid"] == [-(-shape[2] // blocks[0]), shape[0] * shape[1]], where
        # The interpreter computes "tf32" products in full float32, as "ieee".
        tol = 1e-2 if dtype == "bfloat16" else 1e-5
        assert rel_err(torch.tensor(r["out"]), expected) < tol, where
        assert rel_err(torch.tensor(r["lse"]), expected_lse) < 1e-5, where


OFFSETS = textwrap.dedent(
    """
    import json
    import torch
    import triton
    import triton.language as tl
    from attention_docs.attention._flash_kernel import head_offset, tile_offsets

    @triton.jit
    def probe(OUT, bh, num_heads, stride_b, stride_h, first_row, stride_n, stride_d):
        rows = first_row + tl.arange(0, 2)
        dims = tl.arange(0, 2)
        offsets = head_offset(bh, num_heads, stride_b, stride_h) + tile_offsets(
            rows, dims, stride_n, stride_d)
        tl.store(OUT + tl.arange(0, 2)[:, None] * 2 + tl.arange(0, 2)[None, :], offsets)

    cases = [(5, 2, 2**30, 2**29, 70000, 40000, 3), (3, 4, 7, 2**31 - 1, 2**20, 2**12, 2**20)]
    results = []
    for args in cases:
        out = torch.zeros(4, dtype=torch.int64)
        probe[(1,)](out, *args)
        results.append(out.tolist())
    print(json.dumps(results))
    """
)


@needs_triton
def test_kernel_offsets_are_64_bit(interpreted):
    """Offsets past 2³¹ elements, from int32 program ids and strides, come out exact."""
    proc = interpreted.offsets
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    cases = [(5, 2, 2**30, 2**29, 70000, 40000, 3), (3, 4, 7, 2**31 - 1, 2**20, 2**12, 2**20)]
    for (bh, heads, s_b, s_h, row, s_n, s_d), got in zip(cases, results, strict=True):
        base = (bh // heads) * s_b + (bh % heads) * s_h
        expected = [base + (row + i) * s_n + j * s_d for i in range(2) for j in range(2)]
        assert got == expected
        assert max(expected) >= 2**31  # the case would wrap in int32


HUGE_STRIDE = textwrap.dedent(
    """
    import json
    import torch
    from attention_docs.attention.triton_flash import triton_flash_attention
    # Three (batch=3, heads=1, 16, 16) float16 views of one storage whose batch stride puts
    # batch 2 at element 2**31 + 512: int32 offsets would wrap there. The storage is 4 GiB of
    # address space, but only the pages the views touch are ever written.
    stride = 2**30 + 256
    storage = torch.empty(2 * stride + 3 * 256, dtype=torch.float16)
    views = [storage.as_strided((3, 1, 16, 16), (stride, 256, 16, 1), 256 * i) for i in range(3)]
    g = torch.Generator().manual_seed(int(__import__("sys").argv[1]))
    for t in views:
        t.copy_(torch.randn(3, 1, 16, 16, generator=g).half())
    q, k, v = views
    out = triton_flash_attention(q, k, v, causal=True, block_m=16, block_n=16)
    print(json.dumps({"q": q.tolist(), "k": k.tolist(), "v": v.tolist(), "out": out.tolist()}))
    """
)


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    """The three scripts above, run under the interpreter in one new process."""
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    prepared = json.dumps([[*c, seed + i] for i, c in enumerate(PREPARED_CASES)])
    ran = run_interpreted(
        {
            "prepared": (PREPARED, [prepared]),
            "offsets": (OFFSETS, []),
            "huge_stride": (HUGE_STRIDE, [str(seed)]),
        },
        tmp_path_factory.mktemp("interpreted"),
    )
    return SimpleNamespace(seed=seed, **ran)


@needs_triton
def test_kernel_reads_a_batch_past_2_to_the_31_elements(interpreted):
    seed, proc = interpreted.seed, interpreted.huge_stride
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    q, k, v = (torch.tensor(r[n]) for n in ("q", "k", "v"))
    expected = attention_reference(q, k, v, causal=True)
    assert rel_err(torch.tensor(r["out"])[2], expected[2]) < 2e-3, f"seed={seed}"
    assert rel_err(torch.tensor(r["out"]), expected) < 2e-3, f"seed={seed}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_prepared_launcher_on_cuda_matches_float64(dtype):
    from attention_docs.attention.triton_flash import triton_available
    from attention_docs.profiling.gpu_timing import time_kernel_us

    if not triton_available()[0]:
        pytest.skip(triton_available()[1])
    seed = int(torch.randint(0, 2**31 - 1, ()).item())
    q, k, v = make_qkv(2, 4, 1000, 64, dtype=dtype, device="cuda", seed=seed)
    launch = prepare_triton_flash(q, k, v, causal=True)
    out = launch()
    expected = attention_reference(q[:1, :2].cpu(), k[:1, :2].cpu(), v[:1, :2].cpu(), causal=True)
    assert rel_err(out[:1, :2].cpu(), expected) < (1e-2 if dtype == "bfloat16" else 1e-5)
    assert launch.input_precision == ("ieee" if dtype == "float32" else None)
    assert all(t > 0 for t in time_kernel_us(launch, warmup_ms=5, rep_ms=20))
