# Verdicts of the profiler primer: how the first profiled calls of a fresh process compare
# with the settled ones of the same process; how page faults per call are
# distributed and what each group costs; the dispatch chain of one labelled range; what each
# profiler setting adds per forward and per event; and the two regimes of a size sweep (a
# per-call floor, then time in proportion to the bytes), with the size that moved bytes
# fastest. Facts and flags only: render/primer.py says them.
from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.distribution import Distribution, distribution
from attention_docs.findings.facts import (
    COUNTED,
    MODEL,
    PROFILED,
    UNPROFILED,
    Fact,
    On,
    Quantity,
    model_fact,
    per_second,
)
from attention_docs.findings.forward import forward_time
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.kernels import is_bookkeeping
from attention_docs.records.shape import Shape
from attention_docs.records.timing import Timing
from attention_docs.records.trace import Span, Trace

# A warm call's page faults explain "most" of it when even the least costly reading is half
# the forward, a "small" part when even the costliest is under a tenth.
MOST, SMALL = 0.5, 0.1
SMALLEST = 4  # the sizes of a sweep whose medians make its per-call floor


def _scaled(q: Quantity, f: Fact, by: float = 1.0, per: float = 1.0) -> Fact:
    """`f` × `by` ÷ `per`, its range with it, as a fact of `q`."""
    return Fact(q, f.value * by / per, f.unit, f.low * by / per, f.high * by / per)


def _minus(q: Quantity, a: Timing, b: Timing) -> Fact:
    """`a` − `b`: the difference of the medians, its range pairing the rounds' extremes."""
    return Fact(q, a.time_us - b.time_us, "µs", a.low_us - b.high_us, a.high_us - b.low_us)


@dataclass(frozen=True)
class FirstCalls:
    # Per call, first to last, in the cold session and in a second one with the forward
    # already warm: its profiled wall time and its minor page faults (None: not counted).
    cold: tuple[Fact, ...]
    again: tuple[Fact, ...]
    cold_faults: tuple[Fact | None, ...]
    again_faults: tuple[Fact | None, ...]
    settled: Fact  # the cold session's second half
    # None where it does not show: the first call ÷ the settled calls (None: inside their
    # range); the profiler's start-up, the second session's first call over its settled calls
    # (None: no slower than every one of them); the cold start, the cold session's first call
    # over the second's (None: by no more than the settled calls vary).
    first_over_settled: Fact | None
    startup: Fact | None
    cold_start: Fact | None


def first_calls(m: Measurement) -> FirstCalls:
    """Calls 1..N of `profile_first_calls` against each other, all in one process: profiled
    times from another process (naive_steps, forward_times) are not set against them."""
    table = m.tables["per_call"]
    cold, again = table.column("cold_wall_us"), table.column("warm_session_wall_us")
    half = len(cold) // 2
    # Each call is one round of its Timing.
    settled, settled_again = (Timing.from_rounds(c[half:], "calls") for c in (cold, again))
    first = Timing.from_rounds([cold[0]], "call")
    noise = max(settled.high_us - settled.low_us, settled_again.high_us - settled_again.low_us)

    def naive(metric: str, value, unit: str = "", detail: str = "", clock=PROFILED) -> Fact:
        return On.of(m)(metric, fwd.NAIVE, clock, value, unit, detail=detail)

    def per_call(column: str, session: str, metric: str, clock: str, unit: str) -> tuple:
        return tuple(
            naive(metric, v, unit, f"call {i}, {session} session", clock)
            for i, v in enumerate(table.column(column), 1)
        )

    time, faults = ("profiled call time", PROFILED, "µs"), ("minor page faults", COUNTED, "")
    vs_settled = compare(settled, first)
    startup = naive(
        "profiler start-up", again[0] - settled_again.time_us, "µs", "first call over settled calls"
    )
    cold_start = naive(
        "cold start", cold[0] - again[0], "µs", "first call, cold minus warm session"
    )
    return FirstCalls(
        cold=per_call("cold_wall_us", "cold", *time),
        again=per_call("warm_session_wall_us", "second", *time),
        cold_faults=per_call("minor_page_faults", "cold", *faults),
        again_faults=per_call("warm_session_page_faults", "second", *faults),
        settled=naive("profiled call time", settled, detail="settled calls, cold session"),
        first_over_settled=None
        if vs_settled.tie
        else naive("first profiled call ÷ settled calls", vs_settled),
        startup=startup if again[0] > settled_again.high_us else None,
        cold_start=cold_start if cold_start.value > noise else None,
    )


