# Every number and every verdict as the pages say it: the one place that turns findings and
# facts into words, with one precision rule (three significant figures, thousands separated,
# never scientific notation). "%" values are fractions (0.177 reads "17.7%"); k, M, G are
# decimal (a power of two is written 1,024, never "1 k"); a parameter's whole number prints
# exactly on axes and in alt text. `fact(f)` marks a value with its quantity's id
# (`data-fact`), which the site-wide test reads.
from __future__ import annotations

import contextvars
import html
import math
from collections.abc import Iterable, Sequence

from attention_docs.findings.compare import Comparison
from attention_docs.findings.facts import Fact

# How a request's parameters read (`batch_size=1, not causal`) is the store's too: the build
# log and the command line name requests with it. Re-exported for the renderers.
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.keys import params_text  # noqa: F401
from attention_docs.records.timing import Timing

SIGNIFICANT = 3

# What each implementation's trick is (forward_times' and winners' implementation names).
# Sentences live here, not in the experiments: editing one re-measures nothing.
TRICKS = {
    fwd.NAIVE: "none: five ops, the N×N matrix in memory",
    fwd.COMPILED: "fusion of the element-wise steps",
    fwd.SDPA_MATH: "SDPA's reference decomposition",
    fwd.SDPA_FLASH: "one fused kernel, no N×N matrix",
    fwd.SDPA_EFFICIENT: "one fused kernel, no N×N matrix",
    fwd.SDPA_CUDNN: "one fused kernel, no N×N matrix",
    fwd.FLEX: "a kernel generated for the mask (shape-generic); skips masked blocks",
    fwd.TILED: "tiles and online softmax, one small op at a time",
    fwd.TRITON: "tiles and online softmax in one kernel",
}


def trick(implementation: str) -> str:
    """What `implementation`'s trick removes, in words (— for a name without one)."""
    return TRICKS.get(implementation, "—")


def work_counted(device_kind: str) -> str:
    """What a count of a forward's work counts on a device kind (winners' summary)."""
    if device_kind == "cuda":
        return "kernels, memcpys and memsets"
    return (
        "ATen ops at every depth and Inductor's generated kernels, views and allocations excluded"
    )


# --- numbers -----------------------------------------------------------------------------


# Digits beyond SIGNIFICANT, for the ends of a range that three would misstate (`span`).
_EXTRA_DIGITS: contextvars.ContextVar[int] = contextvars.ContextVar("extra_digits", default=0)


# Past this no quantity the site states (a GPU's FLOP/s is 1e15) is a number to write out.
ABSURD = 1e21


def number(x: float | None, significant: int | None = None) -> str:
    """`x` to three significant figures, as a reader writes it: 1,710 · 2.5 · 0.000123.

    Trailing zeros after the point are dropped (2.50 -> 2.5); None and NaN read as "—".
    """
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if x == 0:
        return "0"
    if significant is None:
        significant = SIGNIFICANT + _EXTRA_DIGITS.get()
    if abs(x) >= ABSURD:  # a damaged value: no wall of digits (1e300 had 300 of them)
        mantissa, exponent = f"{x:.{significant - 1}e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}×10^{int(exponent)}".replace("-", "−")
    digits = significant - 1 - math.floor(math.log10(abs(x)))
    rounded = round(float(x), digits)
    # Rounding can carry into a new digit (999.7 -> 1000): recount once.
    if rounded and math.floor(math.log10(abs(rounded))) != math.floor(math.log10(abs(x))):
        digits -= 1
        rounded = round(float(x), digits)
    if digits <= 0:
        text = f"{round(rounded):,}"
    else:
        text = f"{rounded:,.{digits}f}".rstrip("0").rstrip(".")
    return text.replace("-", "−")  # a minus sign, not a hyphen


def _rounded(x: float) -> float:
    """`x` as `number` states it, read back (999.7 -> 1000.0)."""
    if abs(x) >= ABSURD:
        return float(x)
    return float(number(x).replace(",", "").replace("−", "-"))


_PREFIXES = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


def _prefixed(value: float) -> tuple[str, str]:
    """(number, SI prefix), the number below 1,000 where a prefix allows: 33.6e6 -> ("33.6", "M")."""
    rounded = _rounded(value)  # 999.7e6 rounds to 1e9: "1 G", not "1,000 M"
    for prefix, scale in _PREFIXES:
        if abs(rounded) >= scale:
            return number(value / scale), prefix
    return number(value), ""


def _with_prefix(v: float, unit: str) -> str:
    """`v` with an SI prefix joined to `unit`: 33.6 M, 1.05 MB, 512 B."""
    text, prefix = _prefixed(v)
    return f"{text} {prefix}{unit}".rstrip()


