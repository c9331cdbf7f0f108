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
from recorded import recorded
from synthetic_forward import forward_times as synthetic_forward_times
from synthetic_forward import row
from timings import spanning

from attention_docs import render
from attention_docs.analytic import gpu
from attention_docs.analytic.cost import attention_flops, step_costs
from attention_docs.analytic.roofline import OVERHEAD_FACTOR, Prediction, Roof, predict
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments.naive import gpu_step_work
from attention_docs.experiments.runner import run_experiment
from attention_docs.findings import roofline as fr
from attention_docs.findings import steps as fs
from attention_docs.findings.facts import DevicesDifferError
from attention_docs.inputs import make_qkv
from attention_docs.measurements import Measurement, Sourced, Table
from attention_docs.measurements import forward as fwd
from attention_docs.profiling.ceilings import COLUMNS as CEILING_COLUMNS
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.records.timing import Timing, quantile
from attention_docs.records.trace import (
    GPU_WORK,
    Span,
    Trace,
    kernel_time_us,
    launch_gaps,
    trim_chrome,
)

# past_cache off: on a server CPU the floor would copy gigabytes (tested on its own below).
CEILINGS_TINY = {"matmul_size": 64, "copy_mb": 1, "past_cache": False}


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
    return run_experiment("machine_ceilings", CEILINGS_TINY, device_setting="cpu")


def test_the_copy_is_sized_past_the_last_level_cache():
    from attention_docs.experiments.cost_model import past_the_cache

    assert past_the_cache(128, None) == 128  # no cache reported: as asked
    assert past_the_cache(128, 480 * 2**20) == 1920  # 4 x 480 MiB
    assert past_the_cache(128, 8 * 2**20) == 128  # already past a small cache
    assert past_the_cache(1, 2**20 + 1) == 5  # rounded up to whole MiB


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


def text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def t(*rounds: float) -> Timing:
    return spanning(rounds)


@pytest.fixture(scope="module")
def roofline():
    """naive_steps (recorded): the one profile of the naive forward the roofline places."""
    return recorded("naive_steps")


def sweep_for(m, floor_us: float = 2.0):
    """An op_size_sweep entry whose per-call floor is `floor_us` (10 GB/s above it)."""
    rows = tuple(
        (n, 12 * n, t(*(max(floor_us, 12 * n / 1e10 * 1e6) * f for f in (0.98, 1, 1.02))), "ok")
        for n in (2**p for p in range(4, 20))
    )
    return replace(
        m,
        experiment="op_size_sweep",
        params={"dtype": "float32"},
        tables={"sizes": Table(("elements", "bytes", "time", "status"), rows)},
        facts={"op": "torch.add(a, b)"},
    )


def test_ceilings_renderers_state_the_ceilings_as_facts(ceilings, roofline):
    table = render.roofline.ceilings_table(Sourced(ceilings, "now", "x.json"))
    assert "Spec sheet" not in table  # no spec sheet is used for a CPU
    assert table.count("\n| matmul (float32)") == 3
    # Every row a fact: the best matmul is the device's ceiling fact, the others their own.
    assert table.count('data-fact="achieved FLOP/s;matmul float32 n=') == 2
    assert table.count('data-fact="ceiling;peak_flops_float32;;unprofiled;') == 1
    # The ceilings were measured here, the profile recorded on another machine: as one
    # device's entries, which a roofline needs (on whatever CPU runs the suite).
    roofline = on_device(roofline, ceilings)
    times = times_for(roofline)
    claim = render.roofline.ceilings_claim(roofline, ceilings, times)
    peak = render.compare.ceiling(ceilings, "peak_flops_float32", spread=True)
    assert peak in claim  # the same helper, the same text: one fact, one number
    ridge = ceilings.facts["peak_flops_float32"] / ceilings.facts["bandwidth_bs"]
    assert f"*ridge point*, is **{render.words.value(ridge, 'FLOP/B')}**" in text(claim)
    bf16 = replace(roofline, params={**roofline.params, "dtype": "bfloat16"})
    with pytest.raises(ValueError, match="--dtypes bfloat16"):
        render.roofline.ceilings_claim(bf16, ceilings, times)


