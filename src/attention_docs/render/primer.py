# Renderers for the profiler primer: first calls and page faults, the dispatch tree, the
# profiler's own cost, the size sweep. Verdicts are findings/primer.py's.
from __future__ import annotations

from dataclasses import replace

from attention_docs.findings import primer as fprimer
from attention_docs.findings.forward import forward_time
from attention_docs.measurements.forward import NAIVE
from attention_docs.measurements.schema import Measurement, Sourced, Table
from attention_docs.records.shape import Shape
from attention_docs.records.trace import GPU_KINDS
from attention_docs.render import claims, words
from attention_docs.render.caption import caption_html
from attention_docs.render.plots import line_figure
from attention_docs.render.tables import captioned_table
from attention_docs.render.tables import measurement_of as _m

fact = words.fact


def finding(first: Sourced) -> str:
    """The chapter's opening: the first profiled call of a fresh process against the settled
    calls of the same session; the settled calls' time and the ranges in its caption."""
    calls = fprimer.first_calls(_m(first))
    than = calls.first_over_settled
    claim = f"In a fresh process, the first profiled call took {fact(calls.cold[0])}, " + (
        f"{fact(than, with_spread=False)} the calls after it had settled: a profile's first "
        "step lies."
        if than
        else "within the range of the calls after it."
    )
    detail = f"Settled calls: the session's second half, {fact(calls.settled)}." + (
        f" The first call over them: {fact(than)}." if than else ""
    )
    return claims.opening(claim, first, detail)


def first_calls(sourced: Sourced) -> str:
    """Each call's profiled wall time and page faults in the cold and the second session; then
    the first call against the settled ones, and what the profiler's start-up and the
    forward's cold start each account for."""
    f = fprimer.first_calls(sourced.measurement)
    cells = zip(f.cold, f.again, f.cold_faults, f.again_faults, strict=True)
    rows = [(i, *r) for i, r in enumerate(cells, 1)]
    header = (
        "Call | Cold session (profiled) | Second session (profiled) | Faults, cold | Faults, second"
    )
    what = "Each call's wall time under the profiler (profiled clock), and its minor page faults."
    table = captioned_table(header, rows, "rrrrr", sourced, what)
    than = fact(f.first_over_settled, with_spread=False) if f.first_over_settled else None
    return (
        f"{table}\n\nThe first call took **{fact(f.cold[0])}**, {than or 'within the range of'} "
        f"the settled calls ({fact(f.settled)}, the session's second half). In a second "
        f"session, with the forward warm, the first call took {fact(f.again[0])}: "
        + (
            f"{fact(f.startup)} more than its settled calls, the profiler's own start-up."
            if f.startup
            else "no slower than the slowest settled call, so the profiler's own start-up did not show."
        )
        + (
            f" The cold session's first call took **{fact(f.cold_start)}** longer than the "
            f"second session's: what the forward itself paid for running first in this process."
            if f.cold_start
            else " The cold session's first call was not slower by more than calls vary."
        )
    )


LEVELS = {"most": "most of a call", "small": "a small part", "part": "a measurable part"}
LEVELS |= {"open": "open: small or most", None: "not priced"}


def faults(sourced: Sourced, times: Sourced) -> str:
    """The faults-per-call distribution in groups, each priced against the unprofiled forward
    with the measured cost of a fresh page."""
    found = fprimer.faults(sourced.measurement, _m(times))
    if found is None:
        return "This run recorded no page-fault counts."
    rows = [(g.faults, g.calls, g.cost, g.share, LEVELS[g.level]) for g in found.groups]
    header = "Faults per call | Calls | At the fresh-page price | ÷ the unprofiled forward | Of such a call"
    what = "Minor page faults of every profiled call, both sessions, in groups, priced at the cost of a fresh page (unprofiled)."
    table = captioned_table(header, rows, "rrrrl", sourced, what)
    groups = words.series(f"{fact(g.faults)} faults in {fact(g.calls)} calls" for g in found.groups)
    if found.distribution.multimodal:
        text = f"{table}\n\nCalls do not all fault alike: {groups}. "
    else:
        text = f"{table}\n\nEvery profiled call took about the same: {groups}. "
    buffer = fact(found.buffer)
    if found.page_cost is None:
        return text + (
            f"Pricing a fresh page failed here: writing to a freshly mapped {buffer} buffer was "
            f"within noise of writing to a mapped one, so what the faults cost is not measured."
        )
    return text + (
        f"A fresh page costs {fact(found.page_cost)} here, timed apart from any forward: one "
        f"byte written per page of a freshly mapped {buffer} buffer against a mapped one. The "
        "table prices each group at that rate; faults inside a call may cost otherwise (each "
        "call's time is above)."
    )


