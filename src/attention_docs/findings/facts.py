# Facts: a value the site states, with the quantity it measures. A quantity is named by what
# it is, not by the experiment that measured it: the metric, the subject (an implementation,
# a step, an op), the full shape, the clock it was read on and the device. Two experiments
# that produce one quantity id are a bug (they will disagree on a shared machine); two truly
# different quantities (a warm and a cold cache, with and without building the mask) say how
# in `detail`. `On` builds them: a device and a shape, then metric, subject, clock and value.
# render/words.py states a Fact and marks it with its id; the site-wide test proves that
# every id has one value.
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from attention_docs.findings.compare import Comparison
from attention_docs.findings.share import Share
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape
from attention_docs.records.timing import Timing

# How a value was obtained. A speed verdict (faster, % of peak, roofline position) only ever
# uses "unprofiled" or "kernel" times; "profiled" times are for shares and structure.
UNPROFILED = "unprofiled"  # wall clock without the profiler, interleaved rounds
PROFILED = "profiled"  # read from a profile: inflated by the profiler's own bookkeeping
KERNEL = "kernel"  # GPU kernel time (CUDA events or the profiler's device clock)
MODEL = "model"  # computed by an analytic model from the shape (FLOPs, bytes, intensity)
SPEC = "spec-sheet forecast"  # computed from a GPU's data sheet: a forecast, not a measurement
COUNTED = "counted"  # counted by the profiler or the allocator (events, allocations, bytes)
NUMERIC = "numeric"  # an output compared with a reference (a relative error), not a time
PUBLISHED = "published"  # quoted from a paper (device `paper:...`): cited, not measured here
CLOCKS = (UNPROFILED, PROFILED, KERNEL, MODEL, SPEC, COUNTED, NUMERIC, PUBLISHED)
# The device of a MODEL quantity computed from a shape or a parameter alone: it holds on every
# device, so every device's page states it with the same id.
MODEL_DEVICE = "analytic"


class DevicesDifferError(ValueError):
    """A finding that needs one device's entries was given entries of several (a store that
    lacks some of them on the page's device). `what` names the finding."""

    def __init__(self, what: str, devices: Iterable[str]) -> None:
        self.what = what
        self.devices = tuple(sorted(set(devices)))
        super().__init__(f"{what} needs its entries from one device; got {', '.join(self.devices)}")


def one_device(what: str, *device_ids: str) -> str:
    """The one device id of `device_ids`, or DevicesDifferError naming `what` needs them alike."""
    if len(set(device_ids)) > 1:
        raise DevicesDifferError(what, device_ids)
    return device_ids[0]


@dataclass(frozen=True)
class Quantity:
    """What a number measures, precisely enough that one id has one true value.

    `device_id` is a device id (`cpu-intel-xeon`, `cuda-h200`), or what else gave the value:
    `spec:h200` (a forecast from a spec sheet), `paper:…` (a published figure).
    """

    metric: str  # "forward time", "step time", "share", "peak memory", "speed-up"...
    subject: str  # "naive (eager)", "attention.softmax", "SDPA flash vs naive (eager)"...
    device_id: str
    clock: str
    shape: Shape | None = None
    detail: str = ""  # what else tells it apart: "cold cache", "mask built per call"

    def __post_init__(self) -> None:
        if self.clock not in CLOCKS:
            raise ValueError(f"clock {self.clock!r} is not one of: {', '.join(CLOCKS)}")

    @property
    def id(self) -> str:
        """`forward time;naive (eager);b1 h4 n512 d64 float32 causal;unprofiled;cpu-x`."""
        parts = [self.metric, self.subject, self.shape.key() if self.shape else "", self.clock]
        parts.append(self.device_id)
        if self.detail:
            parts.append(self.detail)
        return ";".join(parts)


@dataclass(frozen=True)
class Fact:
    """A stated value: the median (or the only value), its range when it has one, its unit.

    Units: "µs", "B", "B/s", "FLOP", "FLOP/s", "FLOP/B", "%" (the value a fraction), "×", or a
    word ("events", "tokens"). `low`/`high`: the range over rounds or profiled forwards. A
    value known only as a range (a paper's "50–73%") has `value` None and both ends.
    """

    quantity: Quantity
    value: float | None
    unit: str
    low: float | None = None
    high: float | None = None

    @classmethod
    def of_timing(cls, quantity: Quantity, t: Timing) -> Fact:
        return cls(quantity, t.time_us, "µs", t.low_us, t.high_us)

    @property
    def id(self) -> str:
        return self.quantity.id


@dataclass(frozen=True)
class On:
    """The one fact builder: facts of one device at one shape (None: a quantity of no shape),
    `on(metric, subject, clock, value, unit)`. `On.of(m)`: a measurement's device and shape."""

    device_id: str
    shape: Shape | None = None

    @classmethod
    def of(cls, m: Measurement, **params: Any) -> On:
        """At `m`'s shape, or at it with `params` changed (another seq_len, dtype or mask)."""
        return cls(m.device_id, Shape.of(m.params, **params))

    @classmethod
    def spec(cls, gpu: SpecSheet, shape: Shape | None = None) -> On:
        """Forecasts from `gpu`'s data sheet (device `spec:SLUG`, clock SPEC)."""
        return cls(f"spec:{gpu.slug}", shape)

    def quantity(self, metric: str, subject: str, clock: str, detail: str = "") -> Quantity:
        return Quantity(metric, subject, self.device_id, clock, self.shape, detail)

    def __call__(
        self, metric: str, subject: str, clock: str, value: Any, unit: str = "", *, detail: str = ""
    ) -> Fact | None:
        """`value` as a fact: a Timing with its rounds' range (µs), a Comparison as its ratio
        and range (×), a Share as its fraction and range (%), a number in `unit`; None: none.
        (A number with a range of its own: `Fact(on.quantity(...), value, unit, low, high)`.)"""
        if value is None:
            return None
        q = self.quantity(metric, subject, clock, detail)
        if isinstance(value, Timing):
            return Fact.of_timing(q, value)
        if isinstance(value, Comparison):
            return ratio_fact(q, value)
        if isinstance(value, Share):
            return Fact(q, value.fraction, "%", value.low, value.high)
        return Fact(q, value, unit)


def model_fact(
    metric: str, subject: str, shape: Shape | None, value: float, unit: str, *, detail: str = ""
) -> Fact:
    """A value the analytic model computes from the shape alone: one fact on every device."""
    return On(MODEL_DEVICE, shape)(metric, subject, MODEL, value, unit, detail=detail)


def llc_fact(facts: dict, device_id: str) -> Fact | None:
    """The last-level cache a measurement recorded (`llc_level`, `llc_bytes` among its
    facts: profiling/cache.py), or None where it recorded none."""
    if not facts.get("llc_bytes"):
        return None
    q = Quantity("last-level cache", f"L{facts.get('llc_level')}", device_id, COUNTED)
    return Fact(q, facts["llc_bytes"], "B")


def per_second(q: Quantity, amount: float, t: Timing, unit: str) -> Fact:
    """`amount` over the time `t` as a rate; its range from the rounds' extremes."""
    return Fact(
        q, amount / t.time_us * 1e6, unit, amount / t.high_us * 1e6, amount / t.low_us * 1e6
    )


def ratio_fact(quantity: Quantity, c: Comparison) -> Fact:
    """A comparison's ratio with its range over the rounds, as the fact `quantity` (×)."""
    return Fact(quantity, c.ratio, "×", c.low, c.high)
