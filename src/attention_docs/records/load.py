# How busy the machine was while a measurement ran, as plain data (profiling/load.py
# observes it). Timings taken while other processes compete for the cores are slower and
# noisier. A measurement leaves half the cores to the rest of the machine
# (profiling/environment.py), so others compete only when they use more than those.
from __future__ import annotations

from dataclasses import asdict, dataclass

# Others compete with a measurement when they use more of the CPU than the cores it leaves
# free, by more than this share of the cores it uses (a quarter of one core of two).
COMPETING_SHARE = 0.25
# ... on average over the run, or in at least this share of its half-second windows (a burst
# that an average over a minute-long experiment would hide).
BUSY_WINDOWS = 0.25
# Publishing asks more: others used at most this share of all cores over the run. Idle,
# the committed store's entries show 0-3 % (11 % for a run of 50 ms); one CPU-bound process
# beside a measurement on 2 cores shows 50 %, two of them 54-76 %, under the threshold
# above at times.
IDLE_SHARE = 0.25


@dataclass(frozen=True)
class Load:
    """The machine's load around one measurement.

    `other_cpu_share` is the share of all cores' time other processes used during the run
    (not this process, nor its children); `busiest_share` the largest such share in one
    half-second window, `busy_windows` the share of windows in which others competed.
    """

    cores: int
    threads: int | None  # torch's intra-op threads during the run (None: a GPU run)
    load1_before: float | None
    load1_after: float | None
    other_cpu_share: float | None  # others' CPU time / (wall time x cores) during the run
    busiest_share: float | None = None
    busy_windows: float | None = None

    @property
    def threshold(self) -> float:
        """Others' share of the CPU above which they took time from this measurement."""
        used = min(self.threads or 1, self.cores) / self.cores
        return 1 - used + COMPETING_SHARE * used

    @property
    def busy(self) -> bool:
        """Other work competed: on average over the run, or in a quarter of its windows."""
        if self.other_cpu_share is not None and self.other_cpu_share > self.threshold:
            return True
        return self.busy_windows is not None and self.busy_windows >= BUSY_WINDOWS

    @property
    def idle(self) -> bool:
        """Nothing else used the machine to speak of: what publishing requires."""
        share = self.other_cpu_share
        return not self.busy and (share is None or share <= IDLE_SHARE)

    def describe(self) -> str:
        """`load 0.4 → 1.9 on 2 cores; other processes used 3 % of the CPU (at most 40 % in a
        half-second, competing in 10 % of them)`."""
        parts = []
        if self.load1_before is not None and self.load1_after is not None:
            parts.append(
                f"load {self.load1_before:.1f} → {self.load1_after:.1f} on {self.cores} cores"
            )
        if self.other_cpu_share is not None:
            text = f"other processes used {100 * self.other_cpu_share:.0f}% of the CPU"
            if self.busiest_share is not None and self.busy_windows is not None:
                text += (
                    f" (at most {100 * self.busiest_share:.0f}% in a half-second; competing "
                    f"in {100 * self.busy_windows:.0f}% of them)"
                )
            parts.append(text)
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
