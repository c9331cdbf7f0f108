# The cost model against torch.profiler's own FLOP counts and real tensor sizes, its scaling
# laws, the roofline model's classification, the ceiling experiments at tiny sizes, and the
# roofline renderer (byte-stable, spec-sheet roof when the device has one).
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace

import pytest
import torch
from conftest import DATA, python_prints
from fake_times import forward_times_for

from attention_docs import render
from attention_docs.analytic.cost import attention_flops, step_costs
from attention_docs.analytic.roofline import OVERHEAD_FACTOR, Prediction, Roof, predict
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments.cost_model import gpu_step_work
from attention_docs.experiments.runner import run_experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements import Measurement, Sourced
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.records.trace import (
    GPU_WORK,
    Span,
    Trace,
    kernel_time_us,
    launch_gaps,
    trim_chrome,
)
from attention_docs.render.roofline import (
    fixed_costs_us,
    ops_per_step,
    roof_of,
    roofline_svg,
    verdicts,
)

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
    from attention_docs.analytic.cost import StepCost

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


def test_machine_ceilings_rates_are_their_work_over_their_time(ceilings):
    rows = ceilings.tables["ceilings"].records()
    matmuls = [r for r in rows if r["kind"] == "matmul"]
    copies = [r for r in rows if r["kind"] == "copy"]
    assert [r["size"] for r in matmuls] == [16, 32, 64]
    assert [r["size"] for r in copies] == [2**20]  # copy_mb // 64 rounds up to the same 1 MiB
    for r in matmuls:
        assert r["flops"] == 2 * r["size"] ** 3
        assert r["flop_per_s"] == pytest.approx(r["flops"] / r["time_us"] * 1e6, rel=1e-3)
        assert r["low_us"] <= r["time_us"] <= r["high_us"]
    for r in copies:
        assert r["bytes"] == 2 * r["size"]
        assert r["bytes_per_s"] == pytest.approx(r["bytes"] / r["time_us"] * 1e6, rel=1e-3)
    facts = ceilings.facts
    assert facts["peak_flops_float32"] == max(r["flop_per_s"] for r in matmuls)
    assert facts["peak_flops_float32_low"] <= facts["peak_flops_float32"]
    assert facts["peak_flops_float32"] <= facts["peak_flops_float32_high"]
    assert facts["bandwidth_bs"] == copies[-1]["bytes_per_s"]


def test_ceilings_renderers_state_the_ceilings_as_facts(ceilings):
    table = render.roofline.ceilings_table(Sourced(ceilings, "now", "x.json"))
    assert "No spec sheet is used for this device" in table
    fact = 'data-fact="ceiling;' + ceilings.device_id + ";peak_flops_float32"
    assert table.count(fact) == 1  # the best matmul's row is the fact, marked once
    assert table.count("\n| matmul (float32)") == 3
    claim = render.roofline.ceilings_claim(ceilings)
    assert "FLOP per byte" in claim
    peak = render.compare.ceiling(ceilings, "peak_flops_float32", spread=True)
    assert peak in claim  # the same helper, the same text: one fact, one number
    ridge = ceilings.facts["peak_flops_float32"] / ceilings.facts["bandwidth_bs"]
    assert f"**{ridge:.3g} FLOP per byte**" in claim
    with pytest.raises(ValueError, match="--dtypes bfloat16"):
        render.roofline.ceilings_claim(ceilings, "bfloat16")


@pytest.fixture(scope="module")
def roofline():
    return run_experiment(
        "roofline_steps", {"seq_len": 32, "num_heads": 2, "head_dim": 16}, device="cpu"
    )


def times_for(roof, step_us: float = 50.0, spread: float = 0.1):
    """forward_times with every step at `step_us` (±spread), the forward at five times that."""
    steps = {s.label: (step_us, step_us * (1 - spread), step_us * (1 + spread)) for s in roof.steps}
    forward = 5 * step_us
    return forward_times_for(roof, (forward, forward * 0.95, forward * 1.05), steps)


