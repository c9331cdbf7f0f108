# The torch-free layers between measurements and pages: findings (verdicts as data), the
# words module (one precision rule), facts (quantities named fully) and the GPU forecasts.
from __future__ import annotations

import pytest
from timings import spanning

from attention_docs.analytic import gpu
from attention_docs.analytic.cost import StepCost
from attention_docs.analytic.memory import naive_peak
from attention_docs.analytic.roofline import Roof
from attention_docs.findings import bound, distribution, rank, share, trend
from attention_docs.findings.facts import COUNTED, PROFILED, SPEC, UNPROFILED, Fact, On, Quantity
from attention_docs.findings.forecast import check, forecast
from attention_docs.records.shape import Shape
from attention_docs.records.timing import Timing
from attention_docs.render import words


def t(*rounds: float) -> Timing:
    return spanning(rounds)


# --- words: one precision rule -------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (1710.4, "1,710"),
        (2.5, "2.5"),
        (2.504, "2.5"),
        (0.000123456, "0.000123"),
        (999.7, "1,000"),
        (12345678, "12,300,000"),
        (0, "0"),
        (-3.14159, "−3.14"),
    ],
)
def test_numbers_have_three_significant_figures_and_no_exponent(x, text):
    assert words.number(x) == text


@pytest.mark.parametrize(
    ("us", "text"),
    [
        (0.85, "850 ns"),
        (12.34, "12.3 µs"),
        (999.7, "1 ms"),
        (4560.0, "4.56 ms"),
        (1.234e6, "1.23 s"),
    ],
)
def test_times_pick_the_unit_that_keeps_them_readable(us, text):
    assert words.time_us(us) == text


def test_units_and_ranges():
    assert words.nbytes(1_048_576) == "1.05 MB"
    assert words.nbytes(999_700_000) == "1 GB"
    assert words.per_second(1.37e11, "FLOP") == "137 GFLOP/s"
    assert words.percent(0.17749) == "17.7%" and words.percent(1.0) == "100%"
    assert words.times(1710.4) == "1,710×"
    assert words.span(9500.0, 9800.0) == "9.5–9.8 ms"
    assert words.span(850.0, 1200.0) == "850 µs–1.2 ms"
    # Ends that would read alike get the digits that tell them apart, and only they do.
    assert words.span(14.01e9, 14.04e9, lambda v: words.per_second(v, "B")) == "14.01–14.04 GB/s"
    assert words.span(12_810.0, 12_840.0) == "12.81–12.84 ms"
    assert words.span(9500.0, 9500.0) == "9.5–9.5 ms"  # no range at all: left as it is
    assert words.number(14.0123) == "14"  # outside a range, three figures as ever


def test_a_comparison_reads_as_a_tie_or_as_a_ratio_above_one():
    fast, slow, close = t(10.0, 11.0, 12.0), t(20.0, 21.0, 22.0), t(11.5, 12.0, 12.5)
    from attention_docs.findings.compare import compare

    assert words.speed(compare(fast, slow), "a", "b").startswith("a is 1.91× (1.67–2.2×) faster")
    assert words.speed(compare(slow, fast), "b", "a").startswith("a is 1.91×")
    tie = words.speed(compare(fast, close), "a", "c")
    assert "within noise" in tie and "faster" not in tie


def test_a_difference_beyond_the_noise_never_reads_as_touching_one():
    """Rounds that do not overlap by a hair: the range's near end keeps the digits that put
    it above 1 ("1.0004–", not "1–", which reads as the edge of a tie), whichever side the
    sentence is read from."""
    from attention_docs.findings.compare import compare

    fast, slow = t(99.0, 100.0, 100.0), t(100.04, 101.0, 110.0)
    c = compare(fast, slow)
    assert not c.tie and c.low > 1
    assert words.versus(c) == "1.01× (1.0004–1.11×)"
    assert words.speed(compare(slow, fast), "b", "a") == "a is 1.01× (1.0004–1.11×) faster than b"
    assert words.span(0.5, 1.0, words.times) == "0.5–1×"  # a true 1 stays 1
    ratio = Fact(Quantity("speed ratio", "a vs b", "cpu-x", UNPROFILED), 1.13, "×", 1.00003, 1.3)
    assert "(1.00003–1.3×)" in words.fact(ratio)  # a ratio fact's range: the same rule


# --- facts ---------------------------------------------------------------------------------


