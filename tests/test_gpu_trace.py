"""`python -m attention_docs trace` on real H100 traces recorded by others
(docs/assets/cited/tracelens-h100/, published with the site), the pages' figures of them, and
bad input. CPU only: nothing here runs a GPU."""

import gzip
import json
from pathlib import Path
from statistics import median

import pytest
from conftest import ROOT
from test_cli import cli

CITED = ROOT / "docs/assets/cited/tracelens-h100"
QWEN = CITED / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
TIMESFORMER = CITED / "facebook_timesformer-base-finetuned-k400__1016002.json.gz"
BERT = CITED / "gaunernst_bert-small-uncased__1016001.json.gz"
STEP_KEYS = {"step", "kernels", "gpu_us", "forecast"}
SITE_KEYS = {"kind", "shape", "calls", "gpu_us", "forecast", "steps"}
SHAPE_KEYS = {"batch_heads", "seq_len", "kv_len", "head_dim", "dtype"}
RANGE_KEYS = {"floor_us", "low_us", "high_us"}


def traced(path, *flags) -> dict:
    ran = cli("trace", path, "--json", *flags)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def site(found: dict, kind: str, batch_heads: int) -> dict:
    (only,) = [
        s
        for s in found["attention"]
        if (s["kind"], s["shape"]["batch_heads"]) == (kind, batch_heads)
    ]
    return only


def test_qwen_sdpa_flash_matches_the_raw_kernels():
    found = traced(QWEN)
    s = site(found, "sdpa-flash", 256)
    assert found["gpu"] == "h100-sxm"  # from the trace's deviceProperties
    assert s["shape"] == {
        "batch_heads": 256, "seq_len": 559, "kv_len": 559, "head_dim": 64, "dtype": "bfloat16"
    }  # fmt: skip
    assert s["calls"] == 24
    # The reference, read straight from the events: every flash kernel's duration (ten of
    # them ran before the profiled step, their launches not recorded).
    events = json.loads(gzip.decompress(QWEN.read_bytes()))["traceEvents"]
    flash = [
        e["dur"] for e in events if e.get("cat") == "kernel" and "flash_fwd_kernel" in e["name"]
    ]
    assert s["gpu_us"] == pytest.approx(median(flash), rel=0.1)


def test_timesformer_naive_attention_has_its_steps():
    s = site(traced(TIMESFORMER), "naive", 96)
    assert (s["shape"]["seq_len"], s["shape"]["kv_len"], s["shape"]["head_dim"]) == (3137, 3137, 64)
    steps = {t["step"]: t["gpu_us"] for t in s["steps"]}
    assert set(steps) == {
        "attention.scores", "attention.scale", "attention.softmax", "attention.weighted_sum"
    }  # fmt: skip
    assert max(steps, key=steps.get) == "attention.softmax"
    assert all(t["kernels"] and t["gpu_us"] > 0 for t in s["steps"])
    assert s["gpu_us"] == pytest.approx(sum(steps.values()), rel=0.05)


def test_bert_small_sdpa_flash():
    s = site(traced(BERT), "sdpa-flash", 8)
    assert (s["shape"]["seq_len"], s["shape"]["head_dim"]) == (141, 64)


@pytest.mark.parametrize("path", [QWEN, TIMESFORMER, BERT], ids=["qwen", "timesformer", "bert"])
def test_json_keys_and_launch_picture(path):
    found = traced(path)
    assert set(found) == {"gpu", "attention", "launch"}
    assert found["attention"]
    for s in found["attention"]:
        assert set(s) == SITE_KEYS and set(s["shape"]) == SHAPE_KEYS
        assert s["forecast"] is None or set(s["forecast"]) == RANGE_KEYS
        for t in s["steps"]:
            assert set(t) == STEP_KEYS
            assert t["forecast"] is None or set(t["forecast"]) == RANGE_KEYS
    launch = found["launch"]
    assert set(launch) == {"median_delay_us", "gpu_busy_share", "verdict"}
    assert launch["median_delay_us"] > 0 and 0 < launch["gpu_busy_share"] <= 1
    assert launch["verdict"] == ("cpu-bound" if launch["gpu_busy_share"] < 0.5 else "gpu-bound")


def test_gpu_flag_and_human_output():
    assert traced(BERT, "--gpu", "a100-sxm4-80gb")["gpu"] == "a100-sxm4-80gb"
    ran = cli("trace", BERT)
    assert ran.returncode == 0 and "sdpa-flash" in ran.stdout and "attention.sdpa" in ran.stdout
    assert "cpu-bound" in ran.stdout