def count(n: float | None) -> str:
    """A large count with an SI prefix: 33.6 M, 1.07 G. Zero reads as 0, missing as —."""
    return "—" if n is None else "0" if n == 0 else _with_prefix(n, "")


def nbytes(n: float | None) -> str:
    """Bytes with a decimal prefix (so that GB/s reads consistently): 1.05 MB, 512 B."""
    return "—" if n is None else "0 B" if n == 0 else _with_prefix(n, "B")


def time_us(us: float | None) -> str:
    """A time given in µs, in the unit that keeps it between 1 and 1,000: 850 ns, 12.3 µs,
    4.56 ms, 1.23 s (999.7 µs reads as 1 ms, never "1,000 µs")."""
    if us is None:
        return "—"
    for scale, unit in ((1e6, "s"), (1e3, "ms"), (1.0, "µs")):
        if abs(_rounded(us)) >= scale:
            return f"{number(us / scale)} {unit}"
    if us == 0:
        return "0 µs"
    return f"{number(us * 1e3)} ns"


def per_second(value: float | None, unit: str) -> str:
    """A rate already in units per second: per_second(2e12, "FLOP") -> '2 TFLOP/s'."""
    return _with_prefix(value, f"{unit}/s") if value else "—"


def rate(amount: float, us: float, unit: str) -> str:
    """`amount` per second over `us` microseconds: rate(2e9, 1000, 'FLOP') -> '2 TFLOP/s'."""
    if not amount or us <= 0:
        return "—"
    return per_second(amount / (us * 1e-6), unit)


def percent(fraction: float | None) -> str:
    """A fraction as a percentage: 0.177 -> 17.7%, 1.0 -> 100%, 0.00512 -> 0.512%."""
    if fraction is None:
        return "—"
    return f"{number(100 * fraction)}%"


def times(x: float) -> str:
    """A multiple: 2.5×, 1,710×."""
    return f"{number(x)}×"


def intensity(flop_per_byte: float) -> str:
    return f"{number(flop_per_byte)} FLOP/B"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def relative_error(x: float | None) -> str:
    """A relative error as a reader of numerics writes it: 0.0042, 2.6 × 10⁻⁷ (a power of ten
    below 0.001, where a decimal would need a row of zeros to say it)."""
    if x is None or x == 0 or abs(x) >= 1e-3:
        return number(x)
    exponent = math.floor(math.log10(abs(x)))
    mantissa = number(x / 10**exponent, 2)
    if mantissa == "10":  # 9.97e-8 rounds up a decade
        mantissa, exponent = "1", exponent + 1
    return f"{mantissa} × 10{str(exponent).translate(_SUPERSCRIPT)}"


def span(low: float, high: float, say=time_us) -> str:
    """A range: `9.5–9.8 ms` (each end in its own unit when they differ: `850 µs–1.2 ms`);
    a range that starts below zero reads `−171 ms to 47.4 ms` (a dash would read as a minus)."""
    a, b = say(low), say(high)
    # More digits, as many as it takes (up to four), where the usual three would mislead: two
    # ends that read alike say nothing of the range ("14–14 GB/s"), and a multiple that is not
    # 1 must not read "1×" at a range's end, the edge of a tie that is not there.
    for extra in range(1, 5):
        alike = a == b and low != high
        redo_a, redo_b = alike or (a == "1×" and low != 1), alike or (b == "1×" and high != 1)
        if not (redo_a or redo_b):
            break
        token = _EXTRA_DIGITS.set(extra)
        try:
            a, b = say(low) if redo_a else a, say(high) if redo_b else b
        finally:
            _EXTRA_DIGITS.reset(token)
    if low < 0:  # a dash between two numbers would read as a minus
        return f"{a} to {b}"
    unit_a, unit_b = a.rpartition(" ")[2], b.rpartition(" ")[2]
    if " " in a and unit_a == unit_b:
        return f"{a.rpartition(' ')[0]}–{b}"
    if a.endswith("×") and b.endswith("×"):
        return f"{a[:-1]}–{b}"
    if a.endswith("%") and b.endswith("%"):
        return f"{a[:-1]}–{b}"
    return f"{a}–{b}"


# --- values with their noise ---------------------------------------------------------------


def spread(t: Timing) -> str:
    """`9.5–9.8 ms over 3 rounds`."""
    n = len(t.rounds_us) or 1
    return f"{span(t.low_us, t.high_us)} over {n} round{'s' if n != 1 else ''}"


def timing(t: Timing) -> str:
    """`9.62 ms (9.5–9.8 ms over 3 rounds)`."""
    return f"{time_us(t.time_us)} ({spread(t)})"


