import pytest
import torch

from attention_docs.analytic.memory import max_seq_len, naive_peak
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments.runner import run_experiment
from attention_docs.inputs import make_qkv
from attention_docs.profiling.memory import memory_timeline, step_allocations, timeline_from_chrome
from attention_docs.profiling.scratch import (
    OpTimeline,
    op_timeline,
    ops_around,
    scratch_by_op,
    tensor_peak,
)

CPU = torch.device("cpu")
# memory_peak's ratio of measured to predicted peak in float32, where no CPU backend
# allocates scratch at the peak: exact, up to this fraction.
TOLERANCE = 0.01


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "shape", [(1, 1, 7, 8, 7), (2, 3, 33, 16, 33), (1, 4, 128, 64, 128), (1, 2, 17, 8, 40)]
)
def test_peak_formula_matches_the_tensors_and_scratch_is_the_rest(shape, causal, dtype):
    """The model counts tensors: it equals the peak of the allocator's line with scratch (a
    block an op frees before it returns) left out — on every instruction set. Scratch is all
    the rest: oneDNN's bfloat16 matmul allocates some on AVX-512 bf16 / AMX CPUs and none
    under ONEDNN_MAX_CPU_ISA=AVX2; both must hold."""
    b, h, n, d, m = shape
    q, k, v = make_qkv(b, h, n, d, dtype=dtype, kv_seq_len=m)
    tl = op_timeline(lambda: naive_attention(q, k, v, causal=causal), CPU, STEPS)
    predicted = naive_peak(b, h, n, d, dtype, causal=causal, kv_seq_len=m)
    assert tensor_peak(tl) == predicted.peak_bytes
    measured = max(e.live for e in tl.timeline.events)
    largest_scratch = max((largest for _, largest in scratch_by_op(tl).values()), default=0)
    assert predicted.peak_bytes <= measured <= predicted.peak_bytes + largest_scratch
    assert predicted.inputs_bytes == sum(t.numel() * t.element_size() for t in (q, k, v))


def mem(ts, nbytes, addr=0, device=0):
    """A `[memory]` instant event: an allocation (a free when `nbytes` is negative)."""
    args = {"Bytes": nbytes, "Device Type": device, "Addr": addr}
    return {"ph": "i", "name": "[memory]", "ts": ts, "args": args}


def span(cat, name, ts, dur):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}


def scratch_chrome():
    """A matmul that allocates its output and a scratch block it frees before returning, and
    a free of the output after the op (not scratch)."""
    return {
        "traceEvents": [
            span("user_annotation", "attention.scores", 0.0, 50.0),
            span("cpu_op", "aten::matmul", 1.0, 20.0),
            span("cpu_op", "aten::bmm", 2.0, 18.0),
            mem(3.0, 1000, 1),  # the output: outlives the op
            mem(4.0, 300, 2),  # scratch
            mem(9.0, -300, 2),
            mem(30.0, -1000, 1),
        ]
    }


def test_scratch_is_what_an_op_frees_before_it_returns():
    found = ops_around(scratch_chrome(), "cpu")
    assert [scratch for _, scratch in found] == [False, True, True, False]
    assert [op for op, _ in found] == ["aten::bmm", "aten::bmm", "aten::bmm", None]
    base = timeline_from_chrome(scratch_chrome(), STEPS, "cpu")
    tl = OpTimeline(base, tuple(o for o, _ in found), tuple(s for _, s in found))
    assert max(e.live for e in base.events) == 1300 and tensor_peak(tl) == 1000
    assert scratch_by_op(tl) == {("attention.scores", "aten::bmm"): (1, 300)}


def test_onednn_names_the_kernel_of_a_bf16_matmul_or_says_it_did_not_run_it():
    from attention_docs.profiling.onednn import onednn_matmul

    a = torch.randn(2, 16, 8, dtype=torch.bfloat16)
    found = onednn_matmul(a, a.transpose(1, 2))
    if found.kernel is None:  # an AVX2 machine (or ONEDNN_MAX_CPU_ISA=AVX2): ATen ran it
        assert not found.user_scratchpad
    else:
        assert found.isa and ":" in found.kernel


