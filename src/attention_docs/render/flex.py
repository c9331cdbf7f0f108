# Renderers for the FlexAttention chapter: one row per mask (compiled, unfused fallback,
# SDPA with a dense mask, block sparsity, accuracy), the fallback's own warning, the
# sparsity sweep and the cost of building a BlockMask. Times carry their spread over the
# timing rounds, and a comparison inside the noise reads "within noise". Compiled
# FlexAttention with the causal mask is read from `forward_times` (its FlexAttention row):
# one fact, one number. Pure: no torch, no I/O.
from __future__ import annotations

import html

from attention_docs.findings.compare import Comparison, compare
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.timing import Timing
from attention_docs.render import compare as cmp
from attention_docs.render import words as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.plots import line_figure, loglog_slope
from attention_docs.render.tables import markdown_table


def _time(value) -> str:
    return fmt.time_us(value) if isinstance(value, int | float) else "—"


def _ok(row: dict) -> bool:
    return row["status"] == "ok"


def _m(source: Sourced | Measurement) -> Measurement:
    return source.measurement if isinstance(source, Sourced) else source


def causal_shape(m: Measurement) -> fwd.Shape:
    """The forward_times shape of flex_masks' causal row."""
    return fwd.Shape.of({**m.params, "causal": True})


def _from_forward_times(m: Measurement) -> set[str]:
    return set(m.facts.get("compiled_timed_in_forward_times", ()))


def mask_timing(row: dict, name: str, method: str = "") -> Timing | None:
    """One of a mask row's timings (`compiled`, `eager`, `sdpa_dense`) with its rounds."""
    median = row.get(f"{name}_us")
    if not isinstance(median, int | float):
        return None
    low, high = row[f"{name}_low_us"], row[f"{name}_high_us"]
    return Timing(median, 0.0, 0, method, (low, median, high))


def compiled_timing(m: Measurement, row: dict, times: Measurement) -> Timing | None:
    """Compiled FlexAttention's time for a mask: forward_times' row where it has one."""
    if not _ok(row):
        return None
    if row["mask"] in _from_forward_times(m):
        return fwd.timing(times, fwd.FLEX, causal_shape(m))
    return mask_timing(row, "compiled")


def _cell(t: Timing | None) -> str:
    """`12.3 ms<br>11.9–12.8 ms`: the median and the rounds' range."""
    if t is None:
        return "—"
    return f"{fmt.time_us(t.median_us)}<br>{fmt.time_us(t.low_us)}–{fmt.time_us(t.high_us)}"


def mask_table(sourced: Sourced, times: Sourced | Measurement) -> str:
    """Per mask: compiled FlexAttention, its unfused fallback, SDPA with the dense mask."""
    m, t = sourced.measurement, _m(times)
    rows = []
    for r in m.tables["masks"].records():
        if not _ok(r):
            compiled = html.escape(r["status"])
        elif r["mask"] in _from_forward_times(m):
            compiled = cmp.forward_time(t, fwd.FLEX, causal_shape(m)) + " †"
        else:
            compiled = _cell(mask_timing(r, "compiled"))
        rows.append(
            [
                f"`{r['mask']}`" + (" (score_mod, causal mask)" if r["score_mod"] != "—" else ""),
                compiled,
                _cell(mask_timing(r, "eager")),
                _cell(mask_timing(r, "sdpa_dense")),
                fmt.percent(r["skipped_fraction"]),
                f"{r['rel_err_vs_float64']:.1e}" if _ok(r) else "—",
            ]
        )
    header = [
        "Mask",
        "Compiled flex (median; slowest–fastest round)",
        "Unfused fallback",
        "SDPA + dense mask",
        "Tiles skipped",
        "Error vs float64",
    ]
    note = (
        "\n\n† The plain causal mask's compiled time is the FlexAttention row of the site's "
        "forward-time table (`forward_times`): the same call, timed once for every page."
        if _from_forward_times(m)
        else ""
    )
    return (
        markdown_table(header, rows, "lrrrrr")
        + note
        + "\n\n"
        + caption_html(sourced, "One forward per mask, the three timed in interleaved rounds.")
    )


def block_table(sourced: Sourced) -> str:
    """Per mask: the BlockMask's tiles (skipped, partial, full), its build time, compile time."""
    m = sourced.measurement
    bq, bk = m.facts["block_size"]
    rows = [
        [
            f"`{r['mask']}`",
            str(r["total_blocks"]),
            str(r["total_blocks"] - r["partial_blocks"] - r["full_blocks"]),
            str(r["partial_blocks"]),
            str(r["full_blocks"]),
            f"{r['block_mask_ms']:.3g} ms",
            (
                f"{r['compile_s']:.1f} s ({r['fx_cache']})"
                if isinstance(r["compile_s"], int | float)
                else "—"
            ),
        ]
        for r in m.tables["masks"].records()
    ]
    header = [
        "Mask",
        f"Tiles ({bq}×{bk})",
        "Skipped",
        "Partial",
        "Full",
        "Build",
        "First call (FX cache)",
    ]
    return (
        markdown_table(header, rows, "lrrrrrr")
        + "\n\n"
        + caption_html(sourced, "BlockMask tiles per mask.")
    )


