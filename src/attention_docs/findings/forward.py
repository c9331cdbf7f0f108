# Facts and comparisons from the one forward-time entry of a device (measurements/forward.py):
# an implementation's unprofiled forward time at a shape (also from an entry whose grid may not
# hold it), one naive step's time in the forward, how two implementations compare (Versus: the
# one speed-ratio type every finding uses), and the machine's measured ceilings. Every page
# that states one of these asks here, so each is one quantity with one value.
from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass

from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import UNPROFILED, Fact, On, Quantity, ratio_fact
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.shape import Shape
from attention_docs.records.timing import Timing

FORWARD_TIME = "forward time"
STEP_TIME = "step time in the forward"
SPEED = "speed ratio"


def forward_quantity(m: Measurement, implementation: str, shape: Shape) -> Quantity:
    metric, subject = FORWARD_TIME, implementation
    if implementation.startswith(fwd.STEP_PREFIX):
        metric, subject = STEP_TIME, implementation.removeprefix(fwd.STEP_PREFIX)
    return On(m.device_id, shape).quantity(metric, subject, UNPROFILED)


def forward_time(m: Measurement, implementation: str, shape: Shape) -> Fact | None:
    """The implementation's unprofiled forward time at `shape`; None when it did not run
    (`fwd.status` says why)."""
    t = fwd.timing(m, implementation, shape)
    return None if t is None else Fact.of_timing(forward_quantity(m, implementation, shape), t)


def timing_at(m: Measurement | None, implementation: str, shape: Shape) -> Timing | None:
    """The implementation's forward timing at `shape` in an entry that may not hold it
    (another device's grid, a shape off the grid); None there, without an entry, or where
    it did not run."""
    with suppress(fwd.NotMeasuredError):
        return None if m is None else fwd.timing(m, implementation, shape)
    return None


def time_at(m: Measurement | None, implementation: str, shape: Shape) -> Fact | None:
    """That timing as the forward-time fact every page states."""
    t = timing_at(m, implementation, shape)
    return None if t is None else Fact.of_timing(forward_quantity(m, implementation, shape), t)


def step_time(m: Measurement, label: str, shape: Shape) -> Fact | None:
    """One naive step's (`attention.softmax`...) time in the forward, without the profiler."""
    return forward_time(m, fwd.STEP_PREFIX + label, shape)


@dataclass(frozen=True)
class Versus:
    """`a` against `b` (implementations, a sweep's lines, decode paths): b's time ÷ a's as a
    fact with its range over the rounds (above 1: `a` is faster), and the comparison it
    states (a tie where the intervals overlap)."""

    a: str
    b: str
    fact: Fact
    comparison: Comparison

    @classmethod
    def of(cls, quantity: Quantity, a: str, b: str, comparison: Comparison) -> Versus:
        return cls(a, b, ratio_fact(quantity, comparison), comparison)

    @classmethod
    def between(cls, on: On, a: str, b: str, ta: Timing | None, tb: Timing | None) -> Versus | None:
        """`a`'s timing against `b`'s, as a speed ratio of `on`; None when either did not run."""
        if ta is None or tb is None:
            return None
        return cls.of(on.quantity(SPEED, f"{a} vs {b}", UNPROFILED), a, b, compare(ta, tb))

    @property
    def quantity(self) -> Quantity:
        return self.fact.quantity


def versus(m: Measurement, a: str, b: str, shape: Shape) -> Versus | None:
    """How `a` compares with `b`; None when either did not run here."""
    on = On(m.device_id, shape)
    return Versus.between(on, a, b, fwd.timing(m, a, shape), fwd.timing(m, b, shape))


CEILING_UNITS = {"peak_flops": "FLOP/s", "bandwidth_bs": "B/s", "cache_bandwidth_bs": "B/s"}


def ceiling(m: Measurement, key: str) -> Fact:
    """One of the device's measured ceilings (`peak_flops_float32`, `bandwidth_bs`...), with
    its range over the rounds when recorded."""
    if key not in m.facts:
        raise KeyError(f"machine_ceilings on {m.device_id} has no {key!r}: {sorted(m.facts)}")
    unit = next(u for prefix, u in CEILING_UNITS.items() if key.startswith(prefix))
    q = On(m.device_id).quantity("ceiling", key, UNPROFILED)
    return Fact(q, m.facts[key], unit, m.facts.get(f"{key}_low"), m.facts.get(f"{key}_high"))
