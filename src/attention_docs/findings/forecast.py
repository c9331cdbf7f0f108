# Forecasts checked against measurements. A chapter whose answer depends on the device shows
# what a named GPU's data sheet and the analytic model predict (analytic/gpu.py computes it),
# labelled as a forecast; when the store holds a measurement of the same quantity on that
# GPU, the check puts them side by side with their ratio: the model tested by the machine.
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from attention_docs.analytic.gpu import Range
from attention_docs.findings.facts import SPEC, Fact, On
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape


def measured_on(entries: Iterable, gpu: SpecSheet) -> Measurement | None:
    """The entry measured on `gpu` among a request's entries on every device (Sourced, as
    `book.measure_each_device` returns them, or Measurement), or None."""
    measured = (getattr(e, "measurement", e) for e in entries)
    return next((m for m in measured if m.device_id == f"cuda-{gpu.slug}"), None)


def forecast(
    metric: str,
    subject: str,
    gpu: SpecSheet,
    value: float,
    unit: str,
    *,
    shape: Shape | None = None,
    detail: str = "",
) -> Fact:
    """A value computed from `gpu`'s data sheet, as a fact of its own (device `spec:SLUG`)."""
    return Fact(On.spec(gpu, shape).quantity(metric, subject, SPEC, detail), value, unit)


# The models' names in a realistic range's fact id, as every chapter gives them.
RANGE_OF_NAIVE = "realistic range: naive_floor_us over cited efficiencies"
RANGE_OF_FLASH = "realistic range: flash_forward over cited efficiencies"


def realistic(
    metric: str,
    subject: str,
    gpu: SpecSheet,
    r: Range,
    unit: str,
    *,
    shape: Shape | None = None,
    detail: str = "",
) -> Fact | None:
    """A forecast's realistic range (`analytic.gpu.Range`: the floor over cited
    efficiencies) as a fact with no single value; None where no efficiency is on record."""
    if r.low_us is None or r.high_us is None:
        return None
    q = On.spec(gpu, shape).quantity(metric, subject, SPEC, detail or "realistic range")
    return Fact(q, None, unit, r.low_us, r.high_us)


@dataclass(frozen=True)
class Check:
    """A forecast beside a measurement of the same quantity (or None: not measured yet).

    `ratio` = measured / forecast, with its range from the measurement's."""

    forecast: Fact
    measured: Fact | None
    ratio: float | None
    low: float | None
    high: float | None


def check(forecast: Fact, measured: Fact | None) -> Check:
    if forecast.quantity.clock != SPEC:
        raise ValueError(f"{forecast.id} is not a spec-sheet forecast")
    if measured is not None:
        f, m = forecast.quantity, measured.quantity
        if (f.metric, f.subject, f.shape) != (m.metric, m.subject, m.shape):
            raise ValueError(f"{measured.id} does not measure what {forecast.id} forecasts")
    if measured is None or not forecast.value or measured.value is None:
        return Check(forecast, measured, None, None, None)
    value = measured.value
    low, high = (value if end is None else end for end in (measured.low, measured.high))
    return Check(forecast, measured, *(x / forecast.value for x in (value, low, high)))
