# Forward times, speed comparisons and ceilings as the pages state them. The facts and
# verdicts come from findings/forward.py (the one forward-time entry of a device); the words
# from render/words.py. Three rules hold everywhere:
#   - a time is shown with its spread over rounds ("9.62 ms (9.5–9.8 ms)");
#   - a comparison whose intervals overlap is a tie, and says "within noise" — never
#     "N× faster";
#   - every value is marked with its quantity's `data-fact` id, so that a test over the built
#     site can prove that no quantity is stated with two values.
from __future__ import annotations

from attention_docs.findings import forward as ffwd
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.shape import Shape
from attention_docs.render import words
from attention_docs.render.tables import measurement_of

fact = words.fact_span


def forward_time(
    times: Sourced | Measurement, implementation: str, shape: Shape, *, spread: bool = True
) -> str:
    """An implementation's unprofiled forward time at `shape`, as a marked fact."""
    m = measurement_of(times)
    f = ffwd.forward_time(m, implementation, shape)
    if f is None:
        return f"— ({fwd.status(m, implementation, shape)})"
    return words.fact(f, with_spread=spread)


def speedup(
    times: Sourced | Measurement, fast: str, slow: str, shape: Shape, *, with_spread: bool = True
) -> str:
    """A sentence part: `SDPA flash is 2.2× (2.1–2.3×) faster than naive (eager)`, or a tie."""
    m = measurement_of(times)
    v = ffwd.versus(m, fast, slow, shape)
    if v is None:
        missing = fast if fwd.timing(m, fast, shape) is None else slow
        return f"{missing} did not run here ({fwd.status(m, missing, shape)})"
    if not v.comparison.tie and not v.comparison.as_ordered:
        # "fast is 1.5× slower than slow" states slow-vs-fast's ratio: mark it as that one.
        v = ffwd.versus(m, slow, fast, shape)
    return fact(v.quantity.id, words.speed(v.comparison, v.a, v.b, with_spread=with_spread))


def forward_table(
    times: Sourced, implementations: list[str], shape: Shape, *, baseline: str = fwd.NAIVE
) -> str:
    """A Markdown table: each implementation's forward time at `shape`, against `baseline`."""
    m = measurement_of(times)
    lines = [
        f"| Implementation | Unprofiled forward time (its confidence interval) | vs {baseline} |",
        "| --- | --: | --: |",
    ]
    for name in implementations:
        v = ffwd.versus(m, name, baseline, shape) if name != baseline else None
        lines.append(f"| {name} | {forward_time(m, name, shape)} | {versus_cell(v)} |")
    return "\n".join(lines)


def ceiling(ceilings: Sourced | Measurement, key: str, *, spread: bool = False) -> str:
    """One of the device's measured ceilings (`peak_flops_float32`, `bandwidth_bs`...) as a
    marked fact: `95 GFLOP/s`, with `spread` its interval too."""
    return words.fact(ffwd.ceiling(measurement_of(ceilings), key), with_spread=spread)


def versus_cell(v: ffwd.Versus | None) -> str:
    """A findings `Versus` as its marked ratio with the ratio's range, or a tie; — for None."""
    return "—" if v is None else fact(v.quantity.id, words.versus(v.comparison))
