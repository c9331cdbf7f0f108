# Renderers for the KV-cache decoding chapter: the roofline that decode steps sit on, the
# cache-length sweep with the slope of its memory-bound tail, and sentences whose numbers
# are computed from the measurements. Pure: no torch, no I/O.
from __future__ import annotations

from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import _format as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.figures import INK, MUTED, SERIES_COLORS, figure_html, new_figure, to_svg
from attention_docs.render.plots import line_figure, loglog_slope
from attention_docs.render.tables import markdown_table

VARIANT_COLORS = {"MHA": SERIES_COLORS[0], "GQA": SERIES_COLORS[1], "MQA": SERIES_COLORS[2]}
IMPL_MARKERS = {"naive": "o", "naive_repeat_kv": "x", "sdpa": "s"}


def _ok(m: Measurement, table: str) -> list[dict]:
    return [r for r in m.tables[table].records() if r.get("status", "ok") == "ok"]


def _row(m: Measurement, variant: str, impl: str) -> dict | None:
    for r in _ok(m, "variants"):
        if r["variant"] == variant and r["impl"] == impl:
            return r
    return None


def decode_variants_table(sourced: Sourced) -> str:
    """One row per variant and implementation: cache, intensity, time, bandwidth."""
    m = sourced.measurement
    rows = [
        [
            f"{r['variant']} · {r['impl']}",
            str(r["num_kv_heads"]),
            fmt.nbytes(r["cache_mb"] * 1e6) if r["cache_mb"] is not None else "—",
            f"{r['intensity']:.2g}" if r["intensity"] is not None else "—",
            fmt.time_us(r["time_us"]) if r["time_us"] is not None else r["status"],
            f"{r['gbs']:.3g}" if r["gbs"] is not None else "—",
            f"{r['pct_copy']:.0f}%" if r["pct_copy"] is not None else "—",
        ]
        for r in m.tables["variants"].records()
    ]
    header = [
        "Variant · path",
        "k/v heads",
        "Cache / layer",
        "FLOP/B",
        "Time / token",
        "GB/s",
        "% of copy",
    ]
    return (
        markdown_table(header, rows, "lrrrrrr")
        + "\n\n"
        + caption_html(sourced, "One decode step, per layer.")
    )


def decode_batch_table(sourced: Sourced) -> str:
    """Per batch size: time per step and per token, tokens/s, bytes, bandwidth."""
    m = sourced.measurement
    rows = [
        [str(r["batch_size"]), r["status"]] + ["—"] * 5
        if r["step_us"] is None
        else [
            str(r["batch_size"]),
            fmt.time_us(r["step_us"]),
            fmt.time_us(r["token_us"]),
            f"{r['tokens_per_s']:.3g}",
            fmt.nbytes(r["bytes_mb"] * 1e6),
            f"{r['gbs']:.3g}",
            f"{r['pct_copy']:.0f}%",
        ]
        for r in m.tables["batch_sweep"].records()
    ]
    header = [
        "Batch",
        "Time / step",
        "Time / token",
        "Tokens/s",
        "Bytes / step",
        "GB/s",
        "% of copy",
    ]
    return (
        markdown_table(header, rows, "rrrrrrr")
        + "\n\n"
        + caption_html(sourced, "Decode steps per layer, by batch size.")
    )


def prefill_vs_decode_table(sourced: Sourced) -> str:
    """The same tokens all at once and one at a time: time, rates, bytes, intensity."""
    m = sourced.measurement
    rows = [
        [
            r["mode"],
            str(r["tokens"]),
            fmt.time_us(r["total_ms"] * 1e3),
            fmt.time_us(r["token_us"]),
            f"{r['gflops']:.3g}",
            fmt.nbytes(r["bytes_mb"] * 1e6),
            f"{r['intensity']:.3g}",
        ]
        for r in m.tables["prefill_vs_decode"].records()
    ]
    header = ["Mode", "Tokens", "Total", "Per token", "GFLOP/s", "Bytes (min)", "FLOP/B"]
    return (
        markdown_table(header, rows, "lrrrrrr")
        + "\n\n"
        + caption_html(sourced, "Prefill against decode, one layer.")
    )


def ridge_point(m: Measurement) -> float:
    """FLOP per byte where the measured matmul ceiling meets the measured copy bandwidth."""
    return m.facts["matmul_gflops"] / m.facts["copy_gbs"]