def first_call_ops_table(sourced: Sourced) -> str:
    """Where the first call's extra time went: names only it runs, then the largest extras
    (the first eight names).

    A settled call's self time by name is not stated here: the page's per-op table states it
    from the chapter's one profile of the forward (naive_steps), and this experiment's
    profile, another process recording every call, would give the same op a second value."""
    ops = fprimer.first_call_ops(sourced.measurement)[:8]
    rows = [(f"`{name[:57]}`", *rest) for name, *rest in ops]
    header = "Name | Kind | Self, first call (profiled) | Extra over a settled call"
    what = "Self time by name (profiled clock): the first call, and what it took beyond a settled call of the same session."
    return captioned_table(header, rows, "llrr", sourced, what)


def dispatch_tree(sourced: Sourced, label: str = "attention.scores") -> str:
    """One labelled range of the measurement's timeline as a text tree with total and self
    time per span (and on a GPU the kernel each launch started), in a code block."""
    m = sourced.measurement
    if m.timeline is None:
        raise ValueError(f"{m.experiment} recorded no timeline")
    top, inside = fprimer.range_spans(m.timeline, label)
    kernels = {s.flow: s for s in m.timeline.spans if s.kind in GPU_KINDS and s.flow is not None}
    lines = [(top.name, top, "")]  # (the tree's prefix and the span's name, span, kernel)
    open_levels: list[bool] = []  # per depth below the range: does a later sibling follow?
    for i, s in enumerate(inside):
        # layout: tree drawing: the next sibling's depth
        sibling = next((t.depth == s.depth for t in inside[i + 1 :] if t.depth <= s.depth), False)
        del open_levels[s.depth - top.depth - 1 :]
        prefix = "".join("│  " if more else "   " for more in open_levels)
        open_levels.append(sibling)
        k = kernels.get(s.flow) if s.kind == "runtime" else None
        launched = f"  → {k.name[:47]} ({words.time_us(k.dur_us)} on the GPU)" if k else ""
        lines.append((prefix + ("├─ " if sibling else "└─ ") + s.name, s, launched))
    # layout: the widest line of the tree
    width = max(len(name) for name, _, _ in lines) + 2
    body = [f"{'':<{width}}{'total':>10}  {'self':>10}"]
    body += [
        f"{name:<{width}}{words.time_us(s.dur_us):>10}  {words.time_us(s.self_us):>10}{launched}"
        for name, s, launched in lines
    ]
    what = f"The spans inside {label} in one profiled forward (profiled clock)."
    return "```text\n" + "\n".join(body) + "\n```\n\n" + caption_html(sourced, what)


def self_vs_total_claim(m: Measurement, label: str = "attention.scores") -> str:
    """Total against self time along the dispatch chain of one range."""
    d = fprimer.dispatch(m, label)
    text = (
        f"`{label}` has a total of **{fact(d.total)}** but a self time of {fact(d.own)}: a "
        f"range does no work itself. `{d.outer}` takes {fact(d.outer_total)} in total, "
    )
    if d.outer == d.worker:
        return text + f"{fact(d.outer_own)} of it its own: here it did the work itself."
    text += (
        f"only {fact(d.outer_own)} of it its own: it dispatches. The work sits in `{d.worker}`, "
        f"with **{fact(d.worker_own)}** of self time ({fact(d.worker_share)} of the range)."
    )
    if m.timeline.has_gpu:
        text += (
            " On a GPU that self time is the CPU's cost of *launching* the kernel; the kernel's "
            "own duration is at the end of the arrow in the tree."
        )
    return text


