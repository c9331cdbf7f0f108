import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from conftest import ROOT, python_prints


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def cli(*args, cwd=None) -> Ran:
    """`python -m attention_docs ARGS`, run as its `main` in this process (a new interpreter
    per call would import torch each time): its exit code and what it printed."""
    from attention_docs.cli import main as run_main

    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = run_main([str(a) for a in args])
            except SystemExit as exc:  # argparse's own errors and --help
                code = exc.code if isinstance(exc.code, int) else 0
    finally:
        os.chdir(here)
    return Ran(code, out.getvalue(), err.getvalue())


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
        (("show", "naive_steps", "--store", "nowhere"), "there is no store folder nowhere here"),
        (
            ("run", "naive_steps", "--seq-len", "1000000000", "--device", "cpu"),
            "naive_steps with seq_len=1000000000 needs at least 13.9 EiB for one "
            "batch_size×num_heads×seq_len² score matrix of float32",
        ),
        (("bogus",), "invalid choice: 'bogus'"),
        (("run", "_test_quick", "--timeout", "0"), "--timeout: must be a positive number"),
        (("run", "_test_quick", "--timeout", "-1"), "--timeout: must be a positive number"),
        # Issue 30: nan and inf reached select() as a traceback; 1e300 overflowed it.
        (("run", "_test_quick", "--timeout", "nan"), "--timeout: 'nan' is not a number of"),
        (("run", "_test_quick", "--timeout", "inf"), "--timeout: 'inf' is not a number of"),
        (("run", "_test_quick", "--timeout", "1e300"), "--timeout: 1e300 s is more than a week"),
        (("run", "_test_quick", "--timeout", "soon"), "--timeout: 'soon' is not a number of"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(capsys, args, message):
    # In this process: `main` is what `python -m attention_docs` runs, and a new
    # interpreter per case would cost seconds each.
    try:
        code, _, err = main(capsys, *args)
    except SystemExit as exc:  # argparse's own errors exit
        code, err = exc.code, capsys.readouterr().err
    one_line_error(code, err, message)


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


def stored_quick(store: Path, **requested) -> None:
    """An entry of `_test_quick` in `store`, measured in this process: what `run` would store,
    without a new interpreter (test_run_prints_tables_stores_and_show_reads_back runs it)."""
    from attention_docs.experiments.runner import run_experiment
    from attention_docs.measurements.store import Store

    Store(store).put(run_experiment("_test_quick", requested, device_setting="cpu"))


def test_prune_removes_stale_and_unreadable_entries_only(tmp_path):
    stored_quick(tmp_path)
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
    for seq_len in (4, 8):
        stored_quick(tmp_path, seq_len=seq_len)
    (tmp_path / "requests.json").write_text(
        json.dumps([{"experiment": "_test_quick", "requested": {"seq_len": 8}}])
    )
    assert "0 stale entries found" in cli("prune", "--store", str(tmp_path), "--dry-run").stdout
    out = cli("prune", "--store", str(tmp_path), "--unrequested")
    assert out.returncode == 0 and "1 stale entry removed" in out.stdout
    assert "no page requests it" in out.stdout
    (kept,) = tmp_path.glob("_test_quick/*.json")
    assert json.loads(kept.read_text())["requested"] == {"seq_len": 8}


# --- Store and command cases that once crashed or changed things (issue 18) ----------------
# Each is one line on stderr with exit code 2 and nothing changed, or it works. They run
# `main` in this process: a new interpreter per case would cost seconds each.


def main(capsys, *args) -> tuple[int, str, str]:
    from attention_docs import cli as command_line

    code = command_line.main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(code: int, err: str, message: str) -> None:
    assert code == 2, err
    assert message in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def files(root) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def store(tmp_path):
    """A store holding one current entry of _test_quick (with its trace)."""
    from attention_docs.experiments.runner import run_experiment
    from attention_docs.measurements.store import Store

    root = tmp_path / "store"
    run_experiment("_test_quick", {"seq_len": 8}, device_setting="cpu", store=Store(root))
    return root


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("prune", "there is no store folder"),
    ],
)
def test_a_mistyped_store_path_is_an_error_not_an_empty_store(tmp_path, capsys, command, message):
    one_line_error(*main(capsys, command, "--store", tmp_path / "mistyped")[::2], message)
    assert not (tmp_path / "mistyped").exists()