def decode_roofline_figure(sourced: Sourced) -> str:
    """Each decode variant at (FLOP per byte, achieved FLOP/s) under this device's roofline."""
    m = sourced.measurement
    bw, peak = m.facts["copy_gbs"], m.facts["matmul_gflops"]
    rows = _ok(m, "variants")
    ridge = ridge_point(m)
    lo = min(min(r["intensity"] for r in rows) / 4, 0.1)
    hi = max(ridge, *(r["intensity"] for r in rows)) * 8
    with new_figure(7.0, 3.8) as fig:
        ax = fig.add_subplot()
        xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.plot(xs, [min(peak, bw * x) for x in xs], color=INK, linewidth=1.4)
        ax.axvline(ridge, color=MUTED, linestyle=":", linewidth=1)
        ax.text(
            ridge * 1.1,
            peak * 0.55,
            f"ridge {ridge:.3g} FLOP/B",
            color=MUTED,
            fontsize=8,
        )
        ax.text(lo * 1.3, bw * lo * 1.6, f"copy {bw:.3g} GB/s", color=INK, fontsize=8, rotation=0)
        ax.text(
            hi / 1.3, peak * 1.12, f"matmul {peak:.3g} GFLOP/s", color=INK, fontsize=8, ha="right"
        )
        for r in rows:
            ax.plot(
                r["intensity"],
                r["gflops"],
                IMPL_MARKERS.get(r["impl"], "o"),
                color=VARIANT_COLORS.get(r["variant"], INK),
                markersize=7,
                label=r["label"],
                markerfacecolor="none" if r["impl"] == "naive" else None,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP per byte of K/V cache, q and output)")
        ax.set_ylabel("achieved GFLOP/s")
        ax.grid(color=MUTED, alpha=0.3, linewidth=0.5, which="both")
        ax.spines[["top", "right"]].set_visible(False)
        fig.legend(loc="outside right center", frameon=False, fontsize=8)
        alt = (
            f"Roofline: copy bandwidth {bw:.3g} GB/s, matmul {peak:.3g} GFLOP/s, ridge at "
            f"{ridge:.3g} FLOP/B. "
            + "; ".join(
                f"{r['label']}: {r['intensity']:.3g} FLOP/B, {r['gflops']:.3g} GFLOP/s"
                for r in rows
            )
        )
        svg = to_svg(fig, alt)
    return figure_html(svg, sourced, "Decode steps on the measured roofline.")


def decode_variants_figure(sourced: Sourced, impl: str = "sdpa") -> str:
    """Two panels for MHA, GQA and MQA on one path: cache per layer, and time per token."""
    m = sourced.measurement
    rows = [r for r in _ok(m, "variants") if r["impl"] == impl]
    names = [f"{r['variant']} ({r['num_kv_heads']} k/v)" for r in rows]
    colors = [VARIANT_COLORS.get(r["variant"], INK) for r in rows]
    with new_figure(7.0, 0.9 + 0.4 * len(rows)) as fig:
        left, right = fig.subplots(1, 2, sharey=True)
        for ax, key, label, text in (
            (left, "cache_mb", "K/V cache per layer (MB)", lambda v: fmt.nbytes(v * 1e6)),
            (right, "time_us", f"time per token per layer (µs), {impl}", fmt.time_us),
        ):
            ax.barh(names, [r[key] for r in rows], color=colors)
            for i, r in enumerate(rows):
                ax.text(r[key], i, f" {text(r[key])}", va="center", fontsize=8, color=INK)
            ax.set_xlabel(label)
            ax.margins(x=0.25)
            ax.spines[["top", "right"]].set_visible(False)
        left.invert_yaxis()
        alt = "Cache size and time per token: " + "; ".join(
            f"{n}: {r['cache_mb']:.3g} MB, {r['time_us']:.3g} µs"
            for n, r in zip(names, rows, strict=True)
        )
        svg = to_svg(fig, alt)
    return figure_html(svg, sourced, "Multi-head, grouped-query and multi-query attention.")


