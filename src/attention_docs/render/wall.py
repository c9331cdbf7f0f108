# The quadratic-wall chapter's renderers: sweep tables and figures, the sentences on slopes,
# the wall, the largest step and the splits, and the GPU forecast. Facts and verdicts come from
# findings/wall.py (one `wall` measurement; forward_times for shapes its grid holds); words
# from render/words.py.
from __future__ import annotations

from attention_docs.analytic import gpu as gpus
from attention_docs.findings import wall as fwall
from attention_docs.findings.facts import llc_fact
from attention_docs.findings.forecast import measured_on
from attention_docs.findings.memory import FORECAST_BASE
from attention_docs.findings.model_check import FUSED_FA2, NAIVE_KINDS
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.steps import STEPS
from attention_docs.render import claims, words
from attention_docs.render.forecast import forecast_box
from attention_docs.render.plots import Series, line_chart, stacked_share_figure
from attention_docs.render.tables import Column, captioned_table, column_table

fact = words.fact
X = {"seq_len": "seq_len", "tokens": "seq_len", "heads": "num_heads", "head_dim": "head_dim"}
CELLS = {
    "time": Column("Forward time, unprofiled (with its confidence interval)", lambda p: p.time),
    "peak": Column("Peak memory (allocator)", lambda p: p.peak),
    "flops": Column("Matmul FLOPs (model)", lambda p: p.flops),
}


def _pts(wall: Sourced, name: str, times: Sourced | None = None) -> list[fwall.Point]:
    return fwall.sweep(wall.measurement, name, times.measurement if times else None)


def _ends(wall: Sourced, name: str) -> tuple[Measurement, fwall.Point, fwall.Point] | None:
    """The measurement and a sweep's first and last timed points (None with fewer than two)."""
    pts = [p for p in _pts(wall, name) if p.timing]
    return (wall.measurement, pts[0], pts[-1]) if len(pts) >= 2 else None


def sweep_table(wall: Sourced, name: str, times: Sourced | None = None) -> str:
    """One sweep's shapes with their time, peak memory, FLOPs and status, as facts."""
    pts = _pts(wall, name, times)
    dims = [d for d in ("batch_size", "num_heads", "seq_len", "head_dim") if len({getattr(p.shape, d) for p in pts}) > 1]  # fmt: skip
    shape = [Column(d, lambda p, d=d: getattr(p.shape, d)) for d in dims]
    status = Column("Status", lambda p: p.status, "l")
    return column_table([*shape, *CELLS.values(), status], pts, wall)


def sweep_figure(
    wall: Sourced, name: str, *, y: str, what: str, times: Sourced | None = None
) -> str:
    """Time (its confidence interval as a band) or peak memory against a sweep's x, log-log."""
    x, get = X[name], CELLS[y].cell
    pts = [p for p in _pts(wall, name, times) if get(p)]
    facts = [get(p) for p in pts]
    xs = [getattr(p.shape, x) for p in pts]
    band = tuple((f.low, f.high) for f in facts) if y == "time" else ()
    line = Series(CELLS[y].header, tuple((v, f.value) for v, f in zip(xs, facts, strict=True)), band, "range over rounds")  # fmt: skip
    text = ", ".join(f"{x} {words.figure_number(v)}: {words.value(f.value, f.unit)}" for v, f in zip(xs, facts, strict=True))  # fmt: skip
    return line_chart(
        wall,
        what,
        [line],
        alt=f"{what} {text}",
        xlabel=x,
        ylabel="forward time" if y == "time" else "peak memory",
        unit="µs" if y == "time" else "B",  # 1 ms, 1 MB: as the table says
        logx=True,
        logy=True,
    )


def step_share_figure(sourced: Sourced, name: str, *, x: str, what: str) -> str:
    """Stacked shares of the five steps at each profiled shape of a sweep, from their medians."""
    xs, shares = fwall.step_shares(sourced.measurement, name, x)
    what += " Each step's median share over the profiled forwards; medians need not sum to 100%."
    return stacked_share_figure(sourced, xs, shares, x=x, parts=STEPS, what=what)


