# Renderers for the KV-cache decoding chapter: the roofline that decode steps sit on, the
# cache-length sweep with the slope of its memory-bound tail, and sentences whose numbers
# are computed from the measurements. The ceilings (copy bandwidth, matmul FLOP/s) are the
# `machine_ceilings` entry's — the numbers chapter 03 states — and are used only when that
# entry was measured on the same device as the decode measurement. Timings carry their
# rounds' range; a difference inside it is called a tie. Pure: no torch, no I/O.
from __future__ import annotations

from attention_docs.analytic.decode import decode_cost
from attention_docs.findings.compare import compare
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.timing import Timing
from attention_docs.render import words as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.compare import ceiling, ratio_text
from attention_docs.render.figures import INK, MUTED, SERIES_COLORS, figure_html, new_figure, to_svg
from attention_docs.render.plots import line_figure, loglog_slope
from attention_docs.render.tables import markdown_table

VARIANT_COLORS = {"MHA": SERIES_COLORS[0], "GQA": SERIES_COLORS[1], "MQA": SERIES_COLORS[2]}
# Distinct shapes and sizes, so that two paths at the same point stay visible: a large hollow
# circle (naive), a cross (repeat_kv) and a small filled square (sdpa) drawn on top.
IMPL_MARKERS = {
    "naive": {"marker": "o", "markersize": 11, "markerfacecolor": "none", "zorder": 3},
    "naive_repeat_kv": {"marker": "x", "markersize": 8, "zorder": 4},
    "sdpa": {"marker": "s", "markersize": 5, "zorder": 5},
}
BANDWIDTH = "bandwidth_bs"
NO_CEILING = "—"


def _m(source: Sourced | Measurement) -> Measurement:
    return source.measurement if isinstance(source, Sourced) else source


def _ok(m: Measurement, table: str) -> list[dict]:
    return [r for r in m.tables[table].records() if r.get("status", "ok") == "ok"]


def _row(m: Measurement, variant: str, impl: str) -> dict | None:
    for r in _ok(m, "variants"):
        if r["variant"] == variant and r["impl"] == impl:
            return r
    return None


def _timing(median: float, low: float, high: float) -> Timing:
    return Timing(median_us=median, iqr_us=0.0, runs=0, method="", rounds_us=(low, median, high))


def _row_timing(r: dict) -> Timing:
    return _timing(r["time_us"], r["low_us"], r["high_us"])


def _time_range(median: float, low: float, high: float) -> str:
    """`1.72 ms (1.70–1.75 ms)`: the median of the rounds and their range."""
    return f"{fmt.time_us(median)} ({fmt.time_us(low)}–{fmt.time_us(high)})"


# --- the ceilings, from machine_ceilings on the same device ---


def _ceilings(m: Measurement, ceilings: Sourced | Measurement | None) -> Measurement | None:
    c = _m(ceilings) if ceilings is not None else None
    return c if c is not None and c.device_id == m.device_id else None


def bandwidth(m: Measurement, ceilings: Sourced | Measurement | None) -> float | None:
    """The copy bandwidth (B/s) machine_ceilings measured on `m`'s device, or None."""
    c = _ceilings(m, ceilings)
    return c.facts.get(BANDWIDTH) if c else None


def matmul_key(m: Measurement) -> str:
    return f"peak_flops_{m.params['dtype']}"


def matmul_rate(m: Measurement, ceilings: Sourced | Measurement | None) -> float | None:
    """The matmul FLOP/s of `m`'s dtype machine_ceilings measured on `m`'s device, or None."""
    c = _ceilings(m, ceilings)
    return c.facts.get(matmul_key(m)) if c else None


def _pct_copy(gbs: float | None, bw: float | None) -> str:
    return f"{100 * gbs * 1e9 / bw:.0f}%" if gbs is not None and bw else NO_CEILING


def _no_ceilings(m: Measurement) -> str:
    return (
        f"`machine_ceilings` has no copy-bandwidth or {m.params['dtype']} matmul measurement on "
        f"{m.provenance.device.label}, so nothing is placed under a roof here."
    )


