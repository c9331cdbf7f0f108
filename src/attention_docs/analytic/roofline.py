# The roofline model: a machine's two ceilings (peak FLOP/s, memory bandwidth) and what they
# predict for a step of known FLOPs and bytes. Pure arithmetic, like cost.py, and kept apart
# from it so that the cost formulas (which experiments fingerprint) stay untouched.
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.analytic.cost import StepCost

# A step is called overhead-bound when it takes more than this many times its roofline time.
# The ceilings are measured best cases (a large matmul, a large copy); a kernel that does its
# job well reaches a good fraction of them, so time beyond 5× (under 20% of the attainable
# rate) is not explained by the roof the step sits under: it goes to fixed per-call costs
# (dispatch, allocation, kernel launch) or to a kernel far from the hardware's best.
OVERHEAD_FACTOR = 5.0
# Such a step is overhead-bound when its fixed costs (op calls × the cheapest call's time)
# make up at least this share of its measured time; otherwise its kernels are simply far
# from the ceilings ("inefficient"), which no amount of batching of calls would fix.
FIXED_SHARE = 0.5


@dataclass(frozen=True)
class Roof:
    """A machine's two ceilings: peak FLOP/s (one dtype) and memory bandwidth in bytes/s."""

    peak_flops: float
    bandwidth: float

    def __post_init__(self) -> None:
        if self.peak_flops <= 0 or self.bandwidth <= 0:
            raise ValueError(
                f"a roof needs positive ceilings, got {self.peak_flops} FLOP/s and "
                f"{self.bandwidth} B/s"
            )

    @property
    def ridge(self) -> float:
        """The intensity (FLOP/byte) where the two ceilings meet: below it, memory limits."""
        return self.peak_flops / self.bandwidth

    def attainable(self, intensity: float) -> float:
        """The best FLOP/s a step of this intensity can reach: min(peak, bandwidth × intensity)."""
        return min(self.peak_flops, self.bandwidth * intensity)


@dataclass(frozen=True)
class Prediction:
    """A step's roofline prediction against its measured time (seconds)."""

    label: str
    compute_s: float  # flops / peak
    memory_s: float  # bytes / bandwidth
    measured_s: float
    fixed_s: float | None = None  # op calls × the per-call floor, when known

    @property
    def predicted_s(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def ratio(self) -> float:
        """measured / predicted; infinite for a step the roofline says should cost nothing."""
        return self.measured_s / self.predicted_s if self.predicted_s else float("inf")

    @property
    def bound(self) -> str:
        """'compute' or 'memory' (the larger roofline time) when the step runs within
        OVERHEAD_FACTOR of its roofline time; beyond that 'overhead' when fixed per-call
        costs explain at least FIXED_SHARE of it (or are unknown), else 'inefficient'."""
        if self.ratio <= OVERHEAD_FACTOR:
            return "compute" if self.compute_s >= self.memory_s else "memory"
        if self.fixed_s is None or self.fixed_s >= FIXED_SHARE * self.measured_s:
            return "overhead"
        return "inefficient"


def predict(
    cost: StepCost, roof: Roof, measured_s: float, fixed_s: float | None = None
) -> Prediction:
    """The roofline time of `cost` on `roof`, next to what was measured (and the step's
    fixed per-call cost, if known)."""
    return Prediction(
        label=cost.label,
        compute_s=cost.flops / roof.peak_flops,
        memory_s=cost.bytes / roof.bandwidth,
        measured_s=measured_s,
        fixed_s=fixed_s,
    )