def test_an_archive_is_never_imported_into_a_mistyped_store(tmp_path, store, capsys):
    archive = _archive(tmp_path, store, {"requests": []})
    code, _, err = main(capsys, "import-archive", archive, "--store", tmp_path / "mistyped")
    one_line_error(code, err, "there is no store folder")
    assert not (tmp_path / "mistyped").exists()


def test_prune_of_a_folder_that_is_not_a_store_deletes_nothing(tmp_path, capsys):
    docs = tmp_path / "docs"
    (docs / "measurements").mkdir(parents=True)
    (docs / "measurements" / "requests.json").write_text("[]\n")
    (docs / "chapters").mkdir()
    (docs / "chapters" / "notes.json").write_text("{}\n")
    before = files(docs)
    one_line_error(*main(capsys, "prune", "--store", docs)[::2], "is it a store?")
    assert files(docs) == before


def test_prune_deletes_entries_only_never_other_files_of_the_store(store, capsys):
    (store / "requests.json").write_text("[]\n")
    stray = store / "_test_quick" / "notes.json"
    stray.write_text("{}\n")
    code, out, _ = main(capsys, "prune", "--store", store)
    assert code == 0 and "0 stale entries removed" in out
    assert stray.exists() and (store / "requests.json").exists()


WRONG_TYPES = [
    (lambda d: d["provenance"].__setitem__("date", 5), "provenance.date is 5, not str"),
    (lambda d: d["steps"][0].__setitem__("time_us", "slow"), "steps[0].time_us is 'slow'"),
    (lambda d: d.__setitem__("provenance", []), "malformed measurement"),
    (lambda d: d["provenance"]["device"].__setitem__("name", 7), "provenance.device.name is 7"),
    (lambda d: d.__setitem__("tables", {"t": {"columns": "ab", "rows": 5}}), "malformed"),
    # Numbers no measurement holds: json.dumps writes NaN and Infinity unless told not to.
    (lambda d: d["steps"][0].__setitem__("time_us", float("nan")), "it holds NaN"),
    (lambda d: d["steps"][0].__setitem__("cpu_us", float("-inf")), "it holds -Infinity"),
    (lambda d: d["steps"][0].__setitem__("time_us", -5.0), "time_us is -5.0, a negative time"),
]


@pytest.mark.parametrize(("damage", "message"), WRONG_TYPES)
def test_an_entry_with_a_wrongly_typed_field_is_unreadable_not_a_crash(
    store, capsys, damage, message
):
    (entry,) = store.glob("_test_quick/*.json")
    data = json.loads(entry.read_text())
    damage(data)
    entry.write_text(json.dumps(data))
    one_line_error(*main(capsys, "show", entry)[::2], message)
    code, out, err = main(capsys, "prune", "--store", store, "--dry-run")
    assert code == 0 and f"would delete {entry} (unreadable: " in out, err
    assert message in out


def test_show_on_a_device_the_entry_is_not_stored_for_names_the_devices_it_is(store, capsys):
    (entry,) = store.glob("_test_quick/*.json")
    stored_on = entry.name.split(".")[1]
    asked = ("show", "_test_quick", "--seq-len", 8, "--store", store, "--device")
    code, _, err = main(capsys, *asked, "cuda-h200")
    one_line_error(code, err, f"on the device cuda-h200 in {store}; it is stored for: {stored_on}")
    code, out, _ = main(capsys, *asked, stored_on)
    assert code == 0 and "from the store" in out


def test_show_and_prune_of_an_entry_whose_parameters_no_longer_fit(store, capsys):
    (entry,) = store.glob("_test_quick/*.json")
    data = json.loads(entry.read_text())
    data["requested"] = {"seq_len": "many"}
    entry.write_text(json.dumps(data))
    code, out, _ = main(capsys, "prune", "--store", store, "--dry-run")
    assert code == 0 and "its parameters are not the experiment's now" in out