def test_roofline_steps_keeps_structure_and_a_cpu_floor_but_no_times_or_ceilings(roofline):
    assert [s.label for s in roofline.steps] == list(STEPS)
    facts = roofline.facts
    assert facts["floor_low_us"] <= facts["floor_us"] <= facts["floor_high_us"]
    assert "gpu_steps" not in facts and "launch_gaps" not in facts  # a CPU trace: no kernels
    assert not {"peak_flops", "bandwidth_bs"} & set(facts) and roofline.timing is None
    assert "matmul_size" not in roofline.params
    per_forward = roofline.tables["per_forward"]
    for s in roofline.steps:
        assert s.time_us == pytest.approx(sum(per_forward.column(s.label)) / len(per_forward.rows))
    # Fixed cost on a CPU: top-level op calls × the CPU floor, per step.
    calls = ops_per_step(roofline)
    assert calls["attention.mask"] == 3  # ones, triu, masked_fill
    assert fixed_costs_us(roofline) == {label: n * facts["floor_us"] for label, n in calls.items()}


def test_verdicts_use_unprofiled_times_and_the_ceilings_entry(roofline, ceilings):
    times = times_for(roofline)
    roof = roof_of(ceilings, "float32")
    found = {v.label: v for v in verdicts(roofline, ceilings, times)}
    for s in roofline.steps:
        p = found[s.label].prediction
        assert p.measured_s == pytest.approx(50e-6)  # the unprofiled time, not the profiled one
        assert p.compute_s == pytest.approx(s.flops / roof.peak_flops)
        assert p.memory_s == pytest.approx(s.bytes / roof.bandwidth)
        assert found[s.label].low.measured_s == pytest.approx(45e-6)
        assert found[s.label].high.measured_s == pytest.approx(55e-6)
    table = render.roofline.roofline_table(Sourced(roofline, "now", "x.json"), ceilings, times)
    assert table.count("`attention.") == 5
    assert len(re.findall(r"\*\*(compute|memory|overhead|inefficient)[^*]*\*\*", table)) == 5
    assert "torch.utils.benchmark, the CPU wall clock" in table and "CPU floor" in table
    assert 'data-fact="forward;' in table  # the step times are forward_times' facts
    claim = render.roofline.roofline_claim(roofline, ceilings, times)
    assert claim.startswith("With each step timed alone without the profiler")
    assert "over the rounds" in claim
    assert "CPU floor" in render.roofline.fixed_cost_claim(roofline)


def test_a_verdict_whose_rounds_straddle_a_threshold_is_within_noise(roofline, ceilings):
    roof = roof_of(ceilings, "float32")
    softmax = roofline.step("attention.softmax")
    predicted = max(softmax.flops / roof.peak_flops, softmax.bytes / roof.bandwidth) * 1e6
    # Median at 4.9× the roofline time, slowest round at 6×: memory-bound or beyond it.
    steps = {"attention.softmax": (4.9 * predicted, 4.5 * predicted, 6.0 * predicted)}
    times = forward_times_for(roofline, (1e3, 900.0, 1100.0), steps)
    found = {v.label: v for v in verdicts(roofline, ceilings, times)}
    # Which roof is lower depends on this machine's measured ceilings at a tiny size.
    lower = (
        "memory" if softmax.bytes / roof.bandwidth >= softmax.flops / roof.peak_flops else "compute"
    )
    assert found["attention.softmax"].prediction.bound == lower
    assert found["attention.softmax"].bound.endswith("(within noise)")
    assert found["attention.scores"].bound == "not timed"
    table = render.roofline.roofline_table(Sourced(roofline, "now", "x.json"), ceilings, times)
    assert "not timed alone" in table


def test_steps_ceilings_and_times_must_come_from_one_device(roofline, ceilings):
    other = replace(ceilings, provenance=replace(ceilings.provenance, device_id="cuda-h200"))
    with pytest.raises(ValueError, match="from one device"):
        verdicts(roofline, other, times_for(roofline))


def test_profiled_sum_is_set_against_the_unprofiled_forward(roofline):
    per_forward = roofline.tables["per_forward"]
    sums = [sum(r[s.label] for s in roofline.steps) for r in per_forward.records()]
    low = min(sums) / 3  # the unprofiled forward far below every profiled sum
    times = forward_times_for(roofline, (low, low * 0.9, low * 1.1))
    claim = render.claims.profiled_vs_unprofiled(roofline, times)
    assert f"**{render.words.time_us(sorted(sums)[1])}**" in claim  # the median forward
    assert "profiler's own overhead" in claim and "within noise" not in claim
    assert f"**{render.words.time_us(sorted(sums)[1] - low)}** per forward" in claim
    tie = forward_times_for(roofline, (sorted(sums)[1], min(sums), max(sums)))
    assert "within noise of each other" in render.claims.profiled_vs_unprofiled(roofline, tie)