def test_peak_model_parts():
    model = naive_peak(2, 3, 10, 4, "bfloat16", causal=True)
    assert model.matrices == 2
    assert model.matrix_bytes == 2 * 3 * 10 * 10 * 2
    assert model.mask_bytes == 100
    assert model.output_bytes == 2 * 3 * 10 * 4 * 2
    assert model.total_bytes == model.peak_bytes + model.inputs_bytes
    assert naive_peak(2, 3, 10, 4, "bfloat16").mask_bytes == 0


@pytest.mark.parametrize("memory", [10**6, 24 * 10**9, 141 * 10**9])
@pytest.mark.parametrize("causal", [False, True])
def test_max_seq_len_is_the_last_length_that_fits(memory, causal):
    n = max_seq_len(memory, 2, 8, 64, "bfloat16", causal=causal)
    assert n > 0
    assert naive_peak(2, 8, n, 64, "bfloat16", causal=causal).total_bytes <= memory
    assert naive_peak(2, 8, n + 1, 64, "bfloat16", causal=causal).total_bytes > memory
    assert max_seq_len(0, 1, 1, 8) == 0


def fake_chrome():
    """Two labelled ranges and memory events inside, between and after them."""
    return {
        "traceEvents": [
            span("user_annotation", "attention.scores", 100.0, 10.0),
            span("user_annotation", "attention.softmax", 120.0, 10.0),
            span("user_annotation", "something.else", 140.0, 10.0),
            mem(101.0, 400),
            mem(115.0, 8),  # between the ranges
            mem(121.0, 400),
            mem(125.0, -400),
            mem(122.0, 999, device=1),  # a CUDA event: not counted on the CPU
            mem(145.0, -400),  # inside a range that is not a step
        ]
    }


def test_memory_events_are_attributed_to_the_range_around_them():
    tl = timeline_from_chrome(fake_chrome(), STEPS, "cpu")
    assert [b.label for b in tl.bands] == ["attention.scores", "attention.softmax"]
    assert tl.bands[0].start_us == 0.0 and tl.bands[1].end_us == 30.0
    assert list(tl.steps) == [
        "attention.scores",
        None,
        "attention.softmax",
        "attention.softmax",
        None,
    ]
    assert [e.live for e in tl.events] == [400, 408, 808, 408, 8]
    per = step_allocations(tl, STEPS)
    assert per["attention.scores"] == {"allocations": 1, "allocated": 400, "freed": 0}
    assert per["attention.softmax"] == {"allocations": 1, "allocated": 400, "freed": 400}
    assert per["attention.mask"] == {"allocations": 0, "allocated": 0, "freed": 0}
    cuda = timeline_from_chrome(fake_chrome(), STEPS, "cuda")
    assert [e.bytes for e in cuda.events] == [999]
    assert timeline_from_chrome({"traceEvents": []}, STEPS, "cpu").events == ()


def test_a_real_forward_allocates_one_matrix_per_step_and_frees_everything():
    q, k, v = make_qkv(1, 2, 64, 16)
    tl = memory_timeline(lambda: naive_attention(q, k, v, causal=True), CPU, STEPS)
    per = step_allocations(tl, STEPS)
    matrix = 2 * 64 * 64 * 4
    assert per["attention.scores"]["allocated"] == matrix
    assert per["attention.softmax"]["allocated"] == matrix
    assert per["attention.mask"]["allocated"] == matrix + 2 * 64 * 64
    assert per["attention.weighted_sum"]["allocated"] == 2 * 64 * 16 * 4
    assert tl.events[-1].live == 0  # the output is freed after the call too
    assert max(e.live for e in tl.events) == naive_peak(1, 2, 64, 16, causal=True).peak_bytes


