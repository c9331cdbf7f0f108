"""`python -m attention_docs forecast` against NVIDIA's published cuDNN SDPA forwards on an H200
and its decode and prefill calls on an A100 (docs/assets/cited/cudnn-frontend/), on a decode
step, and on bad input. CPU only."""

import csv
import json
import re

import pytest
from conftest import ROOT
from test_cli import cli

CITED = ROOT / "docs/assets/cited/cudnn-frontend"
H200_TRAINING = CITED / "training_llama3.1_h200.csv"
KEYS = {"gpu", "impl", "shape", "model", "recording", "floor_us", "low_us", "high_us", "bound"}
KEYS |= {"sources", "memory_bytes", "kernels"}
SHAPE_KEYS = {"batch_size", "num_heads", "num_kv_heads", "seq_len", "kv_len", "head_dim"}
SHAPE_KEYS |= {"dtype", "causal"}
KERNEL_KEYS = {"label", "op", "flops", "bytes", "floor_us", "bound"}
DECODE = ["--gpu", "h200", "--batch-size", "1", "--num-heads", "64", "--num-kv-heads", "8"]
DECODE += ["--seq-len", "1", "--kv-len", "8192", "--head-dim", "128"]


def forecast(*flags) -> dict:
    ran = cli("forecast", "--json", *flags)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def _bf16_forwards() -> list[dict]:
    with H200_TRAINING.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["data_type"] == "bfloat16"]
    assert len(rows) == 10 and {r["gpu_name"] for r in rows} == {"NVIDIA H200"}
    return rows


def _flags(row: dict, impl: str) -> list[str]:
    assert row["head_dim_qk"] == row["head_dim_vo"] and row["attn_mask"] in ("top_left", "no_mask")
    flags = ["--gpu", "h200", "--impl", impl, "--dtype", "bfloat16"]
    for flag, column in (
        ("--batch-size", "batch_size"),
        ("--num-heads", "num_q_heads"),
        ("--num-kv-heads", "num_kv_heads"),
        ("--seq-len", "q_seqlen"),
        ("--kv-len", "kv_seqlen"),
        ("--head-dim", "head_dim_qk"),
    ):
        flags += [flag, row[column]]
    # As many keys as queries: top-left and bottom-right causal masks are the same mask.
    return flags + (["--causal"] if row["attn_mask"] == "top_left" else [])


def test_json_keys():
    found = forecast(*DECODE, "--impl", "sdpa-flash")
    assert set(found) == KEYS and set(found["shape"]) == SHAPE_KEYS
    assert all(set(k) == KERNEL_KEYS for k in found["kernels"])
    assert found["gpu"] == "h200" and found["impl"] == "sdpa-flash"
    assert found["floor_us"] <= found["low_us"] <= found["high_us"]


@pytest.mark.parametrize("row", _bf16_forwards(), ids=lambda r: f"{r['q_seqlen']}-{r['attn_mask']}")
@pytest.mark.parametrize("impl", ["sdpa-cudnn", "sdpa-flash"])
def test_published_h200_forwards_lie_above_the_floor(row, impl):
    found = forecast(*_flags(row, impl))
    assert found["model"] == "fused forward" and found["bound"] == "compute"
    assert found["shape"]["causal"] == (row["attn_mask"] == "top_left")
    assert float(row["fwd_time_ms"]) * 1e3 > found["floor_us"]


def test_published_h200_forwards_lie_inside_cudnns_realistic_range():
    # cuDNN's Hopper kernels are held to the efficiencies of their generation (35-75%).
    from attention_docs.analytic.gpu import sheet
    from attention_docs.findings.gpu_forecast import SDPA_CUDNN
    from attention_docs.findings.gpu_forecast import forecast as model

    for row in _bf16_forwards():
        f = model(sheet("h200"), SDPA_CUDNN, _shape(row, "q_seqlen", "kv_seqlen"))
        f = f.range
        assert f.low_us <= float(row["fwd_time_ms"]) * 1e3 <= f.high_us, row


def _shape(row: dict, queries: str, keys: str, causal: bool | None = None):
    from attention_docs.records.shape import Shape

    return Shape(
        int(row["batch_size"]),
        int(row["num_q_heads"]),
        int(row[queries]),
        int(row["head_dim_qk"]),
        "bfloat16",
        row.get("attn_mask") == "top_left" if causal is None else causal,
        int(row["num_kv_heads"]),
        int(row[keys]),
    )