def _archive(tmp_path, store, run_log) -> Path:
    from attention_docs.archive import write_archive

    return write_archive(tmp_path / "measurements.tar.gz", store, run_log)


@pytest.mark.parametrize(
    ("run_log", "message"),
    [
        ({"requests": ["x", 3]}, "'requests' is not a list of JSON objects"),
        ({"environment": "gpu"}, "'environment' is not a JSON object"),
        ({"requests": [{"status": 1}]}, "request 0 has a 'status' that is not a string"),
        ({"requests": [{"error": ["a"]}]}, "request 0 has a 'error' that is not a string"),
        ({"total_s": "long"}, "'total_s' is not a number"),
    ],
)
def test_import_archive_checks_the_run_log_before_writing(
    tmp_path, store, capsys, run_log, message
):
    archive = _archive(tmp_path, store, run_log)
    target = tmp_path / "target"
    target.mkdir()
    one_line_error(*main(capsys, "import-archive", archive, "--store", target)[::2], message)
    assert files(target) == {}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -5.0, "1e999"])
def test_an_archive_entry_with_a_number_no_time_can_be_is_refused_and_replaces_nothing(
    tmp_path, store, capsys, value
):
    (entry,) = store.glob("_test_quick/*.json")
    target = tmp_path / "target"
    shutil.copytree(store, target)  # the good entry, committed
    before = files(target)
    data = json.loads(entry.read_text())
    data["steps"][0]["time_us"] = value
    entry.write_text(json.dumps(data).replace('"1e999"', "1e999"))
    archive = _archive(tmp_path, store, {})
    code, _, err = main(capsys, "import-archive", archive, "--store", target)
    one_line_error(code, err, f"_test_quick/{entry.name} is not a measurement this build can read")
    assert files(target) == before


def test_import_of_an_archive_without_entries_is_an_error(tmp_path, capsys):
    empty = tmp_path / "empty-store"
    empty.mkdir()
    archive = _archive(tmp_path, empty, {"requests": [{"experiment": "x", "status": "failed"}]})
    target = tmp_path / "target"
    target.mkdir()
    code, _, err = main(capsys, "import-archive", archive, "--store", target)
    one_line_error(code, err, "holds no measurement entries (run on ?: 1 requests (1 failed))")


def project(tmp_path) -> Path:
    """Just enough of the project for `new-chapter`: experiments, the guide's example (which
    it copies), mkdocs.yml and the folders a chapter's files go to."""
    package = tmp_path / "src" / "attention_docs"
    shutil.copytree(ROOT / "src" / "attention_docs" / "experiments", package / "experiments")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    for folder in ("docs/chapters", "docs/notebooks", "tests"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "mkdocs.yml").write_text("site_name: t\n")
    return tmp_path


def test_a_command_that_measures_nothing_imports_no_torch(tmp_path):
    """`new-chapter` (and the command line's error handling) in a new interpreter: torch's
    import alone is seconds, and the command writes files."""
    root = project(tmp_path)
    code = (
        "import sys; from attention_docs.cli import main; "
        f"main(['new-chapter', 'mask-cost', '--root', {str(root)!r}]); "
        "print('torch' in sys.modules)"
    )
    assert python_prints(code).splitlines()[-1] == "False"
    assert (root / "docs" / "chapters" / "01-mask-cost.md").is_file()


def test_new_chapter_refuses_a_slug_that_names_an_existing_experiment(tmp_path, capsys):
    root = project(tmp_path)
    before = files(root)
    code, _, err = main(capsys, "new-chapter", "naive-steps", "--root", root)
    one_line_error(code, err, "names the experiment naive_steps, which experiments/naive.py")
    assert files(root) == before


