# Number formatting shared by every renderer: one place decides how a time, a FLOP count or
# a byte count reads on the page.
from __future__ import annotations

# How a request's parameters read lives with the store keys, since the build log and the
# command line name requests too; re-exported for the renderers that say it.
from attention_docs.measurements.keys import params_text  # noqa: F401 - re-exported


def time_us(us: float) -> str:
    """12.3 µs, 4.56 ms, 1.23 s (999.7 µs rounds up to 1 ms, not "1e+03 µs")."""
    for scale, unit in ((1e6, "s"), (1e3, "ms")):
        if float(f"{us:.3g}") >= scale:
            return f"{float(f'{us / scale:.3g}'):g} {unit}"
    return f"{float(f'{us:.3g}'):g} µs"


def count(n: float | None) -> str:
    """A large count with an SI prefix: 33.6 M, 1.07 G. Zero reads as 0, missing as —."""
    if n is None:
        return "—"
    if n == 0:
        return "0"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {prefix}"
    return f"{n:.3g}"


def nbytes(n: float | None) -> str:
    """Bytes with a decimal prefix (so that GB/s reads consistently): 1.05 MB."""
    if n is None:
        return "—"
    return count(n) + "B" if n else "0 B"


def rate(amount: float, us: float, unit: str) -> str:
    """amount per second, e.g. rate(2e9, 1000, 'FLOP') -> '2 TFLOP/s'."""
    if not amount or us <= 0:
        return "—"
    return f"{count(amount / (us * 1e-6))}{unit}/s"


def percent(fraction: float) -> str:
    return f"{100 * fraction:.1f}%"


# Words for the columns measurements use, so that an axis or a header reads "Peak memory
# (bytes)", not "peak_bytes (B)". Columns not listed read as their words ("mask_us" -> "Mask
# time"); renderers may always pass their own label.
QUANTITY_NAMES = {
    "seq_len": "Sequence length",
    "head_dim": "Head dimension",
    "num_heads": "Heads",
    "batch_size": "Batch size",
    "cache_len": "Cache length",
    "time_us": "Time",
    "time_ms": "Time",
    "t_us": "Time",
    "peak_bytes": "Peak memory",
    "live_bytes": "Live memory",
    "bytes": "Bytes",
    "flops": "FLOPs",
    "iqr_us": "Spread (IQR)",
    "self_us": "Self time",
    "total_us": "Total time",
    "device_us": "Device time",
    "cpu_us": "CPU time",
    "block": "Block size",
    "elements": "Elements",
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


def figure_number(value, unit: str | None = None) -> str:
    """A value as a reader says it, for alt text: rounded, with its unit; None -> not available.

    2170.748374737741 µs -> "2.17 ms"; 1572864 B -> "1.57 MB"; 0.1234 -> "0.123".
    """
    if value is None:
        return "not available"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    by_unit = {"µs": time_us, "B": nbytes, "%": lambda v: f"{v:.3g}%"}
    if unit in by_unit:
        return by_unit[unit](value)
    if abs(value) < 1e4:
        return f"{value:.3g} {unit}" if unit else f"{value:.3g}"
    # An SI prefix joins a symbol (33.6 MFLOP/s) but stands apart from a word (10.2 k tokens).
    number = count(value)
    return number + (unit if unit[:1].isupper() else f" {unit}") if unit else number
