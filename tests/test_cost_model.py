# The cost model against torch.profiler's own FLOP counts and real tensor sizes, its scaling
# laws, the roofline model's classification, the ceiling experiments at tiny sizes, and the
# roofline renderer (byte-stable, spec-sheet roof when the device has one).
from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from attention_docs import render
from attention_docs.attention.naive import naive_attention
from attention_docs.cost import attention_flops, step_costs
from attention_docs.experiments.runner import run_experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements import Measurement, Sourced
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.render.roofline import predictions, roofline_svg
from attention_docs.roofline import OVERHEAD_FACTOR, Prediction, Roof, predict

CEILINGS_TINY = {"matmul_size": 64, "copy_mb": 1}


def by_label(costs):
    return {c.label: c for c in costs}


@pytest.mark.parametrize(
    ("batch_size", "num_heads", "seq_len", "head_dim", "kv_seq_len"),
    [(1, 2, 32, 16, None), (2, 3, 17, 8, None), (1, 1, 5, 24, 13)],
)
def test_matmul_flops_match_the_profilers_count(
    batch_size, num_heads, seq_len, head_dim, kv_seq_len
):
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, kv_seq_len=kv_seq_len)
    run = profile_callable(
        lambda: naive_attention(q, k, v), torch.device("cpu"), sched=Schedule(0, 1, 1)
    )
    costs = by_label(step_costs(batch_size, num_heads, seq_len, head_dim, kv_seq_len=kv_seq_len))
    ours = costs["attention.scores"].flops + costs["attention.weighted_sum"].flops
    assert run.flops_by_op["aten::bmm"] == pytest.approx(ours)
    assert ours == attention_flops(batch_size, num_heads, seq_len, head_dim, kv_seq_len=kv_seq_len)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_minimum_bytes_are_the_tensors_each_step_reads_and_writes(dtype):
    q, k, v = make_qkv(2, 2, 24, 8, dtype=dtype)
    scores = q @ k.transpose(-2, -1)
    out = naive_attention(q, k, v)
    costs = by_label(step_costs(2, 2, 24, 8, dtype))
    assert costs["attention.scores"].bytes == q.nbytes + k.nbytes + scores.nbytes
    assert costs["attention.weighted_sum"].bytes == scores.nbytes + v.nbytes + out.nbytes
    assert costs["attention.scale"].bytes == 2 * scores.nbytes
    assert costs["attention.softmax"].bytes == 2 * scores.nbytes
    assert costs["attention.mask"].bytes == 0  # no mask, no pass
    causal = by_label(step_costs(2, 2, 24, 8, dtype, causal=True))
    assert causal["attention.mask"].bytes == 2 * scores.nbytes + 24 * 24  # plus the bool mask


def test_doubling_seq_len_quadruples_the_n_by_n_terms():
    small = by_label(step_costs(1, 4, 256, 64, causal=True))
    large = by_label(step_costs(1, 4, 512, 64, causal=True))
    for label in ("attention.scale", "attention.softmax", "attention.mask"):
        assert large[label].bytes == 4 * small[label].bytes, label
        assert large[label].flops == 4 * small[label].flops, label
    for label in ("attention.scores", "attention.weighted_sum"):
        assert large[label].flops == 4 * small[label].flops
        # The operands grow only linearly: bytes grow by less than 4×, intensity rises.
        assert 2 * small[label].bytes < large[label].bytes < 4 * small[label].bytes
        assert large[label].intensity > small[label].intensity


def test_intensity_of_the_element_wise_steps_depends_on_dtype_only():
    for seq_len in (64, 1024):
        costs = by_label(step_costs(1, 1, seq_len, 64, "float32"))
        assert costs["attention.scale"].intensity == pytest.approx(1 / 8)
        assert costs["attention.softmax"].intensity == pytest.approx(5 / 8)
    half = by_label(step_costs(1, 1, 64, 64, "bfloat16"))
    assert half["attention.scale"].intensity == pytest.approx(1 / 4)
    # The matmuls approach 2·head_dim / itemsize FLOP/B as seq_len grows past head_dim.
    long = by_label(step_costs(1, 1, 1 << 16, 64, "float32"))
    assert long["attention.scores"].intensity == pytest.approx(2 * 64 / 4, rel=0.01)


