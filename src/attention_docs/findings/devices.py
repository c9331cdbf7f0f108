# One quantity on several devices: where the store holds the same experiment's entry for
# more than one device (two CPUs, a CPU and a GPU), what each device measured for the same
# implementation at the same shape, and their ratio — a tie when the two intervals overlap.
# Devices never mix silently: every fact names its device, and the ratio names both.
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import UNPROFILED, Fact, On
from attention_docs.findings.forward import time_at, timing_at
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.shape import Shape

DEVICE_RATIO = "time ratio between devices"


@dataclass(frozen=True)
class Across:
    """One implementation at one shape on every device that timed it there."""

    implementation: str
    times: tuple[Fact | None, ...]  # one per device, in the entries' order; None: not run
    # Each other device against the first: ratio = that device's time ÷ the first's.
    ratios: tuple[tuple[Fact, Comparison] | None, ...]


def common_shapes(entries: Sequence[Measurement]) -> list[Shape]:
    """The shapes every entry's forward-time table holds, in the first entry's order."""
    held = [{Shape.of(r) for r in fwd.rows(m)} for m in entries[1:]]
    first = dict.fromkeys(Shape.of(r) for r in fwd.rows(entries[0]))
    return [s for s in first if all(s in h for h in held)]


def across(entries: Sequence[Measurement], shape: Shape) -> list[Across]:
    """Every implementation the first entry timed at `shape`, on each device, with each other
    device's time against the first's. Steps are left out: their method may differ between
    entries measured with different code."""
    base = entries[0]
    found = []
    for r in fwd.rows(base):
        name = r["implementation"]
        if Shape.of(r) != shape or name.startswith(fwd.STEP_PREFIX):
            continue
        first, ratios = fwd.timing(base, name, shape), []
        for m in entries[1:]:
            other = timing_at(m, name, shape)
            if first is None or other is None:
                ratios.append(None)
                continue
            c = compare(first, other)
            subject = f"{name}, {m.device_id} ÷ {base.device_id}"
            ratios.append((On(m.device_id, shape)(DEVICE_RATIO, subject, UNPROFILED, c), c))
        times = tuple(time_at(m, name, shape) for m in entries)
        found.append(Across(name, times, tuple(ratios)))
    return found