def test_new_chapter_writes_valid_front_matter_for_any_one_line_title(tmp_path, capsys):
    import yaml

    root = project(tmp_path)
    title = 'The "best" mask: a #1 choice'
    code, _, err = main(capsys, "new-chapter", "mask-cost", "--title", title, "--root", root)
    assert code == 0, err
    (page,) = (root / "docs" / "chapters").glob("*-mask-cost.md")
    front = page.read_text().split("---\n")[1]
    assert yaml.safe_load(front)["title"] == title
    code, _, err = main(capsys, "new-chapter", "other", "--title", "two\nlines", "--root", root)
    one_line_error(code, err, "must be one line of printable text")


def test_an_experiment_registered_twice_is_one_line_naming_both(tmp_path, monkeypatch):
    (tmp_path / "twice_experiments.py").write_text(
        "from attention_docs.experiments.registry import Observed, experiment\n\n"
        '@experiment("naive_steps", summary="a second naive_steps")\n'
        "def again(ctx) -> Observed:\n    return Observed()\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]),
        "ATTENTION_DOCS_EXPERIMENTS": "fake_experiments,twice_experiments",
    }
    out = subprocess.run(
        [sys.executable, "-m", "attention_docs", "list"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    one_line_error(
        out.returncode,
        out.stderr,
        "experiment naive_steps is registered twice (in attention_docs.experiments.naive and "
        "in twice_experiments); rename one of them",
    )


# --- Issue 30: fault cases of the command line ---------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("run", "_test_quick", "--store", ""),
        ("run", "--requests", ""),
        ("show", "_test_quick", "--store", ""),
        ("show", "_test_quick", "--device", " "),
        ("prune", "--store", ""),
        ("import-archive", ""),
        ("import-archive", "measurements.tar.gz", "--store", ""),
        ("new-chapter", "mask-cost", "--root", ""),
    ],
)
def test_an_empty_path_or_name_is_refused_not_read_as_this_folder(tmp_path, args):
    """An empty --store was the current folder: `run` measured into it, `new-chapter --root ''`
    wrote a chapter into it."""
    out = cli(*args, cwd=tmp_path)
    one_line_error(out.returncode, out.stderr, "is empty; give a")
    assert list(tmp_path.iterdir()) == []


def test_a_run_that_is_not_stored_names_no_file(tmp_path):
    """`run --no-store` printed `trace: _test_quick/<key>.trace.json.gz`: a file in a folder
    deleted as the run ended."""
    out = cli(
        "run", "_test_quick", "--seq-len", "4", "--device", "cpu", "--no-store", "--allow-busy"
    )
    assert out.returncode == 0, out.stderr
    assert "| `attention.softmax` |" in out.stdout
    assert "trace:" not in out.stdout and ".json" not in out.stdout
    assert "not stored (--no-store): neither its raw data nor its trace was kept" in out.stdout


def _busy_refusal(name: str, requested: dict):
    """The MeasurementError run_worker raises when the runner refused a busy result: the
    runner's sentence (BusyMachineError's), as its worker reports it."""
    from attention_docs.workers import MeasurementError

    load = "load 1.9 → 2.0 on 2 cores; other processes used 60% of the CPU"
    return MeasurementError(
        f"experiment {name}(seq_len=4) was refused: {name} was measured while other work "
        f"competed for the machine ({load}), so its timings are not trustworthy and it was "
        "not stored. Run it again on an idle machine, or pass --allow-busy to store it flagged.",
        kind="busy",
        busy=load,
    )


def test_a_busy_refusal_under_no_store_says_nothing_of_storing(tmp_path, monkeypatch, capsys):
    """Under --no-store nothing is ever stored: "it was not stored ... pass --allow-busy to
    store it flagged" promised what the flag cannot do. The machine's load is the worker's
    report, given here (a real busy machine would disturb the suite's other timings)."""
    from attention_docs import workers

    def busy_worker(experiment, requested, *args, **kwargs):
        raise _busy_refusal(experiment, requested)

    monkeypatch.setattr(workers, "run_worker", busy_worker)
    code, _, err = main(capsys, "run", "_test_quick", "--seq-len", "4", "--no-store")
    one_line_error(code, err, "_test_quick(seq_len=4) was measured while other work competed")
    assert "(load 1.9 → 2.0 on 2 cores;" in err
    assert "stored" not in err and "pass --allow-busy to show it flagged as busy" in err
    code, _, err = main(capsys, "run", "_test_quick", "--seq-len", "4", "--store", tmp_path)
    assert code == 2 and "it was not stored" in err and "to store it flagged" in err


