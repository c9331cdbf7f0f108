# The experiment of the chapter "Preparing a mask", on tiny shapes on the CPU.
from attention_docs.experiments.registry import get
from attention_docs.experiments.runner import run_experiment
from attention_docs.findings.sweep import sweep_findings


def test_mask_cost_times_both_masks_at_each_size_in_rounds():
    sizes = {"min_seq_len": 16, "max_seq_len": 64}
    m = run_experiment("mask_cost", sizes, device_setting="cpu")
    found = sweep_findings(m)
    assert [p.x for p in found.points] == [16, 32, 64]
    for p in found.points:
        assert p.status == "ok"
        assert p.ranking is not None
        for line in ("bool mask", "float bias"):
            # Every round is kept, so that a tie is decided from them, not from a median.
            assert len(p.timings[line].rounds_us) > 1
            assert p.facts[line].id.endswith(f"seq_len={p.x}")


def test_mask_cost_is_keyed_by_the_masking_code_and_plans_its_gpu_time():
    exp = get("mask_cost")
    assert "attention/masking.py" in exp.source_files
    assert exp.gpu_work(exp.resolve({}, "cuda")).timed == 2 * 5
