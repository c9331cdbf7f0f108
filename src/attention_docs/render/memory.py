# The memory chapter's renderers: the allocation timeline of one forward, its per-step table,
# the peak per dtype with a backend's scratch, the peak against seq_len, and the forecast for
# a GPU. Facts and verdicts come from findings/memory.py; words from render/words.py.
from __future__ import annotations

from attention_docs.analytic import gpu as gpus
from attention_docs.findings import memory as fmemory
from attention_docs.findings.forecast import measured_on
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import claims, words
from attention_docs.render.figures import INK, MUTED, STEP_COLORS, figure_html, new_figure, to_svg
from attention_docs.render.forecast import forecast_box
from attention_docs.render.plots import line_figure
from attention_docs.render.tables import captioned_table

fact = words.fact


def memory_timeline_figure(sourced: Sourced) -> str:
    """Live bytes above the inputs after each allocation and free, over the step bands; dotted
    lines at one and two N×N matrices, dashed at the model's peak."""
    m = sourced.measurement
    events, bands = m.tables["events"].records(), m.tables["bands"].records()
    size, predicted = m.facts["matrix_bytes"], m.facts["predicted_peak_bytes"]
    # layout: the x axis spans every event and band
    end = max([e["t_us"] for e in events] + [b["end_us"] for b in bands] + [1.0])
    # layout: the y axis unit for the largest value
    scale, unit = (1e6, "MB") if max(predicted, size) >= 1e6 else (1e3, "kB")
    with new_figure(7.6, 3.4) as fig:
        ax = fig.add_subplot()
        for b in bands:
            span, color = (b["start_us"], b["end_us"]), STEP_COLORS.get(b["step"], MUTED)
            ax.axvspan(*span, color=color, alpha=0.16, lw=0)
            ax.text(sum(span) / 2, 1.01, b["step"].removeprefix("attention."), transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=7, color=INK, rotation=30)  # fmt: skip
        ys = [0.0] + [e["live_bytes"] / scale for e in events]
        ax.step([0.0] + [e["t_us"] for e in events] + [end], [*ys, ys[-1]], where="post", color=INK, lw=1.4, label="live bytes")  # fmt: skip
        for k in (1, 2):
            ax.axhline(k * size / scale, color=MUTED, linestyle=":", lw=0.8)
        ax.axhline(predicted / scale, color="#D55E00", ls="--", lw=0.9, label="predicted peak")
        # layout: the y axis spans every value
        ax.set(xlim=(0, end * 1.01), ylim=(0, max([*ys, predicted / scale]) * 1.12))
        ax.set_xlabel("time since the start of the forward (µs)")
        ax.set_ylabel(f"allocated by the forward ({unit})")
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(frameon=False, fontsize=8, loc="upper left")
        steps = "; ".join(
            f"{r['step']}: {r['allocations']} allocations, {words.nbytes(r['allocated_bytes'])} "
            f"allocated, {words.nbytes(r['freed_bytes'])} freed"
            for r in m.tables["steps"].records()
        )
        peak = words.nbytes(m.facts["measured_peak_bytes"])
        alt = f"Memory timeline of one forward. Peak {peak} above the inputs; one N×N matrix is {words.nbytes(size)}. {steps}."  # fmt: skip
        svg = to_svg(fig, alt)
    return figure_html(svg, sourced, "Allocations of one forward.")


def memory_step_table(sourced: Sourced) -> str:
    """Per step: allocations, how many were N×N, bytes allocated and freed, live at its end."""
    m = sourced.measurement
    columns = ("allocated_bytes", "freed_bytes", "live_after_bytes")
    rows = [
        [f"`{r['step']}`", r["allocations"], r["score_sized"], *(fmemory.step_bytes(m, r, c) for c in columns)]
        for r in m.tables["steps"].records()
    ]  # fmt: skip
    header = ["Step", "Allocations", "Of them N×N", "Allocated", "Freed", "Live at its end"]
    return captioned_table(header, rows, "", sourced, "Allocations per step.")


def allocation_claim(m: Measurement) -> str:
    """How many N×N tensors one forward creates, against how many are live at once."""
    found = fmemory.matrices(m)
    makers = words.series(f"`{s}`" for s in found.makers)
    return (
        f"One forward creates {fact(found.created, emphasis=True)} N×N tensors ({makers} each "
        f"allocate one), but never more than {fact(found.live_at_once, emphasis=True)} are live "
        f"at once."
    )


def _here(m: Measurement) -> fmemory.DtypePeak:
    return next(p for p in fmemory.dtype_peaks(m) if p.dtype == m.params["dtype"])