def test_a_busy_request_of_a_manifest_under_no_store_says_nothing_of_storing(
    tmp_path, monkeypatch, capsys
):
    from attention_docs.experiments import runner
    from attention_docs.records.load import BusyMachineError

    def busy_run(name, requested, **kwargs):
        refusal = _busy_refusal(name, requested)
        raise BusyMachineError(refusal.message.split("was refused: ", 1)[1], refusal.busy)

    monkeypatch.setattr(runner, "run_experiment", busy_run)
    manifest = tmp_path / "requests.json"
    manifest.write_text(json.dumps([{"experiment": "_test_quick", "requested": {"seq_len": 4}}]))
    code, out, _ = main(capsys, "run", "--requests", manifest, "--no-store")
    assert code == 1 and "FAILED  _test_quick {'seq_len': 4}: " in out
    assert "_test_quick(seq_len=4) was measured while other work competed" in out
    assert "stored" not in out and "pass --allow-busy to show it flagged as busy" in out


def _stale_copy(store: Path) -> Path:
    """A copy of the store's entry under another key, with another code fingerprint: an entry
    `prune` deletes."""
    (current,) = store.glob("_test_quick/*.json")
    stale = current.with_name("ffffffffffffffff." + current.name.split(".", 1)[1])
    data = json.loads(current.read_text())
    data["fingerprint"], data["trace_file"] = "0" * 16, None
    stale.write_text(json.dumps(data))
    return stale


@pytest.mark.parametrize(
    ("command", "prepare"),
    [
        (("prune",), _stale_copy),
        (("import-archive", "ARCHIVE"), None),
    ],
)
def test_a_read_only_store_is_one_sentence_and_left_as_it_was(
    tmp_path, store, capsys, command, prepare
):
    """They ended in filelock's PermissionError on `<store>/.lock`, a traceback."""
    from conftest import read_only

    archive = _archive(tmp_path, store, {"requests": []})
    if prepare is not None:
        prepare(store)
    args = [archive if a == "ARCHIVE" else a for a in command]
    before = files(store)
    with read_only(store):
        code, _, err = main(capsys, *args, "--store", store)
    one_line_error(code, err, f"the store {store} cannot be written (Permission denied")
    assert "--store" in err and files(store) == before


def test_prune_dry_run_reads_a_read_only_store(store, capsys):
    from conftest import read_only

    stale = _stale_copy(store)
    with read_only(store):
        code, out, err = main(capsys, "prune", "--store", store, "--dry-run")
    assert code == 0 and f"would delete {stale}" in out, err


def test_run_into_a_read_only_store_is_refused_before_it_measures(tmp_path, store, capsys):
    """It measured fully, then failed to write."""
    from conftest import read_only

    mark = tmp_path / "started"
    before = files(store)
    with read_only(store):
        code, _, err = main(
            capsys, "run", "_test_marks", "--mark", mark, "--device", "cpu", "--store", store
        )
    one_line_error(code, err, f"the store {store} cannot be written (Permission denied")
    assert not mark.exists() and files(store) == before
    # A store folder that does not exist yet is made where its parent can be written.
    with read_only(tmp_path / "store"):
        assert write_problem_of(tmp_path / "new" / "store") is None
        assert "cannot be written" in write_problem_of(store / "new")


def write_problem_of(root: Path) -> str | None:
    from attention_docs.measurements.store import Store

    return Store(root).write_problem()


def test_show_of_a_truncated_entry_says_so_once_and_never_that_it_will_be_measured(
    store, capsys, caplog
):
    """It warned twice (the entry was found under two of the keys it tries) that the entry
    "will be measured again": `show` never measures."""
    (entry,) = store.glob("_test_quick/*.json")
    entry.write_bytes(entry.read_bytes()[:100])
    before = files(store)
    code, out, err = main(capsys, "show", "_test_quick", "--seq-len", "8", "--store", store)
    one_line_error(code, err, f"the stored measurement {entry} cannot be read (not valid JSON")
    assert "measured again" not in err + caplog.text and out == ""
    assert f"run _test_quick --seq-len 8 --store {store}" in err
    assert files(store) == before


