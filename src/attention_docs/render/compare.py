# Times and comparisons as the pages state them, from the one forward-time entry of a device
# (measurements/forward.py). Three rules hold everywhere:
#   - a time is shown with its spread over rounds ("9.62 ms, 9.5–9.8 ms");
#   - a comparison whose round ranges overlap is a tie, and says "within noise" — never
#     "N× faster";
#   - every value that could appear in more than one place is wrapped in a `data-fact` span
#     naming the fact (implementation, shape, device), so that a test over the built site
#     can prove that no fact is stated with two values.
from __future__ import annotations

import html

from attention_docs.findings.compare import Comparison, compare
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.timing import Timing
from attention_docs.render import _format as fmt


def fact(fact_id: str, text: str) -> str:
    """`text` marked as the site-wide fact `fact_id` (an inline HTML span)."""
    # `|` is escaped so that a fact inside a Markdown table cell does not split the row.
    attribute = html.escape(fact_id).replace("|", "&#124;")
    return f'<span class="ad-fact" data-fact="{attribute}">{text}</span>'


def _m(source: Sourced | Measurement) -> Measurement:
    return source.measurement if isinstance(source, Sourced) else source


def forward_fact_id(m: Measurement, implementation: str, shape: fwd.Shape) -> str:
    return f"forward;{m.device_id};{implementation};{shape.text()}"


def spread_text(t: Timing) -> str:
    """`9.5–9.8 ms over 3 rounds`."""
    return f"{fmt.time_us(t.low_us)}–{fmt.time_us(t.high_us)} over {len(t.rounds_us) or 1} rounds"


def timing_text(t: Timing) -> str:
    """`9.62 ms (9.5–9.8 ms over 3 rounds)`."""
    return f"{fmt.time_us(t.median_us)} ({spread_text(t)})"


def forward_time(
    times: Sourced | Measurement, implementation: str, shape: fwd.Shape, *, spread: bool = True
) -> str:
    """An implementation's unprofiled forward time at `shape`, as a marked fact."""
    m = _m(times)
    t = fwd.timing(m, implementation, shape)
    if t is None:
        return f"— ({fwd.status(m, implementation, shape)})"
    text = timing_text(t) if spread else fmt.time_us(t.median_us)
    return fact(forward_fact_id(m, implementation, shape), text)


def ratio_text(c: Comparison) -> str:
    """`2.20× (2.1–2.3×)`, or `within noise (1.01×)`."""
    if c.tie:
        return f"within noise ({c.ratio:.2f}×)"
    return f"{c.ratio:.2f}× ({c.low:.2f}–{c.high:.2f}×)"


def comparison(times: Sourced | Measurement, a: str, b: str, shape: fwd.Shape) -> Comparison | None:
    """How `a` compares with `b` at `shape`: ratio = b's time / a's time (> 1: a is faster)."""
    m = _m(times)
    ta, tb = fwd.timing(m, a, shape), fwd.timing(m, b, shape)
    if ta is None or tb is None:
        return None
    return compare(ta, tb)


def speedup(times: Sourced | Measurement, fast: str, slow: str, shape: fwd.Shape) -> str:
    """A sentence part: `SDPA flash is 2.20× (2.1–2.3×) faster than naive (eager)`, or a tie."""
    m = _m(times)
    c = comparison(m, fast, slow, shape)
    if c is None:
        missing = fast if fwd.timing(m, fast, shape) is None else slow
        return f"{missing} did not run here ({fwd.status(m, missing, shape)})"
    fid = f"ratio;{m.device_id};{fast};{slow};{shape.text()}"
    if c.tie:
        return fact(fid, f"{fast} and {slow} are within noise of each other ({c.ratio:.2f}× apart)")
    if c.ratio < 1:
        inverse = compare(fwd.timing(m, slow, shape), fwd.timing(m, fast, shape))
        return fact(
            fid,
            f"{fast} is {1 / c.ratio:.2f}× ({inverse.low:.2f}–{inverse.high:.2f}×) slower than {slow}",
        )
    return fact(fid, f"{fast} is {c.ratio:.2f}× ({c.low:.2f}–{c.high:.2f}×) faster than {slow}")


def forward_table(
    times: Sourced, implementations: list[str], shape: fwd.Shape, *, baseline: str = fwd.NAIVE
) -> str:
    """A Markdown table: each implementation's forward time at `shape`, against `baseline`."""
    m = _m(times)
    lines = [
        f"| Implementation | Forward time (median; slowest–fastest round) | vs {baseline} |",
        "| --- | --: | --: |",
    ]
    for name in implementations:
        c = comparison(m, name, baseline, shape) if name != baseline else None
        versus = "—" if name == baseline else (ratio_text(c) if c else "—")
        lines.append(f"| {name} | {forward_time(m, name, shape)} | {versus} |")
    return "\n".join(lines)


CEILING_UNITS = {"peak_flops": "FLOP/s", "bandwidth_bs": "B/s", "cache_bandwidth_bs": "B/s"}


def ceiling(ceilings: Sourced | Measurement, key: str, *, spread: bool = False) -> str:
    """One of the device's measured ceilings (`peak_flops_float32`, `bandwidth_bs`...) as a
    marked fact: `95.0 GFLOP/s`, with `spread` its slowest–fastest round range too."""
    m = _m(ceilings)
    if key not in m.facts:
        raise KeyError(f"machine_ceilings on {m.device_id} has no {key!r}: {sorted(m.facts)}")
    unit = next(u for prefix, u in CEILING_UNITS.items() if key.startswith(prefix))
    per_s = unit.removesuffix("/s")
    text = f"{fmt.count(m.facts[key])}{per_s}/s"
    if spread and f"{key}_low" in m.facts:
        low, high = m.facts[f"{key}_low"], m.facts[f"{key}_high"]
        text += f" ({fmt.count(low)}–{fmt.count(high)}{per_s}/s over the rounds)"
    return fact(f"ceiling;{m.device_id};{key}", text)
