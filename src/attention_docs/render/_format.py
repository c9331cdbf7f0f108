# Number formatting shared by every renderer: one place decides how a time, a FLOP count or
# a byte count reads on the page.
from __future__ import annotations


def time_us(us: float) -> str:
    """12.3 µs, 4.56 ms, 1.23 s."""
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    if us >= 1e3:
        return f"{us / 1e3:.3g} ms"
    return f"{us:.3g} µs"


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


def params_text(params: dict) -> str:
    """batch_size=1, num_heads=4, ... in declaration order; booleans by name."""
    parts = []
    for name, value in params.items():
        if isinstance(value, bool):
            parts.append(name if value else f"not {name}")
        else:
            parts.append(f"{name}={value}")
    return ", ".join(parts)