def peak_claim(m: Measurement) -> str:
    """The measured peak against the model's parts, in the timeline's dtype."""
    here, s = _here(m), fmemory.shape(m)
    parts = [f"two N×N matrices of {fact(fmemory.matrix(s))}"]
    parts += [f"the bool mask ({fact(fmemory.matrix(s, 'mask'))})"] if s.causal else []
    parts += [f"the output ({fact(fmemory.matrix(s, 'output'))})"]
    verdict = "to the byte" if here.matches_model else "once scratch is added"
    return (
        f"The forward's peak is {fact(here.measured, emphasis=True)} above its inputs. The model "
        f"predicts {words.series(parts)}: {fact(here.model)}. It matches {verdict}."
    )


def _backend(p: fmemory.DtypePeak) -> str:
    return f"{p.backend} `{p.kernel}`" if p.kernel else p.backend


def dtype_table(sourced: Sourced) -> str:
    """Per dtype: the counted peak, the tensors alone, the model, the scratch at the peak, and
    which library ran the matmul."""
    rows = [
        [p.dtype, p.measured, p.tensors, p.model, p.scratch_at_peak, _backend(p)]
        for p in fmemory.dtype_peaks(sourced.measurement)
    ]
    header = ["dtype", "Peak (allocator)", "Tensors alone", "Model", "Scratch at the peak", "Matmul ran in"]  # fmt: skip
    return captioned_table(header, rows, "lrrrrl", sourced, "Peak per dtype.")  # fmt: skip


def scratch_claim(m: Measurement) -> str:
    """In which dtype the tensors model is the whole peak here, and what each backend adds."""
    found = fmemory.dtype_peaks(m)
    exact = [p.dtype for p in found if p.exact and not p.scratch_at_peak.value]
    text = f"In {words.series(exact)} the model matches the allocator to the byte." if exact else ""
    for p in found:
        big = p.scratch_blocks
        if p.scratch_at_peak.value and big:
            where = words.series(f"`{x.op}` in `{x.step}` {fact(x.per_call)}" for x in big)
            # oneDNN names its instruction-set level in Intel's words on every vendor's CPU.
            isa = f" (at the instruction-set level oneDNN calls “{p.isa}”)" if p.isa else ""
            text += (
                f" In {p.dtype}, {_backend(p)}{isa} allocates scratch per call and frees it before "
                f"returning ({where}). At the peak it adds {fact(p.scratch_at_peak)}: the peak is "
                f"{fact(p.measured)}, while the tensors alone, {fact(p.tensors)}, still match the model."
            )  # fmt: skip
    return text.strip()


def peak_table(sourced: Sourced) -> str:
    """seq_len, predicted peak and total, measured peak, their ratio and the row's status."""
    rows = [
        [r.seq_len, r.model, r.total, r.measured, r.ratio, r.status]
        for r in fmemory.peak_rows(sourced.measurement)
    ]
    header = ["seq_len", "Predicted peak", "Predicted with inputs", "Measured peak", "Measured ÷ predicted", "Status"]  # fmt: skip
    return captioned_table(header, rows, "rrrrrl", sourced, "Peak memory.")


def peak_figure(sourced: Sourced) -> str:
    """Predicted and measured peak against seq_len, log-log, with fitted slopes."""
    return line_figure(
        sourced, "peak", x="seq_len", ys=fmemory.PEAK_LINES,
        labels=["predicted", "measured"], what="Peak memory of one forward against seq_len.",
        ylabel="bytes above the inputs", logx=True, logy=True, slopes=fmemory.peak_slopes(sourced.measurement),
    )  # fmt: skip


def oom_claim(m: Measurement) -> str:
    """Where this device runs out by the model, how the measured peaks compare, and what share
    of them is N×N at the ends of the sweep."""
    rows = fmemory.peak_rows(m)
    ran = [r for r in rows if r.ratio is not None]
    text = (
        f"This device has {fact(fmemory.memory_fact(m, 'memory_bytes'))} of {m.facts['memory_kind']}, "
        f"{fact(fmemory.memory_fact(m, 'free_bytes'))} of it free when the sweep began. By the model, "
        f"the longest sequence whose inputs and peak fit in that free memory is "
        f"{fact(fmemory.longest(m, free=True), emphasis=True)} ({fact(fmemory.longest(m, free=False))} if "
        f"all of it were free)."
    )
    if ran:
        same = "equals the model's to the byte" if fmemory.peaks_to_the_byte(ran) else "is the model's times the ratio in the table"  # fmt: skip
        text += (
            f" Where the forward ran, the measured peak {same}. Its N×N part (two matrices and "
            f"the mask) grows from {fact(ran[0].nxn)} of it at seq_len {ran[0].seq_len:,} to "
            f"{fact(ran[-1].nxn)} at {ran[-1].seq_len:,}; the output, which grows like N, is the rest."
        )  # fmt: skip
    first = m.facts["first_out_of_memory_seq_len"]
    if first is not None:
        text += f" The first length that really ran out of memory was **{first:,}**."
    return text


