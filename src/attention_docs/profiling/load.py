# How busy the machine was while a measurement ran. Timings taken while other processes
# compete for the cores are slower and noisier, and nothing in the numbers themselves says
# so. So every entry records the load average before and after, and — more to the point —
# the share of the machine's CPU time that *other* processes used during the run (all CPU
# time from /proc/stat minus this process's and its descendants'), on average and in each
# half-second window: an average over a minute-long experiment hides a burst that moved
# some of its rounds. Linux only; elsewhere the fields are None.
from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
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


def _process_ticks() -> dict[int, tuple[int, int]]:
    """Every process's (parent pid, CPU ticks used by it and its waited-for children)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue  # ended meanwhile
        fields = text.rsplit(")", 1)[1].split()
        # Fields after the command name start at "state" (field 3): ppid is 4, utime 14 ...
        # cstime 17.
        found[int(entry.name)] = (int(fields[1]), sum(int(v) for v in fields[11:15]))
    return found


def _own_ticks() -> int | None:
    """CPU ticks used by this process and every process below it, alive or waited for: a
    worker's own subprocesses (a compile, an interpreter check) are not "other work"."""
    try:
        table = _process_ticks()
    except OSError:
        return None
    me = os.getpid()
    if me not in table:
        return None
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0, [me]
    while todo:
        pid = todo.pop()
        total += table[pid][1]
        todo += children.get(pid, [])
    return total


class _Windows:
    """Samples others' share of the CPU every `window_s` in a background thread."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.shares: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join()
        return self.shares

    def _run(self) -> None:
        cores = os.cpu_count() or 1
        ticks_per_s = os.sysconf("SC_CLK_TCK")
        last = (time.monotonic(), _total_busy_ticks(), _own_ticks())
        while not self._stop.wait(self.window_s):
            now = (time.monotonic(), _total_busy_ticks(), _own_ticks())
            if None in last or None in now:
                return
            wall = now[0] - last[0]
            others = (now[1] - last[1]) - (now[2] - last[2])
            self.shares.append(max(others, 0) / ticks_per_s / (wall * cores))
            last = now


class LoadMonitor:
    """Context manager: `with LoadMonitor(threads) as mon: ...; mon.load`."""

    WINDOW_S = 0.5

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads
        self.load: Load | None = None

    def __enter__(self) -> LoadMonitor:
        self._before = _loadavg()
        self._busy0, self._own0 = _total_busy_ticks(), _own_ticks()
        self._t0 = time.monotonic()
        self._windows = _Windows(self.WINDOW_S)
        self._windows.start()
        return self

    def __exit__(self, *exc: object) -> None:
        windows = self._windows.stop()
        wall = time.monotonic() - self._t0
        busy1, own1 = _total_busy_ticks(), _own_ticks()
        cores = os.cpu_count() or 1
        share = None
        if None not in (self._busy0, self._own0, busy1, own1) and wall > 0:
            ticks_per_s = os.sysconf("SC_CLK_TCK")
            others = (busy1 - self._busy0) - (own1 - self._own0)
            share = round(max(others, 0) / ticks_per_s / (wall * cores), 3)
        load = Load(
            cores=cores,
            threads=self.threads,
            load1_before=self._before,
            load1_after=_loadavg(),
            other_cpu_share=share,
        )
        if windows:
            competing = sum(w > load.threshold for w in windows) / len(windows)
            load = replace(
                load, busiest_share=round(max(windows), 3), busy_windows=round(competing, 3)
            )
        self.load = load


def wait_until_calm(timeout_s: float, window_s: float = 1.0) -> Load:
    """Wait, at most `timeout_s`, until the machine has been calm for a window of `window_s`
    (others leaving a measurement's threads their cores, records/load.py); returns the last
    window's load, calm or not."""
    deadline = time.monotonic() + timeout_s
    threads = max(1, cores_available() // 2)  # what a worker gives torch (environment.py)
    while True:
        with LoadMonitor(threads) as monitor:
            time.sleep(window_s)
        if not monitor.load.busy or time.monotonic() + window_s > deadline:
            return monitor.load