def test_memory_timeline_experiment_matches_its_prediction():
    m = run_experiment("memory_timeline", {"seq_len": 48, "head_dim": 16}, device_setting="cpu")
    assert m.facts["measured_peak_bytes"] == m.facts["predicted_peak_bytes"]
    dtypes = {r["dtype"]: r for r in m.tables["dtypes"].records()}
    assert set(dtypes) == {"float32", "bfloat16"}
    for r in dtypes.values():
        assert r["tensor_peak_bytes"] == r["model_peak_bytes"]
        assert r["measured_peak_bytes"] >= r["tensor_peak_bytes"]
        assert r["backend"] in {"oneDNN", "ATen"}
    assert dtypes["float32"]["measured_peak_bytes"] == m.facts["measured_peak_bytes"]
    steps = m.tables["steps"].records()
    assert [r["score_sized"] for r in steps] == [1, 1, 1, 1, 0]
    assert set(m.tables["events"].column("step")) <= {*STEPS, "after the steps"}
    assert [r[0] for r in m.tables["bands"].rows] == list(STEPS)


def test_memory_peak_experiment_predicts_beyond_what_it_runs():
    m = run_experiment("memory_peak", {"start": 16, "max_measured": 64}, device_setting="cpu")
    rows = m.tables["peak"].records()
    ran = [r for r in rows if r["status"] == "ok"]
    assert [r["seq_len"] for r in ran] == [16, 32, 64]
    assert all(r["measured_over_predicted"] == pytest.approx(1.0, abs=TOLERANCE) for r in ran)
    rest = [r for r in rows if r["status"] != "ok"]
    assert rest and all(r["measured_peak_bytes"] is None for r in rest)
    assert {r["status"] for r in rest[:-1]} == {"not run: above max_measured"}
    assert rest[-1]["status"] == "too large for the free memory"
    f = m.facts
    assert f["predicted_max_seq_len"] == max_seq_len(f["memory_bytes"], 1, 4, 64, causal=True)
    limit = f["predicted_max_seq_len_free"]
    assert limit == max_seq_len(f["free_bytes"], 1, 4, 64, causal=True)
    assert rows[-2]["seq_len"] <= limit < rows[-1]["seq_len"]
    assert f["free_bytes"] <= f["memory_bytes"]
    assert m.facts["memory_kind"] == "system RAM"


def test_memory_peak_does_not_try_a_length_the_free_memory_cannot_hold(monkeypatch):
    import attention_docs.experiments._sweep as sweep_module
    import attention_docs.experiments.memory as exp

    free = naive_peak(1, 4, 300, 64, causal=True).total_bytes
    monkeypatch.setattr(exp, "free_memory_bytes", lambda device: 10**12)  # at the start
    monkeypatch.setattr(sweep_module, "free_memory_bytes", lambda device: free)  # later
    m = run_experiment("memory_peak", {"start": 64, "max_measured": 512}, device_setting="cpu")
    status = {r["seq_len"]: r["status"] for r in m.tables["peak"].records()}
    assert status[64] == status[128] == status[256] == "ok"
    assert status[512].startswith("too large for the free memory (needs ")
    assert any(n.startswith("seq_len=512") and "was not run" in n for n in m.notes)
    assert m.facts["first_out_of_memory_seq_len"] is None


def test_memory_peak_turns_an_out_of_memory_into_a_row(monkeypatch):
    import attention_docs.experiments.memory as exp

    real = exp._profile
    calls = []

    def fails_on_the_third_length(*args):
        calls.append(args)
        if len(calls) >= 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return real(*args)

    monkeypatch.setattr(exp, "_profile", fails_on_the_third_length)
    m = run_experiment("memory_peak", {"start": 16, "max_measured": 256}, device_setting="cpu")
    status = {r["seq_len"]: r["status"] for r in m.tables["peak"].records()}
    assert status[16] == status[32] == "ok"
    assert status[64] == "out of memory"
    assert status[128] == "skipped after an out-of-memory"
    assert m.facts["first_out_of_memory_seq_len"] == 64
    assert m.notes[0].startswith("seq_len=64") and "ran out of memory" in m.notes[0]
