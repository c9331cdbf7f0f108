import re

import pytest
import torch
from recorded import recorded

from attention_docs import render
from attention_docs.attention.naive import naive_attention
from attention_docs.experiments._sweep import OUT_OF_MEMORY, sweep, timed_sweep
from attention_docs.findings.trend import fitted_slope, table_slopes
from attention_docs.inputs import make_qkv
from attention_docs.measurements import Sourced, Table
from attention_docs.profiling.memory import is_out_of_memory, peak_memory_bytes


def test_sweep_turns_out_of_memory_into_a_row_and_skips_larger_points():
    def measure(point):
        if point["n"] >= 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return {"time_us": float(point["n"])}

    table, notes = sweep([{"n": n} for n in (1, 2, 4, 8)], measure, columns=("n", "time_us"))
    assert table.column("status") == ["ok", "ok", OUT_OF_MEMORY, "skipped after an out-of-memory"]
    assert table.column("time_us") == [1.0, 2.0, None, None]
    assert notes == ["n=4 ran out of memory on this device."]


def test_a_timed_sweep_times_every_point_in_the_same_rounds():
    """Points compared on a page are timed together, round by round: one count of rounds and
    one method for all (timed one after another, each had its own); a point that runs out of
    memory while it is prepared is a row that says so and is not timed, as is one whose
    prepare gives nothing to time."""
    order = []

    def prepare(point):
        n = point["n"]
        if n == 8:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        a = torch.ones(n)
        return {"bytes": 4 * n}, None if n == 4 else (lambda: order.append(n) or a.sum())

    points = [{"n": n} for n in (1, 2, 4, 8)]
    table, notes = timed_sweep(
        points, prepare, columns=("n", "bytes"), device=torch.device("cpu"), min_run_time=0.01
    )
    assert table.columns == ("n", "bytes", "time", "status")
    assert table.column("status") == ["ok", "ok", "ok", OUT_OF_MEMORY]
    assert table.column("bytes") == [4, 8, 16, None]
    times = table.column("time")
    assert times[2] is None and times[3] is None
    assert len({(len(t.rounds_us), t.method) for t in times[:2]}) == 1
    assert "interleaved rounds" in times[0].method
    # Round by round: the two callables alternate, never one's rounds all before the other's.
    assert order.index(2) < len(order) - order[::-1].index(1) - 1
    assert notes == ["n=8 ran out of memory on this device."]


def test_a_timed_sweep_that_runs_out_of_memory_while_timing_marks_the_timed_points():
    def prepare(point):
        def call():
            if point["n"] == 2:
                raise torch.OutOfMemoryError("CUDA out of memory")

        return {}, call

    table, notes = timed_sweep(
        [{"n": 1}, {"n": 2}], prepare, columns=("n",), device=torch.device("cpu")
    )
    assert table.column("status") == [OUT_OF_MEMORY, OUT_OF_MEMORY]
    assert table.column("time") == [None, None]
    assert notes == ["the points ran out of memory while they were timed together"]


def test_sweep_does_not_hide_other_errors():
    def measure(point):
        raise ValueError("a real bug")

    with pytest.raises(ValueError, match="a real bug"):
        sweep([{"n": 1}], measure, columns=("n",))


def test_out_of_memory_is_recognised_on_cpu_and_cuda():
    assert is_out_of_memory(torch.OutOfMemoryError("x"))
    assert is_out_of_memory(
        RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 TB")
    )
    assert not is_out_of_memory(RuntimeError("shape mismatch"))


def test_peak_memory_of_naive_attention_holds_the_score_matrix():
    q, k, v = make_qkv(1, 2, 128, 16)
    peak = peak_memory_bytes(lambda: naive_attention(q, k, v, causal=True), torch.device("cpu"))
    scores = 2 * 128 * 128 * 4
    # At least two N×N float32 matrices are live at once (scores and their masked copy).
    assert 2 * scores <= peak <= 4 * scores


def test_fitted_slope_recovers_the_exponent():
    xs = [64, 128, 256, 512]
    assert fitted_slope(xs, [3 * x**2 for x in xs]) == pytest.approx(2.0)
    assert fitted_slope(xs, [5 * x for x in xs[:3]] + [None]) == pytest.approx(1.0)
    assert fitted_slope([1], [1]) is None


def test_line_figure_marks_missing_points_and_states_the_slope():
    from dataclasses import replace

    base = recorded("naive_steps")  # only its provenance matters here

    table = Table(
        ("seq_len", "time_us", "status"),
        ((64, 1.0, "ok"), (128, 4.0, "ok"), (256, None, OUT_OF_MEMORY)),
        {"time_us": "µs"},
    )
    s = Sourced(replace(base, tables={"sweep": table}), "from the store", "x.json")
    slopes = table_slopes(table, "seq_len", ["time_us"])  # the finding the figure is given
    html = render.plots.line_figure(
        s, "sweep", x="seq_len", ys=["time_us"], what="Time.", logx=True, logy=True, slopes=slopes
    )
    assert re.search(
        r'aria-label="Time\. Against sequence length: Time \(slope 2\): '
        r'64 → 1 µs, 128 → 4 µs, 256 → not available"',
        html,
    )
    assert "<figcaption" in html
    # Axes are labelled in words, never with the column's name; lines of one unit have it
    # in their ticks, as the tables write it (1 µs), not in the label.
    assert ">Sequence length</text>" in html and ">Time</text>" in html
    assert re.search(r">\d[\d.,]* µs</text>", html) and "(µs)" not in html
    assert "time_us" not in html and "seq_len" not in html.split("<figcaption")[0]
    bars = render.plots.bar_figure(s, "sweep", label="seq_len", value="time_us", what="Bars.")
    assert "256: not available" in bars and "None" not in bars.split("<figcaption")[0]
    found = [{"time_us": 1.0}, {"time_us": 1.0}, {"time_us": 0.0}]
    shares = render.plots.stacked_share_figure(
        s, table.column("seq_len"), found, x="seq_len", parts=["time_us"], what="Shares."
    )
    assert "64: time_us 100%" in shares and "256: time_us 0%" in shares
    # Its bars are labelled as every axis's ticks are (words.tick): 1,024, not "1024".
    wide = render.plots.stacked_share_figure(
        s, [1024, 2048], found[:2], x="seq_len", parts=["time_us"], what="Shares."
    )
    assert ">1,024</text>" in wide and ">1024</text>" not in wide
