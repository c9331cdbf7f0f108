# Facts and comparisons from the one forward-time entry of a device (measurements/forward.py):
# an implementation's unprofiled forward time at a shape, one naive step's time in the forward
# (the five timed one after another), how two
# implementations compare, and the machine's measured ceilings. Every page that states one of
# these asks here, so each is one quantity with one value.
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import UNPROFILED, Fact, Quantity
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.shape import Shape

FORWARD_TIME = "forward time"
STEP_TIME = "step time in the forward"
SPEED = "speed ratio"


def forward_quantity(m: Measurement, implementation: str, shape: Shape) -> Quantity:
    if implementation.startswith(fwd.STEP_PREFIX):
        subject = implementation.removeprefix(fwd.STEP_PREFIX)
        return Quantity(STEP_TIME, subject, m.device_id, UNPROFILED, shape)
    return Quantity(FORWARD_TIME, implementation, m.device_id, UNPROFILED, shape)


def forward_time(m: Measurement, implementation: str, shape: Shape) -> Fact | None:
    """The implementation's unprofiled forward time at `shape`; None when it did not run
    (`fwd.status` says why)."""
    t = fwd.timing(m, implementation, shape)
    return None if t is None else Fact.of_timing(forward_quantity(m, implementation, shape), t)


def step_time(m: Measurement, label: str, shape: Shape) -> Fact | None:
    """One naive step's (`attention.softmax`...) time in the forward, without the profiler."""
    return forward_time(m, fwd.STEP_PREFIX + label, shape)


@dataclass(frozen=True)
class Versus:
    """`a` against `b` at one shape: `comparison.ratio` = b's time / a's (> 1: a is faster)."""

    quantity: Quantity
    a: str
    b: str
    comparison: Comparison


def versus(m: Measurement, a: str, b: str, shape: Shape) -> Versus | None:
    """How `a` compares with `b`; None when either did not run here."""
    ta, tb = fwd.timing(m, a, shape), fwd.timing(m, b, shape)
    if ta is None or tb is None:
        return None
    q = Quantity(SPEED, f"{a} vs {b}", m.device_id, UNPROFILED, shape)
    return Versus(q, a, b, compare(ta, tb))


CEILING_UNITS = {"peak_flops": "FLOP/s", "bandwidth_bs": "B/s", "cache_bandwidth_bs": "B/s"}


def ceiling(m: Measurement, key: str) -> Fact:
    """One of the device's measured ceilings (`peak_flops_float32`, `bandwidth_bs`...), with
    its range over the rounds when recorded."""
    if key not in m.facts:
        raise KeyError(f"machine_ceilings on {m.device_id} has no {key!r}: {sorted(m.facts)}")
    unit = next(u for prefix, u in CEILING_UNITS.items() if key.startswith(prefix))
    q = Quantity("ceiling", key, m.device_id, UNPROFILED)
    return Fact(q, m.facts[key], unit, m.facts.get(f"{key}_low"), m.facts.get(f"{key}_high"))
