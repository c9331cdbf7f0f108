import hashlib
import re

import pytest
from conftest import python_prints
from recorded import recorded

from attention_docs import render
from attention_docs.measurements import Measurement, Sourced, Store
from attention_docs.render import words as fmt


@pytest.fixture
def naive():
    """naive_steps as the store recorded it (tests/data/measurements/)."""
    return recorded("naive_steps")


@pytest.fixture
def sourced(naive, tmp_path):
    stored = Store(tmp_path).put(naive, {"traceEvents": []})
    return Sourced(stored, "from the store", f"naive_steps/{stored.key}.cpu.json")


def test_step_table_has_a_row_per_step_and_a_caption(sourced):
    table = render.tables.step_table(sourced)
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
    seq_len = sourced.measurement.params["seq_len"]
    assert "from the store" in table and f"seq_len={seq_len}" in table


def test_op_table_lists_the_profiled_ops(sourced):
    table = render.tables.op_table(sourced)
    assert "`aten::bmm`" in table and "| CPU |" in table


def test_timeline_is_an_accessible_captioned_svg(sourced):
    html = render.timeline.timeline_figure(sourced)
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
        "out = render.tables.step_table(s) + render.tables.op_table(s) + render.timeline.timeline_figure(s); "
        "print(hashlib.sha256(out.encode()).hexdigest())"
    )
    digests = {python_prints(code) for _ in range(2)}
    again = Sourced(Measurement.loads(path.read_text()), "from the store", "x.json")
    here = hashlib.sha256(
        (
            render.tables.step_table(again)
            + render.tables.op_table(again)
            + render.timeline.timeline_figure(again)
        ).encode()
    ).hexdigest()
    assert digests == {here}


def test_claims_are_computed_from_the_measurement(naive):
    m = naive
    top = max(m.steps, key=lambda s: s.time_us)
    sentence = render.claims.dominant_step(m)
    # The largest step comes first, alone or tied with the next (the forwards decide).
    assert sentence.startswith(f"`{top.label}` ")
    assert fmt.percent(render.claims.share(m, top.label)) in sentence
    note = render.claims.device_note(m, cpu="on the cpu", cuda="on the gpu")
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


def test_a_pipe_in_a_cell_is_escaped_for_the_table_but_not_inside_a_tag():
    fact = '<span class="ad-fact" data-fact="forward|cpu-x|naive">1 ms</span>'
    table = render.tables.markdown_table(["What", "Time"], [["a | b", fact]])
    row = table.splitlines()[-1]
    assert row == (
        '| a \\| b | <span class="ad-fact" data-fact="forward&#124;cpu-x&#124;naive">1 ms</span> |'
    )


def with_per_forward(m, per_forward):
    """`m` whose steps' profiled times are `per_forward` (label -> one value per forward)."""
    from dataclasses import replace

    from attention_docs.measurements import Table

    labels = [s.label for s in m.steps]
    n = len(per_forward[labels[0]])
    rows = tuple((i + 1, *(per_forward[label][i] for label in labels)) for i in range(n))
    steps = tuple(replace(s, time_us=sum(per_forward[s.label]) / n) for s in m.steps)
    return replace(
        m, steps=steps, tables={"per_forward": Table(("forward", *labels), rows)}, timing=None
    )


def test_dominant_step_is_a_tie_when_the_forwards_overlap(naive):
    base = {"attention.scale": [1.0] * 3, "attention.mask": [1.0] * 3}
    apart = with_per_forward(
        naive,
        {
            **base,
            "attention.scores": [10.0, 11.0, 12.0],
            "attention.softmax": [5.0, 6.0, 7.0],
            "attention.weighted_sum": [8.0, 8.5, 9.0],
        },
    )
    sentence = render.claims.dominant_step(apart)
    assert sentence.startswith("`attention.scores` takes the largest share")
    assert "in each of the 3 profiled forwards" in sentence
    tied = with_per_forward(
        naive,
        {
            **base,
            "attention.scores": [10.0, 11.0, 12.0],
            "attention.softmax": [5.0, 6.0, 7.0],
            "attention.weighted_sum": [9.0, 10.5, 11.5],
        },
    )
    sentence = render.claims.dominant_step(tied)
    assert "`attention.scores` (" in sentence and "within noise of each other" in sentence
    assert "ranged 10 µs–12 µs" in sentence and "9 µs–11.5 µs" in sentence


def test_profiled_and_unprofiled_forward_are_set_side_by_side(naive):
    from fake_times import forward_times_for

    m = with_per_forward(
        naive,
        {s.label: [100.0, 110.0, 120.0] for s in naive.steps},
    )  # five steps: 500, 550 and 600 µs per forward
    times = forward_times_for(m, (400.0, 390.0, 410.0))
    claim = render.claims.profiled_vs_unprofiled(m, times)
    assert "sum to **550 µs** per forward (500 µs–600 µs over 3 profiled forwards)" in claim
    assert "1.38× (1.22–1.54×) the unprofiled time" in claim
    assert "**150 µs** per forward" in claim and "profiler's own overhead" in claim
    shorter = render.claims.profiled_vs_unprofiled(m, forward_times_for(m, (700.0, 690.0, 710.0)))
    assert "*shorter*" in shorter


def test_intensity_and_mask_step_claims_come_from_the_cost_model_and_the_times(naive):
    from dataclasses import replace

    from fake_times import forward_times_for

    from attention_docs.analytic.cost import step_costs

    # The recorded steps at a small shape, their FLOPs and bytes from the cost model there.
    small = {"batch_size": 1, "num_heads": 2, "seq_len": 32, "head_dim": 16, "dtype": "float32"}
    costs = {c.label: c for c in step_costs(1, 2, 32, 16, "float32", causal=True)}
    steps = tuple(
        replace(s, flops=costs[s.label].flops, bytes=costs[s.label].bytes) for s in naive.steps
    )
    tiny = replace(naive, params={**naive.params, **small}, steps=steps)
    claim = render.claims.intensity_claim(tiny)
    # 2·N·D / (e·(2·D + N)) = 2·32·16 / (4·64) = 4 FLOP/B, half the cap 2·16/4 = 8.
    assert "`attention.scores` 4," in claim and "**8 FLOP/B**" in claim
    assert f"{fmt.percent(0.5)} of that ceiling" in claim
    steps = {
        "attention.mask": (30.0, 28.0, 32.0),
        "attention.scores": (10.0, 9.0, 11.0),
        "attention.weighted_sum": (29.0, 27.0, 31.0),
    }
    times = forward_times_for(tiny, (100.0, 95.0, 105.0), steps)
    text = render.claims.mask_step_claim(tiny, times)
    assert "3× (2.55–3.56×) the time of `attention.scores`" in text
    assert "within noise of `attention.weighted_sum`" in text