def fallback_warning(m: Measurement) -> str:
    """The warning flex_attention gave when called without torch.compile, as a quote."""
    text = m.facts.get("fallback_warning")
    if not text:
        return (
            "*flex_attention warns only once per process; no warning was recorded in this run "
            "(an earlier call in the same process had already shown it).*"
        )
    body = "\n".join(f"    {line}" if line.strip() else "" for line in text.strip().splitlines())
    return f'!!! warning "What flex_attention said, called without torch.compile"\n\n{body}\n'


def _versus(c: Comparison | None, other: str) -> str:
    """`3.10× (2.9–3.3×) faster than <other>`, `… slower than …`, or `within noise of …`."""
    if c is None:
        return f"not compared with {other} (one of the two did not run)"
    if c.tie:
        return f"within noise of {other} ({c.ratio:.2f}×)"
    if c.ratio >= 1:
        return f"{cmp.ratio_text(c)} faster than {other}"
    slower = Comparison(1 / c.ratio, 1 / c.high, 1 / c.low, False)
    return f"{cmp.ratio_text(slower)} slower than {other}"


def mask_claims(m: Measurement, times: Sourced | Measurement) -> str:
    """Compiled FlexAttention against its fallback and SDPA with a dense mask, per mask,
    each ratio with its range over the rounds ("within noise" when the ranges overlap)."""
    t = _m(times)
    records = m.tables["masks"].records()
    rows = [r for r in records if _ok(r)]
    parts = []
    if rows:
        lines = []
        for r in rows:
            fast = compiled_timing(m, r, t)
            eager, dense = mask_timing(r, "eager"), mask_timing(r, "sdpa_dense")
            versus_eager = compare(fast, eager) if fast and eager else None
            versus_dense = compare(fast, dense) if fast and dense else None
            lines.append(
                f"- `{r['mask']}`: compiled is {_versus(versus_eager, 'its unfused fallback')} "
                f"and {_versus(versus_dense, 'SDPA with the dense mask')}."
            )
        compile_s = [r["compile_s"] for r in rows]
        errs = [r["rel_err_vs_float64"] for r in rows]
        parts.append(
            "Per mask, the ratios of median times, with the range the timing rounds allow:\n\n"
            + "\n".join(lines)
        )
        parts.append(
            f"\nEach mask's first call paid **{min(compile_s):.1f}–{max(compile_s):.1f} s** of "
            "compilation: every distinct `mask_mod`/`score_mod` is a new kernel. Every compiled "
            f"result matches the float64 reference built from explicit masks to a relative error "
            f"of at most {max(errs):.1e}."
        )
    for r in records:
        if not _ok(r):
            parts.append(f"`{r['mask']}`: {html.escape(r['status'])}.")
    return "\n".join(parts)


def sparsity_figure(sourced: Sourced) -> str:
    """Time per forward against the fraction of tiles computed, with the proportional line."""
    return line_figure(
        sourced,
        "sweep",
        x="computed_fraction",
        ys=("time_us", "proportional_us"),
        labels=("measured", "proportional to tiles computed"),
        what="Sliding-window FlexAttention: time against tiles computed.",
        xlabel="fraction of 128×128 tiles computed (1 − sparsity)",
        ylabel="time per forward (µs)",
    )


def sparsity_claim(m: Measurement) -> str:
    """How the narrowest window's time compares with the widest's, next to its tile saving."""
    rows = [r for r in m.tables["sweep"].records() if r["time_us"]]
    if len(rows) < 2:
        return ""
    narrow, wide = rows[0], rows[-1]
    tiles = wide["computed_fraction"] / narrow["computed_fraction"]
    c = compare(mask_timing(narrow, "time"), mask_timing(wide, "time"))
    text = (
        f"From a window of {wide['window']} tokens (plain causal: "
        f"{fmt.percent(wide['skipped_fraction'])} of tiles skipped) down to {narrow['window']} "
        f"({fmt.percent(narrow['skipped_fraction'])} skipped), the tiles computed fall "
        f"**{tiles:.1f}×**; "
    )
    if c.tie:
        text += (
            f"the time does not fall outside the noise ({fmt.time_us(wide['time_us'])} and "
            f"{fmt.time_us(narrow['time_us'])}, {cmp.ratio_text(c)}): at this size fixed "
            "per-call costs, not tiles, set the time."
        )
    elif c.ratio > 1:
        text += (
            f"the time falls **{cmp.ratio_text(c)}** ({fmt.time_us(wide['time_us'])} → "
            f"{fmt.time_us(narrow['time_us'])})."
        )
    else:
        text += (
            f"yet the time rises ({fmt.time_us(wide['time_us'])} → "
            f"{fmt.time_us(narrow['time_us'])}, outside the rounds' range)."
        )
    return text + (
        f" One compiled kernel served every width; its first call took {m.facts['compile_s']:.1f} s."
    )