def finding(sourced: Sourced) -> str:
    """The chapter's opening: how many N×N matrices are live at once and the peak that makes;
    in its caption, one matrix's size and what a backend's scratch adds in the other dtype."""
    m = sourced.measurement
    here, s, parts = _here(m), fmemory.shape(m), fmemory.matrices(m)
    match = "exact to the byte" if here.matches_model else "once the backend's scratch is added"
    claim = (
        f"One naive forward keeps at most {fact(parts.live_at_once, with_spread=False)} N×N "
        f"matrices live at once, so a formula from the shapes predicts its peak: "
        f"{fact(here.measured, with_spread=False)} above the inputs here, {match}."
    )
    detail = (
        f"One N×N matrix is {fact(fmemory.matrix(s))}; the peak adds the bool mask and the output."
    )
    for p in fmemory.dtype_peaks(m):
        if p.dtype != here.dtype and p.scratch_at_peak.value:
            matmul = f"{p.backend} {p.kernel}" if p.kernel else p.backend
            detail += f" In {p.dtype} the matmul runs in {matmul}, whose scratch adds {fact(p.scratch_at_peak)} to the peak: the tensors alone still match the model."  # fmt: skip
        elif p.dtype != here.dtype:
            detail += f" In {p.dtype} no backend adds scratch at the peak: the model is exact there too."  # fmt: skip
    return claims.opening(claim, sourced, detail)


def what_to_do(m: Measurement) -> str:
    """What the memory numbers mean for your own model, each action backed by the page."""
    here, s, parts = _here(m), fmemory.shape(m), fmemory.matrices(m)
    gpu = gpus.sheet()
    c = fmemory.forecasts(gpu)
    exact = " to the byte" if here.matches_model else ""
    return claims.what_to_do(
        f"Predict attention's peak before you run it: {fact(parts.live_at_once)} N×N matrices "
        f"of {fact(fmemory.matrix(s))} live at once here, and the model matched the "
        f"allocator{exact} ({fact(here.measured)}).",
        f"On long sequences use a fused kernel: on an {gpu.label} it keeps "
        f"{fact(c['fused peak'].forecast)} where naive attention keeps "
        f"{fact(c['naive peak'].forecast)} (forecast).",
        "Leave room beyond the tensors: the CUDA context and cuBLAS's workspace are not in "
        "the model (the forecast's table lists the workspace).",
    )


def forecast(entries: list[Sourced] | None = None) -> str:
    """How long a sequence naive attention can hold on the forecast GPU, its peak at the
    forecast shape (beside a stored timeline of that GPU), and what a fused kernel keeps."""
    gpu = gpus.sheet()
    c = fmemory.forecasts(gpu, measured_on(entries or [], gpu))
    rows = [
        (f"{gpu.label} memory" + (", as the driver reports it" if "memory MiB" in c else ", from the data sheet"), c["memory"]),
        *((("… in MiB, as nvidia-smi prints it", c["memory MiB"]), ("… in GiB (2³⁰ bytes)", c["memory GiB"])) if "memory MiB" in c else ()),
        ("The data sheet's figure (GB: 10⁹ bytes)", c["data sheet memory"]),
        ("Naive peak above the inputs", c["naive peak"]),
        ("One N×N score matrix", c["matrix"]),
        ("Longest seq_len whose naive forward fits (this batch, heads, head_dim, dtype; two significant figures)", c["longest"]),
        ("A fused kernel's peak above the inputs (output, float32 log-sum-exp)", c["fused peak"]),
        ("cuBLAS workspace per stream (cuBLAS's recommendation for Hopper)", c["workspace"]),
    ]  # fmt: skip
    lead = (
        f"Naive attention on an {gpu.label} runs out of memory past about "
        f"{fact(c['longest'].forecast, emphasis=True)}; a fused kernel keeps "
        f"{fact(c['fused peak'].forecast)} where naive attention keeps {fact(c['naive peak'].forecast)}."
    )  # fmt: skip
    model = (
        "The naive peak is this chapter's model; the fused kernel keeps its output and one float32 "
        "per query row, its scores living one tile at a time on chip. Neither counts the CUDA "
        "context, nor cuBLAS's workspace, which PyTorch allocates through its caching allocator on "
        "a stream's first matmul and keeps: like oneDNN's scratch on a CPU, it can lift the "
        "allocator's peak above the tensors'. Memory: the driver's total where it is on "
        "record (records/device.py: REPORTED_MIB_SOURCE), which for a Hopper part is more than "
        "the data sheet's GB read as 10⁹ bytes."
    )
    return forecast_box(gpu, rows, shape=gpus.FORECAST_SHAPE, lead=lead, model=model)