def on_device(m, like):
    """`m` as if measured on the device `like` was measured on."""
    p = like.provenance
    return replace(m, provenance=replace(m.provenance, device=p.device, device_id=p.device_id))


def times_for(roof, step_us: float = 50.0, spread: float = 0.1):
    """forward_times with every step at `step_us` (±spread), the forward at five times that."""
    steps = {s.label: (step_us, step_us * (1 - spread), step_us * (1 + spread)) for s in roof.steps}
    forward = 5 * step_us
    return forward_times_for(roof, (forward, forward * 0.95, forward * 1.05), steps)


def test_naive_steps_keeps_structure_and_the_profilers_flops_but_no_times(tiny_measurement):
    roofline = tiny_measurement  # run here: the experiment's own output
    assert [s.label for s in roofline.steps] == list(STEPS)
    facts = roofline.facts
    assert "gpu_steps" not in facts and "launch_gaps" not in facts  # a CPU trace: no kernels
    assert not {"peak_flops", "bandwidth_bs", "floor_us"} & set(facts) and roofline.timing is None
    per_forward = roofline.tables["per_forward"]
    for s in roofline.steps:
        assert s.time_us == pytest.approx(sum(per_forward.column(s.label)) / len(per_forward.rows))
    # The FLOP count comes from a profile of its own: the matmuls', as the cost model says.
    flops = fr.profiler_flops(roofline)
    assert flops.agree and flops.names == ("aten::bmm",)
    assert (
        next(o for o in roofline.ops if o.name == "aten::bmm").flops
        == facts["profiler_flops"]["aten::bmm"]
    )
    claim = text(render.roofline.costs(Sourced(roofline, "now", "x.json")))
    assert "in a profile of its own" in claim and "— the same number" in claim
    # Fixed cost on a CPU: top-level op calls × the per-call floor of op_size_sweep.
    assert fr.op_calls(roofline.timeline, "attention.mask") == 3  # ones, triu, masked_fill
    r = fr.roofline(roofline, fake_ceilings(roofline), times_for(roofline), sweep_for(roofline))
    mask = next(p for p in r.placed if p.step.label == "attention.mask")
    assert r.fixed_from == "floor" and r.floor_call.value == pytest.approx(2.0)
    assert mask.fixed.value == pytest.approx(3 * 2.0)


def fake_ceilings(m, peak=1e11, bandwidth=1e10):
    """A machine_ceilings entry with known ceilings (100 GFLOP/s, 10 GB/s: ridge 10 FLOP/B),
    and a small copy at 50 GB/s beside the large one."""

    def point(kind, size, rate, rounds):
        flops, nbytes = (2 * size**3, 0.0) if kind == "matmul" else (0.0, 2 * size)
        us = (flops or nbytes) / rate * 1e6
        rates = (rate, None) if kind == "matmul" else (None, rate)
        low, high = (us * f for f in rounds)
        return (kind, "float32", size, flops, nbytes, us, low, high, *rates, None, "ok")

    rows = (
        point("matmul", 2048, peak, (0.99, 1.01)),
        point("copy", 2**20, 5e10, (0.9, 1.1)),
        point("copy", 2**27, bandwidth, (0.99, 1.01)),
    )
    columns = (*CEILING_COLUMNS, "status")
    facts = {
        "peak_flops_float32": peak,
        "peak_flops_float32_low": peak * 0.99,
        "peak_flops_float32_high": peak * 1.01,
        "bandwidth_bs": bandwidth,
        "bandwidth_bs_low": bandwidth * 0.99,
        "bandwidth_bs_high": bandwidth * 1.01,
        "cache_bandwidth_bs": 5e10,
    }
    return replace(
        m,
        experiment="machine_ceilings",
        params={"dtypes": "float32"},
        tables={"ceilings": Table(columns, rows)},
        facts=facts,
    )