def ridge_point(m: Measurement, ceilings: Sourced | Measurement | None) -> float | None:
    """FLOP per byte where the measured matmul ceiling meets the measured copy bandwidth."""
    bw, peak = bandwidth(m, ceilings), matmul_rate(m, ceilings)
    return peak / bw if bw and peak else None


# --- tables ---


def decode_variants_table(sourced: Sourced, ceilings: Sourced | None = None) -> str:
    """One row per variant and implementation: cache, intensity, time, bandwidth."""
    m = sourced.measurement
    bw = bandwidth(m, ceilings)
    rows = []
    for r in m.tables["variants"].records():
        name = f"{r['variant']} · {r['impl']} ({r['num_kv_heads']} k/v)"
        if r["time_us"] is None:
            rows.append([name, "—", "—", r["status"], "—", "—"])
            continue
        rows.append(
            [
                name,
                fmt.nbytes(r["cache_mb"] * 1e6),
                f"{r['intensity']:.2g}",
                _time_range(r["time_us"], r["low_us"], r["high_us"]),
                f"{r['gbs']:.3g}",
                _pct_copy(r["gbs"], bw),
            ]
        )
    header = [
        "Variant · path (k/v heads)",
        "Cache / layer",
        "FLOP/B",
        "Time / step / layer (median; round range)",
        "Achieved GB/s",
        "% of copy bandwidth",
    ]
    return (
        markdown_table(header, rows, "lrrrrr")
        + "\n\n"
        + caption_html(sourced, "One decode step, per layer; % of machine_ceilings' copy.")
    )


def decode_batch_table(sourced: Sourced, ceilings: Sourced | None = None) -> str:
    """Per batch size: time per step and per token, tokens/s, bandwidth."""
    m = sourced.measurement
    bw = bandwidth(m, ceilings)
    rows = []
    for r in m.tables["batch_sweep"].records():
        if r["step_us"] is None:
            rows.append([str(r["batch_size"]), r["status"], "—", "—", "—", "—"])
            continue
        rows.append(
            [
                str(r["batch_size"]),
                _time_range(r["step_us"], r["step_low_us"], r["step_high_us"]),
                fmt.time_us(r["token_us"]),
                f"{r['tokens_per_s']:.3g}",
                f"{r['gbs']:.3g}",
                _pct_copy(r["gbs"], bw),
            ]
        )
    header = [
        "Batch",
        "Time / step (median; round range)",
        "Time / token",
        "Tokens/s per layer",
        "Achieved GB/s",
        "% of copy bandwidth",
    ]
    return (
        markdown_table(header, rows, "rrrrrr")
        + "\n\n"
        + caption_html(sourced, "Decode steps per layer, by batch size.")
    )


def prefill_vs_decode_table(sourced: Sourced) -> str:
    """The same tokens all at once and one at a time: time, rates, bytes, intensity."""
    m = sourced.measurement
    rows = [
        [
            r["mode"],
            _time_range(r["total_ms"] * 1e3, r["low_ms"] * 1e3, r["high_ms"] * 1e3),
            fmt.time_us(r["token_us"]),
            f"{r['gflops']:.3g}",
            fmt.nbytes(r["bytes_mb"] * 1e6),
            f"{r['intensity']:.3g}",
        ]
        for r in m.tables["prefill_vs_decode"].records()
    ]
    header = [
        "Mode",
        "Total (median; round range)",
        "Per token",
        "GFLOP/s",
        "Bytes (min)",
        "FLOP/B",
    ]
    n = m.params["prompt_len"]
    return (
        markdown_table(header, rows, "lrrrrr")
        + "\n\n"
        + caption_html(sourced, f"Prefill against decode of the same {n} tokens, one layer.")
    )


# --- figures ---