def _kineto_trace() -> Trace:
    chrome = json.loads((DATA / "cuda_trace_kineto.json").read_text())
    return Trace.from_chrome(trim_chrome(chrome))


def test_gpu_step_work_puts_each_gap_before_the_kernel_that_follows_it():
    def span(name, kind, lane, start, dur, *, flow=None):
        return Span(name, kind, lane, start, dur, 0, dur, flow, 1)

    cpu, gpu = "CPU thread", "GPU stream 7"
    spans = (
        span("a", "range", cpu, 0.0, 10.0),
        span("cudaLaunchKernel", "runtime", cpu, 1.0, 1.0, flow=1),
        span("b", "range", cpu, 10.0, 10.0),
        span("cudaLaunchKernel", "runtime", cpu, 11.0, 1.0, flow=2),
        span("cudaLaunchKernel", "runtime", cpu, 13.0, 1.0, flow=3),
        span("k1", "kernel", gpu, 5.0, 3.0, flow=1),
        span("k2", "kernel", gpu, 12.0, 3.0, flow=2),
        span("k3", "kernel", gpu, 20.0, 2.0, flow=3),
    )
    step = Span("ProfilerStep#1", "step", cpu, 0.0, 25.0, step=1)
    trace = Trace(spans, (cpu, gpu), (step,))
    work = gpu_step_work(trace, ["a", "b"])
    assert work["a"] == {"kernels": 1.0, "busy_us": 3.0, "gap_us": 0.0}
    # k2 waited 12 - 8 = 4 µs after k1, k3 waited 20 - 15 = 5 µs after k2: both are b's.
    assert work["b"] == {"kernels": 2.0, "busy_us": 5.0, "gap_us": 9.0}
    cpu_only = Trace(tuple(s for s in spans if s.kind != "kernel"), (cpu,), (step,))
    assert gpu_step_work(cpu_only, ["a", "b"]) is None


def test_gpu_step_work_on_a_kineto_trace_splits_its_gaps_and_kernels():
    trace = _kineto_trace()
    phases = ("attention.forward", "attention.backward")
    work = gpu_step_work(trace, phases)
    forwards = len(trace.steps)
    gaps = launch_gaps(trace)
    pieces = [s for s in trace.spans if s.kind in GPU_WORK and s.step is not None]
    # Every piece of GPU work is the forward's or the backward's, so the two together hold
    # every kernel, every busy microsecond and every gap, once.
    assert sum(w["kernels"] for w in work.values()) == pytest.approx(len(pieces) / forwards)
    assert sum(w["busy_us"] for w in work.values()) == pytest.approx(gaps.busy_us / forwards)
    assert sum(w["gap_us"] for w in work.values()) == pytest.approx(
        gaps.total_us / forwards, abs=1e-3
    )
    busy = kernel_time_us(trace, phases)
    for phase in phases:
        assert work[phase]["busy_us"] == pytest.approx(busy[phase] / forwards, abs=1e-3)


def test_roofline_renderers_read_the_gpu_clock_when_the_trace_has_kernels(roofline, ceilings):
    trace = _kineto_trace()
    gpu = gpu_step_work(trace, STEPS)
    gaps = launch_gaps(trace)
    device = replace(roofline.provenance.device, kind="cuda", name="NVIDIA H200")
    provenance = replace(roofline.provenance, device=device, device_id="cuda-h200")
    facts = {k: v for k, v in roofline.facts.items() if not k.startswith("floor")}
    facts["gpu_steps"] = gpu
    facts["launch_gaps"] = {
        "count": gaps.count,
        "median_us": gaps.median_us,
        "total_us": gaps.total_us / 2,
        "busy_us": gaps.busy_us / 2,
        "idle_share": gaps.idle_share,
    }
    gpu_roof = replace(roofline, provenance=provenance, facts=facts)
    gpu_ceilings = replace(ceilings, provenance=replace(ceilings.provenance, device_id="cuda-h200"))
    times = times_for(gpu_roof)
    assert fixed_costs_us(gpu_roof) == {label: w["gap_us"] for label, w in gpu.items()}
    table = render.roofline.roofline_table(Sourced(gpu_roof, "now", "x.json"), gpu_ceilings, times)
    assert "CUDA events, the GPU clock" in table and "idle time" in table
    assert "CPU floor" not in table
    fixed = [row.split(" | ")[4] for row in table.splitlines() if row.startswith("| `")]
    assert fixed[0] == render.words.time_us(gpu["attention.scores"]["gap_us"])
    claim = render.roofline.fixed_cost_claim(gpu_roof)
    assert render.words.percent(gaps.idle_share) in claim and "On this GPU" in claim
    assert "GPU clock" in render.roofline.bound_rules(gpu_roof)


