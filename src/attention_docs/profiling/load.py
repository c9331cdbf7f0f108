# How busy the machine was while a measurement ran. Timings taken while other processes
# compete for the cores are slower and noisier, and nothing in the numbers themselves says
# so: a median of 46 ms with an interquartile range of 0 looks as trustworthy as any other.
# So every entry records the load average before and after, and — more to the point — the
# share of the machine's CPU time that *other* processes used during the run (all CPU time
# from /proc/stat minus this process's own). Linux only; elsewhere the fields are None.
from __future__ import annotations

import os
import time
from pathlib import Path

from attention_docs.records.load import Load


def cores_available() -> int:
    """The cores this process may run on (its CPU affinity), not all the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def _total_busy_ticks() -> int | None:
    """All non-idle CPU ticks of the machine since boot."""
    try:
        fields = Path("/proc/stat").read_text(encoding="ascii").splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:]]
    # user nice system idle iowait irq softirq steal (guest is already inside user).
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values[:8]) - idle


def _own_ticks() -> int | None:
    """CPU ticks used by this process and its waited-for children."""
    try:
        text = Path("/proc/self/stat").read_text(encoding="ascii")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    # Fields after the command name start at "state" (field 3): utime is 14, cstime 17.
    return sum(int(v) for v in fields[11:15])


class LoadMonitor:
    """Context manager: `with LoadMonitor(threads) as mon: ...; mon.load`."""

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads
        self.load: Load | None = None

    def __enter__(self) -> LoadMonitor:
        self._before = _loadavg()
        self._busy0, self._own0 = _total_busy_ticks(), _own_ticks()
        self._t0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.monotonic() - self._t0
        busy1, own1 = _total_busy_ticks(), _own_ticks()
        cores = os.cpu_count() or 1
        share = None
        if None not in (self._busy0, self._own0, busy1, own1) and wall > 0:
            ticks_per_s = os.sysconf("SC_CLK_TCK")
            others = (busy1 - self._busy0) - (own1 - self._own0)
            share = round(max(others, 0) / ticks_per_s / (wall * cores), 3)
        self.load = Load(
            cores=cores,
            threads=self.threads,
            load1_before=self._before,
            load1_after=_loadavg(),
            other_cpu_share=share,
        )


def wait_until_calm(timeout_s: float, window_s: float = 1.0) -> Load:
    """Wait, at most `timeout_s`, until the machine has been calm for a window of `window_s`
    (a load average within the cores, and others using at most BUSY_OTHER_SHARE of the
    CPU); returns the last window's load, calm or not."""
    deadline = time.monotonic() + timeout_s
    while True:
        with LoadMonitor() as monitor:
            time.sleep(window_s)
        if not monitor.load.busy or time.monotonic() + window_s > deadline:
            return monitor.load
