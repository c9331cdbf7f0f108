# The one-call GPU run, rehearsed on the CPU: tools/gpu_measure.py runs a manifest in worker
# processes and packs one archive; `import-archive` checks it and fills a store.
from __future__ import annotations

import contextlib
import gzip
import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

from attention_docs import cli
from attention_docs.archive import RUN_LOG, write_archive
from attention_docs.book import local_device_id
from attention_docs.experiments.registry import COMPILE_S, START_S, Work, get
from attention_docs.measurements.manifest import read_requests
from attention_docs.measurements.store import Store

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "gpu_measure.py"
QUICK = {"experiment": "_test_quick", "requested": {"seq_len": 8}}
FAILS = {"experiment": "_test_raises", "requested": {"value": 3}}


def gpu_measure(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    manifest = tmp / "requests.json"
    manifest.write_text(json.dumps([FAILS, QUICK]), encoding="utf-8")
    (tmp / "no-estimates").mkdir(exist_ok=True)
    return run_script(
        *("--device", "cpu", "--requests", str(manifest)),
        *("--estimates", str(tmp / "no-estimates"), "--out", str(tmp / "out"), *args),
    )


def run_script(*args: str) -> subprocess.CompletedProcess:
    """tools/gpu_measure.py ARGS, run as its `main` in this process (its requests run in
    worker processes, as they would; a new interpreter would import torch once more)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = load_script().main(list(args))
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def pack(path: Path, files: dict[str, bytes], link: str | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
    return path


def import_archive(capsys, *args) -> tuple[int, str, str]:
    code = cli.main(["import-archive", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu-run")
    proc = gpu_measure(tmp, "--budget-s", "600")
    return tmp, proc


def test_rehearsal_measures_packs_and_imports(rehearsal):
    tmp, proc = rehearsal
    assert proc.returncode == 1, proc.stderr  # one request failed, on purpose
    progress = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert len(progress) == 2
    assert "_test_quick" in progress[1] and " ok " in progress[1]
    assert "failed" in progress[0] and "deliberate failure with value=3" in progress[0]

    archive = tmp / "out" / "measurements.tar.gz"
    files = members(archive)
    names = list(files)
    assert names[0] == RUN_LOG and names[1:] == sorted(names[1:])
    assert all(not n.startswith("/") and ".." not in n for n in names)
    log = json.loads(files[RUN_LOG])
    device = local_device_id("cpu")
    assert log["complete"] and log["device"] == "cpu"
    assert log["environment"]["device_id"] == device and log["environment"]["torch"]
    by_name = {r["experiment"]: r for r in log["requests"]}
    assert by_name["_test_raises"]["status"] == "failed"
    assert "ValueError: deliberate failure with value=3" in by_name["_test_raises"]["error"]
    quick = by_name["_test_quick"]
    key = get("_test_quick").key(QUICK["requested"])
    assert quick["status"] == "ok" and quick["params"] == {"seq_len": 8, "causal": True}
    assert quick["entries"] == [
        f"_test_quick/{key}.{device}.json",
        f"_test_quick/{key}.{device}.trace.json.gz",
    ]
    assert sorted(n for n in names if n != RUN_LOG) == [f"store/{e}" for e in quick["entries"]]
    assert sorted(p.name for p in (tmp / "out").iterdir()) == [
        "measurements.tar.gz",
        "run-log.json",
    ]
    assert json.loads((tmp / "out" / "run-log.json").read_text()) == log

    store = tmp / "imported"
    store.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "attention_docs", "import-archive", str(archive), "--store", store],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert f"{device}: 1 entry imported" in out.stdout
    assert "failed on the device: _test_raises" in out.stdout
    m = Store(store).get("_test_quick", key, device)
    assert m is not None and m.device_id == device and m.params["seq_len"] == 8
    for path in (store / "_test_quick").iterdir():
        assert path.stat().st_mode & 0o777 == 0o644


def test_no_budget_skips_every_request_and_says_so(tmp_path):
    proc = gpu_measure(tmp_path, "--budget-s", "0")
    assert proc.returncode == 1
    assert "0 ok, 0 failed, 2 skipped" in proc.stdout
    assert proc.stdout.count("skipped     0.0 s") == 2 and "over budget" in proc.stdout
    files = members(tmp_path / "out" / "measurements.tar.gz")
    assert list(files) == [RUN_LOG]
    log = json.loads(files[RUN_LOG])
    assert [r["status"] for r in log["requests"]] == ["skipped", "skipped"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_missing_device_skips_every_request_with_the_reason(tmp_path):
    manifest = tmp_path / "requests.json"
    manifest.write_text(json.dumps([QUICK]), encoding="utf-8")
    out = tmp_path / "out"
    proc = run_script("--device", "cuda", "--requests", str(manifest), "--out", str(out))
    assert proc.returncode == 1
    log = json.loads((out / "run-log.json").read_text())
    assert "no usable CUDA device" in log["environment"]["error"]
    assert log["requests"][0]["status"] == "skipped"
    assert log["requests"][0]["reason"].startswith("the device is unusable")


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_measure", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_plan():
    from attention_docs import gpu_plan

    return gpu_plan


def test_requests_run_in_the_order_the_pages_need_them():
    plan = load_plan()
    names = ["wall_seq_len", "later", "forward_times", "nowhere", "winners_summary"]
    names += ["naive_steps", "machine_ceilings", "earlier", "sdpa_backends"]
    shown = {"earlier": ["01-a"], "wall_seq_len": ["05-b"], "later": ["09-c"]}
    order = plan.run_order([{"experiment": n, "requested": {}} for n in names], shown)
    assert [r["experiment"] for r in order] == [
        "machine_ceilings",
        "forward_times",
        "naive_steps",
        "sdpa_backends",
        "winners_summary",
        "earlier",  # then the chapters' order
        "wall_seq_len",
        "later",
        "nowhere",  # then what no chapter shows
    ]


def test_every_experiment_declares_its_gpu_work():
    """A new or renamed experiment gets gpu_plan.DEFAULT until its declaration counts its work
    (`@experiment(..., gpu_work=lambda p: Work(...))`); this test says which to declare."""
    from attention_docs.experiments.registry import REGISTRY

    plan = load_plan()
    get("naive_steps")  # loads every experiment
    missing = []
    for name, exp in sorted(REGISTRY.items()):
        if name.startswith("_"):
            continue  # the tests' own experiments
        work, counted = plan.work(name, exp.resolve({}, "cuda"))
        if not counted:
            missing.append(name)
        assert work.seconds > START_S, name
    assert missing == [], f"declare gpu_work= with these experiments: {missing}"
    # ... and at the parameters the site requests: an estimate that fails on them (a renamed
    # parameter) would plan the GPU call with the default.
    script = load_script()
    for request in read_requests(ROOT / "docs" / "measurements" / "requests.json"):
        params, error = script.resolve(request, "cuda")
        assert error is None, error
        assert plan.work(request["experiment"], params)[1], request


def test_an_experiment_without_gpu_work_gets_the_default_and_is_named(monkeypatch):
    from dataclasses import replace

    from attention_docs.experiments.registry import REGISTRY

    plan = load_plan()
    exp = get("naive_steps")
    params = exp.resolve({}, "cuda")
    assert plan.work("naive_steps", params) == (exp.gpu_work(params), True)
    monkeypatch.setitem(REGISTRY, "naive_steps", replace(exp, gpu_work=None))
    assert plan.work("naive_steps", params) == (plan.DEFAULT, False)
    with pytest.raises(
        AssertionError, match=r"declare gpu_work= with these experiments: \['naive_steps'\]"
    ):
        test_every_experiment_declares_its_gpu_work()


def test_a_gpu_estimate_is_no_part_of_the_fingerprint():
    """Editing an experiment's gpu_work (and importing Work for it) re-measures nothing; an
    edit of what it measures does."""
    from attention_docs.measurements.keys import code_fingerprint_text

    before = """
from attention_docs.experiments.registry import Observed, experiment

@experiment("x", summary="s", seq_len=1)
def x(ctx, *, seq_len):
    return Observed()
"""
    after = before.replace("Observed, experiment", "Observed, Work, count_items, experiment")
    after = after.replace(
        'summary="s",', 'summary="s", gpu_work=lambda p: Work(timed=count_items("a,b")),'
    )
    assert code_fingerprint_text(after) == code_fingerprint_text(before)
    changed = before.replace("seq_len=1)", "seq_len=2)")
    assert code_fingerprint_text(changed) != code_fingerprint_text(before)
    # A registry name the measuring code uses stays in it: only the estimate's imports go.
    used = after.replace("return Observed()", "return Observed(timing=Work())")
    assert code_fingerprint_text(used) != code_fingerprint_text(before)


def test_an_estimate_grows_with_the_work_it_counts():
    plan = load_plan()
    assert Work(compiles=2).seconds - Work(compiles=1).seconds == COMPILE_S
    decode = get("decode_steps").resolve({}, "cuda")
    longer = {**decode, "max_cache_len": 4 * decode["max_cache_len"]}
    assert (
        plan.work("decode_steps", longer)[0].seconds > plan.work("decode_steps", decode)[0].seconds
    )
    tiny = plan.work("forward_times", {"tiny": True})[0]
    assert tiny.seconds < plan.work("forward_times", {"tiny": False})[0].seconds
    assert plan.work("no_such_experiment", {}) == (plan.DEFAULT, False)
    assert plan.work("naive_step_shares", {"renamed": 1}) == (plan.DEFAULT, False)


def test_a_plan_over_budget_says_which_pages_would_lose_what(tmp_path, capsys):
    manifest = tmp_path / "requests.json"
    manifest.write_text(
        json.dumps(
            [
                {"experiment": n, "requested": {}}
                for n in ("flex_masks", "naive_steps", "machine_ceilings")
            ]
        )
    )
    args = ["--plan", "--requests", str(manifest), "--estimates", str(tmp_path)]
    code = load_script().main([*args, "--budget-s", "20"])
    out = capsys.readouterr().out
    assert code == 1
    assert "1. machine_ceilings" in out and "2. naive_steps" in out  # the core first
    assert "flex_masks {} [~" in out and "SKIPPED" in out
    assert "requests would be skipped; these pages would lose them:" in out
    assert "  10-flex-attention: flex_masks" in out
    assert load_script().main([*args, "--budget-s", "10000"]) == 0
    assert "all 3 requests fit the budget" in capsys.readouterr().out


def test_a_stored_gpu_duration_beats_the_counted_estimate(tmp_path):
    script = load_script()
    entry = json.loads(
        next((ROOT / "docs" / "measurements" / "naive_steps").glob("*.json")).read_text()
    )
    entry["provenance"]["device"]["kind"] = "cuda"
    entry["provenance"]["duration_s"] = 123.0
    (tmp_path / "naive_steps").mkdir()
    (tmp_path / "naive_steps" / "x.cuda-h200.json").write_text(json.dumps(entry))
    known = script.estimates(tmp_path, "cuda")
    request = {"experiment": "naive_steps", "requested": entry["requested"]}
    seconds, source = script.estimate(request, known, "cuda")
    assert source == "measured" and seconds == 123.0 + START_S


def test_plan_lists_the_parameters_each_request_gets_on_cuda(tmp_path, capsys):
    manifest = tmp_path / "requests.json"
    manifest.write_text(json.dumps([{"experiment": "naive_steps", "requested": {}}, QUICK]))
    code = load_script().main(["--plan", "--requests", str(manifest), "--estimates", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "2 requests, in run order, with their parameters on cuda" in out
    assert '"seq_len":2048' in out  # naive_steps' GPU default, not its CPU default of 256
    assert '{"seq_len":8,"causal":true}' in out
    assert not (tmp_path / "measurements.tar.gz").exists()


@pytest.mark.parametrize(
    ("name", "link", "message"),
    [
        ("../evil", None, "points outside the archive ('../evil')"),
        ("store/../../evil", None, "points outside the archive"),
        ("/abs/evil", None, "absolute path ('/abs/evil')"),
        (None, "store/x/evil", "holds a link ('store/x/evil')"),
        ("evil.sh", None, "neither run-log.json nor a store entry"),
    ],
)
def test_unsafe_members_are_refused(tmp_path, capsys, name, link, message):
    files = {RUN_LOG: b"{}"} | ({name: b"boom"} if name else {})
    (tmp_path / "a").mkdir()
    archive = pack(tmp_path / "a" / "evil.tar.gz", files, link)
    store = tmp_path / "a" / "store"
    code, _, err = import_archive(capsys, archive, "--store", store)
    assert code == 2
    assert message in err and "nothing was imported" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "evil").exists() and not (tmp_path / "a" / "evil").exists()
    assert not store.exists()


def test_corrupt_archive_is_one_sentence(tmp_path, capsys):
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"\x1f\x8b not really gzip")
    code, _, err = import_archive(capsys, bad, "--store", tmp_path / "store")
    assert code == 2 and "bad.tar.gz is not a readable gzipped tar archive" in err
    assert len(err.strip().splitlines()) == 1


def test_stale_and_corrupt_entries(rehearsal, tmp_path, capsys):
    tmp, _ = rehearsal
    files = members(tmp / "out" / "measurements.tar.gz")
    entry = next(n for n in files if n.endswith(".json") and n != RUN_LOG)
    data = json.loads(files[entry])

    # The same name and key, but parameters this code would key differently: other code.
    data["requested"] = {"seq_len": 9}
    stale = pack(tmp_path / "stale.tar.gz", files | {entry: json.dumps(data).encode()})
    store = tmp_path / "store"
    store.mkdir()
    code, out, _ = import_archive(capsys, stale, "--store", store)
    assert code == 1
    assert "stale, not imported" in out and "is not the key this code gives its parameters" in out
    assert not list(store.glob("*/*.json"))
    code, out, _ = import_archive(capsys, stale, "--store", store, "--allow-stale")
    assert code == 0 and "1 entry imported" in out and "(stale)" in out
    assert len(list(store.glob("*/*.json"))) == 1

    # One unreadable entry: nothing is imported, and the sentence names it.
    broken = files | {entry: b'{"schema_version": 2, "experiment": "_test_quick"}'}
    fresh = tmp_path / "fresh"
    code, _, err = import_archive(
        capsys, pack(tmp_path / "broken.tar.gz", broken), "--store", fresh
    )
    assert code == 2 and f"{entry} is not a measurement this build can read" in err
    assert len(err.strip().splitlines()) == 1 and not fresh.exists()

    # An entry without the trace it names.
    no_trace = {n: b for n, b in files.items() if not n.endswith(".gz")}
    code, _, err = import_archive(capsys, pack(tmp_path / "nt.tar.gz", no_trace), "--store", fresh)
    assert code == 2 and "which is missing" in err


def test_archive_bytes_are_deterministic(tmp_path):
    store = tmp_path / "store"
    (store / "exp_a").mkdir(parents=True)
    (store / "exp_a" / "0123abcd.cpu-x.json").write_text("{}")
    (store / ".lock").write_text("")
    first = write_archive(tmp_path / "1.tar.gz", store, {"b": 1, "a": 2}).read_bytes()
    second = write_archive(tmp_path / "2.tar.gz", store, {"a": 2, "b": 1}).read_bytes()
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(first))) as tar:
        assert tar.getnames() == [RUN_LOG, "store/exp_a/0123abcd.cpu-x.json"]


class _Zeros(io.RawIOBase):
    """`size` zero bytes, read in chunks: a large member without holding it in memory."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def test_a_member_over_the_member_cap_is_refused_naming_that_cap(tmp_path, capsys):
    """A 100 MiB member was refused as taking the archive "past 512 MiB" (the total cap);
    the cap it broke is the one a member has, 64 MiB."""
    from attention_docs.archive import MAX_MEMBER_BYTES

    archive = tmp_path / "big.tar.gz"
    name = "store/_test_quick/0123456789abcdef.cpu-x.json"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo(name)
        info.size = 100 * 2**20
        tar.addfile(info, io.BufferedReader(_Zeros(info.size)))
    assert info.size > MAX_MEMBER_BYTES
    code, _, err = import_archive(capsys, archive, "--store", tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"big.tar.gz holds {name!r} of 100.0 MiB, more than the 64.0 MiB" in err
    assert "512" not in err and "nothing was imported" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # nan said "all 28 requests fit the budget" (exit 0); -1 was taken as a budget.
        (["--plan", "--budget-s", "nan"], "--budget-s: 'nan' is not a number of seconds"),
        (["--plan", "--budget-s", "inf"], "--budget-s: 'inf' is not a number of seconds"),
        (
            ["--plan", "--budget-s", "-1"],
            "--budget-s: must be zero or a positive number of seconds",
        ),
        (["--plan", "--budget-s", ""], "--budget-s: '' is not a number of seconds"),
        (["--plan", "--budget-s", "1e12"], "--budget-s: 1e12 s is more than a week"),
        (["--out", "FILE", "--budget-s", "0"], "--out FILE is a file, not a folder"),
        (["--out", "", "--budget-s", "0"], "argument --out: is empty"),
        (["--plan", "--requests", ""], "argument --requests: is empty"),
        (["--plan", "--requests", "BINARY"], "cannot read the requests manifest BINARY: it is"),
        (["--plan", "--estimates", "NOWHERE"], "--estimates NOWHERE is not a store folder"),
        (["--plan", "--estimates", "FILE"], "--estimates FILE is not a store folder"),
    ],
)
def test_gpu_measure_refuses_bad_input_in_one_sentence(tmp_path, capsys, argv, message):
    (tmp_path / "file").write_text("not a folder\n")
    (tmp_path / "binary").write_bytes(bytes(range(256)))
    names = {
        "FILE": tmp_path / "file",
        "BINARY": tmp_path / "binary",
        "NOWHERE": tmp_path / "nowhere",
    }
    argv = [str(names.get(a, a)) for a in argv]
    try:
        code = load_script().main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    for name, path in names.items():
        message = message.replace(name, str(path))
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (tmp_path / "file").read_text() == "not a folder\n"


