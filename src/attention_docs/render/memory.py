# The memory chapter's renderers: the allocation timeline of one forward (live bytes over
# time, over the five step bands), its per-step table, the peak-vs-seq_len table, and the
# sentences that state the measured peak, the model's prediction and the out-of-memory
# length. Pure: they read a Measurement's tables and facts, never torch.
from __future__ import annotations

from attention_docs.analytic.memory import is_matrix_sized, naive_peak
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import words as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.figures import INK, MUTED, STEP_COLORS, figure_html, new_figure, to_svg
from attention_docs.render.tables import markdown_table

AFTER = "after the steps"
TOO_LARGE = "too large for the free memory"  # experiments/_sweep.py's status for such a point
ABOVE_MAX = "not run: above max_measured"


def memory_timeline_svg(m: Measurement) -> str:
    """Live bytes (above the inputs) after each allocation and free, over the step bands."""
    events = m.tables["events"].records()
    bands = m.tables["bands"].records()
    matrix = m.facts["matrix_bytes"]
    end = max([e["t_us"] for e in events] + [b["end_us"] for b in bands] + [1.0])
    scale, unit = _byte_unit(max([e["live_bytes"] for e in events] + [matrix]))
    with new_figure(7.6, 3.4) as fig:
        ax = fig.add_subplot()
        for b in bands:
            color = STEP_COLORS.get(b["step"], MUTED)
            ax.axvspan(b["start_us"], b["end_us"], color=color, alpha=0.16, linewidth=0)
            ax.text(
                (b["start_us"] + b["end_us"]) / 2,
                1.01,
                b["step"].removeprefix("attention."),
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize=7,
                color=INK,
                rotation=30,
            )
        xs = [0.0] + [e["t_us"] for e in events] + [end]
        ys = [0.0] + [e["live_bytes"] / scale for e in events]
        ys.append(ys[-1])
        ax.step(xs, ys, where="post", color=INK, linewidth=1.4, label="live bytes")
        for k in (1, 2):
            ax.axhline(k * matrix / scale, color=MUTED, linestyle=":", linewidth=0.8)
        matrices = ax.secondary_yaxis(
            "right", functions=(lambda y: y * scale / matrix, lambda n: n * matrix / scale)
        )
        matrices.set_ylabel("in N×N score matrices")
        matrices.set_yticks([0, 1, 2])
        predicted = m.facts["predicted_peak_bytes"] / scale
        ax.axhline(
            predicted, color="#D55E00", linestyle="--", linewidth=0.9, label="predicted peak"
        )
        ax.set_xlim(0, end * 1.01)
        ax.set_ylim(0, max([*ys, predicted]) * 1.12)
        ax.set_xlabel("time since the start of the forward (µs)")
        ax.set_ylabel(f"allocated by the forward ({unit})")
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(frameon=False, fontsize=8, loc="upper left")
        return to_svg(fig, _timeline_alt(m))


def _timeline_alt(m: Measurement) -> str:
    steps = m.tables["steps"].records()
    parts = "; ".join(
        f"{r['step']}: {r['allocations']} allocations, {fmt.nbytes(r['allocated_bytes'])} allocated, "
        f"{fmt.nbytes(r['freed_bytes'])} freed"
        for r in steps
    )
    return (
        f"Memory timeline of one forward. Peak {fmt.nbytes(m.facts['measured_peak_bytes'])} "
        f"above the inputs; one N×N matrix is {fmt.nbytes(m.facts['matrix_bytes'])}. {parts}."
    )


def _byte_unit(largest: float) -> tuple[float, str]:
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if largest >= scale:
            return scale, unit
    return 1.0, "B"


def memory_timeline_figure(sourced: Sourced) -> str:
    """The allocation timeline of `memory_timeline` as a captioned <figure>."""
    return figure_html(
        memory_timeline_svg(sourced.measurement), sourced, "Allocations of one forward."
    )


def memory_step_table(sourced: Sourced) -> str:
    """Per step: allocations, how many were score-sized, bytes allocated and freed, live after."""
    m = sourced.measurement
    rows = [
        [
            f"`{r['step']}`",
            str(r["allocations"]),
            str(r["score_sized"]),
            fmt.nbytes(r["allocated_bytes"]),
            fmt.nbytes(r["freed_bytes"]),
            fmt.nbytes(r["live_after_bytes"]),
        ]
        for r in m.tables["steps"].records()
    ]
    header = [
        "Step",
        "Allocations",
        "Of them N×N",
        "Allocated",
        "Freed",
        "Live at its end",
    ]
    return markdown_table(header, rows) + "\n\n" + caption_html(sourced, "Allocations per step.")


def peak_claim(m: Measurement) -> str:
    """The measured peak against the model's prediction, and what it is made of."""
    f = m.facts
    measured, predicted = f["measured_peak_bytes"], f["predicted_peak_bytes"]
    matrices = measured / f["matrix_bytes"]
    off = abs(measured - predicted) / predicted if predicted else 0.0
    parts = [f"{f['live_matrices_predicted']} × {fmt.nbytes(f['matrix_bytes'])} (N×N)"]
    if f["mask_bytes"]:
        parts.append(f"{fmt.nbytes(f['mask_bytes'])} (bool mask)")
    parts.append(f"{fmt.nbytes(f['output_bytes'])} (output)")
    agreement = "exactly" if measured == predicted else f"within {fmt.percent(off)}"
    return (
        f"The forward's peak is **{fmt.nbytes(measured)}** above its inputs, "
        f"{matrices:.2f} times one N×N matrix. The model predicts {' + '.join(parts)} = "
        f"{fmt.nbytes(predicted)}: it matches {agreement}."
    )


