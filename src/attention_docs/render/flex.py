# Renderers for the FlexAttention chapter: one row per mask (compiled, unfused fallback,
# SDPA with a dense mask, block sparsity, accuracy), the fallback's own warning, the
# sparsity sweep and the cost of building a BlockMask. Pure: no torch, no I/O.
from __future__ import annotations

import html

from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import _format as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.plots import line_figure, loglog_slope
from attention_docs.render.tables import markdown_table


def _time(value) -> str:
    return fmt.time_us(value) if isinstance(value, int | float) else "—"


def _ok(row: dict) -> bool:
    return row["status"] == "ok"


def mask_table(sourced: Sourced) -> str:
    """Per mask: compiled FlexAttention, its unfused fallback, SDPA with the dense mask."""
    rows = []
    for r in sourced.measurement.tables["masks"].records():
        speedup = (
            f"{r['eager_us'] / r['compiled_us']:.1f}×"
            if _ok(r) and r.get("compiled_us") and r.get("eager_us")
            else "—"
        )
        rows.append(
            [
                f"`{r['mask']}`" + (" (score_mod, causal mask)" if r["score_mod"] != "—" else ""),
                _time(r["compiled_us"]) if _ok(r) else r["status"],
                _time(r["eager_us"]),
                speedup,
                _time(r["sdpa_dense_us"]),
                fmt.percent(r["skipped_fraction"]),
                f"{r['rel_err_vs_float64']:.1e}" if _ok(r) else "—",
            ]
        )
    header = [
        "Mask",
        "Compiled flex",
        "Unfused fallback",
        "Fallback ÷ compiled",
        "SDPA + dense mask",
        "Tiles skipped",
        "Error vs float64",
    ]
    return (
        markdown_table(header, rows, "lrrrrrr")
        + "\n\n"
        + caption_html(sourced, "One forward per mask.")
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


def mask_claims(m: Measurement) -> str:
    """The headline numbers of the mask table, computed."""
    rows = [r for r in m.tables["masks"].records() if _ok(r)]
    parts = []
    if rows:
        ratios = [r["eager_us"] / r["compiled_us"] for r in rows]
        compile_s = [r["compile_s"] for r in rows]
        parts.append(
            f"Compiled, FlexAttention runs **{min(ratios):.1f}×–{max(ratios):.1f}×** faster than "
            f"its unfused fallback across the {len(rows)} masks that compiled here, and "
            f"each mask's first call paid **{min(compile_s):.1f}–{max(compile_s):.1f} s** of "
            "compilation in a fresh process: every distinct `mask_mod`/`score_mod` is a new "
            "kernel."
        )
        errs = [r["rel_err_vs_float64"] for r in rows]
        parts.append(
            f"Every compiled result matches the float64 reference built from explicit masks to "
            f"a relative error of at most {max(errs):.1e}."
        )
    missing = [r for r in m.tables["masks"].records() if not _ok(r)]
    for r in missing:
        parts.append(f"`{r['mask']}`: {html.escape(r['status'])}.")
    return " ".join(parts)


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
    """How much time the narrowest window saves against the widest, next to its tile saving."""
    rows = [r for r in m.tables["sweep"].records() if r["time_us"]]
    if len(rows) < 2:
        return ""
    narrow, wide = rows[0], rows[-1]
    return (
        f"From a window of {wide['window']} tokens (plain causal: {fmt.percent(wide['skipped_fraction'])} "
        f"of tiles skipped) down to {narrow['window']} ({fmt.percent(narrow['skipped_fraction'])} "
        f"skipped), the tiles computed fall **{wide['computed_fraction'] / narrow['computed_fraction']:.1f}×** "
        f"and the time **{wide['time_us'] / narrow['time_us']:.1f}×** "
        f"({fmt.time_us(wide['time_us'])} → {fmt.time_us(narrow['time_us'])}). One compiled kernel "
        f"served every width; its first call took {m.facts['compile_s']:.1f} s."
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