def seq_len_claim(wall: Sourced, times: Sourced | None = None) -> str:
    """Slopes of time against seq_len, the overhead range, the wall, and a doubling steeper
    than N² with what the cache says about it."""
    m = wall.measurement
    pts = _pts(wall, "seq_len", times)
    t = fwall.time_trend(m, pts)
    if t is None:
        return "Too few lengths were measured to fit a slope."
    text = (
        f"From seq_len {t.xs[0]:,} to {t.xs[-1]:,}, time grows with a log-log slope of "
        f"{fact(t.whole, emphasis=True)} end to end (its range from the times' intervals), and "
        f"{fact(t.upper)} over the upper half."
    )
    if t.overhead_until:
        text += (
            f" Up to seq_len {t.overhead_until:,} each doubling costs less than double the time even "
            f"at the rounds' extremes: fixed per-call costs dominate and the N² work hides under them."
        )
    text += (
        f" From **{t.turn:,}** tokens on, every doubling multiplies time by at least "
        f"{fact(fwall.WALL_STEP)} even at the rounds' extremes: that is the quadratic wall."
        if t.turn
        else f" No stretch at the end keeps every doubling at {fact(fwall.WALL_STEP)} or more outside the noise."
    )
    if t.steep is None:
        return text + " No doubling is steeper than N² outside the rounds' noise."
    s = t.steep_slope
    text += (
        f" Between {s.x0:,} and {s.x1:,} tokens the local slope is {fact(t.steep)}: steeper than "
        f"N² even at the rounds' extremes, so something besides the N² work grew there."
    )
    crossing = fwall.cache_crossing(m, s, pts)
    if crossing is None:
        return text + " This measurement does not record the last-level cache."
    where = {"crossed": "grows past", "inside": "stays inside", "inside, shared": "stays inside", "beyond": "was already larger than"}[crossing]  # fmt: skip
    verdict = {
        "crossed": "which is consistent with the bend",
        "inside, shared": (
            "the size the CPU reports for all its cores; how much of it this run had (other "
            "cores, and on a virtual machine other guests, share it) is not measured, so the "
            "cache is not ruled out, and these measurements do not say what made the bend"
        ),
    }.get(crossing, "so the cache does not explain it; these measurements do not say what does")
    return text + (
        f" Across that doubling the N×N working set (two matrices and the mask) {where} the "
        f"{fact(llc_fact(m.facts, m.device_id))} last-level cache, {verdict}."
    )


def step_shares_table(wall: Sourced, name: str) -> str:
    """Per profiled point of a sweep: the largest step, named only outside the noise (else the
    steps tied for it), its share, and the two matmuls' share."""
    m = wall.measurement
    pts = {getattr(p.shape, X[name]): p for p in fwall.sweep(m, name) if p.steps}
    rows = [
        [f"{x:,}", f"`{lead.leaders[0]}`" if lead.clear else "within noise: " + ", ".join(f"`{s}`" for s in lead.leaders),
         share if lead.clear else None, fwall.matmul_share(m, pts[x])]
        for lead in fwall.leaders(m, list(pts.values()), X[name])
        for x, share in zip(lead.xs, lead.shares, strict=True)
    ]  # fmt: skip
    header = [X[name], "Largest step", "Its share", "The two matmuls' share"]
    what = "Largest of the five profiled steps, beyond the noise of the profiled calls."
    return captioned_table(header, rows, "rlrr", wall, what)


def _change(m: Measurement, a: fwall.Point, b: fwall.Point) -> str:
    fact_id, c, rises = fwall.change(m, a, b)
    if c.tie:
        return words.fact_span(fact_id, f"leaves time within noise ({words.times(c.ratio)} apart)")
    verb = "multiplies" if rises else "divides"
    return words.fact_span(fact_id, f"{verb} time by {words.versus(c)}")


def tokens_claim(wall: Sourced) -> str:
    """The same tokens as more, shorter sequences: work and time follow seq_len, not N²."""
    if not (ends := _ends(wall, "tokens")):
        return ""
    m, a, b = ends
    flops = fwall.ratio(m, b, a, "flops")
    return (
        f"Splitting the same tokens into {words.plural(b.shape.batch_size, 'sequence')} of "
        f"{b.shape.seq_len:,} instead of {words.plural(a.shape.batch_size, 'sequence')} of "
        f"{a.shape.seq_len:,} {_change(m, a, b)} and divides the FLOPs by {fact(flops)}. With "
        f"the tokens fixed, work is proportional to seq_len, not to its square."
    )  # fmt: skip


def heads_claim(wall: Sourced) -> str:
    """The same width as more, narrower heads: FLOPs fixed, memory and time not."""
    if not (ends := _ends(wall, "heads")):
        return ""
    m, a, b = ends
    peak = fwall.ratio(m, a, b, "peak")
    return (
        f"Splitting the same width into {b.shape.num_heads} heads of {b.shape.head_dim} instead "
        f"of {a.shape.num_heads} of {a.shape.head_dim} leaves the matmul FLOPs at {fact(a.flops)} "
        f"but multiplies peak memory by {fact(peak, emphasis=True)} — every head has its own N×N "
        f"matrix — and {_change(m, a, b)}."
    )  # fmt: skip


def head_dim_claim(wall: Sourced) -> str:
    """How time follows head_dim at a fixed seq_len, and how the matmuls' share moves."""
    if not (ends := _ends(wall, "head_dim")):
        return ""
    m, a, b = ends
    flops = fwall.ratio(m, a, b, "flops")
    return (
        f"From head_dim {a.shape.head_dim} to {b.shape.head_dim} the FLOPs grow {fact(flops)}, "
        f"while widening the heads {_change(m, a, b)}: the three element-wise passes do not depend "
        f"on head_dim. The matmuls' share of the five profiled steps goes from "
        f"{fact(fwall.matmul_share(m, a))} to {fact(fwall.matmul_share(m, b), emphasis=True)}."
    )  # fmt: skip


