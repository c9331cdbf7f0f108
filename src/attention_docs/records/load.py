# How busy the machine was while a measurement ran, as plain data (profiling/load.py
# observes it). Timings taken while other processes compete for the cores are slower and
# noisier, and nothing in the numbers themselves says so.
from __future__ import annotations

from dataclasses import asdict, dataclass

# Other processes using more than this share of all cores during a run flag it as busy.
BUSY_OTHER_SHARE = 0.25


@dataclass(frozen=True)
class Load:
    """The machine's load around one measurement."""

    cores: int
    threads: int | None  # torch's intra-op threads during the run
    load1_before: float | None
    load1_after: float | None
    other_cpu_share: float | None  # others' CPU time / (wall time x cores) during the run

    @property
    def busy(self) -> bool:
        """Other work competed: the load average exceeded the cores, or others used >25 %."""
        if self.load1_before is not None and self.load1_before > self.cores:
            return True
        return self.other_cpu_share is not None and self.other_cpu_share > BUSY_OTHER_SHARE

    def describe(self) -> str:
        """`load 0.4 → 1.9 on 2 cores; other processes used 3 % of the CPU`."""
        parts = []
        if self.load1_before is not None and self.load1_after is not None:
            parts.append(
                f"load {self.load1_before:.1f} → {self.load1_after:.1f} on {self.cores} cores"
            )
        if self.other_cpu_share is not None:
            parts.append(f"other processes used {100 * self.other_cpu_share:.0f}% of the CPU")
        return "; ".join(parts) or "load not recorded"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Load:
        return cls(**data)


class BusyMachineError(RuntimeError):
    """Other work competed for the machine while an experiment ran; its result was not stored.

    `load` says how busy the machine was (`Load.describe()`). Raised by the runner; defined
    here, beside the record, so that the command line catches it without importing torch.
    """

    def __init__(self, message: str, load: str) -> None:
        super().__init__(message)
        self.load = load
