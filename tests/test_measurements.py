import json
import multiprocessing
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from recorded import recorded

from attention_docs.experiments.registry import get
from attention_docs.measurements import SCHEMA_VERSION, Measurement, SchemaError, Store
from attention_docs.measurements.keys import PACKAGE_ROOT, fingerprint, store_key
from attention_docs.measurements.source import source_tokens


@pytest.fixture
def naive():
    """naive_steps as the store recorded it (tests/data/measurements/)."""
    return recorded("naive_steps")


def test_measurement_json_round_trips(naive):
    text = naive.dumps()
    again = Measurement.loads(text)
    assert again == naive
    assert again.dumps() == text
    assert json.loads(text)["schema_version"] == SCHEMA_VERSION


def test_measurement_carries_provenance_and_steps(tiny_measurement):
    m = tiny_measurement
    assert m.provenance.device.kind == "cpu"
    assert m.provenance.torch_version
    assert m.params["seq_len"] == 32 and m.requested == {
        "seq_len": 32,
        "num_heads": 2,
        "head_dim": 16,
    }
    assert m.steps[0].label == "attention.scores"
    assert all(s.time_us > 0 for s in m.steps)
    assert m.timeline is not None
    assert m.timing is None  # forward times are forward_times' one job


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema_version": 0}', "schema version 0"),
        (
            json.dumps({"schema_version": SCHEMA_VERSION, "experiment": "x"}),
            "malformed measurement",
        ),
    ],
)
def test_unreadable_measurements_say_why(text, message):
    with pytest.raises(SchemaError, match=message):
        Measurement.loads(text)


def test_store_put_get_and_report_corrupt(tmp_path, naive):
    store = Store(tmp_path)
    m = naive
    stored = store.put(m, {"traceEvents": []})
    assert stored.trace_file == f"naive_steps/{m.key}.{m.device_id}.trace.json.gz"
    assert store.get("naive_steps", m.key, m.device_id) == stored
    assert store.get("naive_steps", m.key, "cuda") is None
    store.path("naive_steps", m.key, m.device_id).write_text("{ truncated")
    assert store.get("naive_steps", m.key, m.device_id) is None
    assert "not valid JSON" in str(store.problems[-1])
    assert m.key in str(store.problems[-1])


def test_store_rejects_an_entry_filed_under_the_wrong_key(tmp_path, naive):
    store = Store(tmp_path)
    store.put(naive)
    src = store.path("naive_steps", naive.key, naive.device_id)
    shutil.copy(src, store.path("naive_steps", "0" * 16, naive.device_id))
    assert store.get("naive_steps", "0" * 16, naive.device_id) is None
    assert "not naive_steps/0000000000000000" in str(store.problems[-1])


def _writer(root, text, n):
    store = Store(root)
    m = Measurement.loads(text)
    for i in range(n):
        store.put(replace(m, facts={"writer_round": i}), {"traceEvents": [{"i": i}]})


def test_concurrent_writers_leave_a_valid_store(tmp_path, naive):
    text = naive.dumps()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(tmp_path, text, 15)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = Store(tmp_path)
    assert store.get("naive_steps", naive.key, naive.device_id) is not None
    assert not store.problems
    leftovers = [p.name for p in tmp_path.rglob("*") if p.suffix == ".tmp"]
    assert leftovers == []


