import hashlib
import re
from dataclasses import replace

import pytest
from conftest import python_prints
from fake_times import forward_times_for
from synthetic_forward import forward_times as synthetic_forward_times
from synthetic_forward import row

from attention_docs import render
from attention_docs.analytic import gpu
from attention_docs.findings import steps as fs
from attention_docs.measurements import Measurement, Sourced, Store
from attention_docs.measurements import forward as fwd
from attention_docs.records.steps import STEPS
from attention_docs.render import words as fmt


def text(html: str) -> str:
    """What a reader sees: the fact spans' text without their markup."""
    return re.sub(r"<[^>]+>", "", html)


@pytest.fixture
def sourced(tiny_measurement, tmp_path):
    stored = Store(tmp_path).put(tiny_measurement, {"traceEvents": []})
    return Sourced(stored, "from the store", f"naive_steps/{stored.key}.cpu.json")


def test_step_table_has_a_row_per_step_and_a_caption(sourced):
    table = render.steps.step_table(sourced)
    for label in STEPS:
        assert f"`{label}`" in table
    # Each share is a fact; the medians over the forwards lie inside their ranges' sums.
    found = fs.steps(sourced.measurement)
    assert sum(s.share.low for s in found.steps) <= 1 <= sum(s.share.high for s in found.steps)
    assert table.count('data-fact="share of the profiled steps;') == len(STEPS)
    assert "Time per forward (profiled)" in table and "FLOPs (cost model)" in table
    assert "FLOP/s" not in table  # no rate from a profiled time
    assert '<p class="ad-caption">' in table
    assert "@measurements/naive_steps/" in table
    assert "from the store" in table and "seq_len=32" in table


def test_step_rates_come_from_the_unprofiled_step_times(tiny_measurement):
    """Issue 16: "Achieved FLOP/s" divided profiled times (attention.scale at 500 µs where
    its unprofiled time was 39 µs). Rates now divide the steps' unprofiled times in the
    forward."""
    steps = dict.fromkeys(STEPS, (40.0, 38.0, 44.0))
    times = forward_times_for(tiny_measurement, (300.0, 290.0, 310.0), steps)
    table = render.steps.step_table(Sourced(tiny_measurement, "now", "x.json"), times=times)
    header = table.splitlines()[0]
    assert "(profiled)" in header and "In the forward (unprofiled)" in header
    assert "Achieved (unprofiled)" in header and "FLOP/s (a matmul) or bytes/s" in table
    rows = {line.split(" | ")[0]: line for line in table.splitlines()}
    scale = tiny_measurement.step("attention.scale")
    scores = tiny_measurement.step("attention.scores")
    row = rows["| `attention.scale`"]  # element-wise: the bytes it moved per unprofiled second
    assert f">{fmt.per_second(scale.bytes / 40e-6, 'B')} (" in row and "40 µs (38–44 µs)" in row
    fact_id = "achieved bandwidth;attention.scale;b1 h2 n32 d16 float32 causal;unprofiled;"
    assert f'data-fact="{fact_id}' in row
    row = rows["| `attention.scores`"]  # a matmul: its FLOPs per unprofiled second
    assert f">{fmt.per_second(scores.flops / 40e-6, 'FLOP')} (" in row


def test_op_table_lists_the_profiled_ops(sourced):
    table = render.steps.op_table(sourced)
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
        "out = render.steps.step_table(s) + render.steps.op_table(s) + render.timeline.timeline_figure(s); "
        "print(hashlib.sha256(out.encode()).hexdigest())"
    )
    digests = {python_prints(code) for _ in range(2)}
    again = Sourced(Measurement.loads(path.read_text()), "from the store", "x.json")
    here = hashlib.sha256(
        (
            render.steps.step_table(again)
            + render.steps.op_table(again)
            + render.timeline.timeline_figure(again)
        ).encode()
    ).hexdigest()
    assert digests == {here}


def test_claims_are_computed_from_the_measurement(tiny_measurement):
    m = tiny_measurement
    found = fs.steps(m)
    top = found.step(found.largest.part)
    sentence = render.claims.dominant_step(m)
    # The largest step comes first, alone or tied with others (the forwards decide).
    assert sentence.startswith(f"`{top.label}` ")
    assert fmt.percent(top.share.value) in sentence
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


def test_dominant_step_is_a_tie_when_the_forwards_overlap(tiny_measurement):
    base = {"attention.scale": [1.0] * 3, "attention.mask": [1.0] * 3}
    apart = with_per_forward(
        tiny_measurement,
        {
            **base,
            "attention.scores": [10.0, 11.0, 12.0],
            "attention.softmax": [5.0, 6.0, 7.0],
            "attention.weighted_sum": [8.0, 8.5, 9.0],
        },
    )
    sentence = text(render.claims.dominant_step(apart))
    assert sentence.startswith("`attention.scores` takes the largest share")
    assert "beyond the noise of every other step over 3 profiled forwards" in sentence
    tied = with_per_forward(
        tiny_measurement,
        {
            **base,
            "attention.scores": [10.0, 11.0, 12.0],
            "attention.softmax": [5.0, 6.0, 7.0],
            "attention.weighted_sum": [12.0, 10.5, 9.0],  # shares overlap forward by forward
        },
    )
    sentence = text(render.claims.dominant_step(tied))
    assert sentence.startswith("`attention.scores` (")
    assert "within noise of `attention.weighted_sum` (" in sentence
    # Shares are facts with the range over the forwards.
    assert "(34.5–40%)" in sentence  # shares are facts with their range over the forwards