def first_call_ops(m: Measurement) -> tuple[tuple[str, str, Fact, Fact], ...]:
    """What the first call spent its extra time in, by name (first-only names first): each
    name, its kind, its self time in the first call, and that over the settled calls' mean."""

    def f(r: dict, metric: str, column: str, detail: str) -> Fact:
        return On.of(m)(metric, r["name"], PROFILED, r[column], "µs", detail=detail)

    return tuple(
        (
            r["name"],
            r["kind"],
            f(r, "profiled self time", "self_first_us", "first call, cold session"),
            f(r, "first call's extra self time", "extra_us", "over the settled calls"),
        )
        for r in m.tables["first_call_ops"].records()
    )


@dataclass(frozen=True)
class Dispatch:
    """One labelled range of a profiled forward: its total and self time, the op its line of
    Python called (`outer`, the longest) and the op that did the work (`worker`, the most
    self time, views excluded), with the worker's share of the range's total."""

    total: Fact
    own: Fact
    outer: str
    outer_total: Fact
    outer_own: Fact
    worker: str
    worker_own: Fact
    worker_share: Fact


def range_spans(trace: Trace, label: str) -> tuple[Span, list[Span]]:
    """The (first) range named `label` and every span nested in it on its lane."""
    top = next((s for s in trace.spans if s.kind == "range" and s.name == label), None)
    if top is None:
        raise KeyError(f"the trace has no range named {label!r}")
    inside = [
        s
        for s in trace.spans
        if s.lane == top.lane
        and s is not top
        and s.depth > top.depth
        and top.start_us <= s.start_us
        and s.end_us <= top.end_us + 1e-3
    ]
    return top, inside


def dispatch(m: Measurement, label: str) -> Dispatch:
    """The dispatch chain of `label` in `m`'s one profiled forward."""
    if m.timeline is None:
        raise ValueError(f"{m.experiment} recorded no timeline")
    top, inside = range_spans(m.timeline, label)
    ops = [s for s in inside if s.kind == "op"]
    if not ops:
        raise ValueError(f"{label} holds no op in {m.experiment}'s timeline")
    outer = max(ops, key=lambda s: s.dur_us)
    # Views and reshapes can out-time the worker at tiny sizes, never out-work it.
    worker = max([s for s in ops if not is_bookkeeping(s.name)] or ops, key=lambda s: s.self_us)

    on = On.of(m)

    def f(span: Span, which: str) -> Fact:
        subject = label if span is top else f"{label} › {span.name}"
        value = span.dur_us if which == "total" else span.self_us
        return on(f"{which} time in one profiled forward", subject, PROFILED, value, "µs")

    share, busiest = worker.self_us / top.dur_us if top.dur_us else 0.0, f"{label} › {worker.name}"
    return Dispatch(
        f(top, "total"),
        f(top, "self"),
        outer.name,
        f(outer, "total"),
        f(outer, "self"),
        worker.name,
        f(worker, "self"),
        on("share of the range", busiest, PROFILED, share, "%", detail="self time"),
    )