def test_roof_and_predictions_classify_each_bound():
    roof = Roof(peak_flops=1e12, bandwidth=1e11)  # ridge at 10 FLOP/B
    assert roof.ridge == pytest.approx(10.0)
    assert roof.attainable(1.0) == pytest.approx(1e11)
    assert roof.attainable(100.0) == pytest.approx(1e12)
    from attention_docs.cost import StepCost

    heavy = StepCost("mm", 1e12, 1e9)  # 1000 FLOP/B: compute, 1 s
    light = StepCost("ew", 1e9, 1e10)  # 0.1 FLOP/B: memory, 0.1 s
    assert predict(heavy, roof, 1.5).bound == "compute"
    assert predict(light, roof, 0.2).bound == "memory"
    slow = OVERHEAD_FACTOR * 0.1 * 2  # well past the factor
    assert predict(light, roof, slow, fixed_s=slow * 0.9).bound == "overhead"
    assert predict(light, roof, slow, fixed_s=slow * 0.01).bound == "inefficient"
    assert predict(light, roof, slow).bound == "overhead"  # fixed cost unknown
    nothing = Prediction("mask", 0.0, 0.0, 1e-6)
    assert nothing.ratio == float("inf") and nothing.bound == "overhead"
    with pytest.raises(ValueError, match="positive ceilings"):
        Roof(0.0, 1.0)


@pytest.fixture(scope="module")
def ceilings():
    return run_experiment("machine_ceilings", CEILINGS_TINY, device="cpu")


def test_machine_ceilings_at_tiny_sizes_are_positive_and_sane(ceilings):
    rows = ceilings.tables["ceilings"].records()
    matmuls = [r for r in rows if r["kind"] == "matmul"]
    copies = [r for r in rows if r["kind"] == "copy"]
    assert [r["size"] for r in matmuls] == [16, 32, 64]
    assert [r["size"] for r in copies] == [2**20]  # copy_mb // 64 rounds up to the same 1 MiB
    for r in matmuls:
        assert r["flops"] == 2 * r["size"] ** 3
        assert 1e6 < r["flop_per_s"] < 1e16  # between a calculator and a supercomputer
    for r in copies:
        assert r["bytes"] == 2 * r["size"]
        assert 1e7 < r["bytes_per_s"] < 1e14
    facts = ceilings.facts
    assert facts["peak_flops"] == max(r["flop_per_s"] for r in matmuls)
    assert facts["bandwidth_bs"] == copies[-1]["bytes_per_s"]
    table = render.ceilings_table(Sourced(ceilings, "now", "x.json"))
    assert "No spec sheet is used for this device" in table
    assert "FLOP per byte" in render.ceilings_claim(ceilings)


@pytest.fixture(scope="module")
def roofline():
    params = {"seq_len": 32, "num_heads": 2, "head_dim": 16, **CEILINGS_TINY}
    return run_experiment("roofline_steps", params, device="cpu")


def test_roofline_steps_holds_steps_ceilings_and_floor(roofline):
    assert len(roofline.steps) == 5
    assert roofline.facts["floor_us"] > 0
    assert roofline.facts["peak_flops"] > 0 and roofline.facts["bandwidth_bs"] > 0
    preds = predictions(roofline)
    assert [p.label for p in preds] == [s.label for s in roofline.steps]
    assert all(p.fixed_s is not None and p.fixed_s > 0 for p in preds)
    table = render.roofline_table(Sourced(roofline, "now", "x.json"))
    assert table.count("`attention.") == 5
    assert len(re.findall(r"\*\*(compute|memory|overhead|inefficient)\*\*", table)) == 5
    assert "On this measurement" in render.roofline_claim(roofline)
    assert "`attention.mask`" in render.cost_table(Sourced(roofline, "now", "x.json"))


def test_roofline_figure_is_byte_stable_across_processes(roofline, tmp_path):
    path = tmp_path / "m.json"
    path.write_text(roofline.dumps())
    code = (
        "import hashlib; from attention_docs import render; "
        "from attention_docs.measurements import Measurement, Sourced; "
        f"m = Measurement.loads(open({str(path)!r}).read()); "
        "print(hashlib.sha256(render.roofline_figure(Sourced(m, 'x', 'x.json')).encode()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    }
    again = Measurement.loads(path.read_text())
    here = hashlib.sha256(render.roofline_figure(Sourced(again, "x", "x.json")).encode())
    assert digests == {here.hexdigest()}


def test_roofline_figure_places_steps_and_draws_the_spec_roof_when_known(roofline):
    svg = roofline_svg(roofline)
    assert svg.startswith('<svg role="img"') and "ridge at" in svg
    assert "attention.mask: 0 FLOPs" in svg  # the causal mask is listed, not plotted
    assert "spec-sheet roof" not in svg
    device = replace(roofline.provenance.device, spec={"fp32_tflops": 10.0, "hbm_gbs": 100.0})
    gpu_like = replace(roofline, provenance=replace(roofline.provenance, device=device))
    assert "Spec sheet: 10 TFLOP/s, 100 GB/s." in roofline_svg(gpu_like)