def test_fingerprint_ignores_comments_and_layout_but_not_code(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f(x):\n    return x + 1\n")
    before = fingerprint(["m.py"], tmp_path)
    src.write_text("# a comment\ndef f(x):  # why\n\n    return x+1\n")
    assert fingerprint(["m.py"], tmp_path) == before
    src.write_text("def f(x):\n    return x + 2\n")
    assert fingerprint(["m.py"], tmp_path) != before
    assert source_tokens("a = 1  # c\n") == "a\n=\n1"


def test_changing_measured_code_marks_exactly_its_experiments_stale(tmp_path):
    copy = tmp_path / "pkg"
    shutil.copytree(PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    naive = get("naive_steps")
    assert naive.fingerprint(copy) == naive.fingerprint()
    # A renderer is not measured code: editing it changes no fingerprint.
    (copy / "render" / "tables.py").write_text(
        (copy / "render" / "tables.py").read_text() + "\nX = 1\n"
    )
    assert naive.fingerprint(copy) == naive.fingerprint()
    (copy / "attention" / "naive.py").write_text(
        (copy / "attention" / "naive.py").read_text() + "\nY = 2\n"
    )
    assert naive.fingerprint(copy) != naive.fingerprint()


def test_store_key_depends_on_name_params_and_code():
    base = store_key("a", {"x": 1}, "f")
    assert base == store_key("a", {"x": 1}, "f")
    assert (
        len(
            {
                base,
                store_key("b", {"x": 1}, "f"),
                store_key("a", {"x": 2}, "f"),
                store_key("a", {"x": 1}, "g"),
            }
        )
        == 4
    )
    assert store_key("a", {"x": 1, "y": 2}, "f") == store_key("a", {"y": 2, "x": 1}, "f")


def test_timing_cells_keep_their_rounds_through_json(naive):
    """A table cell holding a Timing comes back whole: the rounds a page's spread is drawn
    from, not a low/median/high rebuilt from three columns."""
    from attention_docs.measurements.schema import Table
    from attention_docs.records.timing import Timing

    t = Timing(rounds_us=(9.0, 10.0, 12.5), runs=30, method="test")
    table = Table(("name", "time"), (("a", t), ("b", None)), {"time": "µs"})
    m = replace(naive, tables={"sweep": table})
    again = Measurement.loads(m.dumps())
    cell = again.tables["sweep"].records()[0]["time"]
    assert isinstance(cell, Timing) and cell.rounds_us == (9.0, 10.0, 12.5)
    assert again.tables["sweep"].records()[1]["time"] is None
    # A version-3 entry is still read (its timings' median and IQR left out: they are
    # derived from the rounds now), as is a version-2 one (no timings in tables).
    data = json.loads(m.dumps())
    data["schema_version"] = 3
    data["tables"]["sweep"]["rows"][0][1]["timing"] |= {"median_us": 10.0, "iqr_us": 1.0}
    del data["provenance"]["allocator"]
    old = Measurement.from_json(data)
    assert old.schema_version == SCHEMA_VERSION and old.tables["sweep"].rows[0][1] == t
    data["schema_version"] = 2
    assert Measurement.from_json(data).schema_version == SCHEMA_VERSION
    data["schema_version"] = 0
    with pytest.raises(SchemaError, match="schema version 0"):
        Measurement.from_json(data)


def _keys(copy: Path) -> dict[str, str]:
    """Every experiment's fingerprint computed from the package copy at `copy`."""
    from attention_docs.experiments import load_all
    from attention_docs.experiments.registry import REGISTRY

    load_all()
    return {name: exp.fingerprint(copy) for name, exp in REGISTRY.items()}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path.name} no longer holds {old!r}: update this test"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.fixture
def package_copy(tmp_path) -> Path:
    copy = tmp_path / "pkg"
    shutil.copytree(PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_a_sentence_edit_in_an_experiment_module_keeps_every_key(package_copy):
    before = _keys(package_copy)
    assert before == _keys(PACKAGE_ROOT)
    forward = package_copy / "experiments" / "forward.py"
    # A summary and a parameter's help (declarations), a docstring, a note, an exception's
    # message: prose, in the module whose entry the whole site reads.
    _edit(forward, 'summary="Every implementation', 'summary="All of the implementations')
    _edit(forward, 'help="two shapes only', 'help="just two shapes')
    _edit(forward, '"""Every implementation the site teaches', '"""All implementations taught')
    _edit(forward, "could not be imported here: {exc}", "failed to import: {exc}")
    _edit(
        package_copy / "profiling" / "timing.py",
        'raise ValueError(f"rounds must be at least 1',
        'raise ValueError(f"give at least one round',
    )
    _edit(
        package_copy / "experiments" / "_sweep.py",
        "was not run: it",
        "was skipped: it",
    )
    assert _keys(package_copy) == before


def test_a_change_to_the_timing_code_changes_exactly_the_keys_of_experiments_that_time(
    package_copy,
):
    before = _keys(package_copy)
    _edit(package_copy / "profiling" / "timing.py", "ROUNDS = 20", "ROUNDS = 21")
    after = _keys(package_copy)
    changed = {name for name in before if after[name] != before[name]}
    from attention_docs.experiments.registry import get

    timing = {n for n in before if "profiling/timing.py" in get(n).source_files}
    assert changed == timing
    assert "forward_times" in changed and "naive_steps" not in changed  # it profiles only


def test_an_edit_to_the_gpu_forecast_model_changes_no_key(package_copy):
    # The forecast is arithmetic on data sheets, run by no experiment: experiments read the
    # forecast shape from records/, so repricing a kernel re-measures nothing.
    before = _keys(package_copy)
    _edit(package_copy / "analytic" / "gpu.py", "FLASH_BLOCK_Q = 128", "FLASH_BLOCK_Q = 64")
    assert _keys(package_copy) == before
    from attention_docs.experiments.registry import REGISTRY

    assert not [n for n, e in REGISTRY.items() if "analytic/gpu.py" in e.source_files]


def test_a_changed_default_changes_the_key_of_a_request_that_left_it_out(package_copy):
    before = _keys(package_copy)
    _edit(
        package_copy / "experiments" / "forward.py",
        'tiny=Param(False, help="two',
        'tiny=Param(True, help="two',
    )
    after = _keys(package_copy)
    assert after["forward_times"] != before["forward_times"]
    assert after["naive_steps"] == before["naive_steps"]


def test_the_code_text_is_the_same_for_fields_some_python_versions_lack():
    """What a fingerprint hashes leaves out fields that only some Python versions have
    (3.12's `type_params`) and empty ones, so a GPU machine's interpreter (3.12) and this
    one (3.11) key the same code alike."""
    import ast

    from attention_docs.measurements.keys import code_fingerprint_text, code_text

    tree = ast.parse("def f(x):\n    return f'{x}!'\n")
    plain = code_text(tree)
    tree.body[0].type_params = []  # what 3.12's parser adds
    assert code_text(tree) == plain
    assert "type_params" not in plain and "ctx" not in plain
    # Comments, layout and docstrings are not code; a changed operator is.
    same = "def f(x):  # why\n    '''Says what.'''\n\n    return f'{x}!'\n"
    assert code_fingerprint_text(same) == code_fingerprint_text("def f(x):\n    return f'{x}!'\n")
    assert code_fingerprint_text("def f(x):\n    return x + 1\n") != code_fingerprint_text(
        "def f(x):\n    return x - 1\n"
    )
    # A string that is an input (a dtype name) is code; a message is not.
    assert code_fingerprint_text("x = 'float32'\n") != code_fingerprint_text("x = 'bfloat16'\n")
    assert code_fingerprint_text("raise ValueError('bad')\n") == code_fingerprint_text(
        "raise ValueError(f'bad {x}')\n"
    )


def test_every_python_on_this_machine_keys_the_package_alike():
    """Where other CPython versions are installed (a GPU machine runs 3.12), each computes
    the same fingerprints as this one."""
    import subprocess
    import sys

    def runs(python: str) -> bool:  # a pyenv shim of a version not selected does not
        probe = subprocess.run([python, "-c", "pass"], capture_output=True, check=False)
        return probe.returncode == 0

    others = [
        found
        for version in ("3.11", "3.12", "3.13", "3.14")
        if (found := shutil.which(f"python{version}"))
        and not sys.version.startswith(version + ".")
        and runs(found)
    ]
    if not others:
        pytest.skip("no other CPython version on PATH")
    code = (
        "import importlib.util, sys, pathlib; spec = importlib.util.spec_from_file_location("
        f"'k', {str(PACKAGE_ROOT / 'measurements' / 'keys.py')!r}); m = importlib.util."
        "module_from_spec(spec); sys.modules['k'] = m; spec.loader.exec_module(m); "
        f"print(m.fingerprint(m.measured_closure(['experiments/forward.py']), "
        f"pathlib.Path({str(PACKAGE_ROOT)!r})))"
    )
    from attention_docs.measurements.keys import fingerprint, measured_closure

    here = fingerprint(measured_closure(["experiments/forward.py"]))
    for python in others:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == here, python


def _newer(path) -> bytes:
    """The entry at `path` as a newer checkout would have written it: a schema this one
    cannot read."""
    data = json.loads(path.read_text())
    data["schema_version"] = SCHEMA_VERSION + 1
    data["a_field_of_the_future"] = [1, 2]
    path.write_text(json.dumps(data))
    return path.read_bytes()


NEWER = (
    f"written by a newer version of attention_docs (schema {SCHEMA_VERSION + 1}, this "
    f"checkout reads {SCHEMA_VERSION}): update your checkout"
)


def test_a_newer_schema_entry_is_named_and_never_overwritten(tmp_path, naive, caplog):
    """A build overwrote an entry a newer checkout wrote (and prune deleted it): data this
    checkout cannot read is data it must not lose."""
    from attention_docs.measurements.schema import NewerSchemaError

    store = Store(tmp_path)
    store.put(naive)
    path = store.path("naive_steps", naive.key, naive.device_id)
    written = _newer(path)
    with pytest.raises(NewerSchemaError, match=r"schema \d+, this checkout reads"):
        Measurement.loads(written.decode())
    assert store.get("naive_steps", naive.key, naive.device_id) is None
    (problem,) = store.problems
    assert problem.newer and NEWER in problem.reason
    assert "measured again" not in caplog.text and "it is left as it is" in caplog.text
    with pytest.raises(NewerSchemaError, match="update your checkout") as refused:
        store.put(naive, {"traceEvents": []})
    assert str(path) in str(refused.value) and "this measurement was not stored" in str(
        refused.value
    )
    assert path.read_bytes() == written
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no trace either
    ((found, m, unread),) = list(store.entries())
    assert found == path and m is None and unread.newer and NEWER in unread.reason


def test_an_older_version_is_still_an_unreadable_entry_not_a_newer_one():
    from attention_docs.measurements.schema import NewerSchemaError

    for version in (0, "4", True, None):
        with pytest.raises(SchemaError) as raised:
            Measurement.from_json({"schema_version": version})
        assert not isinstance(raised.value, NewerSchemaError), version


def test_a_file_is_written_whole_world_readable_and_a_failed_write_keeps_the_old(
    tmp_path, monkeypatch
):
    import os

    from attention_docs.files import write_atomically

    path = tmp_path / "new" / "entry.json"
    write_atomically(path, "µs\n")
    assert path.read_bytes() == "µs\n".encode()
    assert path.stat().st_mode & 0o777 == 0o644
    write_atomically(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        write_atomically(path, b"half")
    assert path.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in path.parent.iterdir()) == ["entry.json"]


def test_the_requests_manifest_is_read_one_way_and_refused_in_one_sentence(tmp_path):
    from attention_docs.measurements.manifest import read_requests, requests_text

    path = tmp_path / "requests.json"
    pairs = [("b", {"seq_len": 8}), ("a", {}), ("b", {"seq_len": 8}), ("a", {"x": 1})]
    path.write_text(requests_text(pairs))
    # Sorted (as JSON text) and unique as written; read back in that order, each as a full request.
    assert read_requests(path) == [
        {"experiment": "a", "requested": {"x": 1}},
        {"experiment": "a", "requested": {}},
        {"experiment": "b", "requested": {"seq_len": 8}},
    ]
    assert requests_text(reversed(pairs)) == path.read_text()
    path.write_text('[{"experiment": "a"}, {"experiment": "a", "requested": {}}]')
    assert read_requests(path) == [{"experiment": "a", "requested": {}}]
    binary = tmp_path / "binary.json"
    binary.write_bytes(bytes(range(256)))
    for content, message in (
        (None, "cannot read the requests manifest .*missing.json"),
        (binary, "it is a binary file, not JSON"),
        ("[", "cannot read the requests manifest"),
        ('{"experiment": "a"}', "holds a JSON object; it must be a JSON list of"),
        ('["a"]', 'request 0 of .* is "a"; it must be'),
        ('[{"experiment": "a", "requested": [1]}]', "request 0 of"),
    ):
        if isinstance(content, Path):
            target = content
        elif content is None:
            target = tmp_path / "missing.json"
        else:
            target = path
            path.write_text(content)
        with pytest.raises(ValueError, match=message):
            read_requests(target)


@pytest.fixture
def build_into(tmp_path, monkeypatch):
    """`measure` as a build calls it, into the store at tmp_path, where measuring fails the
    test: what cannot be kept must be said before anything is measured."""
    from attention_docs import book

    monkeypatch.setattr(book, "run_worker", lambda *a, **k: pytest.fail("it measured"))
    book.configure(book.Settings(store=tmp_path, busy_wait_s=0))
    yield book
    book.configure(book.Settings())


def test_a_read_only_store_is_said_before_measuring_and_once_per_build(tmp_path, build_into):
    from conftest import read_only

    from attention_docs.workers import MeasurementError

    (tmp_path / "_test_quick").mkdir()
    with read_only(tmp_path):
        with pytest.raises(MeasurementError, match="cannot be written") as refused:
            build_into.measure("_test_quick", seq_len=8)
        assert refused.value.message.startswith("_test_quick(seq_len=8) was not measured: ")
        with pytest.raises(MeasurementError) as again:  # another block asks for it
            build_into.measure("_test_quick", seq_len=8)
    assert again.value is refused.value


def test_a_newer_checkouts_entry_is_said_before_measuring_and_kept(tmp_path, build_into):
    from attention_docs.workers import MeasurementError

    exp = build_into.declaration("_test_quick")
    key = exp.key(exp.canonical({"seq_len": 8}))
    newer = Store(tmp_path).path("_test_quick", key, build_into.local_device_id("auto"))
    newer.parent.mkdir(parents=True)
    newer.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    before = newer.read_bytes()
    with pytest.raises(MeasurementError, match="written by a newer version of attention_docs"):
        build_into.measure("_test_quick", seq_len=8)
    assert newer.read_bytes() == before
