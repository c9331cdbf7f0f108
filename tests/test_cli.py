import json
import subprocess
import sys

import pytest
import torch


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "attention_docs", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )


def test_list_shows_experiments_and_parameters():
    out = cli("list")
    assert out.returncode == 0
    assert "naive_steps" in out.stdout and "--seq-len int = 256 (GPU: 2048)" in out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("run", "no_such_thing"), "no experiment named 'no_such_thing'; the experiments are: "),
        (
            ("run", "naive_steps", "--bogus", "1"),
            "experiment naive_steps has no parameter 'bogus'; its parameters are: batch_size",
        ),
        (("run", "naive_steps", "--seq-len", "many"), "parameter seq_len must be int, got 'many'"),
        (("run", "naive_steps", "--seq-len", "0"), "parameter seq_len=0 must be at least 1"),
        (
            ("run", "naive_steps", "--dtype", "float8"),
            "parameter dtype='float8' is not valid; choose one of: float32, bfloat16, float16",
        ),
        (("run", "naive_steps", "--causal", "maybe"), "parameter causal must be true or false"),
        (("run", "naive_steps", "--seq-len"), "parameter --seq-len needs a value"),
        (
            ("run", "naive_steps", "--device", "tpu"),
            "unknown device 'tpu'; choose one of: auto, cpu, cuda",
        ),
        (("run",), "run needs an experiment name"),
        (("show", "naive_steps", "--store", "nowhere"), "no stored measurement of naive_steps"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(args, message):
    out = cli(*args)
    assert out.returncode == 2
    assert message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the message on a machine without CUDA"
)
def test_cuda_without_a_gpu_is_explained():
    out = cli("run", "_test_quick", "--device", "cuda")
    assert (
        out.returncode == 2
        and "no usable CUDA device" in out.stderr
        and "--device cpu" in out.stderr
    )


def test_run_prints_tables_stores_and_show_reads_back(tmp_path):
    out = cli(
        "run",
        "_test_quick",
        "--seq-len",
        "8",
        "--device",
        "cpu",
        "--store",
        str(tmp_path),
        "--allow-busy",
    )
    assert out.returncode == 0, out.stderr
    assert "| `attention.softmax` |" in out.stdout and "trace: " in out.stdout
    stored = list(tmp_path.glob("_test_quick/*.cpu-*.json"))
    assert (
        len(stored) == 1
        and stored[0].with_name(stored[0].name.replace(".json", ".trace.json.gz")).exists()
    )
    shown = cli("show", "_test_quick", "--seq-len", "8", "--store", str(tmp_path))
    assert shown.returncode == 0 and "from the store" in shown.stdout
    assert cli("show", str(stored[0])).returncode == 0


def test_prune_removes_stale_and_unreadable_entries_only(tmp_path):
    assert (
        cli(
            "run", "_test_quick", "--device", "cpu", "--store", str(tmp_path), "--allow-busy"
        ).returncode
        == 0
    )
    current = next(tmp_path.glob("_test_quick/*.cpu-*.json"))
    stale = current.with_name("ffffffffffffffff." + current.name.split(".", 1)[1])
    data = json.loads(current.read_text())
    data["fingerprint"] = "0" * 16
    stale.write_text(json.dumps(data))
    broken = current.with_name("eeeeeeeeeeeeeeee." + current.name.split(".", 1)[1])
    broken.write_text("{")
    dry = cli("prune", "--store", str(tmp_path), "--dry-run")
    assert "2 stale entries found" in dry.stdout and stale.exists()
    out = cli("prune", "--store", str(tmp_path))
    assert out.returncode == 0 and "2 stale entries removed" in out.stdout
    assert current.exists() and not stale.exists() and not broken.exists()


def test_requests_manifest_runs_each_request(tmp_path):
    manifest = tmp_path / "requests.json"
    manifest.write_text(
        json.dumps(
            [
                {"experiment": "_test_quick", "requested": {"seq_len": 4}},
                {"experiment": "_test_raises", "requested": {}},
            ]
        )
    )
    out = cli(
        "run",
        "--requests",
        str(manifest),
        "--device",
        "cpu",
        "--store",
        str(tmp_path / "s"),
        "--allow-busy",
    )
    assert out.returncode == 1
    assert "ok      _test_quick" in out.stdout and "FAILED  _test_raises" in out.stdout
    assert list((tmp_path / "s").glob("_test_quick/*.json"))