def block_mask_cost_figure(sourced: Sourced) -> str:
    """create_block_mask time against seq_len, log-log, with the fitted slope."""
    return line_figure(
        sourced,
        "cost",
        x="seq_len",
        ys=("build_us",),
        labels=("create_block_mask",),
        what="Time to build a BlockMask against seq_len.",
        ylabel="time (µs)",
        logx=True,
        logy=True,
    )


def block_mask_cost_table(sourced: Sourced) -> str:
    """Per seq_len: build time, peak memory while building, the BlockMask's and a dense mask's size."""
    rows = [
        [
            str(r["seq_len"]),
            _time(r["build_us"]),
            fmt.nbytes(r["peak_bytes"]),
            fmt.nbytes(r["block_mask_bytes"]),
            fmt.nbytes(r["dense_mask_bytes"]),
            fmt.percent(r["skipped_fraction"]) if r["skipped_fraction"] is not None else "—",
            r["status"],
        ]
        for r in sourced.measurement.tables["cost"].records()
    ]
    header = [
        "seq_len",
        "Build time",
        "Peak memory while building",
        "BlockMask size",
        "Dense bool mask",
        "Tiles skipped",
        "Status",
    ]
    return (
        markdown_table(header, rows, "rrrrrrl")
        + "\n\n"
        + caption_html(sourced, "create_block_mask.")
    )


def block_mask_cost_claim(m: Measurement) -> str:
    """The fitted growth of build time and the size ratio at the largest seq_len."""
    rows = [r for r in m.tables["cost"].records() if r["build_us"]]
    if len(rows) < 2:
        return ""
    # Small masks are dominated by fixed per-call costs; fit the growth where it shows.
    fitted = rows[-3:]
    slope = loglog_slope([r["seq_len"] for r in fitted], [r["build_us"] for r in fitted])
    last = rows[-1]
    slope_text = (
        f"From seq_len {fitted[0]['seq_len']} to {last['seq_len']} the build time grows with "
        f"slope **{slope:.2f}** on log-log axes (2 is quadratic: the mask_mod is evaluated on "
        "every query/key pair)"
        + ("." if slope >= 1.5 else "; below that, fixed per-call costs still dominate.")
        if slope is not None
        else ""
    )
    return (
        f"{slope_text} Peak memory while building reaches "
        f"{fmt.nbytes(last['peak_bytes'])} at seq_len {last['seq_len']}, "
        f"{last['peak_bytes'] / last['dense_mask_bytes']:.1f}× a dense boolean mask, while the "
        f"BlockMask it leaves behind is {fmt.nbytes(last['block_mask_bytes'])} — "
        f"{last['dense_mask_bytes'] / last['block_mask_bytes']:,.0f}× smaller than that mask."
    )


def size_note(masks: Measurement, sweep: Measurement, cost: Measurement) -> str:
    """The sizes this chapter measured at, and what each one measures on this device."""
    p, s = masks.params, sweep.params
    gpu = masks.device_kind == "cuda"
    largest = max(r["seq_len"] for r in cost.tables["cost"].records())
    narrowest = sweep.tables["sweep"].records()[0]
    heads = f"batch_size={p['batch_size']}, num_heads={p['num_heads']}, {p['dtype']}"
    lines = [
        f"- **The four masks** (`flex_masks`): seq_len={p['seq_len']}, head_dim={p['head_dim']}, "
        f"{heads}, a window of {p['window']} tokens and {p['documents']} documents — "
        + (
            "a prefill-sized layer on a GPU, where each dense N×N mask or bias SDPA is given "
            "must be read for every head."
            if gpu
            else "small enough that four compiles and the unfused fallback fit in a CPU build."
        ),
        f"- **The sparsity sweep** (`flex_sparsity_sweep`): seq_len={s['seq_len']}, windows "
        f"from {s['min_window']} tokens doubling up to the whole sequence; the narrowest "
        f"window skips {fmt.percent(narrowest['skipped_fraction'])} of the tiles — "
        + (
            "long enough for the time to follow the tiles, if anything makes it."
            if gpu
            else "at the masks' seq_len, so that its sliding-window kernel can come from "
            "Inductor's cache instead of a second compile."
        ),
        f"- **The BlockMask build** (`flex_block_mask_cost`): seq_len from 256 up to {largest}, "
        f"where the dense boolean mask the build evaluates reaches {fmt.nbytes(largest**2)}.",
    ]
    return "\n".join(lines)
