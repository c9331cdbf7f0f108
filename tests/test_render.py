import hashlib
import re
import subprocess
import sys

import pytest

from attention_docs import render
from attention_docs.measurements import Measurement, Sourced, Store
from attention_docs.render import _format as fmt


@pytest.fixture
def sourced(tiny_measurement, tmp_path):
    stored = Store(tmp_path).put(tiny_measurement, {"traceEvents": []})
    return Sourced(stored, "from the store", f"naive_steps/{stored.key}.cpu.json")


def test_step_table_has_a_row_per_step_and_a_caption(sourced):
    table = render.step_table(sourced)
    for label in (
        "attention.scores",
        "attention.scale",
        "attention.mask",
        "attention.softmax",
        "attention.weighted_sum",
    ):
        assert f"`{label}`" in table
    shares = [float(x) for x in re.findall(r"\| ([\d.]+)% \|", table)]
    assert sum(shares[:-1]) == pytest.approx(100, abs=0.3)  # the last is the total row's 100%
    assert '<p class="ad-caption">' in table
    assert "@measurements/naive_steps/" in table
    assert "from the store" in table and "seq_len=32" in table


def test_op_table_lists_the_profiled_ops(sourced):
    table = render.op_table(sourced)
    assert "`aten::bmm`" in table and "| CPU |" in table


def test_timeline_is_an_accessible_captioned_svg(sourced):
    html = render.timeline_figure(sourced)
    assert html.startswith('<figure class="ad-figure">')
    assert re.search(r'<svg role="img" aria-label="Timeline of one profiled forward[^"]+"', html)
    assert "<figcaption" in html and "Open in Perfetto" in html
    assert "<metadata>" not in html and "<?xml" not in html


def test_renderers_are_byte_stable_across_processes(sourced, tmp_path):
    """The same Measurement gives the same bytes, here and in a fresh interpreter."""
    path = tmp_path / "m.json"
    path.write_text(sourced.measurement.dumps())
    code = (
        "import sys, hashlib; from attention_docs import render; "
        "from attention_docs.measurements import Measurement, Sourced, Store; "
        f"m = Measurement.loads(open({str(path)!r}).read()); s = Sourced(m, 'from the store', 'x.json'); "
        "out = render.step_table(s) + render.op_table(s) + render.timeline_figure(s); "
        "print(hashlib.sha256(out.encode()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    again = Sourced(Measurement.loads(path.read_text()), "from the store", "x.json")
    here = hashlib.sha256(
        (render.step_table(again) + render.op_table(again) + render.timeline_figure(again)).encode()
    ).hexdigest()
    assert digests == {here + "\n"}


def test_renderers_do_not_import_torch():
    code = (
        "import sys; import attention_docs.render, attention_docs.measurements; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_claims_are_computed_from_the_measurement(tiny_measurement):
    m = tiny_measurement
    top = max(m.steps, key=lambda s: s.time_us)
    sentence = render.dominant_step(m)
    assert sentence.startswith(f"`{top.label}` takes the largest share")
    assert fmt.percent(render.share(m, top.label)) in sentence
    note = render.device_note(m, cpu="on the cpu", cuda="on the gpu")
    assert "on the cpu" in note and "on the gpu" not in note and note.startswith("!!! info")


@pytest.mark.parametrize(
    ("value", "text"), [(12.345, "12.3 µs"), (4560.0, "4.56 ms"), (2.5e6, "2.5 s")]
)
def test_time_format(value, text):
    assert fmt.time_us(value) == text


def test_rate_and_count_format():
    assert fmt.count(33_554_432) == "33.6 M"
    assert fmt.rate(2e9, 1000.0, "FLOP") == "2 TFLOP/s"
    assert fmt.rate(0, 10.0, "FLOP") == "—"
    assert fmt.nbytes(0) == "0 B"