def test_verdicts_use_unprofiled_times_and_the_ceilings_entry(roofline):
    ceilings = fake_ceilings(roofline)
    times = times_for(roofline)
    r = fr.roofline(roofline, ceilings, times, sweep_for(roofline))
    assert r.ridge.value == pytest.approx(10.0)
    for p in r.placed:
        s = roofline.step(p.step.label)
        assert p.bound.measured.time_us == pytest.approx(50.0)  # unprofiled, not profiled
        assert p.compute.value == pytest.approx(s.flops / 1e11 * 1e6)
        # Every step moves about what the small copy moves or less: it is held to that copy.
        assert p.bandwidth == r.small_copy and p.bandwidth.value == pytest.approx(5e10)
        assert p.memory.value == pytest.approx(s.bytes / 5e10 * 1e6)
        assert p.ratio.low == pytest.approx(45.0 / p.bound.floor_us)
        assert p.ratio.high == pytest.approx(55.0 / p.bound.floor_us)
    table = render.roofline.verdicts(
        Sourced(roofline, "now", "x.json"), ceilings, times, sweep_for(roofline)
    )
    assert len([line for line in table.splitlines() if line.startswith("| `attention.")]) == 5
    assert len(re.findall(r"\*\*(compute|memory|overhead|inefficient)[^*]*\*\*", table)) == 5
    assert "Time in the forward (unprofiled)" in table
    assert 'data-fact="step time in the forward;' in table  # the step times: forward_times'
    rules = text(render.roofline.bound_rules(roofline, ceilings, times, sweep_for(roofline)))
    assert "within **5×** of its roofline time" in rules and "at least 50%" in rules
    assert "top-level op calls × the per-call floor" in rules and "2 µs" in rules


def test_a_verdict_whose_rounds_straddle_a_threshold_is_not_settled(roofline):
    ceilings = fake_ceilings(roofline)
    softmax = roofline.step("attention.softmax")
    floor = max(softmax.flops / 1e11, softmax.bytes / 5e10) * 1e6  # held to the small copy
    # Median at 4.9× the roofline time, slowest round at 6×: the rounds disagree.
    steps = {"attention.softmax": (4.9 * floor, 4.5 * floor, 6.0 * floor)}
    times = forward_times_for(roofline, (1e3, 900.0, 1100.0), steps)
    r = fr.roofline(roofline, ceilings, times, sweep_for(roofline))
    found = {p.step.label: p for p in r.placed}
    assert found["attention.softmax"].bound.verdict == "memory"
    assert not found["attention.softmax"].bound.settled
    assert found["attention.scores"].bound.verdict is None
    table = text(
        render.roofline.verdicts(
            Sourced(roofline, "now", "x.json"), ceilings, times, sweep_for(roofline)
        )
    )
    assert "not timed" in table and "memory-bound (not in every round)" in table


def test_steps_ceilings_and_times_must_come_from_one_device(roofline, ceilings):
    other = replace(ceilings, provenance=replace(ceilings.provenance, device_id="cuda-h200"))
    with pytest.raises(DevicesDifferError, match="needs its entries from one device") as found:
        fr.roofline(roofline, other, times_for(roofline), None)
    assert "cuda-h200" in found.value.devices
    # A page that got them so (issue 30, case 1: a frozen build beside another CPU's
    # entries) says so in a sentence and goes on; it does not fail.
    sweep = sweep_for(roofline)
    said = render.roofline.verdicts(
        Sourced(roofline, "x", "x.json"), other, times_for(roofline), sweep
    )
    assert said.startswith("*Not shown: a roofline (its steps, ceilings and times) needs")
    assert "`cuda-h200`" in said and "--this-machine" in said


