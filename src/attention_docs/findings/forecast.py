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
    """One row of a forecast box: the data sheet's forecast (a floor, or a value), its
    realistic range when the model gives one, and a measurement of the same quantity on that
    GPU (or None: not measured yet).

    `ratio` = measured / forecast, with its range from the measurement's."""

    forecast: Fact
    measured: Fact | None
    ratio: float | None
    low: float | None
    high: float | None
    realistic: Fact | None = None


def check(forecast: Fact, measured: Fact | None, realistic: Fact | None = None) -> Check:
    if forecast.quantity.clock != SPEC:
        raise ValueError(f"{forecast.id} is not a spec-sheet forecast")
    f = forecast.quantity
    for other, says in ((measured, "does not measure"), (realistic, "is not a range of")):
        o = other and other.quantity
        if o and (f.metric, f.subject, f.shape) != (o.metric, o.subject, o.shape):
            raise ValueError(f"{other.id} {says} what {forecast.id} forecasts")
    if measured is None or not forecast.value or measured.value is None:
        return Check(forecast, measured, None, None, None, realistic)
    value = measured.value
    low, high = (value if end is None else end for end in (measured.low, measured.high))
    return Check(forecast, measured, *(x / forecast.value for x in (value, low, high)), realistic)
