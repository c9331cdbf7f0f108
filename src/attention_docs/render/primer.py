# Renderers for the profiler primer: the first calls of a fresh process, the dispatch tree
# of one labelled range (self vs total time), the profiler's own overhead, and the size
# sweep that separates per-call overhead from work. Pure: Measurement in, Markdown/SVG out.
from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from attention_docs.findings.compare import compare
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced, Table
from attention_docs.records.kernels import is_bookkeeping
from attention_docs.records.timing import Timing
from attention_docs.records.trace import GPU_KINDS, Span, Trace
from attention_docs.render import words as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.compare import forward_time, ratio_text
from attention_docs.render.plots import line_figure, loglog_slope
from attention_docs.render.tables import markdown_table

# --- Why the first step lies -------------------------------------------------------------


def _times(times: Sourced | Measurement) -> Measurement:
    return times.measurement if isinstance(times, Sourced) else times


def _warm(m: Measurement, times: Sourced | Measurement) -> Timing:
    """The unprofiled warm forward at the measurement's shape: `forward_times`' fact."""
    t = fwd.timing(_times(times), fwd.NAIVE, fwd.Shape.of(m.params))
    if t is None:
        raise ValueError(f"forward_times has no naive forward at {m.experiment}'s shape")
    return t


def _times_warm(us: float, warm: Timing) -> str:
    """A call's time as a multiple of the warm forward, or a tie with its rounds."""
    if warm.low_us <= us <= warm.high_us:
        return "within noise"
    ratio = us / warm.median_us
    return f"{ratio:.1f}×" if ratio >= 1 else f"{ratio:.2g}×"


def first_calls_table(sourced: Sourced, times: Sourced | Measurement) -> str:
    """Calls 1..N of a fresh forward: wall time under the profiler, as a multiple of the
    unprofiled warm forward (`forward_times`), in a first (cold) and a second (warm)
    profiling session."""
    m = sourced.measurement
    warm = _warm(m, times)
    cuda = m.device_kind == "cuda"
    header = [
        "Call",
        "Cold session",
        "× warm",
        "Second session",
        "× warm",
        "Page faults" if not cuda else "Allocator reserve growth",
    ]
    rows = []
    for r in m.tables["per_call"].records():
        extra = fmt.nbytes(r["reserve_growth_bytes"]) if cuda else _int(r["minor_page_faults"])
        rows.append(
            [
                str(r["call"]),
                fmt.time_us(r["cold_wall_us"]),
                _times_warm(r["cold_wall_us"], warm),
                fmt.time_us(r["warm_session_wall_us"]),
                _times_warm(r["warm_session_wall_us"], warm),
                extra,
            ]
        )
    what = (
        "Per call, under the profiler; × warm is relative to the unprofiled warm forward "
        "stated below (within noise: inside the range of its rounds)."
    )
    return markdown_table(header, rows, "rrrrrr") + "\n\n" + caption_html(sourced, what)


def _int(value) -> str:
    return "—" if value is None else str(value)


