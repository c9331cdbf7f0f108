# Renderers for the backward-pass chapter: forward and backward time and memory per
# implementation, the autograd nodes of each backward, and the tensors autograd saves in
# between, with the sentences whose numbers come from those measurements. Pure: no torch.
from __future__ import annotations

from dataclasses import replace

from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import _format as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.figures import SERIES_COLORS
from attention_docs.render.plots import line_figure, loglog_slope
from attention_docs.render.tables import markdown_table
from attention_docs.render.timeline import DEFAULT_SETTINGS, timeline_figure

TIMELINE_COLORS = (
    ("attention.forward", SERIES_COLORS[0]),
    ("attention.backward", SERIES_COLORS[1]),
)


def step_timeline(sourced: Sourced) -> str:
    """The timeline of one forward + backward, the two halves in colour."""
    settings = replace(
        DEFAULT_SETTINGS,
        colors=TIMELINE_COLORS,
        title="Timeline of one forward + backward.",
        xlabel="time since the start of the step (µs)",
    )
    return timeline_figure(sourced, settings)


def _num(value, formatter) -> str:
    return "—" if value is None else formatter(value)


def _ran(m: Measurement) -> dict[str, dict]:
    return {r["implementation"]: r for r in m.tables["compare"].records() if r["status"] == "ok"}


def backward_table(sourced: Sourced) -> str:
    """Per implementation: forward, backward, their ratio, step time, peak memory, bytes saved."""
    m = sourced.measurement
    where = "GPU" if m.device_kind == "cuda" else "profiled"
    rows = []
    for r in m.tables["compare"].records():
        if r["status"] != "ok":
            rows.append([f"`{r['implementation']}`", "unavailable", *("—",) * 5])
            continue
        rows.append(
            [
                f"`{r['implementation']}`",
                fmt.time_us(r["forward_us"]),
                fmt.time_us(r["backward_us"]),
                _num(r["backward_per_forward"], lambda x: f"{x:.1f}×"),
                fmt.time_us(r["step_us"]),
                fmt.nbytes(r["step_peak_bytes"]),
                fmt.nbytes(r["saved_internal_bytes"]),
            ]
        )
    header = [
        "Implementation",
        f"Forward ({where})",
        f"Backward ({where})",
        "Ratio",
        "Step (no profiler)",
        "Peak memory",
        "Saved",
    ]
    return (
        markdown_table(header, rows, "lrrrrrr")
        + "\n\n"
        + caption_html(sourced, "Forward and backward, per implementation.")
    )


def unavailable_implementations(sourced: Sourced) -> str:
    """A bullet per implementation that could not run here, with torch's reason."""
    lines = [f"- {note}" for note in sourced.measurement.notes]
    return "\n".join(lines) if lines else "Every implementation ran on this device."


def autograd_nodes_table(sourced: Sourced) -> str:
    """The autograd nodes each backward ran (`...Backward0`), by total time per step."""
    rows = [
        [
            f"`{r['implementation']}`",
            f"`{r['node']}`",
            f"{r['calls']:g}",
            fmt.time_us(r["total_us"]),
        ]
        for r in sourced.measurement.tables["autograd_nodes"].records()
    ]
    return (
        markdown_table(["Implementation", "Autograd node", "Calls", "Total time"], rows, "llrr")
        + "\n\n"
        + caption_html(sourced, "The backward's autograd nodes.")
    )


def backward_claims(m: Measurement) -> str:
    """Flash against naive: memory saved, bytes kept, and the backward/forward ratios."""
    ran = _ran(m)
    naive, flash = ran.get("naive"), ran.get("sdpa-flash")
    if not naive or not flash:
        return ""
    ratios = ", ".join(
        f"`{name}` {r['backward_per_forward']:.1f}×"
        for name, r in ran.items()
        if r["backward_per_forward"] is not None
    )
    return (
        f"Forward plus backward, `sdpa-flash` peaks at **{fmt.nbytes(flash['step_peak_bytes'])}** "
        f"where naive attention peaks at {fmt.nbytes(naive['step_peak_bytes'])} "
        f"(**{naive['step_peak_bytes'] / max(flash['step_peak_bytes'], 1):.2g}×** less). "
        f"Between the two passes, autograd keeps {fmt.nbytes(naive['saved_internal_bytes'])} "
        f"for naive attention's backward and {fmt.nbytes(flash['saved_internal_bytes'])} (plus "
        f"the output, {fmt.nbytes(flash['saved_output_bytes'])}) for FlashAttention's. "
        f"The backward costs, per forward: {ratios}."
    )


def phase_claim(m: Measurement) -> str:
    """How the profiled step (sdpa-flash) splits into forward and backward."""
    steps = {s.label: s for s in m.steps}
    fwd, bwd = steps.get("attention.forward"), steps.get("attention.backward")
    if not fwd or not bwd:
        return ""
    where = "GPU time" if m.device_kind == "cuda" else "time"
    total = fwd.time_us + bwd.time_us
    return (
        f"Under the profiler, the `{m.facts.get('profiled')}` step spends "
        f"{fmt.percent(bwd.time_us / total)} of its {where} in `attention.backward` "
        f"({fmt.time_us(bwd.time_us)} against {fmt.time_us(fwd.time_us)} forward)."
    )


def saved_figure(sourced: Sourced) -> str:
    """Bytes autograd keeps beyond q, k, v, against seq_len, log-log with fitted slopes."""
    table = sourced.measurement.tables["saved"]
    names = [c for c in table.columns if c not in ("seq_len", "status")]
    return line_figure(
        sourced,
        "saved",
        x="seq_len",
        ys=names,
        what="Bytes saved for the backward beyond q, k and v, against seq_len.",
        ylabel="saved bytes",
        logx=True,
        logy=True,
        fit_slope=True,
    )


def saved_detail_table(sourced: Sourced) -> str:
    """Every storage autograd saved, per implementation, at the sweep's smallest seq_len."""
    m = sourced.measurement
    rows = [
        [f"`{r['implementation']}`", r["shape"], r["dtype"], fmt.nbytes(r["bytes"]), r["role"]]
        for r in m.tables["detail"].records()
    ]
    n = m.facts.get("detail_seq_len")
    return (
        markdown_table(["Implementation", "Shape", "dtype", "Bytes", "What it is"], rows, "lllrl")
        + "\n\n"
        + caption_html(sourced, f"Saved tensors at seq_len={n}, once per storage.")
    )


def saved_claims(m: Measurement) -> str:
    """The fitted growth of saved bytes, and the ratio at the longest sequence."""
    table = m.tables["saved"]
    xs = table.column("seq_len")
    names = [c for c in table.columns if c not in ("seq_len", "status")]
    slopes = {n: loglog_slope(xs, table.column(n)) for n in names}
    last = [r for r in table.records() if r["status"] == "ok"][-1]
    parts = ", ".join(f"`{n}` {s:.2f}" for n, s in slopes.items() if s is not None)
    text = f"Fitted log-log slopes of saved bytes against seq_len: {parts}."
    if last.get("naive") and last.get("sdpa-flash"):
        text += (
            f" At seq_len={last['seq_len']}, naive attention keeps "
            f"**{last['naive'] / last['sdpa-flash']:.3g}×** the bytes FlashAttention keeps "
            f"({fmt.nbytes(last['naive'])} against {fmt.nbytes(last['sdpa-flash'])})."
        )
    return text
