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
        (
            ("run", "naive_steps", "--seq-len", "1000000000", "--device", "cpu"),
            "naive_steps with seq_len=1000000000 needs at least 13.9 EiB for one "
            "batch_size×num_heads×seq_len² score matrix of float32",
        ),
        (("bogus",), "invalid choice: 'bogus'"),
        (("run", "_test_quick", "--timeout", "0"), "--timeout must be a positive number"),
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


def test_a_mistyped_command_lists_the_commands_but_not_the_hidden_worker():
    out = cli("runn")
    assert out.returncode == 2 and "'run'" in out.stderr and "'new-chapter'" in out.stderr
    assert "_worker" not in out.stderr
    assert "_worker" not in cli("--help").stdout


def test_prune_help_says_what_stale_means():
    out = cli("prune", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "An entry is stale when" in text
    assert "the code it measured has changed" in text and "METHOD_VERSION" in text


def test_show_of_a_binary_or_missing_file_is_one_sentence(tmp_path):
    binary = tmp_path / "entry.json"
    binary.write_bytes(bytes(range(256)))
    for path, message in ((binary, "it is a binary file"), (tmp_path / "none.json", "cannot read")):
        out = cli("show", str(path))
        assert out.returncode == 2 and message in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ({"experiment": "_test_quick"}, "holds a JSON object; it must be a JSON list of"),
        (["_test_quick"], "request 0 of"),
        ([{"experiment": "_test_quick", "requested": [1]}], "request 0 of"),
    ],
)
def test_a_malformed_requests_manifest_is_one_sentence(tmp_path, manifest, message):
    path = tmp_path / "requests.json"
    path.write_text(json.dumps(manifest))
    out = cli("run", "--requests", str(path), "--store", str(tmp_path / "s"))
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_run_writes_to_the_scratch_store_unless_told(tmp_path):
    out = cli(
        "run", "_test_quick", "--seq-len", "4", "--device", "cpu", "--allow-busy", cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert list((tmp_path / ".cache" / "scratch-store" / "_test_quick").glob("*.json"))
    assert not (tmp_path / "docs").exists()
    assert "raw data: .cache/scratch-store/_test_quick/" in out.stdout


def test_a_parameter_given_at_its_default_lands_on_the_default_key(tmp_path):
    from attention_docs.experiments.registry import get

    out = cli(
        "run",
        "_test_quick",
        "--seq-len",
        "16",
        "--device",
        "cpu",
        "--store",
        str(tmp_path),
        "--allow-busy",
    )
    assert out.returncode == 0, out.stderr
    (entry,) = tmp_path.glob("_test_quick/*.cpu-*.json")
    assert entry.name.startswith(get("_test_quick").key({}) + ".")
    assert json.loads(entry.read_text())["requested"] == {}
    # A default that differs on a GPU is a request of its own, except on the command line of
    # the device whose default it is.
    naive = get("naive_steps")
    assert naive.canonical({"seq_len": 256, "head_dim": 64}) == {"seq_len": 256}
    assert naive.canonical({"seq_len": 256, "head_dim": 64}, "cpu") == {}
    assert naive.canonical({"seq_len": 2048}, "cuda") == {}
    assert naive.key({"head_dim": 64}) == naive.key({}) != naive.key({"seq_len": 256})


def test_a_run_past_its_timeout_is_stopped_with_one_sentence(tmp_path):
    out = cli(
        "run",
        "_test_sleeps",
        "--seconds",
        "120",
        "--timeout",
        "2",
        "--device",
        "cpu",
        "--store",
        str(tmp_path),
        "--allow-busy",
    )
    assert out.returncode == 2, out.stderr
    assert "did not finish within 2 s and was stopped" in out.stderr
    assert "allow more time with --timeout" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not list(tmp_path.rglob("*.json"))


def test_a_failing_experiment_is_one_line_unless_asked_for_its_traceback(tmp_path):
    args = ("run", "_test_raises", "--device", "cpu", "--store", str(tmp_path))
    out = cli(*args)
    assert out.returncode == 1
    assert "ValueError: deliberate failure with value=1" in out.stderr.splitlines()[0]
    assert "Traceback" not in out.stderr and "add --traceback" in out.stderr
    assert "Traceback (most recent call last)" in cli(*args, "--traceback").stderr


def test_the_memory_estimate_refuses_only_what_cannot_fit():
    from attention_docs.experiments.registry import get, score_matrix_bytes

    params = {"batch_size": 2, "num_heads": 3, "seq_len": 10, "dtype": "bfloat16"}
    assert score_matrix_bytes(params) == 2 * 3 * 10 * 10 * 2
    assert score_matrix_bytes({"max_seq_len": 10}) is None
    naive = get("naive_steps")
    fits = naive.resolve({"seq_len": 1024}, "cpu")
    need = 1 * 4 * 1024 * 1024 * 4
    assert naive.memory_problem(fits, need, "this cpu") is None
    problem = naive.memory_problem(fits, need - 1, "this cpu")
    assert problem.startswith("naive_steps with seq_len=1024 needs at least 16.0 MiB")
    assert "this cpu has 16.0 MiB free" in problem


def test_prune_unrequested_deletes_what_no_page_asks_for(tmp_path):
    for seq_len in ("4", "8"):
        args = ("run", "_test_quick", "--seq-len", seq_len, "--device", "cpu", "--allow-busy")
        assert cli(*args, "--store", str(tmp_path)).returncode == 0
    (tmp_path / "requests.json").write_text(
        json.dumps([{"experiment": "_test_quick", "requested": {"seq_len": 8}}])
    )
    assert "0 stale entries found" in cli("prune", "--store", str(tmp_path), "--dry-run").stdout
    out = cli("prune", "--store", str(tmp_path), "--unrequested")
    assert out.returncode == 0 and "1 stale entry removed" in out.stdout
    assert "no page requests it" in out.stdout
    (kept,) = tmp_path.glob("_test_quick/*.json")
    assert json.loads(kept.read_text())["requested"] == {"seq_len": 8}
