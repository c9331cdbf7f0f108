# Renderers for the backward-pass chapter. Verdicts come from findings/backward.py, numbers
# from render/words.py; nothing is decided here. Pure: no torch.
from __future__ import annotations

from attention_docs.analytic.gpu import FORECAST_SHAPE, naive_kernels, sheet
from attention_docs.findings import backward as fb
from attention_docs.measurements.schema import Sourced
from attention_docs.records.steps import PHASES
from attention_docs.render import claims, words
from attention_docs.render.caption import caption_html
from attention_docs.render.forecast import forecast_box
from attention_docs.render.plots import line_figure
from attention_docs.render.tables import captioned_table, markdown_table
from attention_docs.render.timeline import ranges_settings, timeline_figure

VERDICT = {
    fb.AS_COUNTED: "as counted",
    fb.SLOWER_PER_FLOP: "slower per FLOP",
    fb.FASTER_PER_FLOP: "faster per FLOP",
}
BOUND = {"memory": "the bytes moved", "compute": "the FLOPs"}
# The forecast box's rows, in findings/backward.FORECAST_ROWS' order.
TRAINING_ROWS = (
    "Naive attention's forward: {kernels} kernels through HBM, as the code records them",
    "Naive attention's backward: seven kernels through HBM (modelled, not recorded)",
    "FlashAttention's forward: one fused kernel",
    "FlashAttention's backward: one fused kernel, five matmuls",
    "Naive attention: backward ÷ forward (a ratio of floors: equal efficiencies assumed)",
    "FlashAttention: backward ÷ forward (a ratio of floors: equal efficiencies assumed)",
    "Recomputing q·kᵀ in the backward, at the matmul peak",
    "Writing and reading back the probabilities, at HBM bandwidth",
)


def finding(sourced: Sourced) -> str:
    """The chapter's opening: what each implementation keeps for the backward; the pass
    ratios and the peaks go in its caption."""
    ran = {p.implementation: p for p in fb.passes(sourced.measurement)}
    naive, flash = ran["naive"], ran["sdpa-flash"]
    detail = (
        f"Backward ÷ forward: naive attention {words.fact(naive.ratio)}, FlashAttention "
        f"{words.fact(flash.ratio)} (counting matmul FLOPs predicts {words.fact(naive.flop_ratio)} "
        f"and {words.fact(flash.flop_ratio)}). Peak memory: naive attention "
        f"{words.fact(naive.peak)}, FlashAttention {words.fact(flash.peak)}."
    )
    return claims.opening(
        f"To train, naive attention keeps {words.fact(naive.saved, with_spread=False)} for "
        f"the backward, mostly N×N probabilities; FlashAttention keeps "
        f"{words.fact(flash.saved, with_spread=False)} and recomputes the rest.",
        sourced,
        detail,
    )


def what_to_do(compare: Sourced) -> str:
    """What the backward's numbers mean for your own training, each action backed by the page."""
    ran = {p.implementation: p for p in fb.passes(compare.measurement)}
    naive, flash = ran.get("naive"), ran.get("sdpa-flash")
    return claims.what_to_do(
        f"Train with a fused backend: between the passes FlashAttention keeps "
        f"{words.fact(flash.saved)} beyond its output where naive attention keeps "
        f"{words.fact(naive.saved)}, mostly N×N probabilities that grow with the square of the "
        "sequence."
        if naive and flash
        else "",
        "Time a training step, not a forward: a backward's cost does not follow the matmul "
        "FLOPs count (the table of ratios above).",
    )


def count_table(sourced: Sourced) -> str:
    """Per implementation: matmul ops in each pass (profile) and their FLOPs (counter)."""
    rows = []
    for p in fb.passes(sourced.measurement):
        matmuls = " → ".join(words.fact(f) for f in p.matmuls)
        flops = [f or "no formula" for f in p.flops]
        rows.append([f"`{p.implementation}`", matmuls, *flops, p.flop_ratio])
    header = (
        "Implementation | Matmul ops, forward → backward (profile) | Forward FLOPs (counter) | "
        "Backward FLOPs (counter) | Backward ÷ forward FLOPs"
    )
    what = (
        "Matmuls per call in each profiled pass; FLOPs as torch.utils.flop_counter counts the "
        "ops each pass dispatched (the analytic model's ratio where it has no formula)."
    )
    return captioned_table(header, rows, "lrrrr", sourced, what)


