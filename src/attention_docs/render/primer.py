# Renderers for the profiler primer: the first calls of a fresh process, the dispatch tree
# of one labelled range (self vs total time), the profiler's own overhead, and the size
# sweep that separates per-call overhead from work. Pure: Measurement in, Markdown/SVG out.
from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from attention_docs.measurements.schema import Measurement, Sourced, Table
from attention_docs.profiling.kernels import is_bookkeeping
from attention_docs.profiling.trace import GPU_KINDS, Span, Trace
from attention_docs.render import _format as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.plots import line_figure, loglog_slope
from attention_docs.render.tables import markdown_table

# --- Why the first step lies -------------------------------------------------------------


def _warm_us(m: Measurement) -> float:
    """The unprofiled warm time of one forward (the benchmark timer's median)."""
    if m.timing is None:
        raise ValueError(f"{m.experiment} recorded no unprofiled timing")
    return m.timing.median_us


def first_calls_table(sourced: Sourced) -> str:
    """Calls 1..N of a fresh forward: wall time under the profiler, as a multiple of the
    unprofiled warm time, in a first (cold) and a second (warm) profiling session."""
    m = sourced.measurement
    warm = _warm_us(m)
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
                f"{r['cold_wall_us'] / warm:.1f}×",
                fmt.time_us(r["warm_session_wall_us"]),
                f"{r['warm_session_wall_us'] / warm:.1f}×",
                extra,
            ]
        )
    what = f"Per call, under the profiler; × warm is relative to {fmt.time_us(warm)} unprofiled."
    return markdown_table(header, rows, "rrrrrr") + "\n\n" + caption_html(sourced, what)


def _int(value) -> str:
    return "—" if value is None else str(value)


def first_calls_claim(m: Measurement) -> str:
    """How much slower the first call is, and how much of that the profiler explains."""
    table = m.tables["per_call"]
    cold = table.column("cold_wall_us")
    again = table.column("warm_session_wall_us")
    warm = _warm_us(m)
    settled = statistics.median(cold[len(cold) // 2 :])
    settled_again = statistics.median(again[len(again) // 2 :])
    text = (
        f"The first call took **{fmt.time_us(cold[0])}**, {cold[0] / settled:.1f}× the "
        f"{fmt.time_us(settled)} that later calls of the same session settle at (median of "
        f"the second half), and {cold[0] / warm:.1f}× the unprofiled warm forward "
        f"({fmt.time_us(warm)})."
    )
    startup = again[0] - settled_again
    if startup > 0:
        text += (
            f" In a second profiling session, with the forward already warm, the first call "
            f"took {fmt.time_us(again[0])}, {fmt.time_us(startup)} more than that session's "
            f"later calls: that much is the profiler's own start-up."
        )
    else:
        text += (
            f" In a second profiling session, with the forward already warm, the first call "
            f"took {fmt.time_us(again[0])}, no more than that session's later calls: the "
            f"profiler's own start-up was lost in the noise."
        )
    cold_start = cold[0] - again[0]
    if cold_start > 0:
        return text + (
            f" The rest of the first call's excess, **{fmt.time_us(cold_start)}**, is what the "
            f"forward itself paid for running first in this process."
        )
    return text + (
        " The two first calls do not differ by more than the noise between calls: on this run "
        "the forward's own cold start was too small to see."
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
            f": at this size dispatching and reshaping cost more than the arithmetic, which "
            f"`{inner.name}` does in {fmt.time_us(inner.self_us)} of self time."
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


def overhead_table(sourced: Sourced) -> str:
    """Time per forward without the profiler and with each setting, and the cost per event."""
    m = sourced.measurement
    rows = []
    for r in m.tables["overhead"].records():
        per_event = r["overhead_per_event_us"]
        rows.append(
            [
                r["configuration"],
                fmt.time_us(r["time_per_forward_us"]),
                "—" if not r["events_per_forward"] else _signed(r["overhead_us"]),
                f"{r['events_per_forward']:g}" if r["events_per_forward"] else "—",
                "—" if per_event is None else _signed(per_event),
            ]
        )
    header = ["Profiler", "Time / forward", "Overhead", "Events / forward", "Overhead / event"]
    what = "Median wall time per forward, with and without torch.profiler."
    return markdown_table(header, rows, "lrrrr") + "\n\n" + caption_html(sourced, what)


def overhead_claim(m: Measurement) -> str:
    """The profiler's cost per forward and per event, with the default and the full settings."""
    rows = m.tables["overhead"].records()
    base = rows[0]["time_per_forward_us"]
    plain, full = rows[1], rows[-1]
    if plain["overhead_us"] <= 0:
        text = (
            f"With activities only, the profiler's cost was lost in the noise of this run "
            f"({_signed(plain['overhead_us'])} against a {fmt.time_us(base)} forward, "
            f"{plain['events_per_forward']:g} events per forward)"
        )
    else:
        text = (
            f"Recording {plain['events_per_forward']:g} events per forward added "
            f"**{fmt.time_us(plain['overhead_us'])}** to a {fmt.time_us(base)} forward "
            f"({fmt.percent(plain['overhead_us'] / base)}), about "
            f"{fmt.time_us(plain['overhead_per_event_us'])} per event"
        )
    return (
        text
        + (
            f"; with every option on ({full['configuration'].removeprefix('+ ')} and the rest) "
            f"a forward took {fmt.time_us(full['time_per_forward_us'])}, "
            f"{full['time_per_forward_us'] / base:.2f}× the unprofiled time. An op that takes "
            f"less than the per-event cost is mostly profiler in a profile."
        )
        + _benchmark_text(m, base)
    )


def _benchmark_text(m: Measurement, base: float) -> str:
    if m.timing is None:
        return ""
    return (
        f" For comparison, `{m.timing.method}` timed the same forward at "
        f"{fmt.time_us(m.timing.median_us)} (median of {m.timing.runs} runs; the loop above "
        f"said {fmt.time_us(base)})."
    )


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


def size_sweep_claim(m: Measurement) -> str:
    """The floor, the slopes of both regimes, and the crossover, from the sweep."""
    fit = size_fit(m.tables["sizes"])
    slopes = []
    if fit.small_slope is not None:
        slopes.append(f"a log-log slope of {fit.small_slope:.2f} below it")
    if fit.large_slope is not None:
        slopes.append(f"{fit.large_slope:.2f} well above it")
    slope_text = f" ({' and '.join(slopes)})" if slopes else ""
    return (
        f"Below about **{fmt.count(fit.crossover_elements)} elements** "
        f"({fmt.nbytes(fit.crossover_bytes)} moved) a call costs its fixed floor of "
        f"**{fmt.time_us(fit.floor_us)}** whatever its size; above it, time grows in "
        f"proportion to the bytes, at {fmt.count(fit.bandwidth_bs)}B/s for the largest sizes"
        f"{slope_text}. The crossover is where the two meet: floor × bandwidth. The best rate "
        f"anywhere in the sweep was {fmt.count(fit.peak_bandwidth_bs)}B/s."
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
