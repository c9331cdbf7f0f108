"""render/words.py is the one number formatter: its rules for "%", "k" and whole numbers,
and that no renderer formats a number another way (figures' ticks and alt text ask it)."""

from __future__ import annotations

import pytest

from attention_docs.render import figures, words


def test_percent_takes_a_fraction_everywhere():
    assert words.percent(0.177) == "17.7%"
    assert words.value(0.177, "%") == "17.7%"
    assert words.figure_number(0.177, "%") == "17.7%"
    assert words.value(1.0, "%") == "100%"  # a whole fraction, not "1%"


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (1_000, "1 k"),
        (1_024, "1.02 k"),
        (32_768, "32.8 k"),
        (1_048_576, "1.05 M"),
        (2.5e9, "2.5 G"),
    ],
)
def test_k_is_decimal(n, text):
    assert words.count(n) == text


@pytest.mark.parametrize(
    ("x", "text"),
    [(1024, "1,024"), (8192, "8,192"), (16384, "16.4 k"), (26112, "26.1 k"), (512, "512"),
     (10_000, "10 k"), (2**18, "262 k"), (2.5e6, "2.5 M"), (0.01, "0.01"), (0, "0")],
)  # fmt: skip
def test_ticks_follow_the_rule_for_a_bare_number(x, text):
    assert words.tick(x) == text


@pytest.mark.parametrize("n", [1024, 2048, 4096, 16384, 1_048_576])
def test_alt_text_never_rounds_a_whole_number(n):
    """A seq_len of 1024 is said "1,024", never "1,020" (the scaffold's alt text did)."""
    assert words.figure_number(n) == f"{n:,}"
    assert words.figure_number(float(n)) == f"{n:,}"


def test_alt_text_rounds_measured_values_by_the_one_rule():
    assert words.figure_number(2170.748374737741, "µs") == "2.17 ms"
    assert words.figure_number(0.123456) == "0.123"
    assert words.figure_number(1572864, "B") == "1.57 MB"  # a unit of its own: prefixed
    assert words.figure_number(33.6e6, "FLOP/s") == "33.6 MFLOP/s"


def test_a_prefix_joins_a_symbol_and_stands_apart_from_a_word():
    assert words.value(33.6e6, "FLOP/s") == "33.6 MFLOP/s"
    assert words.value(10_240.5, "forwards") == "10.2 k forwards"
    assert words.value(6_813.2, "forwards") == "6.81 k forwards"
    assert words.value(2_048, "tiles") == "2,048 tiles"  # a whole count below 10,000: exact


def test_stray_long_decimals_in_alt_text_follow_the_rule():
    """figures' safety net for alt text rounds as words.number does (no ".3g", no "2171")."""
    assert figures._tidy_alt("at 2170.748374737741 and 0.000123456") == "at 2,170 and 0.000123"
    assert figures._tidy_alt("peak None") == "peak not available"


def test_a_generic_table_column_reads_in_one_spelling():
    """records_table: a µs column never mixes "7,590" with "16 k" (the scaffold's page did)."""
    from dataclasses import replace

    from recorded import recorded

    from attention_docs.measurements import Sourced, Table
    from attention_docs.render import tables

    table = Table(("seq_len", "time_us"), ((1024, 7590.4), (4096, 16012.0)), {"time_us": "µs"})
    m = replace(recorded("naive_steps"), tables={"t": table})
    text = tables.records_table(Sourced(m, "from the store", "x.json"), "t")
    assert "| 1024 | 7,590 |" in text and "| 4096 | 16,000 |" in text and " k " not in text


def test_a_linear_axis_writes_its_ticks_as_words_does():
    """matplotlib's own labels would read 20000 beside the site's "20 k" and "2,500"."""
    with figures.new_figure(4.0, 2.0) as fig:
        ax = fig.add_subplot()
        ax.plot([0, 20_000], [0, 1])
        svg = figures.to_svg(fig, "a line")
    assert ">20 k</text>" in svg and ">20000</text>" not in svg


def test_a_negative_whole_number_takes_a_minus_sign():
    assert words.value(-2, "") == "−2" and words.number(-2.5) == "−2.5"


def test_one_axis_reads_in_one_style():
    """Where some tick needs a prefix, every tick from 1,000 up has one: never "5,000" beside
    "10 k"; the ticks outside the view choose nothing."""
    assert words.ticks([0, 5000, 10000, 15000]) == ["0", "5 k", "10 k", "15 k"]
    assert words.ticks([0, 2500, 5000, 7500]) == ["0", "2,500", "5,000", "7,500"]
    assert words.ticks([0, 2000, 4000, 10000], shown=[0, 2000, 4000]) == [
        "0", "2,000", "4,000", "10 k"
    ]  # fmt: skip
    assert words.ticks([100, 1000, 10000]) == ["100", "1 k", "10 k"]


@pytest.mark.parametrize("high", [8_000, 20_000, 40_000])
def test_a_figures_linear_axis_reads_in_one_style(high):
    from matplotlib.ticker import MaxNLocator

    with figures.new_figure(4, 2) as fig:
        ax = fig.add_subplot()
        ax.plot([0, high], [0, 1])
        ax.set_xlim(0, high)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        figures.settle(fig)
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    plain = [t for t in labels if "," in t]
    prefixed = [t for t in labels if t.endswith((" k", " M"))]
    assert labels and not (plain and prefixed), labels


@pytest.mark.parametrize(
    ("x", "text"),
    [(1e300, "1×10^300"), (-2.5e22, "−2.5×10^22"), (1.23456e20, "123,000,000,000,000,000,000")],
)
def test_an_absurdly_large_number_is_not_a_wall_of_digits(x, text):
    assert words.number(x) == text
    assert words.per_second(x, "FLOP")  # prefixed, it still reads back