def time_table(sourced: Sourced) -> str:
    """Per implementation: both passes unprofiled, their ratio against the count, memory."""
    rows = []
    for p in fb.passes(sourced.measurement):
        facts = [words.fact(f) for f in (p.forward, p.backward, p.ratio, p.peak, p.saved)]
        rows.append([f"`{p.implementation}`", *facts[:3], VERDICT[p.verdict], *facts[3:]])
    header = [
        "Implementation",
        "Forward, recording autograd (unprofiled)",
        "Backward (unprofiled)",
        "Backward ÷ forward",
        "Against the count",
        "Peak memory",
        "Kept for the backward",
    ]
    notes = "".join(f"\n\n{n}." for n in sourced.measurement.notes)
    what = "Median and range over interleaved rounds, without the profiler."
    return markdown_table(header, rows, "lrrrlrr") + notes + "\n\n" + caption_html(sourced, what)


def nodes_table(sourced: Sourced) -> str:
    """The autograd nodes each backward ran (`...Backward0`), by profiled time per step."""
    rows = [
        [f"`{name}`", f"`{node}`", words.number(calls), f]
        for name, node, calls, f in fb.nodes(sourced.measurement)
    ]
    header = ["Implementation", "Autograd node", "Calls", "Total time per step (profiled)"]
    return captioned_table(header, rows, "llrr", sourced, "Autograd nodes.")


def step_timeline(sourced: Sourced) -> str:
    """The timeline of one forward + backward, the two halves in colour."""
    return timeline_figure(sourced, ranges_settings(PHASES, "Timeline of one forward + backward."))


def saved_detail_table(sourced: Sourced) -> str:
    """Every storage autograd kept, per implementation, at the sweep's smallest seq_len."""
    rows = [
        [f"`{name}`", shape, dtype, f, role]
        for name, shape, dtype, role, f in fb.saved_detail(sourced.measurement)
    ]
    what = (
        f"Kept tensors at seq_len={sourced.measurement.facts['detail_seq_len']}, once per storage."
    )
    header = ["Implementation", "Shape", "dtype", "Bytes", "What it is"]
    return captioned_table(header, rows, "lllrl", sourced, what)


def saved_figure(sourced: Sourced) -> str:
    """Bytes autograd keeps beyond q, k, v, against seq_len, log-log with fitted slopes."""
    slopes = fb.saved_slopes(sourced.measurement)
    what = (
        "Bytes autograd keeps beyond q, k and v, the output included (the table above leaves "
        "the output out), against seq_len."
    )
    return line_figure(
        sourced, "saved", x="seq_len", ys=list(slopes), what=what, ylabel="kept bytes",
        logx=True, logy=True, slopes=slopes,
    )  # fmt: skip


def saved_claim(sourced: Sourced) -> str:
    """The fitted growth of kept bytes, and the bytes at the longest sequence."""
    found = fb.growth(sourced.measurement)
    slopes = words.series(f"`{g.implementation}` {words.fact(g.slope)}" for g in found)
    kept = words.series(f"`{g.implementation}` {words.fact(g.longest)}" for g in found)
    return (
        f"Fitted log-log slopes of the bytes kept beyond q, k and v (the output included) "
        f"against seq_len: {slopes}. At the longest: {kept}."
    )


def training_forecast(entries: list[Sourced]) -> str:
    """The forecast box: a training step's floors on the site's forecast GPU, and the
    recomputation trade; measured beside them when `entries` hold that GPU's entry."""
    gpu = sheet()
    checks = fb.training_checks(gpu, [s.measurement for s in entries])
    flops, probs = fb.trade(gpu)
    naive, flash = (BOUND[limit] for limit in fb.limits(gpu))
    lead = (
        f"At this shape {naive} set naive attention's floors and {flash} FlashAttention's "
        f"backward: each backward ÷ forward below follows its own. "
        f"FlashAttention's backward recomputes q·kᵀ: {words.fact(flops)} more, "
        f"{words.fact(checks[6].forecast)} at the matmul peak — instead of naive attention's "
        f"{words.fact(probs)} of probabilities written by the forward and read back, "
        f"{words.fact(checks[7].forecast)} at the HBM bandwidth."
    )
    model = "Fused kernels move each tensor once and skip the tiles a causal mask leaves empty."
    kernels = len(naive_kernels(gpu, FORECAST_SHAPE))
    rows = [(r.format(kernels=kernels), c) for r, c in zip(TRAINING_ROWS, checks, strict=True)]
    return forecast_box(gpu, rows, shape=FORECAST_SHAPE, lead=lead, model=model, floors=True)