def finding(wall: Sourced, times: Sourced | None = None) -> str:
    """The chapter's opening: where the quadratic wall starts on this device; the slope and
    the wall on a GPU (a forecast) go in its caption."""
    m = wall.measurement
    t = fwall.time_trend(m, _pts(wall, "seq_len", times))
    where = "this GPU" if m.device_kind == "cuda" else "this CPU"
    if t is None:
        claim, detail = "Too few lengths were measured here to fit a slope.", ""
    else:
        claim = (
            f"On {where}, naive attention hits the quadratic wall at seq_len **{t.turn:,}**: from "
            f"there on, every doubling of seq_len multiplies its time by at least "
            f"{fact(fwall.WALL_STEP)}."
            if t.turn
            else f"On {where}, naive attention's time grows with a log-log slope of "
            f"{fact(t.whole, with_spread=False)} up to seq_len {t.xs[-1]:,}, short of the quadratic wall."
        )  # fmt: skip
        detail = (
            f"The wall: where every doubling costs at least {fact(fwall.WALL_STEP)}, 2^1.5, "
            f"halfway in exponent from linear (2×) to quadratic (4×). Log-log slope of time "
            f"from seq_len {t.xs[0]:,} to {t.xs[-1]:,}: {fact(t.whole)}; over the upper half, "
            f"{fact(t.upper)}. "
        )
    longest, pts = fwall.forecasts(gpus.sheet())
    at = next(p for p in pts if p.seq_len == gpus.FORECAST_SHAPE.seq_len)
    ranges = (
        f" (realistically {fact(at.naive.realistic)} and {fact(at.fused.realistic)})"
        if at.naive.realistic and at.fused.realistic
        else ""
    )
    detail += (
        f"Forecast from the data sheet for an {gpus.sheet().label} at {FORECAST_BASE}: naive "
        f"attention as written ({at.kernels} kernels) needs at least {fact(at.naive.forecast)} "
        f"at seq_len {at.seq_len:,}, a fused kernel {fact(at.fused.forecast)}{ranges}; the naive "
        f"forward stops fitting in memory past about {fact(longest)}."
    )
    return claims.opening(claim, wall, detail, times)


def what_to_do(wall: Sourced) -> str:
    """What the wall means for your own attention, each action backed by the page's facts."""
    longest, pts = fwall.forecasts(gpus.sheet())
    at = next(p for p in pts if p.seq_len == gpus.FORECAST_SHAPE.seq_len)
    split = ""
    if ends := _ends(wall, "tokens"):
        m, a, b = ends
        split = (
            f"Keep each sequence short where the task allows (windows, chunks): splitting "
            f"{a.shape.seq_len:,} tokens into {b.shape.batch_size} sequences of "
            f"{b.shape.seq_len} {_change(m, a, b)} here."
        )
    return claims.what_to_do(
        f"Call `F.scaled_dot_product_attention` instead of writing the N×N matrix: on an "
        f"{gpus.sheet().label} at seq_len {at.seq_len:,} naive attention needs at least "
        f"{fact(at.naive.forecast)}, a fused kernel {fact(at.fused.forecast)} (forecast).",
        f"Budget memory by N²: naive attention on an {gpus.sheet().label} stops fitting past "
        f"about {fact(longest)} at this shape; a fused kernel keeps nothing N×N.",
        split,
    )


def forecast(entries: list[Sourced] | None = None) -> str:
    """The wall on the forecast GPU: naive and fused floors across seq_len, with a stored
    forward_times of that GPU beside them."""
    gpu = gpus.sheet()
    longest, pts = fwall.forecasts(gpu, measured_on(entries or [], gpu))
    rows = [(f"seq_len {p.seq_len:,}: {what}", c) for p in pts for what, c in ((f"naive ({p.kernels} kernels), floor", p.naive), ("fused (SDPA flash), floor", p.fused)) if c]  # fmt: skip
    out = [p.seq_len for p in pts if p.naive is None]
    lead = (
        f"On an {gpu.label} at {FORECAST_BASE}, naive attention fits in memory up to {fact(longest, emphasis=True)} "
        f"(seq_len {words.series(f'{n:,}' for n in out)} would not). A fused kernel keeps nothing "
        f"N×N, so its floor follows its FLOPs: the work of the causal tiles it computes."
    )
    model = (
        "Naive attention's kernels are those its code records; the fused kernel reads q, k, v "
        "once (re-reads served by L2) and computes the causal tiles at the tensor cores' peak."
    )
    sources = gpus.flash_range(gpu).sources + gpus.naive_range(gpu).sources
    kinds = (*NAIVE_KINDS, FUSED_FA2)
    return forecast_box(gpu, rows, lead=lead, model=model, floors=True, sources=sources, kinds=kinds)  # fmt: skip