def decode_roofline_figure(sourced: Sourced, ceilings: Sourced | None = None) -> str:
    """Each decode variant at (FLOP per byte, achieved FLOP/s) under this device's roofline."""
    m = sourced.measurement
    bw, peak = bandwidth(m, ceilings), matmul_rate(m, ceilings)
    if not (bw and peak):
        return f'<p class="ad-caption">{_no_ceilings(m)}</p>'
    bw_g, peak_g = bw / 1e9, peak / 1e9
    rows = _ok(m, "variants")
    ridge = peak_g / bw_g
    lo = min(min(r["intensity"] for r in rows) / 4, 0.1)
    hi = max(ridge, *(r["intensity"] for r in rows)) * 8
    with new_figure(7.0, 3.8) as fig:
        ax = fig.add_subplot()
        xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.plot(xs, [min(peak_g, bw_g * x) for x in xs], color=INK, linewidth=1.4)
        ax.axvline(ridge, color=MUTED, linestyle=":", linewidth=1)
        ax.text(ridge * 1.1, peak_g * 0.55, f"ridge {ridge:.3g} FLOP/B", color=MUTED, fontsize=8)
        # Just under the start of the sloped roof: the roof rises to the right, so a label that
        # starts under it and runs right never meets it.
        ax.text(
            lo * 1.3,
            bw_g * lo * 1.3 / 1.6,
            f"copy {bw_g:.3g} GB/s",
            color=INK,
            fontsize=8,
            ha="left",
            va="top",
        )
        ax.text(
            hi / 1.3,
            peak_g * 1.12,
            f"matmul {peak_g:.3g} GFLOP/s",
            color=INK,
            fontsize=8,
            ha="right",
        )
        for r in rows:
            ax.plot(
                r["intensity"],
                r["gflops"],
                linestyle="none",
                color=VARIANT_COLORS.get(r["variant"], INK),
                label=r["label"],
                **IMPL_MARKERS.get(r["impl"], {"marker": "o"}),
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(top=peak_g * 2)
        ax.set_xlabel("arithmetic intensity (FLOP per byte of K/V cache, q and output)")
        ax.set_ylabel("achieved GFLOP/s")
        ax.grid(color=MUTED, alpha=0.3, linewidth=0.5, which="both")
        ax.spines[["top", "right"]].set_visible(False)
        fig.legend(loc="outside right center", frameon=False, fontsize=8)
        alt = (
            f"Roofline: copy bandwidth {bw_g:.3g} GB/s, matmul {peak_g:.3g} GFLOP/s, ridge at "
            f"{ridge:.3g} FLOP/B. "
            + "; ".join(
                f"{r['label']}: {r['intensity']:.3g} FLOP/B, {r['gflops']:.3g} GFLOP/s"
                for r in rows
            )
        )
        svg = to_svg(fig, alt)
    what = "Decode steps under the roofline of machine_ceilings (copy bandwidth, matmul rate)."
    return figure_html(svg, sourced, what)


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
            (right, "time_us", f"time per step per layer (µs), {impl}", fmt.time_us),
        ):
            ax.barh(names, [r[key] for r in rows], color=colors)
            for i, r in enumerate(rows):
                ax.text(r[key], i, f" {text(r[key])}", va="center", fontsize=8, color=INK)
            ax.set_xlabel(label)
            ax.margins(x=0.25)
            ax.spines[["top", "right"]].set_visible(False)
        right.errorbar(
            [r["time_us"] for r in rows],
            range(len(rows)),
            xerr=[
                [r["time_us"] - r["low_us"] for r in rows],
                [r["high_us"] - r["time_us"] for r in rows],
            ],
            fmt="none",
            ecolor=INK,
            capsize=3,
            linewidth=1,
        )
        left.invert_yaxis()
        alt = "Cache size and time per step per layer (bars: round range): " + "; ".join(
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


def _variants_of(m: Measurement) -> list[str]:
    return [c for c in ("MHA", "GQA", "MQA") if c in m.tables["cache_sweep"].columns]


def decode_cache_figure(sourced: Sourced) -> str:
    """Time per decode step against cache length, log-log, each line with its tail slope."""
    m = sourced.measurement
    names = _variants_of(m)
    labels = []
    for n in names:
        slope = tail_slope(m, n)
        tail = "" if slope is None else f" (slope {slope:.2f} over the longer half)"
        labels.append(f"{n}, {m.facts[f'{n}_kv_heads']} k/v heads{tail}")
    lengths = m.tables["cache_sweep"].column("cache_len")
    return line_figure(
        sourced,
        "cache_sweep",
        x="cache_len",
        ys=names,
        labels=labels,
        what=f"Time of one decode step per layer as the cache grows (cache_len swept "
        f"{lengths[0]}–{lengths[-1]} tokens).",
        ylabel="time per step per layer (µs)",
        logx=True,
        logy=True,
    )


def decode_batch_figure(sourced: Sourced) -> str:
    """Time per token and per step against batch size, log-log."""
    sizes = sourced.measurement.tables["batch_sweep"].column("batch_size")
    return line_figure(
        sourced,
        "batch_sweep",
        x="batch_size",
        ys=["token_us", "step_us"],
        labels=["per token", "per step"],
        what=f"Decode time per token and per step, per layer, as the batch grows (batch_size "
        f"swept {sizes[0]}–{sizes[-1]}).",
        ylabel="time per layer (µs)",
        logx=True,
        logy=True,
    )


# --- claims ---


def _versus(fast: dict, slow: dict) -> str:
    """`fast`'s time against `slow`'s: `1.9× (1.7–2.1×) faster`, `within noise (1.02×)`."""
    c = compare(_row_timing(fast), _row_timing(slow))
    if c.tie:
        return f"within noise of each other ({c.ratio:.2f}×)"
    if c.ratio < 1:
        return f"{ratio_text(compare(_row_timing(slow), _row_timing(fast)))} slower"
    return f"{ratio_text(c)} faster"


def decode_variants_claim(m: Measurement) -> str:
    """Cache size and time per token of GQA and MQA relative to MHA, on the SDPA path."""
    mha, gqa, mqa = (_row(m, v, "sdpa") for v in ("MHA", "GQA", "MQA"))
    if not (mha and gqa and mqa):
        return "Not every variant ran on this device; see the notes under the table."
    return (
        f"With {gqa['num_kv_heads']} k/v heads, grouped-query attention keeps a cache "
        f"**{mha['cache_mb'] / gqa['cache_mb']:.3g}× smaller** than multi-head attention's "
        f"({fmt.nbytes(gqa['cache_mb'] * 1e6)} against {fmt.nbytes(mha['cache_mb'] * 1e6)} per "
        f"layer); it decodes a token in {fmt.time_us(gqa['time_us'])} against "
        f"{fmt.time_us(mha['time_us'])}: **{_versus(gqa, mha)}**. Multi-query attention, with "
        f"one k/v head and a {mha['cache_mb'] / mqa['cache_mb']:.3g}× smaller cache, takes "
        f"{fmt.time_us(mqa['time_us'])}: {_versus(mqa, mha)} against multi-head."
    )


def sdpa_ops_note(m: Measurement) -> str:
    """What SDPA ran for each variant, from the profile of one step, and whether it copied k/v
    for the grouped variants (`aten::repeat_interleave`)."""
    ops: dict[str, list[str]] = m.facts.get("sdpa_ops") or {}
    if not ops:
        return ""
    parts = []
    for variant, names in ops.items():
        kernel = [n for n in names if n != "aten::repeat_interleave"]
        shown = ", ".join(f"`{n}`" for n in kernel) or "no attention op"
        parts.append(f"{variant}: {shown}")
    grouped = [v for v in ops if v != "MHA"]
    copied = [v for v in grouped if "aten::repeat_interleave" in ops[v]]
    text = (
        f"What `scaled_dot_product_attention` ran here, from the profile of one step per "
        f"variant ({m.params['dtype']} on {m.provenance.device.label}): " + "; ".join(parts) + "."
    )
    if copied:
        return text + (
            f" For {' and '.join(copied)} the profile also shows `aten::repeat_interleave`: "
            "with this backend `enable_gqa=True` copies each k/v head once per query head "
            "before attending — the copy the naive path's grouping avoids."
        )
    if grouped:
        return text + (
            f" No `aten::repeat_interleave` ran for {' or '.join(grouped)}: this backend reads "
            "each k/v head once for its whole group."
        )
    return text


def decode_bandwidth_claim(m: Measurement, ceilings: Sourced | Measurement | None) -> str:
    """Where multi-head decode sits: intensity against the ridge point, bandwidth against copy."""
    mha = _row(m, "MHA", "sdpa")
    ridge, bw = ridge_point(m, ceilings), bandwidth(m, ceilings)
    if mha is None:
        return ""
    if ridge is None:
        return _no_ceilings(m)
    mha_pct = 100 * mha["gbs"] * 1e9 / bw
    text = (
        f"A multi-head decode step does {mha['intensity']:.2g} FLOP per byte it must read; this "
        f"device needs **{ridge:.3g} FLOP per byte** (its measured {m.params['dtype']} matmul "
        f"rate, {ceiling(ceilings, matmul_key(m))}, over its measured copy bandwidth, "
        f"{ceiling(ceilings, BANDWIDTH)}, both from `machine_ceilings`) before arithmetic could "
        f"become the limit. So the step is bound by memory, {ridge / mha['intensity']:.3g}× "
        f"below the ridge: it reads its cache at {mha['gbs']:.3g} GB/s, "
        f"**{mha_pct:.0f}% of what a plain copy achieves**."
    )
    best = max(_ok(m, "variants"), key=lambda r: r["gbs"])
    if best["label"] == mha["label"]:
        return text + " No other row reads faster."
    return text + f" The fastest reader, `{best['label']}`, reaches {_pct_copy(best['gbs'], bw)}."


def decode_roofline_claim(m: Measurement, ceilings: Sourced | Measurement | None) -> str:
    """Which SDPA rows sit left of the ridge (bytes bound them) and which right (arithmetic)."""
    ridge, bw, peak = ridge_point(m, ceilings), bandwidth(m, ceilings), matmul_rate(m, ceilings)
    if ridge is None:
        return _no_ceilings(m)
    rows = [r for r in _ok(m, "variants") if r["impl"] == "sdpa"]
    left = [r for r in rows if r["intensity"] < ridge]
    right = [r for r in rows if r["intensity"] >= ridge]
    parts = []
    if left:
        parts.append(
            "Left of the ridge, where bytes set the limit: "
            + ", ".join(
                f"{r['variant']} ({r['intensity']:.2g} FLOP/B, {_pct_copy(r['gbs'], bw)} of the "
                "copy bandwidth)"
                for r in left
            )
            + "."
        )
    if right:
        parts.append(
            "Right of it, where the roofline says arithmetic is the limit: "
            + ", ".join(
                f"{r['variant']} ({r['intensity']:.2g} FLOP/B, "
                f"{100 * r['gflops'] * 1e9 / peak:.2g}% of the matmul rate)"
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
            c = compare(_row_timing(grouped), _row_timing(repeated))
            verdict = f"within noise ({c.ratio:.2f}×)" if c.tie else f"{ratio_text(c)} the time"
            parts.append(
                f"{variant}: {fmt.time_us(repeated['time_us'])} repeating against "
                f"{fmt.time_us(grouped['time_us'])} folding, {verdict}"
            )
    if not parts:
        return ""
    return (
        "Materialising the repeated heads with `repeat_interleave` writes and reads again a "
        "copy of the cache per query head — the bytes grouped-query attention saved. "
        + "; ".join(parts)
        + "."
    )


def cache_slope_claim(m: Measurement, ceilings: Sourced | Measurement | None = None) -> str:
    """The tail slopes, what each variant reads per second at the longest cache, and — checked
    against both ceilings — whether bytes or FLOPs explain a variant that reads slowly."""
    rows = _ok(m, "cache_sweep")
    if len(rows) < 3:
        return "Too few cache lengths ran on this device to fit a slope."
    last = rows[-1]
    names = _variants_of(m)
    slopes = ", ".join(f"{n} {s:.2f}" for n in names if (s := tail_slope(m, n)) is not None)
    text = f"Over the longer half of the caches the log-log slopes are {slopes}."
    bw, peak = bandwidth(m, ceilings), matmul_rate(m, ceilings)
    reads = ", ".join(f"{n} {last[f'{n} GB/s']:.3g} GB/s" for n in names)
    if not bw:
        return text + f" At {last['cache_len']} tokens they read their caches at {reads}."
    pct = {n: 100 * last[f"{n} GB/s"] * 1e9 / bw for n in names}
    text += (
        f" At {last['cache_len']} tokens they read their caches at {reads} — "
        + ", ".join(f"{n} {pct[n]:.0f}%" for n in names)
        + " of the measured copy bandwidth."
    )
    slow = min(pct, key=pct.get)
    if slow == "MHA" or "MHA" not in pct or max(pct.values()) <= 2 * pct[slow]:
        return text
    p = m.params
    cost = {
        n: decode_cost(
            p["batch_size"],
            p["num_heads"],
            last["cache_len"],
            p["head_dim"],
            p["dtype"],
            num_kv_heads=m.facts[f"{n}_kv_heads"],
        )
        for n in ("MHA", slow)
    }
    flop_pct = (
        f" and computes at {100 * cost[slow].flops / (last[slow] * 1e-6) / peak:.2g}% of the "
        "matmul rate"
        if peak
        else ""
    )
    t_mha = _timing(last["MHA"], last["MHA low"], last["MHA high"])
    t_slow = _timing(last[slow], last[f"{slow} low"], last[f"{slow} high"])
    c = compare(t_slow, t_mha)
    text += (
        f" {slow} reads far below the copy bandwidth{flop_pct}: neither roof binds it. Against "
        f"MHA at that length its step reads {cost['MHA'].bytes / cost[slow].bytes:.3g}× fewer "
        "bytes and does the same FLOPs"
    )
    if c.tie:
        return text + (
            f", and takes the same time within noise ({c.ratio:.2f}×): a cost that does not "
            "depend on the k/v heads fills the step. This sweep does not measure what it is; "
            "the profile of one step below shows where a step's time goes."
        )
    return text + (
        f", and takes {ratio_text(c)} less time — less than the bytes fell, more than the "
        "FLOPs did: its time follows neither alone. This sweep does not measure what fills "
        "the rest; the profile of one step below shows where a step's time goes."
    )


def _token_timing(r: dict) -> Timing:
    b = r["batch_size"]
    return _timing(r["step_us"] / b, r["step_low_us"] / b, r["step_high_us"] / b)


def batch_claim(m: Measurement, ceilings: Sourced | Measurement | None = None) -> str:
    """What batching does to time per step and per token; from which batch on it gains
    nothing more on this device (consecutive per-token times within noise)."""
    rows = _ok(m, "batch_sweep")
    if len(rows) < 2:
        return "Too few batch sizes ran on this device to compare."
    first, last = rows[0], rows[-1]
    gain = compare(_token_timing(last), _token_timing(first))
    text = (
        f"From batch {first['batch_size']} to {last['batch_size']} the bytes per step grow "
        f"{last['bytes_mb'] / first['bytes_mb']:.3g}× and the time per step "
        f"{last['step_us'] / first['step_us']:.3g}×, so the time per token goes from "
        f"{fmt.time_us(first['token_us'])} to {fmt.time_us(last['token_us'])}: "
        + (
            f"within noise ({gain.ratio:.2f}×)."
            if gain.tie
            else f"**{ratio_text(gain)}** the throughput per layer."
        )
    )
    # The first batch from which no larger one is faster per token beyond the noise.
    flat = next(
        (
            r
            for i, r in enumerate(rows)
            if all(
                compare(_token_timing(later), _token_timing(r)).tie
                or compare(_token_timing(later), _token_timing(r)).ratio < 1
                for later in rows[i + 1 :]
            )
        ),
        rows[-1],
    )
    bw = bandwidth(m, ceilings)
    where = f" device ({m.provenance.device.label})"
    if flat is rows[-1]:
        return text + (
            f" On this{where} the time per token still falls beyond the noise up to the largest "
            f"batch measured ({last['batch_size']}): batching has not run out of gains here."
        )
    reads = (
        f", where a step reads at {_pct_copy(flat['gbs'], bw)} of the copy bandwidth" if bw else ""
    )
    return text + (
        f" On this{where}, from batch {flat['batch_size']} on no larger batch decodes a token "
        f"faster beyond the noise{reads}: batching gains nothing more here."
    )


def prefill_vs_decode_claim(m: Measurement, ceilings: Sourced | Measurement | None = None) -> str:
    """Time per token of prefill against token-by-token decode, and decode's time split into
    what its bytes need at the copy bandwidth and what n steps cost with nothing to read."""
    pre, dec = m.tables["prefill_vs_decode"].records()
    t_pre = _timing(pre["total_ms"], pre["low_ms"], pre["high_ms"])
    t_dec = _timing(dec["total_ms"], dec["low_ms"], dec["high_ms"])
    c = compare(t_pre, t_dec)
    n = dec["tokens"]
    text = (
        f"The same {n} tokens cost **{fmt.time_us(pre['token_us'])} each in prefill** and "
        f"**{fmt.time_us(dec['token_us'])} each decoded one at a time** — "
        f"{ratio_text(c)} the time, for the same useful FLOPs. Prefill runs them at "
        f"{pre['gflops']:.3g} GFLOP/s with {pre['intensity']:.3g} FLOP per byte; decode at "
        f"{dec['gflops']:.3g} GFLOP/s with {dec['intensity']:.2g} FLOP per byte: it moves "
        f"{dec['bytes_mb'] / pre['bytes_mb']:.3g}× prefill's bytes, the cache re-read at every "
        "step."
    )
    bw = bandwidth(m, ceilings)
    floor = m.facts.get("floor_us")
    total_us = dec["total_ms"] * 1e3
    if not bw or floor is None:
        return text + (
            " How much of decode's time those bytes explain needs the copy bandwidth of this "
            "device, which `machine_ceilings` has not measured here."
        )
    bytes_us = dec["bytes_mb"] * 1e6 / bw * 1e6
    steps_us = n * floor
    if bytes_us + m.facts["floor_low_us"] * n > dec["high_ms"] * 1e3:
        return text + (
            f" How much of that time is bytes and how much per-step cost is not stated: on this "
            f"run the bytes at the copy bandwidth plus {n} steps on a one-token cache (each "
            f"{fmt.time_us(floor)}, against {fmt.time_us(dec['token_us'])} for an average step "
            "of the whole decode) add up to more than decoding took, beyond the noise, so the "
            "one-token step is no floor here; the machine's load (in the raw data) is the suspect."
        )
    text += (
        f" Is that why decode is slow? At the measured copy bandwidth "
        f"({ceiling(ceilings, BANDWIDTH)}) its {fmt.nbytes(dec['bytes_mb'] * 1e6)} take "
        f"**{fmt.time_us(bytes_us)}, {fmt.percent(bytes_us / total_us)}** of the "
        f"{fmt.time_us(total_us)} decoding took. A decode step on a one-token cache, with "
        f"nothing to read, takes {_time_range(floor, m.facts['floor_low_us'], m.facts['floor_high_us'])}; "
        f"{n} of them are **{fmt.time_us(steps_us)}, {fmt.percent(steps_us / total_us)}**: "
        f"per-step overhead. Together the two parts account for "
        f"{fmt.percent((bytes_us + steps_us) / total_us)} of the measured time"
    )
    if steps_us > bytes_us:
        return text + (
            ": here decode is slow mostly because it takes a step per token, not because of "
            "what each step reads."
        )
    return text + ": here the bytes, re-read at every step, are most of decode's time."


def decode_step_overhead(m: Measurement) -> str:
    """The profiled decode step: its unprofiled time, and where the labelled ranges spend it."""
    total = sum(s.time_us for s in m.steps)
    busiest = max(m.steps, key=lambda s: s.time_us)
    matmuls = sum(
        s.time_us for s in m.steps if s.label in ("attention.scores", "attention.weighted_sum")
    )
    f = m.facts
    unprofiled = (
        _time_range(f["profiled_step_us"], f["profiled_step_low_us"], f["profiled_step_high_us"])
        if "profiled_step_us" in f
        else "—"
    )
    return (
        f"Unprofiled, one decode step at a cache of {f['profiled_cache_len']} tokens on the "
        f"naive path takes {unprofiled} (timed in the same rounds as the table). Under the "
        f"profiler its six labelled ranges add up to {fmt.time_us(total)}; `{busiest.label}` is "
        f"the largest at {fmt.time_us(busiest.time_us)}, and the two matmuls that read the "
        f"cache take {fmt.percent(matmuls / total) if total else '—'} of the total."
    )


__all__ = [
    "bandwidth",
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
    "matmul_rate",
    "prefill_vs_decode_claim",
    "prefill_vs_decode_table",
    "repeat_kv_claim",
    "ridge_point",
    "sdpa_ops_note",
    "tail_slope",
]