def overhead(sourced: Sourced, times: Sourced) -> str:
    """Per profiler setting, what it adds per forward and per event against the loop without
    the profiler in the same rounds; then the least and the most options in words."""
    found = fprimer.overhead(sourced.measurement)
    rows = [
        (o.configuration, o.added, words.versus_fact(o.ratio, o.versus), o.events, o.per_event)
        for o in found
    ]
    header = "Profiler | Added per forward | × without it | Events per forward | Per event"
    what = (
        "What each setting adds to a forward: wall time per forward under it minus the same "
        "loop without the profiler, in interleaved rounds (range: each setting's fastest round "
        "against the loop's slowest, and the other way round)."
    )
    table = captioned_table(header, rows, "lrrrr", sourced, what)
    plain, full = found[0], found[-1]
    if plain.versus.tie:
        text = f"With activities only, the profiler's cost, {fact(plain.added)}, was within noise"
    else:
        text = (
            f"Recording {fact(plain.events)} per forward added **{fact(plain.added)}** to each "
            f"forward, about {fact(plain.per_event, with_spread=False)} per event"
        )
    versus = words.versus_fact(full.ratio, full.versus)
    text += (
        f"; with every option on, a forward was {versus} of the loop without the profiler."
        if full.versus.tie
        else f"; with every option on, a forward took {versus} the time without the profiler."
    )
    forward = forward_time(_m(times), NAIVE, Shape.of(sourced.measurement.params))
    return f"{table}\n\n{text}" + (
        " The profiles above ran in other processes: only these rounds measure the profiler's "
        "cost ([why](../method.md#reproducible-and-checked)). For scale, the unprofiled forward "
        f"takes {fact(forward)}. An op shorter than the per-event cost is mostly profiler in a "
        "profile."
    )


def size_sweep_figure(sourced: Sourced) -> str:
    """Time per call against elements, log-log, with the two-regime model drawn over it."""
    m = sourced.measurement
    size = fprimer.size_sweep(m)
    rows = tuple((p.elements, p.time.value, size.model_us(p.moved.value)) for p in size.points)
    derived = Table(("elements", "time_us", "model_us"), rows, {"time_us": "µs", "model_us": "µs"})
    with_model = replace(sourced, measurement=replace(m, tables={**m.tables, "_fit": derived}))
    floor = words.time_us(size.floor.value)
    bandwidth = words.per_second(size.bandwidth.value, "B")
    return line_figure(
        with_model,
        "_fit",
        x="elements",
        ys=["time_us", "model_us"],
        labels=[f"measured {m.facts.get('op', 'op')}", f"max(floor {floor}, bytes ÷ {bandwidth})"],
        what="Time per call against size (unprofiled).",
        xlabel="elements per tensor",
        ylabel="time per call",
        logx=True,
        logy=True,
    )


def what_to_do(first: Sourced, sweep: Sourced) -> str:
    """What the chapter's numbers mean for your own profiles, each backed by the page."""
    calls = fprimer.first_calls(_m(first))
    size = fprimer.size_sweep(_m(sweep))
    than = calls.first_over_settled
    return claims.what_to_do(
        f"Skip and warm up before you record: the first profiled call of a fresh process "
        f"took {fact(calls.cold[0])}"
        + (f", {fact(than, with_spread=False)} the settled calls." if than else "."),
        "Read a profile for structure and shares, and take times from a timer without the "
        "profiler, in interleaved rounds (the [method page](../method.md) says why).",
        f"Make small ops bigger or fewer: each `torch.add` paid {fact(size.floor, with_spread=False)} "
        f"before its bytes, more than they cost until about {fact(size.crossover)}.",
    )


def size_sweep_claim(m: Measurement) -> str:
    """The floor, the bandwidth and the crossover; whether a smaller size moved bytes faster
    than the largest beyond the noise of both."""
    s = fprimer.size_sweep(m)
    flat = (
        "(the four smallest sizes, within noise of one another)"
        if s.flat
        else "(the median of the four smallest, which differ beyond their noise)"
    )
    text = (
        f"A call's fixed cost is its floor, **{fact(s.floor, with_spread=False)}** {flat}. "
        f"At the largest size's rate, {fact(s.bandwidth, with_spread=False)}, moving the bytes "
        f"takes as long once a call moves about **{fact(s.crossover)}**: below that the fixed "
        "cost is most of a call, above it the bytes are. "
    )
    if not s.fastest_beyond_noise:
        return text + "No smaller size moved bytes faster than the largest beyond the noise."
    p = s.fastest
    return text + (
        f"The rate peaked at {fact(p.rate, with_spread=False)} with {p.elements:,} elements "
        f"({fact(p.moved)} moved), {fact(s.fastest_ratio, with_spread=False)} the "
        f"largest size's, beyond the noise of both; which level of memory served it is not "
        f"measured here."
    )


def size_sweep_table(sourced: Sourced) -> str:
    """The sweep's points: elements, bytes moved, time per call, achieved bandwidth."""
    size = fprimer.size_sweep(sourced.measurement)
    rows = [(f"{p.elements:,}", p.moved, p.time, p.rate) for p in size.points]
    header = "Elements | Bytes moved | Time per call (unprofiled) | Bytes/s (unprofiled)"
    what = "Size sweep; each time with its confidence interval over the rounds."
    return captioned_table(header, rows, "rrrr", sourced, what)
