# Renderers for the backward-pass chapter: forward and backward time and memory per
# implementation, the autograd nodes of each backward, and the tensors autograd saves in
# between, with the sentences whose numbers come from those measurements. Pure: no torch.
#
# Times carry their range over rounds (unprofiled, interleaved) or over profiled calls; a
# ratio whose ranges overlap is "within noise", and a share of the step in the backward
# whose range holds one half is "as long as the forward, within noise".
from __future__ import annotations

from dataclasses import replace

from attention_docs.findings.compare import compare
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.timing import Timing
from attention_docs.render import words as fmt
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


def timing(r: dict, prefix: str) -> Timing:
    """`forward`, `backward`, `profiled_forward`... of a compare row as a Timing."""
    return Timing(
        median_us=r[f"{prefix}_us"],
        iqr_us=0.0,
        runs=0,
        method="",
        rounds_us=(r[f"{prefix}_low_us"], r[f"{prefix}_us"], r[f"{prefix}_high_us"]),
    )


def _time_text(t: Timing) -> str:
    return f"{fmt.time_us(t.median_us)} ({fmt.time_us(t.low_us)}–{fmt.time_us(t.high_us)})"


def ratio(r: dict, prefix: str = "") -> str:
    """Backward ÷ forward with its range, or "within noise" when the ranges overlap."""
    c = compare(timing(r, f"{prefix}forward"), timing(r, f"{prefix}backward"))
    if c.tie:
        return f"within noise ({c.ratio:.2f}×)"
    return f"{c.ratio:.2f}× ({c.low:.2f}–{c.high:.2f}×)"


def backward_share(r: dict, prefix: str = "") -> str:
    """The share of forward + backward spent in the backward, with its range."""
    f, b = timing(r, f"{prefix}forward"), timing(r, f"{prefix}backward")
    share = b.median_us / (b.median_us + f.median_us)
    low = b.low_us / (b.low_us + f.high_us)
    high = b.high_us / (b.high_us + f.low_us)
    tie = ", within noise of half" if low <= 0.5 <= high else ""
    return f"{fmt.percent(share)} ({fmt.percent(low)}–{fmt.percent(high)}{tie})"


def backward_table(sourced: Sourced) -> str:
    """Per implementation: forward and backward without the profiler, their ratio, peak
    memory of forward + backward, and the bytes saved for the backward."""
    m = sourced.measurement
    rows = []
    for r in m.tables["compare"].records():
        if r["status"] != "ok":
            rows.append([f"`{r['implementation']}`", "unavailable", *("—",) * 4])
            continue
        rows.append(
            [
                f"`{r['implementation']}`",
                _time_text(timing(r, "forward")),
                _time_text(timing(r, "backward")),
                ratio(r),
                fmt.nbytes(r["step_peak_bytes"]),
                fmt.nbytes(r["saved_internal_bytes"]),
            ]
        )
    header = [
        "Implementation",
        "Forward, recording autograd",
        "Backward",
        "Backward ÷ forward",
        "Peak memory",
        "Saved",
    ]
    return (
        markdown_table(header, rows, "lrrrrr")
        + "\n\n"
        + caption_html(
            sourced,
            "Forward and backward, per implementation: median and range over interleaved "
            "rounds, without the profiler.",
        )
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


def _times(naive: dict, flash: dict) -> str:
    """How flash's peak compares with naive's: "**4.4×** less", or more at tiny sizes."""
    a, b = naive["step_peak_bytes"], max(flash["step_peak_bytes"], 1)
    return f"**{a / b:.2g}×** less" if a >= b else f"**{b / a:.2g}×** more"


def backward_claims(m: Measurement) -> str:
    """Flash against naive: memory saved, bytes kept; every implementation's backward ÷
    forward ratio and share of the step in the backward, with their noise."""
    ran = _ran(m)
    text = ""
    naive, flash = ran.get("naive"), ran.get("sdpa-flash")
    if naive and flash:
        text = (
            f"Forward plus backward, `sdpa-flash` peaks at "
            f"**{fmt.nbytes(flash['step_peak_bytes'])}** where naive attention peaks at "
            f"{fmt.nbytes(naive['step_peak_bytes'])} ({_times(naive, flash)}). "
            f"Between the two passes, autograd keeps {fmt.nbytes(naive['saved_internal_bytes'])} "
            f"for naive attention's backward and {fmt.nbytes(flash['saved_internal_bytes'])} "
            f"(plus the output, {fmt.nbytes(flash['saved_output_bytes'])}) for "
            f"FlashAttention's. "
        )
    ratios = "; ".join(
        f"`{name}` {ratio(r)}, {backward_share(r)} of the step in the backward"
        for name, r in ran.items()
    )
    return text + (
        f"Without the profiler, backward ÷ forward (range over "
        f"{m.facts.get('rounds', 'the')} interleaved rounds) and the share of forward + "
        f"backward spent in the backward: {ratios}."
    )


def phase_claim(m: Measurement) -> str:
    """How the profiled step splits into forward and backward, call by call."""
    r = _ran(m).get(m.facts.get("profiled"))
    if not r or r.get("profiled_forward_us") is None:
        return ""
    clock = (
        "on the GPU's kernel clock — the backward's kernels are launched by the autograd "
        "engine's own thread and counted for `attention.backward` across threads"
        if m.device_kind == "cuda"
        else "on the CPU time of the two labelled ranges"
    )
    return (
        f"Under the profiler, {clock}, the `{m.facts.get('profiled')}` step spends "
        f"{backward_share(r, 'profiled_')} of its time in `attention.backward` "
        f"({_time_text(timing(r, 'profiled_backward'))} against "
        f"{_time_text(timing(r, 'profiled_forward'))} forward, range over the profiled calls)."
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