def _later(values: list[float]) -> list[float]:
    """The second half of a session's calls: the settled ones."""
    return values[len(values) // 2 :]


def first_calls_claim(m: Measurement, times: Sourced | Measurement) -> str:
    """How much slower the first call is — against the session's settled calls and the
    unprofiled forward — and how much of that the profiler explains, each against the noise
    between settled calls."""
    table = m.tables["per_call"]
    cold = table.column("cold_wall_us")
    again = table.column("warm_session_wall_us")
    warm = _warm(m, times)
    settled, settled_again = _later(cold), _later(again)
    mid, mid_again = statistics.median(settled), statistics.median(settled_again)
    noise = max(max(settled) - min(settled), max(settled_again) - min(settled_again))
    forward = forward_time(_times(times), fwd.NAIVE, fwd.Shape.of(m.params))
    if cold[0] > max(settled):
        text = (
            f"The first call took **{fmt.time_us(cold[0])}**, {cold[0] / mid:.1f}× the "
            f"{fmt.time_us(mid)} that later calls of the same session settle at (median of "
            f"the second half, which ranged {fmt.time_us(min(settled))}–"
            f"{fmt.time_us(max(settled))})"
        )
    else:
        text = (
            f"The first call took **{fmt.time_us(cold[0])}**, within the range of the "
            f"session's later calls ({fmt.time_us(min(settled))}–{fmt.time_us(max(settled))})"
        )
    text += f"; the unprofiled warm forward takes {forward}"
    if cold[0] > warm.high_us:
        text += f": the first profiled call took {cold[0] / warm.median_us:.1f}× that"
    text += "."
    if again[0] > max(settled_again):
        text += (
            f" In a second profiling session, with the forward already warm, the first call "
            f"took {fmt.time_us(again[0])}, {fmt.time_us(again[0] - mid_again)} more than "
            f"that session's settled calls ({fmt.time_us(min(settled_again))}–"
            f"{fmt.time_us(max(settled_again))}): that much is the profiler's own start-up."
        )
    else:
        text += (
            f" In a second profiling session, with the forward already warm, the first call "
            f"took {fmt.time_us(again[0])}, within the range of that session's settled calls: "
            f"the profiler's own start-up was lost in the noise."
        )
    cold_start = cold[0] - again[0]
    if cold_start > noise:
        return text + (
            f" The first call of the cold session took **{fmt.time_us(cold_start)}** more than "
            f"that of the warm one — more than the {fmt.time_us(noise)} that settled calls "
            f"vary by: that is what the forward itself paid for running first in this process."
        )
    return text + (
        f" The two first calls differ by {_signed(cold_start)}, no more than the "
        f"{fmt.time_us(noise)} that settled calls vary by: on this run the forward's own cold "
        f"start was within noise."
    )


def _warm_faults(m: Measurement) -> float | None:
    """Page faults per warm call: the settled halves of both sessions."""
    table = m.tables["per_call"]
    values = [
        v
        for column in ("minor_page_faults", "warm_session_page_faults")
        if column in table.columns
        for v in _later(table.column(column))
        if v is not None
    ]
    return statistics.median(values) if values else None


def fault_verdict(m: Measurement, times: Sourced | Measurement) -> str:
    """Whether allocation explains a warm call's time: page faults per warm call times the
    measured cost of one fault, against the unprofiled forward (CPU); the allocator's
    reserve on a GPU."""
    table = m.tables["per_call"]
    if m.device_kind == "cuda":
        growth = [g for g in _later(table.column("reserve_growth_bytes")) if g is not None]
        if growth and not any(growth):
            return (
                f"**Allocation verdict:** the caching allocator's reserve did not grow on any of "
                f"the last {len(growth)} calls: warm calls are served from its pool, and no "
                f"allocation cost is left in them."
            )
        return (
            f"**Allocation verdict:** the caching allocator's reserve still grew by up to "
            f"{fmt.nbytes(max(growth or [0]))} on the settled calls: warm calls still pay "
            f"`cudaMalloc`."
        )
    faults = _warm_faults(m)
    cost = m.facts.get("fault_cost")
    if faults is None or cost is None:
        return "**Allocation verdict:** this run recorded no page-fault counts."
    if faults < 1:
        most = max(
            (
                v
                for c in ("minor_page_faults", "warm_session_page_faults")
                if c in table.columns
                for v in _later(table.column(c))
                if v is not None
            ),
            default=0,
        )
        return (
            f"**Allocation verdict:** the median settled call takes no page faults (at most "
            f"{most:g} on any of them): the memory warm calls write is already mapped, and "
            f"allocation is not where their time goes."
        )
    warm = _warm(m, times)
    forward = forward_time(_times(times), fwd.NAIVE, fwd.Shape.of(m.params))
    fresh, mapped = Timing.from_json(cost["fresh"]), Timing.from_json(cost["mapped"])
    per_buffer = cost["faults_per_buffer"]
    lead = (
        f"**Allocation verdict:** every warm call still takes about **{faults:g} minor page "
        f"faults** (median of the settled calls of both sessions): the memory the forward "
        f"writes is fresh on every call, not only the first."
    )
    if per_buffer < 1 or compare(mapped, fresh).tie:
        return lead + (
            f" Pricing a fresh page failed here: touching the pages of a freshly mapped "
            f"{fmt.nbytes(cost['buffer_bytes'])} buffer ({per_buffer:g} faults) was within "
            f"noise of touching a mapped one, so how much of the forward's {forward} those "
            f"faults cost is not measured."
        )
    each = (fresh.median_us - mapped.median_us) / per_buffer
    each_low = max(fresh.low_us - mapped.high_us, 0.0) / per_buffer
    each_high = (fresh.high_us - mapped.low_us) / per_buffer
    spent, low, high = faults * each, faults * each_low, faults * each_high
    share_low, share_high = low / warm.high_us, high / warm.low_us
    if share_low >= 0.5:
        verdict = "allocation explains **most** of a warm call"
    elif share_high < 0.1:
        verdict = "allocation is a small part of a warm call"
    elif share_low < 0.1:
        verdict = (
            "the noise leaves open whether allocation is a small part of a warm call or most of it"
        )
    else:
        verdict = "allocation explains a measurable part of a warm call"
    return lead + (
        f" A fresh page costs {fmt.time_us(each)} here ({fmt.time_us(each_low)}–"
        f"{fmt.time_us(each_high)}; its fault and its share of mapping and unmapping): one "
        f"byte written per page of a freshly mapped {fmt.nbytes(cost['buffer_bytes'])} buffer "
        f"({per_buffer:g} faults) against the same writes to a mapped one, both timed without "
        f"the profiler. {faults:g} faults × {fmt.time_us(each)} = **{fmt.time_us(spent)}** "
        f"({fmt.time_us(low)}–{fmt.time_us(high)}), {fmt.percent(spent / warm.median_us)} "
        f"({fmt.percent(share_low)}–{fmt.percent(share_high)}) of the unprofiled forward, "
        f"{forward}: {verdict}."
    )


def first_call_ops_table(sourced: Sourced, limit: int = 10) -> str:
    """Where the first call's extra time went: names only the first call has, then the
    largest extra self times."""
    m = sourced.measurement
    rows = []
    for r in m.tables["first_call_ops"].records()[:limit]:
        name = r["name"] if len(r["name"]) <= 58 else r["name"][:57] + "…"
        rows.append(
            [
                f"`{name}`",
                r["kind"],
                f"{r['calls_first']} / {r['calls_warm']:g}",
                fmt.time_us(r["self_first_us"]),
                fmt.time_us(r["self_warm_us"]),
                fmt.time_us(r["extra_us"]),
            ]
        )
    header = ["Name", "Kind", "Calls first / warm", "Self, first", "Self, warm", "Extra"]
    what = "The first profiled call against a warm one, by name."
    return markdown_table(header, rows, "llrrrr") + "\n\n" + caption_html(sourced, what)


def first_call_ops_claim(m: Measurement) -> str:
    """Whether the first call ran other things, or the same things more slowly."""
    rows = m.tables["first_call_ops"].records()
    only_first = [r for r in rows if not r["calls_warm"]]
    top = max(rows, key=lambda r: r["extra_us"])
    extra_total = sum(max(r["extra_us"], 0.0) for r in rows)
    if only_first:
        names = ", ".join(f"`{r['name']}`" for r in only_first[:4])
        lead = (
            f"The first call ran {len(only_first)} things no warm call runs ({names}"
            f"{', …' if len(only_first) > 4 else ''}), and the ops every call runs were slower."
        )
    else:
        lead = (
            f"The first call ran exactly the ops a warm call runs "
            f"({m.facts['cold_ops_first']} op calls against {m.facts['cold_ops_last']}): "
            f"its extra time is inside them."
        )
    return (
        f"{lead} The largest single excess is `{top['name']}` "
        f"(+{fmt.time_us(top['extra_us'])}); the rows above add up to "
        f"+{fmt.time_us(extra_total)} of self time."
    )


# --- Self time, total time and the dispatch chain ----------------------------------------


def range_span(trace: Trace, label: str) -> Span:
    """The (first) labelled range `label` in a trace."""
    for s in trace.spans:
        if s.kind == "range" and s.name == label:
            return s
    raise KeyError(f"the trace has no range named {label!r}")


def range_children(trace: Trace, label: str) -> list[Span]:
    """Every span nested inside range `label` on its own lane, in start order."""
    top = range_span(trace, label)
    return [
        s
        for s in trace.spans
        if s.lane == top.lane
        and s is not top
        and s.depth > top.depth
        and top.start_us <= s.start_us
        and s.end_us <= top.end_us + 1e-3
    ]


@dataclass(frozen=True)
class TreeLine:
    prefix: str  # the box-drawing connectors before the name
    name: str
    total_us: float
    self_us: float
    kernel: str = ""  # on a GPU trace: the kernel a runtime call launched, and its duration


def dispatch_lines(trace: Trace, label: str) -> list[TreeLine]:
    """The range and its nested spans as an indented tree, connectors included."""
    top = range_span(trace, label)
    children = range_children(trace, label)
    kernels = {s.flow: s for s in trace.spans if s.kind in GPU_KINDS and s.flow is not None}
    lines = [TreeLine("", top.name, top.dur_us, top.self_us)]
    open_levels: list[bool] = []  # per depth below the range: does a later sibling follow?
    for i, s in enumerate(children):
        level = s.depth - top.depth - 1
        later = children[i + 1 :]
        has_sibling = False
        for t in later:
            if t.depth < s.depth:
                break
            if t.depth == s.depth:
                has_sibling = True
                break
        del open_levels[level:]
        prefix = "".join("│  " if more else "   " for more in open_levels)
        prefix += "├─ " if has_sibling else "└─ "
        open_levels.append(has_sibling)
        kernel = ""
        if s.kind == "runtime" and s.flow in kernels:
            k = kernels[s.flow]
            name = k.name if len(k.name) <= 48 else k.name[:47] + "…"
            kernel = f"→ {name} ({fmt.time_us(k.dur_us)} on the GPU)"
        lines.append(TreeLine(prefix, s.name, s.dur_us, s.self_us, kernel))
    return lines


def dispatch_tree(sourced: Sourced, label: str = "attention.scores") -> str:
    """One labelled range of the measurement's timeline as a text tree with total and self
    time per span, in a code block, with its caption."""
    m = sourced.measurement
    if m.timeline is None:
        raise ValueError(f"{m.experiment} recorded no timeline")
    lines = dispatch_lines(m.timeline, label)
    width = max(len(line.prefix + line.name) for line in lines) + 2
    body = [f"{'':<{width}}{'total':>10}  {'self':>10}"]
    for line in lines:
        text = f"{line.prefix + line.name:<{width}}{fmt.time_us(line.total_us):>10}  "
        text += f"{fmt.time_us(line.self_us):>10}"
        if line.kernel:
            text += f"  {line.kernel}"
        body.append(text)
    code = "```text\n" + "\n".join(body) + "\n```"
    what = f"The spans inside {label} in one profiled forward."
    return code + "\n\n" + caption_html(sourced, what)


def self_vs_total_claim(m: Measurement, label: str = "attention.scores") -> str:
    """Total against self time along the dispatch chain of one range."""
    if m.timeline is None:
        return ""
    top = range_span(m.timeline, label)
    ops = [s for s in range_children(m.timeline, label) if s.kind == "op"]
    if not ops:
        return ""
    outer = max(ops, key=lambda s: s.dur_us)  # the op the line of Python called
    # The op that did the work: views and reshapes can out-time it at tiny sizes, never out-work it.
    working = [s for s in ops if not is_bookkeeping(s.name)] or ops
    worker = max(working, key=lambda s: s.self_us)
    text = (
        f"`{label}` has a total of **{fmt.time_us(top.dur_us)}** but a self time of only "
        f"{fmt.time_us(top.self_us)}: a range does no work itself. `{outer.name}` accounts "
        f"for {fmt.time_us(outer.dur_us)} in total"
    )
    if outer is worker:
        inner = max((s for s in working if s is not outer), key=lambda s: s.self_us, default=None)
        text += (
            f", of which {fmt.time_us(outer.self_us)} "
            f"({fmt.percent(outer.self_us / outer.dur_us)}) is its own"
        )
        if inner is None:
            return text + "."
        return text + (
            f": in this one profiled forward, dispatching and reshaping took more self time "
            f"than the arithmetic, which `{inner.name}` did in {fmt.time_us(inner.self_us)}."
        )
    text += (
        f", yet only {fmt.time_us(outer.self_us)} of that is its own: it dispatches. The work "
        f"sits in `{worker.name}`, with **{fmt.time_us(worker.self_us)}** of self time "
        f"({fmt.percent(worker.self_us / top.dur_us)} of the range)."
    )
    if m.timeline.has_gpu:
        text += (
            " On a GPU that self time is the CPU's cost of *launching* the kernel; the "
            "kernel's own duration is on the GPU lane, at the end of the arrow in the tree."
        )
    return text


# --- The profiler's own cost ---------------------------------------------------------------


def _signed(us: float) -> str:
    """A time difference: noise can make a small overhead come out negative."""
    return ("−" if us < 0 else "") + fmt.time_us(abs(us))


def _overhead_cell(r: dict) -> str:
    """The overhead per forward with its range over the rounds, or a tie."""
    low, high = r.get("overhead_low_us"), r.get("overhead_high_us")
    if low is None or high is None:
        return _signed(r["overhead_us"])
    if low <= 0 <= high:
        return f"within noise ({_signed(r['overhead_us'])})"
    return f"{_signed(r['overhead_us'])} ({_signed(low)} to {_signed(high)})"


def _loop_timing(r: dict) -> Timing:
    return Timing(r["median_us"], 0.0, 0, "", (r["low_us"], r["median_us"], r["high_us"]))


def overhead_table(sourced: Sourced) -> str:
    """Per profiler setting: the time it adds to a forward (against the same loop without
    the profiler, in the same rounds), the events it records and the cost per event."""
    m = sourced.measurement
    records = m.tables["overhead"].records()
    base = _loop_timing(records[0])
    rows = []
    for r in records[1:]:
        per_event = r["overhead_per_event_us"]
        rows.append(
            [
                r["configuration"],
                _overhead_cell(r),
                ratio_text(compare(base, _loop_timing(r))),
                f"{r['events_per_forward']:g}",
                "—" if per_event is None else _signed(per_event),
            ]
        )
    header = [
        "Profiler",
        "Added per forward (rounds)",
        "× without profiler",
        "Events / forward",
        "Added / event",
    ]
    what = (
        f"What each profiler setting adds to a forward: median wall time per forward under it, "
        f"minus the same loop without the profiler, in {m.facts.get('rounds', 3)} interleaved "
        f"rounds (the range pairs each setting's fastest round with the loop's slowest, and "
        f"the other way round)."
    )
    return markdown_table(header, rows, "lrrrr") + "\n\n" + caption_html(sourced, what)


def overhead_claim(m: Measurement, times: Sourced | Measurement | None = None) -> str:
    """The profiler's cost per forward and per event, with the default and the full settings,
    each against the noise of the rounds."""
    records = m.tables["overhead"].records()
    base = _loop_timing(records[0])
    plain, full = records[1], records[-1]
    if plain["overhead_low_us"] <= 0 <= plain["overhead_high_us"]:
        text = (
            f"With activities only, the profiler's cost was within the noise of this run "
            f"({_signed(plain['overhead_us'])} per forward, {plain['events_per_forward']:g} "
            f"events)"
        )
    else:
        text = (
            f"Recording {plain['events_per_forward']:g} events per forward added "
            f"**{fmt.time_us(plain['overhead_us'])}** to each forward "
            f"({_signed(plain['overhead_low_us'])} to {_signed(plain['overhead_high_us'])} "
            f"over the rounds), about {_signed(plain['overhead_per_event_us'])} per event"
        )
    c = compare(base, _loop_timing(full))
    everything = f"with every option on ({full['configuration'].removeprefix('+ ')} and the rest)"
    if c.tie:
        text += (
            f"; {everything} a forward was within noise of the same loop without the profiler "
            f"({c.ratio:.2f}×)."
        )
    else:
        text += (
            f"; {everything} a forward took {ratio_text(c)} the time of the same loop without "
            f"the profiler."
        )
    if times is not None:
        forward = forward_time(_times(times), fwd.NAIVE, fwd.Shape.of(m.params))
        text += f" For scale, the unprofiled forward at this shape takes {forward}."
    return text + " An op that takes less than the per-event cost is mostly profiler in a profile."


# --- Overhead-bound or work-bound: the size sweep ------------------------------------------


@dataclass(frozen=True)
class SizeFit:
    """The two regimes of a size sweep, read from its points."""

    floor_us: float  # the fixed cost of one call: median time of the four smallest sizes
    bandwidth_bs: float  # bytes/s at the largest sizes (median of the last three points)
    peak_bandwidth_bs: float  # the best bytes/s anywhere (caches can beat memory)
    crossover_bytes: float  # where moving the bytes costs as much as the floor
    bytes_per_element: float
    small_slope: float | None  # log-log slope well below the crossover (≈ 0: flat)
    large_slope: float | None  # log-log slope well above it (≈ 1: linear)

    @property
    def crossover_elements(self) -> float:
        return self.crossover_bytes / self.bytes_per_element

    def model_us(self, nbytes: float) -> float:
        """Time per call predicted by the two regimes: max(floor, bytes / bandwidth)."""
        return max(self.floor_us, nbytes / self.bandwidth_bs * 1e6)


def size_fit(table: Table) -> SizeFit:
    """Fit the floor, the bandwidth and the crossover of a size sweep's `sizes` table."""
    ok = [r for r in table.records() if r["time_us"] is not None]
    if len(ok) < 4:
        raise ValueError("a size sweep needs at least four measured sizes to fit two regimes")
    # The smallest sizes sit on the floor; a median of four resists one lucky or unlucky call.
    floor = statistics.median(r["time_us"] for r in ok[:4])
    bandwidth = statistics.median(r["bytes"] / r["time_us"] * 1e6 for r in ok[-3:])
    peak = max(r["bytes"] / r["time_us"] * 1e6 for r in ok)
    crossover = floor * 1e-6 * bandwidth
    small = [r for r in ok if r["bytes"] <= crossover / 4]
    large = [r for r in ok if r["bytes"] >= crossover * 8]

    def slope(rows):
        return (
            loglog_slope([r["bytes"] for r in rows], [r["time_us"] for r in rows])
            if len(rows) >= 3
            else None
        )

    return SizeFit(
        floor_us=floor,
        bandwidth_bs=bandwidth,
        peak_bandwidth_bs=peak,
        crossover_bytes=crossover,
        bytes_per_element=ok[0]["bytes"] / ok[0]["elements"],
        small_slope=slope(small),
        large_slope=slope(large),
    )


def size_sweep_figure(sourced: Sourced) -> str:
    """Time per call against elements, log-log, with the two-regime model drawn over it."""
    m = sourced.measurement
    table = m.tables["sizes"]
    fit = size_fit(table)
    model = [fit.model_us(b) if b is not None else None for b in table.column("bytes")]
    derived = Table(
        columns=("elements", "time_us", "model_us"),
        rows=tuple(zip(table.column("elements"), table.column("time_us"), model, strict=True)),
        units={"time_us": "µs"},
    )
    with_model = replace(sourced, measurement=replace(m, tables={**m.tables, "_fit": derived}))
    return line_figure(
        with_model,
        "_fit",
        x="elements",
        ys=["time_us", "model_us"],
        labels=[
            f"measured {m.facts.get('op', 'op')}",
            f"max(floor {fmt.time_us(fit.floor_us)}, bytes ÷ {fmt.count(fit.bandwidth_bs)}B/s)",
        ],
        what="Time per call against size.",
        xlabel="elements per tensor",
        ylabel="time per call (µs)",
        logx=True,
        logy=True,
    )


def _bandwidth_range(r: dict) -> tuple[float, float]:
    """A sweep point's achieved bytes/s over its rounds: (slowest, fastest)."""
    high, low = r.get("high_us") or r["time_us"], r.get("low_us") or r["time_us"]
    return r["bytes"] / high * 1e6, r["bytes"] / low * 1e6


def size_sweep_claim(m: Measurement) -> str:
    """The floor, the slopes of both regimes, and the crossover, from the sweep; whether the
    smallest sizes are flat within noise, and whether any size beat the largest ones' rate
    beyond noise (a cache)."""
    table = m.tables["sizes"]
    fit = size_fit(table)
    ok = [r for r in table.records() if r["time_us"] is not None]
    smallest = ok[:4]
    flat = max(r.get("low_us") or r["time_us"] for r in smallest) <= min(
        r.get("high_us") or r["time_us"] for r in smallest
    )
    slopes = []
    if fit.small_slope is not None:
        slopes.append(f"a log-log slope of {fit.small_slope:.2f} below it")
    if fit.large_slope is not None:
        slopes.append(f"{fit.large_slope:.2f} well above it")
    slope_text = f" ({' and '.join(slopes)})" if slopes else ""
    floor_text = (
        "whatever its size: the four smallest sizes are within noise of one another"
        if flat
        else (
            f"(the median of the four smallest sizes, {fmt.time_us(smallest[0]['time_us'])} to "
            f"{fmt.time_us(smallest[-1]['time_us'])}, which differ by more than their rounds' "
            f"noise)"
        )
    )
    text = (
        f"Below about **{fmt.count(fit.crossover_elements)} elements** "
        f"({fmt.nbytes(fit.crossover_bytes)} moved) a call costs its fixed floor of "
        f"**{fmt.time_us(fit.floor_us)}** {floor_text}; above it, time grows in proportion "
        f"to the bytes, at {fmt.count(fit.bandwidth_bs)}B/s for the largest sizes{slope_text}. "
        f"The crossover is where the two meet: floor × bandwidth."
    )
    largest = ok[-3:]
    large_fast = max(_bandwidth_range(r)[1] for r in largest)
    best = max(ok, key=lambda r: r["bytes"] / r["time_us"])
    best_slow, _ = _bandwidth_range(best)
    if best not in largest and best_slow > large_fast:
        return text + (
            f" At {best['elements']:,} elements ({fmt.nbytes(best['bytes'])} moved) the rate "
            f"peaked at {fmt.count(best['bytes'] / best['time_us'] * 1e6)}B/s, beyond the "
            f"noise of the largest sizes (at most {fmt.count(large_fast)}B/s in their fastest "
            f"rounds): data that small stays in a cache, which serves it faster than memory."
        )
    return text + (
        " No smaller size moved bytes faster than the largest ones beyond the noise of their "
        "rounds."
    )


def size_sweep_table(sourced: Sourced) -> str:
    """The sweep's points: elements, bytes moved, time per call, achieved bandwidth."""
    rows = [
        [
            f"{r['elements']:,}",
            fmt.nbytes(r["bytes"]),
            fmt.time_us(r["time_us"]) if r["time_us"] is not None else r["status"],
            fmt.rate(r["bytes"], r["time_us"], "B") if r["time_us"] else "—",
        ]
        for r in sourced.measurement.tables["sizes"].records()
    ]
    header = ["Elements", "Bytes moved", "Time / call", "Achieved"]
    return markdown_table(header, rows, "rrrr") + "\n\n" + caption_html(sourced, "Size sweep.")


__all__ = [
    "SizeFit",
    "dispatch_lines",
    "dispatch_tree",
    "first_call_ops_claim",
    "first_call_ops_table",
    "first_calls_claim",
    "first_calls_table",
    "overhead_claim",
    "overhead_table",
    "range_children",
    "self_vs_total_claim",
    "size_fit",
    "size_sweep_claim",
    "size_sweep_figure",
    "size_sweep_table",
]