def _other_fingerprint(data: dict) -> None:
    data["fingerprint"] = "0" * 16


def _other_parameters(data: dict) -> None:
    data["requested"] = {"seq_len": 9}


def _bad_parameters(data: dict) -> None:
    data["requested"] = {"seq_len": 0}


def _gone(data: dict) -> None:
    data["experiment"] = "_test_gone"


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_other_fingerprint, "the code it measured has changed since (its fingerprint 0000"),
        (_other_parameters, "is not the key this code gives its parameters"),
        (_bad_parameters, "its parameters are not the experiment's now: parameter seq_len=0"),
        (_gone, "experiment _test_gone no longer exists"),
    ],
)
def test_import_archive_and_prune_call_the_same_entries_stale_for_the_same_reason(
    tmp_path, store, capsys, damage, reason
):
    """An archived entry whose fingerprint differed from its key's was imported as current;
    prune then called it stale. One rule decides for both."""
    (entry,) = store.glob("_test_quick/*.json")
    data = json.loads(entry.read_text())
    damage(data)
    entry.unlink()
    entry.with_name(entry.name.replace(".json", ".trace.json.gz")).unlink()
    data["trace_file"] = None
    moved = store / data["experiment"] / entry.name
    moved.parent.mkdir(exist_ok=True)
    moved.write_text(json.dumps(data))
    archive = _archive(tmp_path, store, {"requests": []})
    target = tmp_path / "target"
    target.mkdir()
    code, out, err = main(capsys, "import-archive", archive, "--store", target)
    assert code == 1, err
    assert f"stale, not imported: {data['experiment']}/{entry.name}: " in out and reason in out
    assert files(target) == {}
    code, out, err = main(capsys, "import-archive", archive, "--store", target, "--allow-stale")
    assert code == 0 and "1 entry imported" in out and "(stale)" in out, err
    code, out, err = main(capsys, "prune", "--store", target, "--dry-run")
    assert code == 0 and f"would delete {target / moved.relative_to(store)} (" in out, err
    assert reason in out


@pytest.mark.parametrize(
    ("slug", "message"),
    [
        ("import", "the slug 'import' names the module import, a Python keyword"),
        ("class", "the slug 'class' names the module class, a Python keyword"),
        # Bound by experiments/__init__.py: importing experiments/os.py would replace the
        # package's `os` (and `load_all`), and every command would fail.
        ("os", "the slug 'os' names the module os, which experiments/__init__.py uses"),
        ("load-all", "names the module load_all, which experiments/__init__.py uses"),
        # Bound by the experiment module it writes: its function would shadow them.
        ("prepare-mask", "names the module prepare_mask, which the chapter's experiment uses"),
        ("experiment", "names the module experiment, which the chapter's experiment uses"),
        ("a" * 80, "is 80 characters long; 60 at most"),
    ],
)
def test_new_chapter_refuses_a_slug_that_is_no_usable_module_name(tmp_path, capsys, slug, message):
    """`new-chapter import` was accepted: experiments/import.py then failed every command of
    the command line with a SyntaxError traceback."""
    root = project(tmp_path)
    before = files(root)
    code, _, err = main(capsys, "new-chapter", slug, "--root", root)
    one_line_error(code, err, message)
    assert files(root) == before


@pytest.mark.parametrize("read_only_path", ["tests", "mkdocs.yml"])
def test_new_chapter_into_a_read_only_project_writes_nothing(tmp_path, capsys, read_only_path):
    """The new files are written first, the test last, then the nav of mkdocs.yml: a write
    that fails after others leaves none of them."""
    from conftest import read_only

    root = project(tmp_path)
    before = files(root)
    with read_only(root / read_only_path):
        code, _, err = main(capsys, "new-chapter", "mask-cost", "--root", root)
    one_line_error(code, err, "cannot write the chapter mask-cost (Permission denied:")
    assert "nothing was written" in err and files(root) == before