def test_gpu_measure_into_a_read_only_out_is_refused_before_it_measures(tmp_path, capsys):
    from conftest import read_only

    manifest = tmp_path / "requests.json"
    mark = tmp_path / "started"
    request = {"experiment": "_test_marks", "requested": {"mark": str(mark)}}
    manifest.write_text(json.dumps([request]), encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    argv = ["--device", "cpu", "--requests", str(manifest), "--out", str(out), "--budget-s", "60"]
    with read_only(out), pytest.raises(SystemExit) as exited:
        load_script().main(argv)
    code, err = exited.value.code, capsys.readouterr().err
    assert code == 2 and f"--out {out} cannot be written (Permission denied" in err, err
    assert not mark.exists() and list(out.iterdir()) == []


def test_a_plan_with_an_invalid_request_says_it_cannot_run_and_spends_no_budget(tmp_path, capsys):
    """It ended "all 2 requests fit the budget" (exit 2), and counted the invalid request's
    default estimate against the budget, which the run never spends on it."""
    manifest = tmp_path / "requests.json"
    invalid = {"experiment": "_test_quick", "requested": {"bogus": 1}}
    manifest.write_text(json.dumps([invalid, QUICK]))
    args = ["--plan", "--device", "cpu", "--requests", str(manifest), "--estimates", str(tmp_path)]
    code = load_script().main(args)
    out = capsys.readouterr().out
    assert code == 2
    assert '_test_quick {"bogus": 1} [not run: INVALID]' in out
    assert "1 of the 2 requests can run, and fit the budget; 1 cannot (INVALID above)" in out
    assert "all 2 requests fit" not in out


def test_gpu_measure_with_a_python_that_lacks_the_dependencies_says_so(tmp_path):
    """The README's lent-machine command, run with a Python that has none of the package's
    dependencies (a fresh virtual environment): one sentence, not ModuleNotFoundError."""
    import venv

    venv.create(tmp_path / "bare")  # no pip, no torch, no filelock
    bare = tmp_path / "bare" / ("Scripts" if sys.platform == "win32" else "bin") / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [bare, str(ROOT / "tools" / "gpu_measure.py"), "--plan"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "lacks torch, numpy, filelock: run the script with the Python that has torch" in (
        done.stderr
    )
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