def live_matrices(m: Measurement) -> int:
    """The most N×N tensors live at once: allocations of exactly a score matrix's size minus
    frees of that size, event by event (the mask and the output, other sizes, are not)."""
    matrix = m.facts["matrix_bytes"]
    live = most = 0
    for e in m.tables["events"].records():
        if is_matrix_sized(e["bytes"], matrix):
            live += 1 if e["bytes"] > 0 else -1
            most = max(most, live)
    return most


def allocation_claim(m: Measurement) -> str:
    """How many N×N tensors one forward creates, against how many are live at once."""
    steps = m.tables["steps"].records()
    created = sum(r["score_sized"] for r in steps)
    makers = [r["step"] for r in steps if r["score_sized"]]
    listed = ", ".join(f"`{s}`" for s in makers)
    return (
        f"One forward creates **{created}** N×N tensors ({listed} each allocate one), "
        f"but never more than **{live_matrices(m)}** are live at once."
    )


def _status(status: str) -> str:
    """A row's status without the sweep's GiB figures: the prose states them in one unit."""
    return status.split(" (", maxsplit=1)[0]


def peak_table(sourced: Sourced) -> str:
    """seq_len, predicted peak and total, measured peak, their ratio and the row's status."""
    m = sourced.measurement
    rows = [
        [
            str(r["seq_len"]),
            fmt.nbytes(r["predicted_peak_bytes"]),
            fmt.nbytes(r["predicted_total_bytes"]),
            fmt.nbytes(r["measured_peak_bytes"]),
            "—" if r["measured_over_predicted"] is None else f"{r['measured_over_predicted']:.3f}",
            _status(r["status"]),
        ]
        for r in m.tables["peak"].records()
    ]
    header = [
        "seq_len",
        "Predicted peak",
        "Predicted with inputs",
        "Measured peak",
        "Measured / predicted",
        "Status",
    ]
    return markdown_table(header, rows, "rrrrrl") + "\n\n" + caption_html(sourced, "Peak memory.")


def oom_claim(m: Measurement) -> str:
    """Where this device runs out of memory: predicted against the free memory the run had,
    measured where it was tried, and in words for every length that was not tried."""
    f = m.facts
    rows = m.tables["peak"].records()
    measured = [r for r in rows if r["measured_over_predicted"] is not None]
    worst = max((abs(r["measured_over_predicted"] - 1) for r in measured), default=None)
    free = f.get("free_bytes", f["memory_bytes"])
    text = (
        f"This device has **{fmt.nbytes(f['memory_bytes'])}** of {f['memory_kind']}, "
        f"{fmt.nbytes(free)} of it free when the sweep began. The model says the longest "
        f"sequence whose inputs and peak fit in that free memory is "
        f"**seq_len = {f.get('predicted_max_seq_len_free', f['predicted_max_seq_len']):,}** "
        f"({f['predicted_max_seq_len']:,} if all of it were free)."
    )
    if worst is not None:
        agreement = (
            "equals the prediction to the byte"
            if worst == 0
            else f"is within {fmt.percent(worst)} of the prediction"
        )
        text += (
            f" Where the forward was run ({len(measured)} lengths up to "
            f"{f['largest_measured_seq_len']:,}), the measured peak {agreement}."
        )
    first = f["first_out_of_memory_seq_len"]
    if first is not None:
        text += f" The first length that really ran out of memory was **{first:,}**."
    too_large = [r for r in rows if r["status"].startswith(TOO_LARGE)]
    if too_large:
        r = too_large[0]
        text += (
            f" **seq_len = {r['seq_len']:,}** was not tried: its inputs and peak, "
            f"{fmt.nbytes(r['predicted_total_bytes'])} by the model, are more than the "
            f"{fmt.nbytes(free)} that were free"
            + (
                f", and neither were the {len(too_large) - 1} longer lengths after it"
                if len(too_large) > 1
                else ""
            )
            + "."
        )
    skipped = [r["seq_len"] for r in rows if r["status"] == ABOVE_MAX]
    if skipped:
        span = f"{skipped[0]:,}" if len(skipped) == 1 else f"{skipped[0]:,} to {skipped[-1]:,}"
        text += (
            f" seq_len {span} would fit but was not run, to keep the build's memory use small "
            f"(max_measured = {m.params['max_measured']:,}): those rows are the prediction alone."
        )
    return text


def peak_slope_claim(m: Measurement) -> str:
    """The fitted slope of the measured peaks against seq_len, worded from the fit, and the
    share of the peak that is N×N at the ends (the model's matrices and mask)."""
    from attention_docs.render.wall import memory_slope_sentence

    p = m.params
    rows = []
    for r in m.tables["peak"].records():
        if r["measured_peak_bytes"] is None:
            continue
        model = naive_peak(
            p["batch_size"],
            p["num_heads"],
            r["seq_len"],
            p["head_dim"],
            p["dtype"],
            causal=p["causal"],
        )
        quadratic = model.matrices * model.matrix_bytes + model.mask_bytes
        rows.append(
            {
                "seq_len": r["seq_len"],
                "peak_bytes": r["measured_peak_bytes"],
                "quadratic_bytes": quadratic,
            }
        )
    if len(rows) < 3:
        return "Too few lengths were measured to fit a slope."
    return memory_slope_sentence(rows)


def peak_figure(sourced: Sourced) -> str:
    """Predicted and measured peak against seq_len, log-log, with fitted slopes."""
    from attention_docs.render.plots import line_figure

    return line_figure(
        sourced,
        "peak",
        x="seq_len",
        ys=["predicted_peak_bytes", "measured_peak_bytes"],
        labels=["predicted", "measured"],
        what="Peak memory of one forward against seq_len.",
        ylabel="bytes above the inputs",
        logx=True,
        logy=True,
        fit_slope=True,
    )