@pytest.mark.parametrize("command", [("prune",), ("import-archive", "ARCHIVE")])
def test_a_command_run_outside_the_repository_says_where_it_looked(tmp_path, store, command):
    """It said "there is no store folder docs/measurements; the committed store is
    docs/measurements": neither where it looked nor how to point it at a store."""
    archive = _archive(tmp_path, store, {"requests": []})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = cli(*[archive if a == "ARCHIVE" else a for a in command], cwd=elsewhere)
    looked = elsewhere.resolve() / "docs" / "measurements"
    one_line_error(
        out.returncode,
        out.stderr,
        f"there is no store folder docs/measurements here (looked for {looked}); run it from "
        "the repository's top folder, or point it at a store with --store PATH",
    )
    assert list(elsewhere.iterdir()) == []


def _newer_schema(path: Path) -> bytes:
    from attention_docs.measurements.schema import SCHEMA_VERSION

    data = json.loads(path.read_text())
    data["schema_version"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(data))
    return path.read_bytes()


def test_prune_keeps_and_names_an_entry_of_a_newer_schema(store, capsys):
    """prune deleted it as "unreadable": what a newer checkout wrote, lost."""
    (entry,) = store.glob("_test_quick/*.json")
    _newer_schema(entry)
    before = files(store)
    code, out, err = main(capsys, "prune", "--store", store)
    assert code == 0, err
    assert f"kept {entry} (written by a newer version of attention_docs (schema" in out
    assert "update your checkout" in out and "0 stale entries removed" in out
    assert files(store) == before


def test_show_of_an_entry_of_a_newer_schema_says_to_update_not_to_measure(store, capsys):
    (entry,) = store.glob("_test_quick/*.json")
    _newer_schema(entry)
    code, _, err = main(capsys, "show", "_test_quick", "--seq-len", "8", "--store", store)
    one_line_error(code, err, f"the stored measurement {entry} was written by a newer version")
    assert "update your checkout" in err and "measure it again" not in err


def test_run_and_import_never_overwrite_an_entry_of_a_newer_schema(tmp_path, store, capsys):
    (entry,) = store.glob("_test_quick/*.json")
    archive = _archive(tmp_path, store, {"requests": []})
    _newer_schema(entry)
    before = files(store)
    code, _, err = main(capsys, "import-archive", archive, "--store", store)
    one_line_error(code, err, f"the stored measurement {entry} was written by a newer version")
    assert files(store) == before
    mark = tmp_path / "started"
    key = json.loads(entry.read_text())["key"]
    marked = store / "_test_marks" / entry.name.replace(key, _marks_key(mark))
    marked.parent.mkdir()
    marked.write_bytes(entry.read_bytes())
    before = files(store)
    code, _, err = main(
        capsys, "run", "_test_marks", "--mark", mark, "--device", "cpu", "--store", store
    )
    one_line_error(code, err, f"the stored measurement {marked} was written by a newer version")
    assert "nothing was measured" in err and not mark.exists() and files(store) == before


def _marks_key(mark: Path) -> str:
    from attention_docs.experiments.registry import get

    return get("_test_marks").key({"mark": str(mark)})


def test_a_timeout_under_a_second_is_said_as_given_not_as_0_s(tmp_path):
    """It said "did not finish within 0 s ... (it had 0 s)" for --timeout 0.5."""
    out = cli(
        "run",
        "_test_sleeps",
        "--seconds",
        "60",
        "--timeout",
        "0.5",
        "--device",
        "cpu",
        "--store",
        tmp_path,
        "--allow-busy",
    )
    assert out.returncode == 2
    assert "did not finish within 0.5 s" in out.stderr and "(it had 0.5 s)" in out.stderr


def test_show_of_a_mistyped_store_says_there_is_no_such_folder(tmp_path, capsys):
    """It read a mistyped --store as an empty store: "no stored measurement ... in nowhere"."""
    code, _, err = main(capsys, "show", "_test_quick", "--store", tmp_path / "nowhere")
    one_line_error(code, err, f"there is no store folder {tmp_path / 'nowhere'}; check the path")