def tail_slope(m: Measurement, column: str, table: str = "cache_sweep") -> float | None:
    """Log-log slope of `column` against cache length over the longest half of the caches."""
    rows = [r for r in _ok(m, table) if r[column]]
    tail = rows[len(rows) // 2 :]
    return loglog_slope([r["cache_len"] for r in tail], [r[column] for r in tail])


def decode_cache_figure(sourced: Sourced) -> str:
    """Time per decode step against cache length, log-log, each line with its tail slope."""
    m = sourced.measurement
    names = [c for c in ("MHA", "GQA", "MQA") if c in m.tables["cache_sweep"].columns]
    labels = []
    for n in names:
        slope = tail_slope(m, n)
        tail = "" if slope is None else f" (slope {slope:.2f} over the longer half)"
        labels.append(f"{n}, {m.facts[f'{n}_kv_heads']} k/v heads{tail}")
    return line_figure(
        sourced,
        "cache_sweep",
        x="cache_len",
        ys=names,
        labels=labels,
        what="Time of one decode step per layer as the cache grows.",
        ylabel="time per step per layer (µs)",
        logx=True,
        logy=True,
    )


def decode_batch_figure(sourced: Sourced) -> str:
    """Time per token and per step against batch size, log-log."""
    return line_figure(
        sourced,
        "batch_sweep",
        x="batch_size",
        ys=["token_us", "step_us"],
        labels=["per token", "per step"],
        what="Decode time per token and per step, per layer, as the batch grows.",
        ylabel="time per layer (µs)",
        logx=True,
        logy=True,
    )


def decode_variants_claim(m: Measurement) -> str:
    """Cache size and time per token of GQA and MQA relative to MHA, on the SDPA path."""
    mha, gqa, mqa = (_row(m, v, "sdpa") for v in ("MHA", "GQA", "MQA"))
    if not (mha and gqa and mqa):
        return "Not every variant ran on this device; see the notes under the table."
    return (
        f"With {gqa['num_kv_heads']} k/v heads, grouped-query attention keeps a cache "
        f"**{mha['cache_mb'] / gqa['cache_mb']:.3g}× smaller** than multi-head attention's "
        f"({fmt.nbytes(gqa['cache_mb'] * 1e6)} against {fmt.nbytes(mha['cache_mb'] * 1e6)} per "
        f"layer) and decodes a token **{mha['time_us'] / gqa['time_us']:.3g}× faster** "
        f"({fmt.time_us(gqa['time_us'])} against {fmt.time_us(mha['time_us'])}); multi-query "
        f"attention, with one k/v head, is {mha['time_us'] / mqa['time_us']:.3g}× faster than "
        f"multi-head with a {mha['cache_mb'] / mqa['cache_mb']:.3g}× smaller cache."
    )


def decode_bandwidth_claim(m: Measurement) -> str:
    """Where multi-head decode sits: intensity against the ridge point, bandwidth against copy."""
    mha = _row(m, "MHA", "sdpa")
    if mha is None:
        return ""
    ridge = ridge_point(m)
    best = max(_ok(m, "variants"), key=lambda r: r["pct_copy"])
    return (
        f"A multi-head decode step does {mha['intensity']:.2g} FLOP per byte it must read; this "
        f"device needs **{ridge:.3g} FLOP per byte** (its measured matmul rate, "
        f"{m.facts['matmul_gflops']:.3g} GFLOP/s, over its measured copy bandwidth, "
        f"{m.facts['copy_gbs']:.3g} GB/s) before arithmetic could become the limit. So the step "
        f"is bound by memory, {ridge / mha['intensity']:.3g}× below the ridge: it reads its "
        f"cache at {mha['gbs']:.3g} GB/s, **{mha['pct_copy']:.0f}% of what a plain copy "
        f"achieves**. The best row, `{best['label']}`, reaches {best['pct_copy']:.0f}%."
    )


def decode_roofline_claim(m: Measurement) -> str:
    """Which SDPA rows sit left of the ridge (bytes bound them) and which right (arithmetic)."""
    ridge, bw, peak = ridge_point(m), m.facts["copy_gbs"], m.facts["matmul_gflops"]
    rows = [r for r in _ok(m, "variants") if r["impl"] == "sdpa"]
    left = [r for r in rows if r["intensity"] < ridge]
    right = [r for r in rows if r["intensity"] >= ridge]
    parts = []
    if left:
        parts.append(
            "Left of the ridge, where bytes set the limit: "
            + ", ".join(
                f"{r['variant']} ({r['intensity']:.2g} FLOP/B, {100 * r['gbs'] / bw:.0f}% of the "
                "copy bandwidth)"
                for r in left
            )
            + "."
        )
    if right:
        parts.append(
            "Right of it, where the roofline says arithmetic is the limit: "
            + ", ".join(
                f"{r['variant']} ({r['intensity']:.2g} FLOP/B, {100 * r['gflops'] / peak:.0f}% "
                "of the matmul rate)"
                for r in right
            )
            + ". A decode step's arithmetic is a one-row product per head — a matrix-vector "
            "product, which reuses nothing from registers and never approaches the rate of the "
            "large matmul that drew the flat line."
        )
    return " ".join(parts)


def repeat_kv_claim(m: Measurement) -> str:
    """How much copying k/v per query head costs, compared with folding the group into rows."""
    parts = []
    for variant in ("GQA", "MQA"):
        grouped, repeated = _row(m, variant, "naive"), _row(m, variant, "naive_repeat_kv")
        if grouped and repeated:
            parts.append(
                f"{variant} {repeated['time_us'] / grouped['time_us']:.3g}× "
                f"({fmt.time_us(repeated['time_us'])} against {fmt.time_us(grouped['time_us'])})"
            )
    if not parts:
        return ""
    return (
        "Materialising the repeated heads with `repeat_interleave` makes the step slower by "
        + " and ".join(parts)
        + ": it writes and reads again a copy of the cache per query head, giving back the "
        "bytes grouped-query attention saved."
    )


def cache_slope_claim(m: Measurement) -> str:
    """The tail slopes, and what each variant reads per second at the longest cache."""
    rows = _ok(m, "cache_sweep")
    if len(rows) < 3:
        return "Too few cache lengths ran on this device to fit a slope."
    last, bw = rows[-1], m.facts["copy_gbs"]
    names = [n for n in ("MHA", "GQA", "MQA") if n in m.tables["cache_sweep"].columns]
    slopes = ", ".join(f"{n} {s:.2f}" for n in names if (s := tail_slope(m, n)) is not None)
    pct = {n: 100 * last[f"{n} GB/s"] / bw for n in names}
    text = (
        f"Over the longer half of the caches the log-log slopes are {slopes}. At "
        f"{last['cache_len']} tokens the three read their caches at "
        + ", ".join(f"{n} {last[f'{n} GB/s']:.3g} GB/s ({pct[n]:.0f}%)" for n in names)
        + " of the measured copy bandwidth."
    )
    slow = min(pct, key=pct.get)
    slow_slope = tail_slope(m, slow)
    if max(pct.values()) > 2 * pct[slow] and slow_slope is not None and slow_slope > 0.8:
        text += (
            f" A slope near 1 says time grows with M, not why: {slow} reads far below the "
            "copy bandwidth, so bytes are not what limits it — its time follows the FLOPs, "
            "which grow with M and with the query heads, not the k/v heads."
        )
    return text


def batch_claim(m: Measurement) -> str:
    """What batching does to time per step, time per token and tokens per second."""
    rows = _ok(m, "batch_sweep")
    if len(rows) < 2:
        return "Too few batch sizes ran on this device to compare."
    first, last = rows[0], rows[-1]
    return (
        f"From batch {first['batch_size']} to {last['batch_size']} the bytes per step grow "
        f"{last['bytes_mb'] / first['bytes_mb']:.3g}× and the time per step "
        f"{last['step_us'] / first['step_us']:.3g}×, so the time per token goes from "
        f"{fmt.time_us(first['token_us'])} to {fmt.time_us(last['token_us'])} "
        f"(**{first['token_us'] / last['token_us']:.3g}×** the throughput, "
        f"{last['tokens_per_s']:.3g} against {first['tokens_per_s']:.3g} tokens/s per layer)."
    )


def prefill_vs_decode_claim(m: Measurement) -> str:
    """Time per token and achieved rates of prefill against token-by-token decode."""
    pre, dec = m.tables["prefill_vs_decode"].records()
    return (
        f"The same {pre['tokens']} tokens cost **{fmt.time_us(pre['token_us'])} each in "
        f"prefill** and **{fmt.time_us(dec['token_us'])} each decoded one at a time** — "
        f"{dec['token_us'] / pre['token_us']:.3g}× more, for the same useful FLOPs. Prefill "
        f"runs them at {pre['gflops']:.3g} GFLOP/s with {pre['intensity']:.3g} FLOP per byte; "
        f"decode at {dec['gflops']:.3g} GFLOP/s with {dec['intensity']:.2g} FLOP per byte, "
        f"because every step reads the whole cache again for one query."
    )


def decode_step_overhead(m: Measurement) -> str:
    """The profiled decode step: its unprofiled time, and where the labelled ranges spend it."""
    total = sum(s.time_us for s in m.steps)
    busiest = max(m.steps, key=lambda s: s.time_us)
    matmuls = sum(
        s.time_us for s in m.steps if s.label in ("attention.scores", "attention.weighted_sum")
    )
    unprofiled = fmt.time_us(m.timing.median_us) if m.timing else "—"
    return (
        f"Unprofiled, one decode step at a cache of {m.facts['profiled_cache_len']} tokens takes "
        f"{unprofiled}. Under the profiler its six labelled ranges add up to "
        f"{fmt.time_us(total)}; `{busiest.label}` is the largest at "
        f"{fmt.time_us(busiest.time_us)}, and the two matmuls that read the cache take "
        f"{fmt.percent(matmuls / total) if total else '—'} of the total."
    )


__all__ = [
    "batch_claim",
    "cache_slope_claim",
    "decode_bandwidth_claim",
    "decode_batch_figure",
    "decode_batch_table",
    "decode_cache_figure",
    "decode_roofline_claim",
    "decode_roofline_figure",
    "decode_step_overhead",
    "decode_variants_claim",
    "decode_variants_figure",
    "decode_variants_table",
    "prefill_vs_decode_claim",
    "prefill_vs_decode_table",
    "repeat_kv_claim",
    "ridge_point",
    "tail_slope",
]