def test_a_quantity_id_names_metric_subject_shape_clock_and_device():
    shape = Shape(1, 4, 512, 64, "float32", causal=True)
    q = Quantity("forward time", "naive (eager)", "cpu-x", UNPROFILED, shape)
    assert q.id == "forward time;naive (eager);b1 h4 n512 d64 float32 causal;unprofiled;cpu-x"
    assert Quantity("forward time", "naive (eager)", "cpu-x", PROFILED, shape).id != q.id
    assert Quantity("forward time", "naive (eager)", "cpu-x", UNPROFILED, shape, "cold").id != q.id
    with pytest.raises(ValueError, match="clock"):
        Quantity("forward time", "naive", "cpu-x", "wall")
    f = Fact.of_timing(q, t(9500.0, 9620.0, 9800.0))
    text = words.fact(f)
    assert f'data-fact="{q.id}"' in text and ">9.62 ms (9.5–9.8 ms)</span>" in text


def test_the_fact_builder_derives_the_id_and_states_each_kind_of_value():
    from attention_docs.findings.compare import compare

    shape = Shape(1, 4, 512, 64, "float32", causal=True)
    on, timing = On("cpu-x", shape), t(9500.0, 9620.0, 9800.0)
    q = Quantity("forward time", "naive (eager)", "cpu-x", UNPROFILED, shape, "cold")
    assert on.quantity("forward time", "naive (eager)", UNPROFILED, "cold") == q
    timed = on("forward time", "naive (eager)", UNPROFILED, timing, detail="cold")
    assert timed == Fact.of_timing(q, timing)
    c = compare(t(100.0, 110.0), t(200.0, 210.0))
    ratio = on("speed ratio", "a vs b", UNPROFILED, c)
    assert (ratio.value, ratio.unit, ratio.low, ratio.high) == (c.ratio, "×", c.low, c.high)
    part = on("share", "attention.softmax", PROFILED, share.Share("softmax", 0.4, 0.3, 0.5))
    assert (part.value, part.unit, part.low, part.high) == (0.4, "%", 0.3, 0.5)
    assert on("peak memory", "naive (eager)", COUNTED, 0, "B").value == 0
    assert on("peak memory", "naive (eager)", COUNTED, None, "B") is None  # nothing recorded
    assert On.spec(gpu.sheet("h200")) == On("spec:h200")


def test_shapes_spelled_two_ways_are_one_shape():
    assert Shape(1, 4, 8, 16, num_kv_heads=4, kv_len=8) == Shape(1, 4, 8, 16)
    decode = Shape.of({"batch_size": 1, "num_heads": 16, "num_kv_heads": 4, "seq_len": 1,
                       "cache_len": 2048, "head_dim": 64})  # fmt: skip
    assert decode.key() == "b1 h16 kv4 n1 m2048 d64 float32 full" and decode.keys == 2048
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        Shape(1, 6, 8, 16, num_kv_heads=4)


# --- verdicts ------------------------------------------------------------------------------


def test_a_ranking_names_every_leader_inside_the_noise():
    r = rank.rank({"a": t(10.0, 11.0, 12.0), "b": t(11.5, 12.5, 13.0), "c": t(30.0, 31.0, 32.0)})
    assert r.order == ("a", "b", "c") and r.leaders == ("a", "b") and not r.clear
    assert rank.rank({"a": t(10.0, 11.0), "c": t(30.0, 31.0)}).clear


def test_shares_carry_their_range_and_the_largest_must_clear_the_others():
    found = share.shares({"x": [6.0, 5.0, 7.0], "y": [4.0, 5.0, 3.0]})
    assert found["x"].fraction == pytest.approx(0.6) and found["x"].low == pytest.approx(0.5)
    largest = share.largest(found)
    assert largest.part == "x" and not largest.clear and largest.rivals == ("y",)
    assert share.largest(share.shares({"x": [9.0, 8.0], "y": [1.0, 2.0]})).clear


def test_trends_are_said_only_beyond_the_noise():
    ts = [t(10.0, 11.0), t(10.5, 11.5), t(40.0, 44.0), t(160.0, 170.0)]
    assert trend.steps(ts) == [trend.FLAT, trend.RISES, trend.RISES]
    slopes = trend.local_slopes([1, 2, 4, 8], ts)
    assert trend.turning_point(slopes) == 2
    assert trend.fitted_slope([1, 2, 4], [1, 4, 16]) == pytest.approx(2.0)


def test_a_bimodal_distribution_is_two_modes_not_a_median():
    d = distribution.distribution([4, 4, 257, 4, 260, 4, 258])
    assert d.multimodal and [(m.low, m.high, m.count) for m in d.modes] == [
        (4, 4, 4),
        (257, 260, 3),
    ]
    assert not distribution.distribution([0, 1, 1, 2]).multimodal