def test_profiled_sum_is_set_against_the_unprofiled_forward(roofline):
    per_forward = roofline.tables["per_forward"]
    sums = [sum(r[s.label] for s in roofline.steps) for r in per_forward.records()]
    low = min(sums) / 3  # the unprofiled forward far below every profiled sum
    times = forward_times_for(roofline, (low, low * 0.9, low * 1.1))
    claim = text(render.claims.profiled_vs_unprofiled(roofline, times))
    summed = quantile(sums, 0.25)  # the profiled forwards' lower quartile (records/timing.py)
    assert f"**{render.words.time_us(summed)} (" in claim
    assert "timed in separate processes" in claim and "within noise" not in claim
    assert render.words.time_us(summed - low) not in claim  # no difference is stated
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


def test_roofline_renderers_read_the_gpu_clock_when_the_trace_has_kernels(roofline):
    trace = _kineto_trace()
    work = gpu_step_work(trace, STEPS)
    device = replace(roofline.provenance.device, kind="cuda", name="NVIDIA H200")
    provenance = replace(roofline.provenance, device=device, device_id="cuda-h200")
    gpu_roof = replace(roofline, provenance=provenance, facts={**roofline.facts, "gpu_steps": work})
    gpu_ceilings = fake_ceilings(gpu_roof)
    times = times_for(gpu_roof)
    r = fr.roofline(gpu_roof, gpu_ceilings, times, None)
    assert r.fixed_from == "gaps" and r.floor_call is None
    assert {p.step.label: p.fixed.value for p in r.placed} == {
        label: w["gap_us"] for label, w in work.items()
    }
    rules = render.roofline.bound_rules(gpu_roof, gpu_ceilings, times, None)
    assert "GPU clock" in rules and "per-call floor" not in rules


def test_roofline_figure_is_byte_stable_across_processes(roofline, tmp_path):
    paths = {}
    entries = (
        ("roof", roofline),
        ("ceil", fake_ceilings(roofline)),
        ("times", times_for(roofline)),
        ("sweep", sweep_for(roofline)),
    )
    for name, m in entries:
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(m.dumps())
    code = (
        "import hashlib; from attention_docs import render; "
        "from attention_docs.measurements import Measurement, Sourced; "
        + "; ".join(
            f"{name} = Measurement.loads(open({str(path)!r}).read())"
            for name, path in paths.items()
        )
        + "; print(hashlib.sha256(render.roofline.roofline_figure(Sourced(roof, 'x', 'x.json'), "
        "ceil, times, sweep).encode()).hexdigest())"
    )
    digests = {python_prints(code) for _ in range(2)}
    again = {name: Measurement.loads(path.read_text()) for name, path in paths.items()}
    here = hashlib.sha256(
        render.roofline.roofline_figure(
            Sourced(again["roof"], "x", "x.json"), again["ceil"], again["times"], again["sweep"]
        ).encode()
    )
    assert digests == {here.hexdigest()}


def test_roofline_figure_places_the_steps_at_their_unprofiled_rates(roofline):
    figure = render.roofline.roofline_figure(
        Sourced(roofline, "x", "x.json"),
        fake_ceilings(roofline),
        times_for(roofline),
        sweep_for(roofline),
    )
    assert '<svg role="img"' in figure and "ridge 10 FLOP/B" in figure
    assert "Steps at their unprofiled time" in figure
    assert "attention.mask: 0 FLOPs" in figure  # the causal mask is listed, not plotted
    # The rate axis says its unit in its ticks, as the tables do (1 GFLOP/s), not "1 G".
    assert re.search(r">[\d.,]+ [kMGT]?FLOP/s</text>", figure)
    assert not re.search(r">[\d.,]+ [kMGT]</text>", figure)
    scores = roofline.step("attention.scores")
    assert (
        f"attention.scores: {render.words.value(scores.flops / 50e-6, 'FLOP/s')}"
        in text(figure.replace("FLOP/B, ", ""))
        or render.words.value(scores.flops / 50e-6, "FLOP/s") in figure
    )


def test_the_matmul_limit_is_set_against_the_ridge_of_the_device_it_holds_on(roofline):
    """Issue 17: "long enough sequences make the matmuls compute-bound here" must say where."""
    times = times_for(roofline)
    above = text(render.roofline.ceilings_claim(roofline, fake_ceilings(roofline), times))
    assert "reaches at most 32 FLOP/B: above this ridge" in above  # 2 × 64 ÷ 4 against 10
    below = text(render.roofline.ceilings_claim(roofline, fake_ceilings(roofline, 1e12), times))
    assert "reaches at most 32 FLOP/B: below this ridge" in below  # against a ridge of 100