@pytest.mark.parametrize("sweep", ["decode", "prefill"])
def test_published_a100_calls_lie_above_the_floor(sweep):
    """A GPU and shapes the model was not built on: cuDNN's decode steps (one to four query
    tokens, batch 1-128) and causal prefills on an A100 80GB PCIe, bfloat16 throughout."""
    from attention_docs.analytic.gpu import sheet
    from attention_docs.findings.gpu_forecast import SDPA_CUDNN
    from attention_docs.findings.gpu_forecast import forecast as model

    with (CITED / f"{sweep}_sweep_a100.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["kv_cache_dtype"] == "bfloat16"]
    assert len(rows) > 100 and {r["gpu_name"] for r in rows} == {"NVIDIA A100 80GB PCIe"}
    for row in rows:
        assert row["success"] == "True" and row["head_dim_qk"] == row["head_dim_vo"]
        # Decode with speculative tokens (q_tokens 2-4) is causal, aligned bottom-right.
        shape = _shape(row, "q_tokens", "kv_len", causal=row["q_tokens"] != "1")
        found = model(sheet("a100-pcie-80gb"), SDPA_CUDNN, shape)
        assert found.model == ("decode step" if row["q_tokens"] == "1" else "fused forward")
        assert float(row["time_ms"]) * 1e3 > found.range.floor_us, row


def test_cudnn_is_said_to_be_forecast_as_flash():
    row = _bf16_forwards()[0]
    ran = cli("forecast", *_flags(row, "sdpa-cudnn"))
    assert ran.returncode == 0, ran.stderr
    assert "forecast as a fused kernel like FlashAttention" in ran.stdout
    assert "| flash forward |" in ran.stdout and "compute-bound" in ran.stdout


@pytest.mark.parametrize("impl", ["naive", "sdpa-math", "sdpa-flash", "sdpa-cudnn"])
def test_a_grouped_query_decode_step_is_bound_by_memory(impl):
    found = forecast(*DECODE, "--impl", impl)
    assert found["model"] == "decode step" and len(found["kernels"]) == 1
    assert found["bound"] in ("memory", "latency")
    assert (found["shape"]["num_kv_heads"], found["shape"]["kv_len"]) == (8, 8192)


def test_a_kernel_whose_fixed_cost_outweighs_its_work_is_latency_bound():
    small = ["--gpu", "h100-sxm", "--batch-size", "1", "--num-heads", "8", "--seq-len", "141"]
    found = forecast(*small, "--head-dim", "64", "--impl", "sdpa-flash")
    assert found["bound"] == "latency"  # BERT-small's kernel: 16 thread blocks, 132 SMs
    big = forecast(*small[:-1], "4096", "--head-dim", "64", "--impl", "sdpa-flash")
    assert big["bound"] == "compute"


def test_naive_and_sdpa_math_price_their_recorded_ops():
    shape = ["--gpu", "h100-sxm", "--batch-size", "2", "--num-heads", "8", "--seq-len", "1024"]
    shape += ["--head-dim", "64", "--causal"]
    naive = forecast(*shape, "--impl", "naive")
    math = forecast(*shape, "--impl", "sdpa-math")
    assert naive["recording"] == "naive_attention" and math["recording"] == "SDPA math"
    assert len(naive["kernels"]) > 1 and naive["bound"] == "memory"
    labels = {k["label"] for k in naive["kernels"]}
    assert {"attention.scores", "attention.softmax", "attention.weighted_sum"} <= labels
    # Not causal, SDPA's math backend decomposes into the naive code's ops.
    full = forecast(*shape[:-1], "--impl", "sdpa-math")
    assert full["recording"] == "naive_attention, no mask"


def test_no_cited_efficiency_gives_a_floor_without_a_range():
    flags = ["--gpu", "l4", "--impl", "sdpa-flash", "--batch-size", "1", "--num-heads", "8"]
    flags += ["--seq-len", "8192", "--head-dim", "128"]
    found = forecast(*flags)
    assert found["floor_us"] > 0 and found["low_us"] is None and found["high_us"] is None
    assert "no realistic range" in cli("forecast", *flags).stdout


FEWER_KEYS = ["--seq-len", "4096", "--kv-len", "1024"]
# The naive forward's two score matrices at seq_len 65,536: terabytes.
TOO_BIG = ["--gpu", "h100-sxm", "--impl", "naive", "--batch-size", "8", "--num-heads", "32"]
TOO_BIG += ["--seq-len", "65536", "--head-dim", "128"]
BAD = {
    "unknown gpu": ["--gpu", "no-such-gpu", *DECODE[2:], "--impl", "naive"],
    "unknown impl": [*DECODE, "--impl", "sdpa-fast"],
    "unknown dtype": [*DECODE, "--impl", "naive", "--dtype", "float8"],
    "zero size": [*DECODE, "--impl", "naive", "--head-dim", "0"],
    "negative size": [*DECODE, "--impl", "naive", "--batch-size", "-2"],
    "not an integer": [*DECODE, "--impl", "naive", "--seq-len", "1.5"],
    "heads not a multiple": [*DECODE, "--impl", "naive", "--num-kv-heads", "6"],
    "more kv heads": [*DECODE, "--impl", "naive", "--num-kv-heads", "128"],
    "causal with fewer keys": [*DECODE, "--impl", "sdpa-flash", "--causal", *FEWER_KEYS],
    "too big for the gpu": TOO_BIG,
    "missing size": ["--gpu", "h200", "--impl", "naive", "--seq-len", "128"],
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_and_exit_2(case):
    ran = cli("forecast", *BAD[case])
    assert ran.returncode == 2 and ran.stdout == ""
    lines = ran.stderr.strip().splitlines()
    # argparse's own refusals (choices, sizes, a missing flag) name the command, as every
    # command's do: "python -m attention_docs forecast: error: ...".
    assert len(lines) == 1 and re.match(r"python -m attention_docs( forecast)?: error: ", lines[0])
    assert "Traceback" not in ran.stderr