def test_a_bound_holds_only_when_every_round_agrees():
    roof = Roof(peak_flops=1e11, bandwidth=1e10)
    cost = StepCost("attention.softmax", 1e6, 8e6)  # 0.125 FLOP/B: memory-bound, 800 µs floor
    near = bound.bound(cost, roof, t(900.0, 1000.0, 1100.0))
    assert near.roof == bound.MEMORY and near.verdict == bound.MEMORY and near.settled
    edge = bound.bound(cost, roof, t(3500.0, 4200.0, 4500.0))  # 5× the floor is the edge
    assert not edge.settled
    assert bound.bound(cost, roof, None).verdict is None


# --- forecasts -----------------------------------------------------------------------------


def test_forecasts_come_from_the_data_sheet_and_the_models():
    h200 = gpu.sheet("h200")
    steps = {k.label: k for k in gpu.naive_steps(h200)}
    d, e = gpu.FORECAST_SHAPE.head_dim, 2
    # A bf16 score matmul's intensity approaches 2·head_dim/itemsize, below the H200's ridge.
    assert steps["attention.scores"].intensity < 2 * d / e < gpu.ridge(h200, "bfloat16")
    assert all(k.limit == "memory" for k in steps.values())
    assert gpu.naive_floor_us(h200) == pytest.approx(sum(k.floor_us for k in steps.values()))
    flash = gpu.flash_forward(h200)
    assert flash.limit == "compute" and flash.floor_us < gpu.naive_floor_us(h200)
    n = gpu.longest_naive_seq_len(h200)
    s = gpu.FORECAST_SHAPE

    def total(length):
        return naive_peak(s.batch_size, s.num_heads, length, s.head_dim, s.dtype, causal=True)

    assert total(n).total_bytes <= gpu.memory_bytes(h200) < total(n + 1).total_bytes
    with pytest.raises(gpu.UnknownGpuError, match="h200"):
        gpu.sheet("h300")


def test_a_check_sets_a_measurement_beside_its_forecast():
    h200 = gpu.sheet("h200")
    shape = gpu.FORECAST_SHAPE
    f = forecast("forward time", "SDPA flash", h200, 300.0, "µs", shape=shape)
    assert f.quantity.clock == SPEC and f.quantity.device_id == "spec:h200"
    assert check(f, None).ratio is None
    m = Fact(
        Quantity("forward time", "SDPA flash", "cuda-h200", UNPROFILED, shape),
        450.0,
        "µs",
        420.0,
        480.0,
    )
    c = check(f, m)
    assert (c.ratio, c.low, c.high) == pytest.approx((1.5, 1.4, 1.6))
    alone = check(f, Fact(m.quantity, 450.0, "µs"))  # no range: both ends are the value
    assert (alone.ratio, alone.low, alone.high) == pytest.approx((1.5, 1.5, 1.5))
    other = Fact(
        Quantity("forward time", "naive (eager)", "cuda-h200", UNPROFILED, shape), 1.0, "µs"
    )
    with pytest.raises(ValueError, match="does not measure"):
        check(f, other)
    # A row's realistic range travels with its floor, and must be a range of the same thing.
    r = Fact(f.quantity, None, "µs", 600.0, 900.0)
    assert check(f, m, r).realistic == r and check(f, m).realistic is None
    with pytest.raises(ValueError, match="is not a range of"):
        check(f, m, Fact(other.quantity, None, "µs", 1.0, 2.0))


def test_a_comparison_says_which_way_it_reads():
    """as_ordered: the side given as `fast` has the lower median; renderers phrase from it."""
    from attention_docs.findings.compare import compare

    assert compare(t(1, 1.1, 1.2), t(2, 2.1, 2.2)).as_ordered
    assert not compare(t(2, 2.1, 2.2), t(1, 1.1, 1.2)).as_ordered
    assert words.speed(compare(t(2, 2.1, 2.2), t(1, 1.1, 1.2)), "a", "b").startswith("b is")


def test_table_slopes_fit_each_column_and_read_a_timing_as_its_median():
    from attention_docs.measurements.schema import Table

    table = Table(
        ("n", "square", "line", "timed"),
        tuple((n, 3.0 * n * n, None if n == 8 else 5.0 * n, t(n, n, n)) for n in (1, 2, 4, 8)),
    )
    slopes = trend.table_slopes(table, "n", ["square", "line", "timed"])
    assert slopes == pytest.approx({"square": 2.0, "line": 1.0, "timed": 1.0})