def test_prune_unrequested_names_the_request_of_requests_json_it_cannot_use(store, capsys):
    """An invalid request in requests.json ended prune with the experiment's error alone,
    naming neither the file nor the request."""
    manifest = store / "requests.json"
    manifest.write_text(json.dumps([{"experiment": "_test_quick", "requested": {"bogus": 1}}]))
    before = files(store)
    code, _, err = main(capsys, "prune", "--store", store, "--unrequested")
    one_line_error(code, err, f"request 0 of {manifest} is not valid: experiment _test_quick has")
    assert "nothing was deleted" in err and files(store) == before


def test_output_into_a_closed_pipe_ends_quietly():
    """`show ... | head -1` (or `list`: main catches it for every command): the reader closed
    the pipe before the command wrote to it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "attention_docs", "show", "naive_steps"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert (proc.returncode, err.decode()) == (0, "")


def test_show_of_an_entry_file_links_files_that_exist_and_prints_no_markup(
    store, capsys, monkeypatch
):
    (entry,) = store.glob("_test_quick/*.json")
    monkeypatch.chdir(store.parent)  # the second path is relative
    for shown in (entry, entry.relative_to(store.parent)):
        code, out, err = main(capsys, "show", shown)
        assert code == 0, err
        raw = next(line for line in out.splitlines() if line.startswith("raw data: "))
        trace = next(line for line in out.splitlines() if line.startswith("trace: "))
        assert Path(raw.removeprefix("raw data: ")).resolve() == entry.resolve()
        assert Path(trace.removeprefix("trace: ").split(" (open it")[0]).is_file()
        assert "<span" not in out and "</" not in out and "&amp;" not in out


def test_run_of_an_empty_manifest_says_there_is_nothing_to_measure(tmp_path, capsys):
    manifest = tmp_path / "requests.json"
    manifest.write_text("[]\n")
    code, _, err = main(capsys, "run", "--requests", manifest, "--no-store")
    one_line_error(code, err, "holds no requests: there is nothing to measure")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["reading-a-profile"],
            "chapters/01-reading-a-profile.md has the slug 'reading-a-profile'",
        ),
        (["profiles", "--title", "reading a PROFILE"], "has the title 'reading a PROFILE' already"),
    ],
)
def test_new_chapter_refuses_a_chapter_the_book_has_already(tmp_path, capsys, argv, message):
    root = project(tmp_path)
    first = root / "docs" / "chapters" / "01-reading-a-profile.md"
    first.write_text((ROOT / "docs" / "chapters" / first.name).read_text(encoding="utf-8"))
    before = files(root)
    one_line_error(*main(capsys, "new-chapter", *argv, "--root", root)[::2], message)
    assert files(root) == before


def test_an_unreadable_entry_is_deleted_by_prune(store, capsys):
    legacy = store / "_test_quick" / f"{'0' * 16}.cpu.json"
    legacy.write_text("{not json")
    code, out, _ = main(capsys, "prune", "--store", store)
    assert code == 0 and f"deleted {legacy} (unreadable: " in out and not legacy.exists()


def test_a_sweep_whose_ends_are_swapped_is_refused_before_it_runs(capsys):
    code, _, err = main(
        capsys, "run", "decode_steps", "--min-cache-len", 8192, "--max-cache-len", 512, "--no-store"
    )
    one_line_error(code, err, "min_cache_len=8192 is more than max_cache_len=512: the sweep")


def test_every_experiments_defaults_are_sweeps_in_order():
    from attention_docs.experiments import load_all
    from attention_docs.experiments.registry import REGISTRY

    load_all()
    for exp in REGISTRY.values():
        for kind in ("cpu", "cuda"):
            exp.resolve({}, kind)  # raises on a swapped pair


def test_a_block_longer_than_the_sequence_is_refused(capsys):
    code, _, err = main(
        capsys, "run", "flash_block_sweep", "--blocks", "32,99999999999", "--no-store"
    )
    one_line_error(code, err, "a block of 99999999999 is longer than seq_len=")