@dataclass(frozen=True)
class FaultGroup:
    """One mode of the faults-per-call distribution and what its faults cost."""

    faults: Fact  # faults per call: the group's median and range
    calls: Fact  # how many calls fell in it
    # Priced with the measured cost of a fresh page (all None where that cost is not
    # resolved): the faults' time per call, that as a fraction of the unprofiled forward, and
    # how much of a call it explains ("most", "small", "part", or "open": small or most).
    cost: Fact | None  # faults × the cost of a fresh page (None: that cost was not resolved)
    share: Fact | None  # that cost as a fraction of the unprofiled forward
    level: str | None  # MOST, SMALL, "part" or "open": how much of a call it explains


@dataclass(frozen=True)
class Faults:
    distribution: Distribution
    groups: tuple[FaultGroup, ...]
    page_cost: Fact | None  # one fresh page; None when fresh and mapped writes tie
    buffer: Fact  # the buffer it was priced on (one N×N score matrix, in whole pages)


def _level(low: float, high: float) -> str:
    if low >= MOST:
        return "most"
    if high < SMALL:
        return "small"
    return "open" if low < SMALL else "part"


def faults(m: Measurement, times: Measurement) -> Faults | None:
    """Minor page faults of every profiled call (both sessions) as a distribution, each
    group priced with the measured cost of one fresh page; None without fault counts."""
    table = m.tables["per_call"]
    values = [
        v
        for column in ("minor_page_faults", "warm_session_page_faults")
        for v in table.column(column)
        if v is not None
    ]
    cost = m.facts.get("fault_cost")
    if not values or cost is None:
        return None
    dist = distribution(values)
    warm = forward_time(times, fwd.NAIVE, Shape.of(m.params))
    fresh, mapped = Timing.from_json(cost["fresh"]), Timing.from_json(cost["mapped"])
    per_buffer, on = cost["faults_per_buffer"], On.of(m)
    page = None
    if per_buffer >= 1 and not compare(mapped, fresh).tie:
        q = On(m.device_id).quantity("fresh page cost", "one minor page fault", UNPROFILED)
        diff = _minus(q, fresh, mapped)
        page = _scaled(q, replace(diff, low=max(diff.low, 0.0)), per=per_buffer)
    groups = []
    for mode in dist.modes:
        typical = statistics.median(v for v in dist.values if mode.low <= v <= mode.high)
        detail = f"calls with {mode.low:g}-{mode.high:g} faults"
        cost_fact = share = level = None
        if page is not None and warm is not None:
            q = on.quantity("page fault time per call", fwd.NAIVE, MODEL, detail)
            cost_fact = _scaled(q, page, typical)
            low, high = cost_fact.low / warm.high, cost_fact.high / warm.low
            q = on.quantity("page faults ÷ unprofiled forward", fwd.NAIVE, MODEL, detail)
            share = Fact(q, cost_fact.value / warm.value, "%", low, high)
            level = _level(low, high)
        q = on.quantity("minor page faults per call", fwd.NAIVE, COUNTED, detail)
        group = Fact(q, typical, "", mode.low, mode.high)
        calls = on("profiled calls", fwd.NAIVE, COUNTED, mode.count, detail=detail)
        groups.append(FaultGroup(group, calls, cost_fact, share, level))
    buffer = model_fact("buffer priced", "fresh page cost", on.shape, cost["buffer_bytes"], "B")
    return Faults(dist, tuple(groups), page, buffer)


@dataclass(frozen=True)
class Overhead:
    configuration: str
    versus: Comparison  # ratio = under the profiler ÷ without it, same rounds
    ratio: Fact  # that ratio as a fact
    added: Fact  # per forward: median difference; range pairs the rounds' extremes
    events: Fact  # events recorded per forward
    per_event: Fact | None  # None when the added time is within noise