def test_unknown_gpu_in_the_trace_gives_no_forecast(tmp_path):
    chrome = json.loads(gzip.decompress(BERT.read_bytes()))
    chrome["deviceProperties"][0]["name"] = "Some Future GPU"
    path = tmp_path / "future.json"
    path.write_text(json.dumps(chrome))
    found = traced(path)
    assert found["gpu"] is None and all(s["forecast"] is None for s in found["attention"])
    assert "no forecast" in cli("trace", path).stdout


def test_gpu_events_without_attention_say_so(tmp_path):
    chrome = json.loads(gzip.decompress(BERT.read_bytes()))
    chrome["traceEvents"] = [
        e for e in chrome["traceEvents"] if "scaled_dot_product" not in str(e.get("name"))
    ]
    path = tmp_path / "no_attention.json"
    path.write_text(json.dumps(chrome))
    assert traced(path)["attention"] == []
    assert "no attention" in cli("trace", path).stdout


# A trace of CPU ops only: what torch.profiler writes without CUDA activity.
CPU_ONLY = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]}


def _bad_inputs(tmp: Path) -> dict[str, Path]:
    cases = {
        "not json": ("notes.json", b"hello, not json"),
        "not gzip": ("fake.json.gz", b"{}"),
        "truncated gzip": ("cut.json.gz", BERT.read_bytes()[:5000]),
        "no traceEvents": ("other.json", json.dumps({"events": []}).encode()),
        "no kernels": ("cpu.json", json.dumps(CPU_ONLY).encode()),
    }
    for name, data in cases.values():
        (tmp / name).write_bytes(data)
    return {"missing": tmp / "missing.json"} | {case: tmp / n for case, (n, _) in cases.items()}


@pytest.mark.parametrize(
    "case",
    ["missing", "not json", "not gzip", "truncated gzip", "no traceEvents", "no kernels", "slug"],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, case):
    args = [BERT, "--gpu", "no-such-gpu"] if case == "slug" else [_bad_inputs(tmp_path)[case]]
    ran = cli("trace", *args)
    assert ran.returncode == 2 and ran.stdout == ""
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m attention_docs: error:")
    assert "Traceback" not in ran.stderr


def test_a_recorded_naive_call_is_drawn_with_its_launches_and_its_queue():
    from attention_docs.findings.gpu_trace import recorded
    from attention_docs.records.trace import GPU_KINDS
    from attention_docs.render.timeline import layout, queue_gap

    r = recorded(TIMESFORMER, "naive")
    assert (r.site.shape.num_heads, r.site.shape.seq_len) == (96, 3137)
    assert r.model == "facebook/timesformer-base-finetuned-k400" and r.torch.startswith("2.6.0")
    spans = r.timeline.spans
    ranges = [s.name for s in spans if s.kind == "range"]
    assert ranges == [t.step for t in r.site.steps]  # one range per step, in order
    kernels = [s for s in spans if s.kind == "kernel"]
    assert kernels and all(s.lane.startswith("GPU stream") for s in kernels)
    # Each kernel is drawn with an arrow from the launch that queued it.
    _, _, flows = layout(r.timeline)
    assert len(flows) == len(kernels)
    # The call's kernels are its steps' kernels, and their time is one call's (near the median).
    assert {s.name for s in kernels} == {k for t in r.site.steps for k in t.kernels}
    assert sum(s.dur_us for s in kernels) == pytest.approx(r.site.gpu_us, rel=0.1)
    # The GPU ran them long after the CPU launched them: the axis breaks over the queue.
    gap = queue_gap(r.timeline)
    cpu_end = max(s.end_us for s in spans if s.kind not in GPU_KINDS)
    assert gap is not None and gap[0] == cpu_end and gap[1] - gap[0] > 10_000


def test_the_pages_say_a_recorded_trace_is_cited_and_link_it():
    from attention_docs.findings.gpu_trace import cited_trace
    from attention_docs.render import gpu_trace

    qwen = cited_trace(QWEN, "sdpa-flash")
    figure = gpu_trace.cited_figure(qwen, "@site/x/qwen.json.gz", "One SDPA call.")
    assert "<svg" in figure and "Recorded by others, not measured by this build" in figure
    assert "AMD-AGI/TraceLens" in figure and "MIT licence" in figure and "torch 2.6.0" in figure
    assert 'href="@site/x/qwen.json.gz" download' in figure
    assert 'data-trace="@site/x/qwen.json.gz"' in figure
    assert "flash_fwd_kernel" in gpu_trace.flash_claim(qwen)
    steps = gpu_trace.cited_steps(qwen)
    assert "| sdpa | pytorch_flash::flash_fwd_kernel" in steps and "24 calls" in steps
    claim = gpu_trace.naive_claim(cited_trace(TIMESFORMER, "naive"))
    assert "3,137 tokens" in claim and "softmax kernel" in claim
    assert "waited on launches" in gpu_trace.launch_claim(cited_trace(BERT, "sdpa-flash"))
    # The page names the file by its bytes: a build's cache of the figure follows the file.
    assert len(qwen.sha256) == 64 and qwen.recorded.site.calls == 24