def test_the_opening_says_what_bounds_each_kind_of_step_in_words(roofline):
    """One plain claim without the machine's name, one number (the most inefficient step's
    time ÷ floor); every ratio with its range in its caption."""
    ceilings, sweep = fake_ceilings(roofline), sweep_for(roofline)
    here = Sourced(roofline, "x", "x.json")
    steps = {s.label: (50.0, 45.0, 55.0) for s in roofline.steps}
    steps["attention.mask"] = (1000.0, 950.0, 1050.0)  # far past 5× its floor, 6 µs fixed
    times = forward_times_for(roofline, (1.2e3, 1.1e3, 1.3e3), steps)
    claim, caption = render.roofline.finding(here, ceilings, times, sweep).split(
        '<p class="ad-caption">'
    )
    assert text(claim).startswith(
        "Here both matmuls are compute-bound; of the three element-wise steps, two are "
        "memory-bound and one is inefficient. The mask step took "
    )
    assert claim.count('class="ad-fact"') == 1  # the inefficient step's ratio, no range
    assert roofline.provenance.device.label not in claim
    assert caption.count('class="ad-fact"') == 5 and "raw data (JSON)" in caption
    assert "Time ÷ roofline floor: scores " in text(caption)
    even = render.roofline.finding(here, ceilings, times_for(roofline), sweep)
    assert text(even).startswith("Here both matmuls are compute-bound; all three element-wise")


def test_each_step_is_held_to_the_copy_that_matches_its_bytes(roofline):
    """A step's bandwidth is the smallest copy moving about its bytes or more (the small copy
    moves 2 MiB here), else the large copy; the rule and the choice are said on the page."""
    ceilings = fake_ceilings(roofline)
    rows = fr.ceiling_rows(ceilings)
    large = fr.ceiling(ceilings, "bandwidth_bs")
    assert fr.held_to(rows, 2**21, large).value == pytest.approx(5e10)
    assert fr.held_to(rows, 2**21 * 1.05, large).value == pytest.approx(5e10)  # within 10%
    assert fr.held_to(rows, 2**21 * 1.2, large) == large
    times, sweep = times_for(roofline), sweep_for(roofline)
    rules = text(render.roofline.bound_rules(roofline, ceilings, times, sweep))
    assert "the smallest copy that moves about as many bytes or more" in rules
    assert "Every step here fits the small copy, so each is held to its 50 GB/s" in rules
    # Without the small copy every step gets the large one, and nothing is said about it.
    only_large = replace(
        ceilings,
        tables={"ceilings": Table(ceilings.tables["ceilings"].columns,
                                  tuple(r for r in ceilings.tables["ceilings"].rows if r[2] != 2**20))},
    )  # fmt: skip
    r = fr.roofline(roofline, only_large, times, sweep)
    assert all(p.bandwidth == r.bandwidth for p in r.placed) and r.small_copy is None
    assert "small copy" not in render.roofline.bound_rules(roofline, only_large, times, sweep)


def test_a_step_faster_than_its_roof_is_explained_by_the_roof_it_beat(roofline):
    ceilings = fake_ceilings(roofline)
    times = times_for(roofline, step_us=1e-4, spread=0.01)  # far faster than any roof
    r = fr.roofline(roofline, ceilings, times, sweep_for(roofline))
    assert all(p.beats_roof for p in r.placed if p.bound.floor_us)
    claim = text(
        render.roofline.verdicts(
            Sourced(roofline, "x", "x.json"), ceilings, times, sweep_for(roofline)
        )
    )
    memory = [f"`{p.step.label}`" for p in r.placed if p.beats_roof and p.bound.roof == "memory"]
    assert (
        f"{render.words.series(memory)} moved bytes faster, in every round, than the copy" in claim
    )
    if any(p.beats_roof and p.bound.roof == "compute" for p in r.placed):
        assert "beat the measured peak in every round" in claim


