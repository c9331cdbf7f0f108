import json
import multiprocessing
import shutil
from dataclasses import replace

import pytest
from recorded import recorded

from attention_docs.experiments.registry import get
from attention_docs.measurements import SCHEMA_VERSION, Measurement, SchemaError, Store
from attention_docs.measurements.keys import PACKAGE_ROOT, fingerprint, source_tokens, store_key


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

    t = Timing(median_us=10.0, iqr_us=1.0, runs=30, method="test", rounds_us=(9.0, 10.0, 12.5))
    table = Table(("name", "time"), (("a", t), ("b", None)), {"time": "µs"})
    m = replace(naive, tables={"sweep": table})
    again = Measurement.loads(m.dumps())
    cell = again.tables["sweep"].records()[0]["time"]
    assert isinstance(cell, Timing) and cell.rounds_us == (9.0, 10.0, 12.5)
    assert again.tables["sweep"].records()[1]["time"] is None
    # A version-2 entry (scalars only) is still read, as version 3.
    data = json.loads(naive.dumps())
    data["schema_version"] = 2
    assert Measurement.from_json(data).schema_version == SCHEMA_VERSION


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