def test_profiled_and_unprofiled_forward_are_set_side_by_side(tiny_measurement):
    m = with_per_forward(
        tiny_measurement,
        {s.label: [100.0, 110.0, 120.0] for s in tiny_measurement.steps},
    )  # five steps: 500, 550 and 600 µs per forward; their lower quartile 525 µs
    times = forward_times_for(m, (400.0, 390.0, 410.0))
    # A profile counts its forwards' page faults (profiling/profile.py); an older one did not.
    assert m.facts["page_faults_per_forward"] >= 0
    facts = {k: v for k, v in m.facts.items() if k != "page_faults_per_forward"}
    m = replace(m, facts=facts)
    claim = text(render.claims.profiled_vs_unprofiled(m, times))
    assert "sum to **525 µs (500–600 µs)** per forward" in claim
    assert "without it the forward takes 400 µs (390–410 µs)" in claim
    # Timed in two processes, the difference is not called the profiler's cost: chapter 01
    # measures that within one process. No per-event cost, no "bookkeeping", no difference.
    assert (
        "timed in separate processes" in claim and "is no measure of the profiler's cost" in claim
    )
    assert "01-reading-a-profile.md#what-the-profiler-costs" in claim
    assert "125 µs" not in claim and "bookkeeping" not in claim and "per event" not in claim
    # Page faults are stated only where counted, as counted.
    assert "page faults" not in claim
    counted = replace(m, facts={**m.facts, "page_faults_per_forward": 512.0})
    claim = text(render.claims.profiled_vs_unprofiled(counted, times))
    assert "Each profiled forward took 512 page faults." in claim
    settled = replace(m, facts={**m.facts, "page_faults_per_forward": 0.0})
    assert "took 0 page faults" in text(render.claims.profiled_vs_unprofiled(settled, times))
    # On a GPU the steps are kernel times, which host page faults do not pay for: not stated.
    gpu = replace(counted.provenance.device, kind="cuda", name="NVIDIA H200")
    on_gpu = replace(counted, provenance=replace(counted.provenance, device=gpu))
    assert "page faults" not in text(render.claims.profiled_vs_unprofiled(on_gpu, times))
    # Shorter, the same: neither a difference nor "shorter" is stated.
    shorter = text(
        render.claims.profiled_vs_unprofiled(m, forward_times_for(m, (700.0, 690.0, 710.0)))
    )
    assert "timed in separate processes" in shorter and "shorter" not in shorter
    tie = render.claims.profiled_vs_unprofiled(m, forward_times_for(m, (560.0, 540.0, 580.0)))
    assert "within noise of each other" in tie and "separate processes" not in tie


def test_mask_step_claim_compares_unprofiled_steps(tiny_measurement):
    steps = {
        "attention.mask": (30.0, 28.0, 32.0),
        "attention.scores": (10.0, 9.0, 11.0),
        "attention.weighted_sum": (29.0, 27.0, 31.0),
    }
    times = forward_times_for(tiny_measurement, (100.0, 95.0, 105.0), steps)
    claim = text(render.claims.mask_step_claim(tiny_measurement, times))
    assert "takes 30 µs (28–32 µs): 3× (2.55–3.56×) the time of `attention.scores`" in claim
    assert "within noise of `attention.weighted_sum` (1.03×)" in claim


def test_the_gpu_forecast_is_the_analytic_model_and_checks_a_gpu_entry(tiny_measurement):
    """Chapter 02's box: each step on the H200 at the forecast shape, from analytic.gpu; with
    a cuda-h200 forward_times entry in the store, measured beside forecast with the ratio."""
    h200 = gpu.sheet("h200")
    kernels = {k.label: k for k in gpu.naive_steps(h200, gpu.FORECAST_SHAPE)}
    box = render.claims.gpu_forecast([])
    assert box.startswith('!!! example "On a GPU: forecast for the NVIDIA H200')
    for label, k in kernels.items():
        assert f">{fmt.time_us(k.floor_us)}<" in box and f"`{label}` at" in box
        assert f"{k.limit}-bound floor" in box
    assert f">{fmt.time_us(gpu.naive_floor_us(h200))}<" in box
    assert "Measured ÷ forecast" not in box and "predictions only" in box
    # A synthetic H200 entry: every step at twice its floor, the forward at 3× the sum.
    base = replace(
        tiny_measurement,
        provenance=replace(tiny_measurement.provenance, device_id="cuda-h200"),
    )
    rows = [
        row(f"step {k}", gpu.FORECAST_SHAPE, 2 * v.floor_us, 1.9 * v.floor_us, 2.1 * v.floor_us)
        for k, v in kernels.items()
    ]
    rows.append(row(fwd.NAIVE, gpu.FORECAST_SHAPE, 3 * gpu.naive_floor_us(h200)))
    entry = synthetic_forward_times(base, rows)
    measured = text(render.claims.gpu_forecast([tiny_measurement, entry]))
    assert "Measured on the NVIDIA H200 | Measured ÷ forecast" in measured
    assert measured.count("| 2× (1.9–2.1×) |") == len(kernels)
    assert "| 3× |" in measured
    assert "predictions only" not in measured
    todo = text(render.claims.naive_what_to_do(Sourced(tiny_measurement, "now", "x.json"), []))
    assert f"floor, {fmt.time_us(gpu.naive_floor_us(h200))}, is set by the bytes" in todo


def test_chapter_02_opens_with_one_claim_in_two_numbers(tiny_measurement):
    """The matmuls' share of the FLOPs against their share of the profiled time; the share's
    range, the device and the shape in the caption under it; the GPU forecast later."""
    found = render.claims.finding(Sourced(tiny_measurement, "now", "x.json"))
    claim, caption = found.split('<p class="ad-caption">')
    assert claim.count('class="ad-fact"') == 2 and "of the FLOPs but take only" in claim
    assert tiny_measurement.provenance.device.label not in claim and "H200" not in found
    assert caption.count('class="ad-fact"') == 1 and "raw data (JSON)" in caption