def test_the_gpu_roofline_forecast_is_the_analytic_model(roofline):
    """Chapter 03's box: each step's place on the H200's roofline and the ridge in bf16 and
    float32, from analytic.gpu; with a cuda-h200 forward_times entry, measured beside it."""
    h200 = gpu.sheet("h200")
    shape = gpu.FORECAST_SHAPE
    g = fs.gpu_steps([])
    assert g.ridge.value == pytest.approx(gpu.ridge(h200, "bfloat16"))  # ≈ 206 FLOP/B
    assert g.ridge_float32.value == pytest.approx(gpu.ridge(h200, "float32"))  # ≈ 14 FLOP/B
    assert g.cap.value == 2 * shape.head_dim / 2 < g.ridge.value  # 128: below the ridge
    for s, k in zip(g.steps, gpu.naive_steps(h200, shape), strict=True):
        assert s.kernel == k and s.intensity.value == pytest.approx(k.intensity)
        assert k.limit == "memory"  # every naive step, the score matmuls included
        rate = k.flops / k.floor_us * 1e6 if k.flops else k.bytes / k.floor_us * 1e6
        assert s.rate.forecast.value == pytest.approx(rate)
    box = text(render.roofline.gpu_forecast([]))
    assert "cannot pass 128 FLOP/B" in box and "ridge of 206 FLOP/B" in box
    assert "the ridge drops to 14 FLOP/B" in box
    assert "below the NVIDIA H200's ridge of 206 FLOP/B, so memory limits even the score" in box
    # A synthetic H200 entry: every step at half its attainable rate.
    base = replace(roofline, provenance=replace(roofline.provenance, device_id="cuda-h200"))
    rows = [row(fwd.STEP_PREFIX + k.label, shape, 2 * k.kernel.floor_us) for k in g.steps]
    rows.append(row(fwd.NAIVE, shape, 3 * gpu.naive_floor_us(h200)))
    measured = fs.gpu_steps([synthetic_forward_times(base, rows)])
    assert all(s.rate.ratio == pytest.approx(0.5) for s in measured.steps)
    box = text(render.roofline.gpu_forecast([synthetic_forward_times(base, rows)]))
    assert box.count("| 0.5× |") == len(STEPS) and "| not in the store | — |" in box


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


def test_a_memory_step_slower_than_one_moving_the_same_bytes_is_not_called_held_by_bandwidth(
    roofline,
):
    ceilings = fake_ceilings(roofline)
    steps = {s.label: (50.0, 45.0, 55.0) for s in roofline.steps}
    steps["attention.mask"] = (150.0, 140.0, 160.0)  # slower than scale in every round
    steps["attention.softmax"] = (54.0, 48.0, 60.0)  # slower, but inside scale's noise
    times = forward_times_for(roofline, (400.0, 380.0, 420.0), steps)
    r = fr.roofline(roofline, ceilings, times, sweep_for(roofline))
    assert [(s.step, s.like) for s in r.same_bytes] == [("attention.mask", "attention.scale")]
    (mask,) = r.same_bytes
    assert mask.ratio.value == pytest.approx(3.0)
    assert mask.ratio.low == pytest.approx(140 / 55) and mask.ratio.high == pytest.approx(160 / 45)
    # What the code makes of the step, from its profile: the mask rebuilt, the scores copied.
    assert {"aten::triu", "aten::masked_fill"} <= set(mask.ops)
    said = text(
        render.roofline.verdicts(
            Sourced(roofline, "now", "x.json"), ceilings, times, sweep_for(roofline)
        )
    )
    assert "`mask` moves the same minimum bytes as `scale`" in said
    assert "yet in every round took longer: `mask` 3×" in said and "may explain the gap" in said
    # All five steps alike: nothing to qualify.
    even = fr.roofline(roofline, ceilings, times_for(roofline), sweep_for(roofline))
    assert even.same_bytes == ()