def overhead(m: Measurement) -> tuple[Overhead, ...]:
    """Each profiler setting of `profile_overhead` against the loop without the profiler."""
    rows, on = m.tables["overhead"].records(), On.of(m)
    base = rows[0]["time"]
    found = []
    for r in rows[1:]:
        t, what, n = r["time"], r["configuration"], r["events_per_forward"]
        c = compare(base, t)
        q = on.quantity("profiler time added per forward", fwd.NAIVE, UNPROFILED, what)
        added = _minus(q, t, base)
        events = on("profiler events per forward", fwd.NAIVE, COUNTED, n, "events", detail=what)
        per_event = None
        if not c.tie and n:
            q = on.quantity("profiler time per event", fwd.NAIVE, UNPROFILED, what)
            per_event = _scaled(q, added, per=n)
        ratio = on("profiled ÷ unprofiled forward", fwd.NAIVE, UNPROFILED, c, detail=what)
        found.append(Overhead(what, c, ratio, added, events, per_event))
    return tuple(found)


@dataclass(frozen=True)
class SizePoint:
    elements: int
    moved: Fact  # bytes moved per call (read a and b, write the sum)
    timing: Timing
    time: Fact
    rate: Fact  # bytes moved per second, range over the rounds


@dataclass(frozen=True)
class SizeSweep:
    points: tuple[SizePoint, ...]
    floor: Fact  # per-call floor: median of the smallest sizes' medians, their range
    flat: bool  # the smallest sizes are within noise of one another
    bandwidth: Fact  # the largest size's rate (a point of `points`)
    crossover: Fact  # bytes where bytes ÷ bandwidth equals the floor
    # The point that moved bytes fastest (median), its time per byte against the largest's,
    # and whether it beats the largest beyond the noise (False when it is the largest).
    fastest: SizePoint  # the point that moved bytes fastest (median)
    fastest_ratio: Fact  # time per byte: largest ÷ fastest
    fastest_beyond_noise: bool  # False when the fastest is the largest, or a tie

    def model_us(self, nbytes: float) -> float:
        """max(floor, bytes ÷ bandwidth): the two regimes drawn over the points."""
        return max(self.floor.value, nbytes / self.bandwidth.value * 1e6)


def size_sweep(m: Measurement) -> SizeSweep:
    """The floor, the bandwidth of the largest size, the crossover, and whether a smaller
    size moved bytes faster than the largest beyond the noise of both."""
    op, on = f"{m.facts.get('op', 'op')} {m.params.get('dtype', 'float32')}", On(m.device_id)
    points = []
    for r in m.tables["sizes"].records():
        n, b, t = r["elements"], r["bytes"], r["time"]
        if t is not None:
            size = f"{n} elements"
            moved = model_fact("bytes moved per call", op, None, b, "B", detail=size)
            time = on("time per call", op, UNPROFILED, t, detail=size)
            rate = per_second(on.quantity("achieved bandwidth", op, UNPROFILED, size), b, t, "B/s")
            points.append(SizePoint(n, moved, t, time, rate))
    if len(points) < SMALLEST + 1:
        raise ValueError(
            f"a size sweep needs at least {SMALLEST + 1} measured sizes to find two regimes; "
            f"{m.experiment} has {len(points)}"
        )
    small = [p.time for p in points[:SMALLEST]]
    flat = max(f.low for f in small) <= min(f.high for f in small)
    small = [f.value for f in small]
    q = on.quantity("per-call floor", op, UNPROFILED, f"median of the {SMALLEST} smallest sizes")
    floor = Fact(q, statistics.median(small), "µs", min(small), max(small))
    largest = points[-1]
    crossover = floor.value * 1e-6 * largest.rate.value
    fastest = max(points, key=lambda p: p.rate.value)
    versus = compare(*(p.timing.scaled(1 / p.moved.value) for p in (fastest, largest)))
    at = f"{fastest.elements} elements"
    ratio = on("bytes/s ÷ the largest size's", op, UNPROFILED, versus, detail=at)
    return SizeSweep(
        points=tuple(points),
        floor=floor,
        flat=flat,
        bandwidth=largest.rate,
        crossover=on("crossover", op, MODEL, crossover, "B", detail="floor × bandwidth"),
        fastest=fastest,
        fastest_ratio=ratio,
        fastest_beyond_noise=fastest is not largest and not versus.tie,
    )