def versus(c: Comparison, *, with_spread: bool = True) -> str:
    """A ratio with its range, or a tie: `2.2× (2.1–2.3×)`, `within noise (1.01×)`;
    `with_spread=False` leaves the range out (`2.2×`), as a chapter's opening says it."""
    if c.tie:
        return f"within noise ({times(c.ratio)})"
    if not with_spread:
        return times(c.ratio)
    return f"{times(c.ratio)} ({span(c.low, c.high, times)})"


def speed(c: Comparison, a: str, b: str, *, with_spread: bool = True) -> str:
    """How `a` compares with `b` when `c = compare(a, b)` (ratio = b's time / a's time):
    `a is 2.2× (2.1–2.3×) faster than b`, or a tie. A ratio below 1 reads "b is … faster
    than a": a sentence always states a ratio above 1."""
    if c.tie:
        return f"{a} and {b} are within noise of each other ({times(c.ratio)} apart)"
    if c.as_ordered:
        return f"{a} is {versus(c, with_spread=with_spread)} faster than {b}"
    return f"{b} is {versus(c.flipped, with_spread=with_spread)} faster than {a}"


# --- facts ---------------------------------------------------------------------------------

# How each unit of a Fact is said.
_SAY = {
    "µs": time_us,
    "B": nbytes,
    "B/s": lambda v: per_second(v, "B"),
    "FLOP/s": lambda v: per_second(v, "FLOP"),
    "FLOP": lambda v: _with_prefix(v, "FLOP"),
    "%": percent,
    "×": times,
    "FLOP/B": intensity,
    # A whole count of tokens (a seq_len): exact, since it is a length, not a measurement.
    "tokens": lambda v: f"{round(v):,} tokens",
    # A count of kernels: "1 kernel", "8 kernels".
    "kernels": lambda v: f"{round(v):,} kernel{'' if round(v) == 1 else 's'}",
    # A driver's memory total: a whole count of MiB, as nvidia-smi prints it.
    "MiB": lambda v: f"{round(v):,} MiB",
    "GiB": lambda v: f"{v:,.1f} GiB",
    "relative error": relative_error,
    "abs error": relative_error,  # an absolute error against a reference: the same notation
}


def value(v: float | None, unit: str) -> str:
    """A bare value in its unit ("%": a fraction); unknown units follow the number, and
    a whole count of things below 10,000 is exact ("2,048 tiles", not "2.05 k tiles")."""
    if v is None:
        return "—"
    say = _SAY.get(unit)
    if say is not None:
        return say(v)
    if float(v).is_integer() and abs(v) < 1e4:  # a count of things: exact
        return f"{int(v):,} {unit}".rstrip().replace("-", "−")  # a minus sign, as `number`'s
    if not unit:  # a bare count: in full below 10,000 ("1,280"), with a prefix above
        return number(v) if abs(v) < 1e4 else count(v)
    # An SI prefix joins a symbol (33.6 MFLOP/s) but stands apart from a word (10.2 k tokens).
    text, prefix = _prefixed(v)
    if not prefix:
        return f"{text} {unit}"
    return f"{text} {prefix}{unit}" if unit[:1].isupper() else f"{text} {prefix} {unit}"


def as_published(value: float, unit: str) -> str:
    """A cited value with the digits its source gave, in the source's unit: `1.955 ms`,
    `1,613 TFLOP/s`, `35%` (rounding a quotation would misquote it)."""
    text = f"{int(value):,}" if float(value).is_integer() else f"{value:,}"
    if unit == "kernels" and value == 1:
        unit = "kernel"
    return f"{text}%" if unit in ("%", "% of baseline") else f"{text} {unit}"


def fact_span(fact_id: str, text: str) -> str:
    """`text` marked as the site-wide fact `fact_id` (an inline HTML span).

    `|` is escaped so that a fact inside a Markdown table cell does not split the row."""
    attribute = html.escape(fact_id).replace("|", "&#124;")
    return f'<span class="ad-fact" data-fact="{attribute}">{text}</span>'


def fact(
    f: Fact, *, with_spread: bool = True, emphasis: bool = False, stacked: bool = False
) -> str:
    """A fact as the page states it, marked with its quantity's id: `9.62 ms (9.5–9.8 ms)`.

    `with_spread=False` leaves the range out (prose that already gave it, or a figure label);
    the value is the same either way, so both spellings are one fact. `stacked`: the range
    on a line of its own under the value (`<br>`), for a table cell among many such cells."""

    def say(v: float | None) -> str:
        return value(v, f.unit)

    if f.value is None and f.low is not None and f.high is not None:  # a range, no median
        return fact_span(f.quantity.id, span(f.low, f.high, say))
    text = say(f.value)
    if emphasis:
        text = f"**{text}**"
    if with_spread and f.low is not None and f.high is not None and f.low != f.high:
        text += f"{'<br>' if stacked else ' '}({span(f.low, f.high, say)})"
    return fact_span(f.quantity.id, text)