def test_roofline_figure_is_byte_stable_across_processes(roofline, ceilings, tmp_path):
    paths = {}
    for name, m in (("roof", roofline), ("ceil", ceilings), ("times", times_for(roofline))):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(m.dumps())
    code = (
        "import hashlib; from attention_docs import render; "
        "from attention_docs.measurements import Measurement, Sourced; "
        + "; ".join(
            f"{name} = Measurement.loads(open({str(path)!r}).read())"
            for name, path in paths.items()
        )
        + "; print(hashlib.sha256(render.roofline.roofline_figure(Sourced(roof, 'x', 'x.json'), ceil, "
        "times).encode()).hexdigest())"
    )
    digests = {python_prints(code) for _ in range(2)}
    again = {name: Measurement.loads(path.read_text()) for name, path in paths.items()}
    here = hashlib.sha256(
        render.roofline.roofline_figure(
            Sourced(again["roof"], "x", "x.json"), again["ceil"], again["times"]
        ).encode()
    )
    assert digests == {here.hexdigest()}


def test_roofline_figure_places_steps_and_draws_the_spec_roof_when_known(roofline, ceilings):
    times = times_for(roofline)
    svg = roofline_svg(roofline, ceilings, times)
    assert svg.startswith('<svg role="img"') and "ridge at" in svg
    assert "Steps at their unprofiled time" in svg
    assert "attention.mask: 0 FLOPs" in svg  # the causal mask is listed, not plotted
    assert "spec-sheet roof" not in svg
    device = replace(ceilings.provenance.device, spec={"fp32_tflops": 10.0, "hbm_gbs": 100.0})
    gpu_like = replace(ceilings, provenance=replace(ceilings.provenance, device=device))
    assert "Spec sheet: 10 TFLOP/s, 100 GB/s." in roofline_svg(roofline, gpu_like, times)


def test_matmul_cap_claim_uses_the_ceilings_ridge(roofline, ceilings):
    claim = render.roofline.matmul_cap_claim(roofline, ceilings)
    assert "2 × 16 ÷ 4 = **8 FLOP/B**" in claim
    ridge = ceilings.facts["peak_flops_float32"] / ceilings.facts["bandwidth_bs"]
    assert f"ridge of {ridge:.3g} FLOP/B" in claim


def test_a_step_faster_than_its_roof_is_explained_by_the_roof_it_beat(roofline, ceilings):
    times = times_for(roofline, step_us=1e-4, spread=0.01)  # far faster than any roof
    found = verdicts(roofline, ceilings, times)
    claim = render.roofline.roofline_claim(roofline, ceilings, times)
    names = r"((?:`[^`]+`, )*`[^`]+`)"
    memory = re.search(names + " moved (?:its|their) bytes faster than the large copy", claim)
    compute = re.search(names + " did more FLOP/s than the measured peak", claim)
    for v in found:
        if not v.prediction.predicted_s:
            continue  # no work, no roof to beat
        beaten = memory if v.prediction.memory_s > v.prediction.compute_s else compute
        assert beaten is not None and f"`{v.label}`" in beaten.group(1), v.label
    assert "in every round" in claim


def test_the_analytic_models_are_pure_arithmetic():
    """attention_docs.analytic predicts without measuring: no torch, and nothing of the
    package but the plain records below it."""
    code = (
        "import sys, json, pkgutil, importlib, attention_docs.analytic as a\n"
        "for m in pkgutil.iter_modules(a.__path__): importlib.import_module(f'{a.__name__}.{m.name}')\n"
        "print(json.dumps(sorted(n for n in sys.modules if n.startswith(('torch', 'attention_docs.')))))"
    )
    modules = json.loads(python_prints(code))
    assert "attention_docs.analytic.gpu" in modules and "attention_docs.analytic.cost" in modules
    assert [
        m
        for m in modules
        if not m.startswith(("attention_docs.analytic", "attention_docs.records"))
    ] == []