def test_a_trace_without_the_attention_asked_for_is_one_sentence():
    from attention_docs.findings.gpu_trace import TraceError, recorded

    with pytest.raises(TraceError, match="holds no naive attention"):
        recorded(BERT, "naive")


def test_timesformer_steps_lie_above_their_floor_and_within_twice_the_range():
    s = site(traced(TIMESFORMER), "naive", 96)
    over = {}
    for t in s["steps"]:
        f = t["forecast"]
        assert f["floor_us"] < t["gpu_us"], t["step"]
        over[t["step"]] = t["gpu_us"] / f["high_us"]
    # The score GEMM (a Turing-era CUTLASS kernel that writes the N×N scores at about a third
    # of the HBM bandwidth) sits at twice the range's high end; every other step within it.
    assert over.pop("attention.scores") < 2.05
    assert all(ratio < 2 for ratio in over.values()), over
    # The flash kernels too: Qwen's causal 559 tokens (five 128-row tiles, the last one
    # partial) and BERT's 16 thread blocks on 132 SMs, each with its fixed cost.
    for path, batch_heads in ((QWEN, 256), (BERT, 8)):
        f = site(traced(path), "sdpa-flash", batch_heads)
        assert f["forecast"]["floor_us"] < f["gpu_us"] < 2 * f["forecast"]["high_us"], path.name


def test_the_fixed_cost_per_kernel_is_the_shortest_kernel_the_traces_record():
    from attention_docs.analytic.gpu import KERNEL_FIXED_US

    shortest = min(
        e["dur"]
        for path in (QWEN, TIMESFORMER, BERT)
        for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        if e.get("cat") == "kernel"
    )
    assert shortest == pytest.approx(KERNEL_FIXED_US, abs=0.005)


def test_a_flash_grid_smaller_than_the_gpu_computes_on_its_share_of_the_sms():
    from attention_docs.analytic.gpu import FLASH_BLOCK_Q, flash_forward, sheet
    from attention_docs.records.shape import Shape

    h100 = sheet("h100-sxm")
    small = flash_forward(h100, Shape(1, 8, 141, 64, "bfloat16", False))
    assert small.programs == 2 * 8  # two query tiles of 128 rows, eight heads
    # Whole tiles: 256 query rows of 128 and 192 keys of 64, for 141 of each.
    assert small.tile_flops == pytest.approx(small.flops * (2 * FLASH_BLOCK_Q * 192) / 141**2)
    assert small.busy_us(h100.sm_count) == pytest.approx(
        small.tile_flops / small.peak * 1e6 * h100.sm_count / 16
    )
    assert small.floor_us < small.busy_us(h100.sm_count)  # the floor keeps the useful work


def test_softmax_reads_a_long_row_three_times_unless_shared_memory_holds_it():
    # PyTorch's kernels: a warp per row up to 1,024; a row cached in shared memory when it
    # fits in 48 KiB in whole 16-byte loads; else three reads (max, sum, output).
    from attention_docs.analytic import gpu
    from attention_docs.records.ops import TensorArg
    from attention_docs.records.shape import Shape

    def rereads(seq_len: int, dtype: str) -> float:
        recorded = Shape(1, 6, 12, 10, dtype, False)
        scale = gpu.Scaling(recorded, Shape(1, 96, seq_len, 64, dtype, False))
        scores = TensorArg((6, 12, 12), dtype)
        return gpu.softmax_rereads(scale, scores) / scale.bytes(scores)

    assert rereads(8, "bfloat16") == 0  # TimeSformer's temporal attention: the warp kernel
    assert rereads(3137, "bfloat16") == 2  # not a whole number of 8-element loads
    assert rereads(4096, "bfloat16") == 0  # 8 KiB, cached: the site's forecast shape
    assert rereads(16384, "float32") == 2  # 64 KiB: more than shared memory holds


@pytest.mark.parametrize("path", [QWEN, TIMESFORMER, BERT], ids=["qwen", "timesformer", "bert"])
def test_a_published_trace_carries_no_environment_of_the_machine_that_recorded_it(path):
    # Upstream's metadata held the recording machine's environment, an access token in it:
    # the site publishes these files, so that field is removed (README.txt says so).
    chrome = json.loads(gzip.decompress(path.read_bytes()))
    assert "env" not in chrome["metadata"]["system"]
    assert "HF_TOKEN" not in json.dumps(chrome)