def versus_fact(f: Fact, c: Comparison) -> str:
    """A comparison stated as the ratio fact `f` it is: `2.2× (2.1–2.3×)`, or a tie."""
    return fact_span(f.quantity.id, versus(c))


# --- labels --------------------------------------------------------------------------------


def devices_differ(what: str, devices: Iterable[str]) -> str:
    """Why a finding is not stated: its entries come from several devices."""
    return (
        f"*Not shown: {what} needs its entries from one device, and this build read them from "
        f"{series(f'`{d}`' for d in devices)} (the store lacks some of them on one). Measure "
        "them on this machine with `nox -s docs -- --this-machine`.*"
    )


def plural(n: int, noun: str) -> str:
    """`1 thread`, `2 threads`, `1,024 tokens`: a whole count with its noun."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def clipped(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, an ellipsis saying so: for a long kernel name."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def series(items: Iterable[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


# Words for the columns measurements use, so that an axis or a header reads "Peak memory
# (bytes)", not "peak_bytes (B)". Columns not listed read as their words ("mask_us" -> "Mask
# time"); renderers may always pass their own label.
QUANTITY_NAMES = {
    "seq_len": "Sequence length",
    "head_dim": "Head dimension",
    "num_heads": "Heads",
    "batch_size": "Batch size",
    "cache_len": "Cache length",
    "kv_len": "Cache length",
    "t_us": "Time",
    "flops": "FLOPs",
    "iqr_us": "Spread (IQR)",
    "cpu_us": "CPU time",
    "block": "Block size",
}
UNIT_WORDS = {"B": "bytes", "B/s": "bytes/s"}
# Column suffix -> the noun it stands for (the unit goes in the parentheses). Longest first.
_SUFFIX_NOUNS = {
    "_per_s": "per second",
    "_tflops": "throughput",
    "_gflops": "throughput",
    "_bytes": "memory",
    "_gbs": "bandwidth",
    "_us": "time",
    "_ms": "time",
    "_s": "time",
}


def quantity_label(column: str, unit: str | None = None) -> str:
    """`time_us`, "µs" -> "Time (µs)"; `peak_bytes`, "B" -> "Peak memory (bytes)".

    A step label (`attention.softmax`) is kept as it is: it is a name, not a column name.
    """
    if "." in column:
        name = column
    elif column in QUANTITY_NAMES:
        name = QUANTITY_NAMES[column]
    else:
        name = column
        for suffix, noun in _SUFFIX_NOUNS.items():
            if column.endswith(suffix) and len(column) > len(suffix):
                base = column.removesuffix(suffix).replace("_", " ")
                name = base if base.endswith(noun) else f"{base} {noun}"
                break
        name = name.replace("_", " ")
        name = name[:1].upper() + name[1:]
    return f"{name} ({UNIT_WORDS.get(unit, unit)})" if unit else name


def figure_number(v, unit: str | None = None) -> str:
    """A value as a reader says it, for alt text: with its unit; None -> not available.

    By `value`'s rules ("%" a fraction, decimal prefixes), except that a whole number in no
    unit of its own prints exactly (seq_len 1024 -> "1,024"; 16384 -> "16,384"):
    2170.748374737741 µs -> "2.17 ms"; 1572864 B -> "1.57 MB"; 0.1234 -> "0.123".
    """
    if v is None:
        return "not available"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if unit not in _SAY and float(v).is_integer():
        return f"{int(v):,} {unit or ''}".rstrip()
    return value(v, unit or "")


def tick(x: float) -> str:
    """An axis tick label (no math text), by `value`'s rule for a bare number: a whole number
    below 10,000 exactly (512, 1,024, 8,192), anything else to three figures with a decimal
    prefix from 10,000 up (10 k, 16.4 k, 2.5 M, 0.01): a base-2 axis's 16,384 is "16.4 k",
    never a binary "16 k"."""
    return value(x, "")


def ticks(values: Sequence[float], shown: Sequence[float] | None = None) -> list[str]:
    """The labels of the round values a tick locator chose for one axis, in one style:
    `tick`'s, except that where some tick `shown` (default: all) needs a prefix (10 k), every
    tick from 1,000 up takes one too, so that one axis never reads "5,000" beside "10 k"
    (0, 5 k, 10 k, 15 k). Ticks placed at measured values (a seq_len axis: 4,096, 16.4 k)
    keep `tick`'s rule."""
    if not any(abs(x) >= 1e4 for x in (values if shown is None else shown)):
        return [tick(x) for x in values]
    return [count(x) if abs(x) >= 1e3 else tick(x) for x in values]
