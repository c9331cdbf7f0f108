# Roofline verdicts: where a step sits against a machine's two ceilings, and what limits it.
# The model (analytic/roofline.py) gives the floor time from FLOPs and bytes; the verdict
# compares an *unprofiled* time with it, over the time's whole range: "memory-bound" is said
# only when the slowest round is still within the model's reach.
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.analytic.cost import StepCost
from attention_docs.analytic.roofline import OVERHEAD_FACTOR, Roof, predict
from attention_docs.records.timing import Timing

COMPUTE, MEMORY, OVERHEAD, INEFFICIENT = "compute", "memory", "overhead", "inefficient"


@dataclass(frozen=True)
class Bound:
    """One step against a roof. `roof` is the ceiling the model says limits it (compute or
    memory); `verdict` what limits it as measured: the roof when the measured time is within
    OVERHEAD_FACTOR of the floor over its whole range, otherwise fixed per-call costs
    (overhead) or a kernel far from the hardware's best (inefficient)."""

    roof: str
    floor_us: float  # max(flops / peak, bytes / bandwidth)
    measured: Timing | None
    verdict: str | None  # None without a measurement
    settled: bool  # the verdict holds for every round, not only the time it states

    @property
    def ratio(self) -> float | None:
        """Measured time over the floor (how far above its roof the step runs)."""
        if self.measured is None or not self.floor_us:
            return None
        return self.measured.time_us / self.floor_us


def bound(
    cost: StepCost, roof: Roof, measured: Timing | None, fixed_us: float | None = None
) -> Bound:
    """The roofline verdict for `cost` on `roof`, from an unprofiled `measured` time."""
    base = predict(cost, roof, 0.0)
    model_roof = COMPUTE if base.compute_s >= base.memory_s else MEMORY
    if measured is None:
        return Bound(model_roof, base.predicted_s * 1e6, None, None, True)
    fixed_s = fixed_us * 1e-6 if fixed_us is not None else None
    median, *ends = (
        predict(cost, roof, us * 1e-6, fixed_s).bound
        for us in (measured.time_us, measured.low_us, measured.high_us)
    )
    return Bound(model_roof, base.predicted_s * 1e6, measured, median, len({median, *ends}) == 1)


__all__ = ["COMPUTE", "INEFFICIENT", "MEMORY", "OVERHEAD", "OVERHEAD_FACTOR", "Bound", "bound"]
