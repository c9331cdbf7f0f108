# Renderers for the fusion chapter (torch.compile on naive attention): the work before and
# after fusion, compile and recompile costs, speed and memory next to eager and SDPA. Every
# number in a sentence comes from a Measurement; forward times and their ratios come from
# the device's one `forward_times` entry (render.compare), never from the fusion
# experiments. Pure: no torch, no I/O.
from __future__ import annotations

import html

from attention_docs.analytic.cost import itemsize
from attention_docs.findings.compare import compare
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.timing import Timing
from attention_docs.render import compare as cmp
from attention_docs.render import words as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.figures import INK, SERIES_COLORS, figure_html, new_figure, to_svg
from attention_docs.render.tables import markdown_table


def _code(name: str, limit: int = 70) -> str:
    return f"`{name}`" if len(name) <= limit else f"`{name[: limit - 1]}…`"


def eager_work_table(sourced: Sourced) -> str:
    """The ops eager attention runs per forward (outermost, views excluded), by step."""
    m = sourced.measurement
    rows = [
        [_code(r["name"]), r["step"], str(r["calls"]), fmt.time_us(r["time_us"])]
        for r in m.tables["eager_work"].records()
    ]
    time_head = "GPU time" if m.device_kind == "cuda" else "Time"
    return (
        markdown_table(["Op or kernel", "Step", "Calls", f"{time_head} / forward"], rows, "llrr")
        + "\n\n"
        + caption_html(sourced, "Eager: the work per forward.")
    )


def compiled_work_table(sourced: Sourced) -> str:
    """The kernels the compiled graph runs per forward, with the steps each one stands for."""
    m = sourced.measurement
    rows = [
        [
            f"{_code(r['name'])}<br>*{r['kind']}*",
            "<br>".join(f"`{s.strip()}`" for s in r["steps"].split(","))
            if r["steps"] != "—"
            else "—",
            str(r["calls"]),
            fmt.time_us(r["time_us"]),
        ]
        for r in m.tables["compiled_work"].records()
    ]
    time_head = "GPU time" if m.device_kind == "cuda" else "Time"
    return (
        markdown_table(["Kernel", "Steps it does", "Calls", f"{time_head} / forward"], rows, "llrr")
        + "\n\n"
        + caption_html(sourced, "Compiled: the work per forward.")
    )


def fusion_summary(m: Measurement) -> str:
    """How many pieces of work before and after, and what the fused kernels absorbed."""
    f = m.facts
    fused = [r for r in m.tables["compiled_work"].records() if r["kind"] == "fused kernel"]
    unit = "kernel launches" if m.device_kind == "cuda" else "op calls that touch data"
    parts = [
        f"Eager attention makes **{f['eager_work_calls']}** {unit} per forward; the compiled "
        f"graph makes **{f['compiled_work_calls']}**, of which {f['fused_kernels']} "
        f"{'is a fused kernel' if f['fused_kernels'] == 1 else 'are fused kernels'}."
    ]
    for r in fused:
        steps = [s.strip() for s in r["steps"].split(",")] if r["steps"] != "—" else []
        ops = r["fused_ops"].strip("_").replace("__", "_")
        parts.append(
            f"`{r['name']}` does the work of {len(steps)} step{'s' if len(steps) != 1 else ''} "
            f"({', '.join(f'`{s}`' for s in steps) or 'none recognised'}): its name lists the "
            f"ATen ops it absorbed, `{ops}`."
        )
    library = [r for r in m.tables["compiled_work"].records() if r["kind"] == "library call"]
    if library:
        parts.append(
            "The matrix multiplications are not fused: "
            + ", ".join(f"`{r['name']}` ({r['calls']}×)" for r in library)
            + " still run as calls into the vendor library, exactly as in eager mode."
        )
    return " ".join(parts)


def _m(source: Sourced | Measurement) -> Measurement:
    return source.measurement if isinstance(source, Sourced) else source


def shape_of(m: Measurement) -> fwd.Shape:
    """The shape a fusion experiment ran at: the forward_times row to read."""
    return fwd.Shape.of(m.params)


def _cache_text(r: dict) -> str:
    hits, misses = r["cache_hits"], r["cache_misses"]
    return f"{hits} hit{'s' if hits != 1 else ''} / {misses} miss{'es' if misses != 1 else ''}"


def break_even(compile_s: float, eager: Timing, compiled: Timing) -> tuple[float, float, float]:
    """Forwards the compiled function needs to repay `compile_s`: (median, fewest, most).

    The fewest uses the largest saving the rounds allow (eager's slowest round against the
    compiled function's fastest), the most the smallest. Only meaningful when the compiled
    forward is faster outside the noise (eager.low_us > compiled.high_us)."""
    saved = eager.median_us - compiled.median_us
    most_saved = eager.high_us - compiled.low_us
    least_saved = eager.low_us - compiled.high_us
    per = compile_s * 1e6
    return per / saved, per / most_saved, per / least_saved


def _break_even_text(compile_s: float, times: Measurement, shape: fwd.Shape) -> str:
    c = cmp.comparison(times, fwd.COMPILED, fwd.NAIVE, shape)
    if c is None:
        return "—"
    if c.tie:
        return "never, within noise"
    if c.ratio < 1:
        return "never: the compiled forward is slower"
    eager, compiled = fwd.timing(times, fwd.NAIVE, shape), fwd.timing(times, fwd.COMPILED, shape)
    mid, low, high = break_even(compile_s, eager, compiled)
    return f"{mid:,.0f} forwards ({low:,.0f}–{high:,.0f})"


def compile_table(sourced: Sourced, times: Sourced | Measurement) -> str:
    """Cold and warm compile: first-call time, cache hits, and the forwards that repay it."""
    m, t = sourced.measurement, _m(times)
    shape = shape_of(m)
    what = {
        "cold": "cold: empty cache folders",
        "warm": "warm: same folders, Dynamo reset",
    }
    rows = [
        [
            what.get(r["compile"], r["compile"]),
            f"{r['seconds']:.1f} s",
            _cache_text(r),
            f"{r['aot_cache_hits']} / {r['aot_cache_misses']}",
            _break_even_text(r["seconds"], t, shape),
        ]
        for r in m.tables["compiles"].records()
    ]
    header = [
        "Compile",
        "First call",
        "FX graph cache",
        "AOTAutograd cache hit / miss",
        "Repaid after",
    ]
    return (
        markdown_table(header, rows, "lrrrl")
        + "\n\n"
        + caption_html(sourced, "The first call of compiled_attention(dynamic=True), twice.")
    )


def compile_cost(m: Measurement, times: Sourced | Measurement) -> str:
    """What the two compiles cost, why the warm one is cheaper, and when each is repaid."""
    t = _m(times)
    shape = shape_of(m)
    rows = {r["compile"]: r for r in m.tables["compiles"].records()}
    cold, warm = rows["cold"], rows["warm"]
    headers = (
        " Inductor's precompiled C++ headers, which it keeps in one global folder on purpose, "
        "were already there for the cold compile: on a machine that never compiled anything, "
        "the first compile builds them too."
        if m.facts.get("precompiled_headers_before")
        else ""
    )
    imported = m.facts.get("compiler_import_s")
    imports = (
        f" Neither includes importing Dynamo and Inductor, which a new process pays once, "
        f"before its first compile: **{imported:.1f} s** here (timed in a new interpreter; "
        "the worker that timed the compiles had imported them)."
        if imported is not None
        else ""
    )
    text = (
        f"With empty cache folders the first call took **{cold['seconds']:.1f} s** "
        f"({_cache_text(cold)} in Inductor's FX graph cache: it generated and compiled the "
        f"code); with the same folders after a reset, **{warm['seconds']:.1f} s** "
        f"({_cache_text(warm)}: Dynamo traced again, Inductor loaded the code it had "
        f"written), {cold['seconds'] / warm['seconds']:.0f}× less.{headers}{imports} "
        f"One forward takes {cmp.forward_time(t, fwd.NAIVE, shape)} eager and "
        f"{cmp.forward_time(t, fwd.COMPILED, shape)} compiled, so "
    )
    c = cmp.comparison(t, fwd.COMPILED, fwd.NAIVE, shape)
    if c is None:
        return text + "the break-even cannot be computed here."
    if c.tie or c.ratio < 1:
        why = "the two are within noise" if c.tie else "the compiled forward is the slower"
        return text + (
            f"{cmp.speedup(t, fwd.COMPILED, fwd.NAIVE, shape)}: {why}, and neither compile "
            "is ever repaid at this shape on this device — within noise, compiling buys nothing."
        )
    eager, compiled = fwd.timing(t, fwd.NAIVE, shape), fwd.timing(t, fwd.COMPILED, shape)
    cold_n = break_even(cold["seconds"], eager, compiled)
    warm_n = break_even(warm["seconds"], eager, compiled)
    fresh = ""
    if imported is not None:
        n = break_even(cold["seconds"] + imported, eager, compiled)
        fresh = (
            " A new process, which imports the compiler too, repays its first cold compile "
            f"after about **{n[0]:,.0f}** ({n[1]:,.0f}–{n[2]:,.0f})."
        )
    return text + (
        f"{cmp.speedup(t, fwd.COMPILED, fwd.NAIVE, shape)}. The cold compile is repaid after "
        f"about **{cold_n[0]:,.0f} forwards** ({cold_n[1]:,.0f}–{cold_n[2]:,.0f} over the "
        f"rounds' range), the warm one after about **{warm_n[0]:,.0f}** "
        f"({warm_n[1]:,.0f}–{warm_n[2]:,.0f}).{fresh}"
    )


def ranges_note(m: Measurement) -> str:
    """What became of the five record_function ranges under torch.compile."""
    f = m.facts
    kept = f["step_ranges_in_compiled_trace"]
    text = f"The compiled trace holds **{kept} of the five** `attention.*` ranges" + (
        ": Dynamo does not put `record_function` into the graph it compiles." if kept == 0 else "."
    )
    if f.get("record_function_warning"):
        text += (
            f" While tracing, torch {html.escape(f['torch_version'])} logged: "
            f"*{html.escape(f['record_function_warning'])}*."
        )
    wrappers = f.get("compiled_wrappers") or []
    if wrappers:
        text += " What the trace shows instead are torch.compile's own wrappers: " + ", ".join(
            _code(w.removesuffix(" ##").strip(), 48) for w in wrappers
        )
        text += "."
    return text


def recompile_table(sourced: Sourced) -> str:
    """Each call of the recompile experiment: shape, time, graphs compiled, cache hits/misses."""
    rows = [
        [
            r["call"],
            str(r["seq_len"]),
            fmt.time_us(r["seconds"] * 1e6),
            str(r["new_graphs"]),
            f"{r['fx_cache_hits']} / {r['fx_cache_misses']}",
        ]
        for r in sourced.measurement.tables["calls"].records()
    ]
    return (
        markdown_table(
            ["Call", "seq_len", "Wall time", "New graphs", "FX cache hit / miss"], rows, "lrrrr"
        )
        + "\n\n"
        + caption_html(sourced, "Calls in order, in one fresh process.")
    )


def recompile_claim(m: Measurement) -> str:
    """The recompile's cost against a cached call, and the guard that failed."""
    rows = m.tables["calls"].records()
    recompile = next(r for r in rows if r["new_graphs"] and r["seq_len"] != rows[0]["seq_len"])
    cached = [r for r in rows if not r["new_graphs"]]
    slowest_cached = max(r["seconds"] for r in cached) if cached else None
    reasons = m.facts.get("guard_failures") or []
    text = (
        f"Changing `seq_len` from {m.facts['first_seq_len']} to {m.facts['second_seq_len']} "
        f"cost **{recompile['seconds']:.1f} s**"
    )
    if slowest_cached:
        text += (
            f" — at least {recompile['seconds'] / slowest_cached:,.0f}× any call that found "
            "its graph cached"
        )
    text += "."
    if reasons:
        text += f" The guard that failed, as Dynamo records it: `{reasons[0]}`."
    if m.facts.get("recompile_limit"):
        text += (
            f" After {m.facts['recompile_limit']} recompiles of one function "
            "(`torch._dynamo.config.recompile_limit`) Dynamo stops compiling it and runs it eagerly."
        )
    return text


def _sdpa(m: Measurement) -> str:
    """The SDPA row of fusion_speed_memory: named after the backend SDPA chose here."""
    return next(
        r["variant"] for r in m.tables["variants"].records() if r["variant"].startswith("SDPA")
    )


def speed_memory_table(sourced: Sourced, times: Sourced | Measurement) -> str:
    """Eager, compiled and SDPA: forward time (forward_times), against eager, peak memory."""
    m, t = sourced.measurement, _m(times)
    shape = shape_of(m)
    rows = []
    for r in m.tables["variants"].records():
        c = cmp.comparison(t, r["variant"], fwd.NAIVE, shape) if r["variant"] != fwd.NAIVE else None
        rows.append(
            [
                r["variant"],
                cmp.forward_time(t, r["variant"], shape),
                "—" if r["variant"] == fwd.NAIVE else (cmp.ratio_text(c) if c else "—"),
                fmt.nbytes(r["peak_bytes"]),
                f"{r['peak_in_matrices']:.2f}",
            ]
        )
    header = [
        "Implementation",
        "Forward time (median; slowest–fastest round)",
        f"vs {fwd.NAIVE}",
        "Peak memory",
        "Peak ÷ one N×N",
    ]
    return (
        markdown_table(header, rows, "lrrrr")
        + "\n\n"
        + caption_html(sourced, "Peak memory of one forward; times are forward_times' rows.")
    )


def speed_figure(times: Sourced, m: Measurement) -> str:
    """Bars: each variant's median forward time, with its slowest–fastest round as a range."""
    shape = shape_of(m)
    names = [r["variant"] for r in m.tables["variants"].records()]
    ran = [(n, fwd.timing(times.measurement, n, shape)) for n in names]
    ran = [(n, tm) for n, tm in ran if tm is not None]
    unit, scale = ("ms", 1e3) if max(tm.median_us for _, tm in ran) >= 1e3 else ("µs", 1.0)
    with new_figure(7.0, 0.7 + 0.4 * len(ran)) as fig:
        ax = fig.add_subplot()
        fastest_name, fastest = min(ran, key=lambda x: x[1].median_us)
        for i, (name, tm) in enumerate(ran):
            ax.barh(i, tm.median_us / scale, color=SERIES_COLORS[i % len(SERIES_COLORS)])
            ax.plot([tm.low_us / scale, tm.high_us / scale], [i, i], color=INK, linewidth=1.5)
            if name != fastest_name and compare(fastest, tm).tie:
                ax.text(
                    tm.high_us / scale,
                    i,
                    f"  within noise of {fastest_name}",
                    va="center",
                    fontsize=8,
                    color=INK,
                )
        ax.set_yticks(range(len(ran)), [n for n, _ in ran])
        ax.invert_yaxis()
        ax.set_xlabel(f"Forward time ({unit}); line: slowest–fastest round")
        ax.spines[["top", "right"]].set_visible(False)
        alt = "Forward time per implementation. " + "; ".join(
            f"{n}: {fmt.time_us(tm.median_us)} ({fmt.time_us(tm.low_us)}–{fmt.time_us(tm.high_us)})"
            for n, tm in ran
        )
        svg = to_svg(fig, alt)
    return figure_html(svg, times, f"Forward time at {shape.text()} (forward_times).")


def speed_memory_claim(m: Measurement) -> str:
    """What fusion saved in memory, and what only SDPA's tiling removes."""
    rows = {r["variant"]: r for r in m.tables["variants"].records()}
    eager, comp, sdpa = rows[fwd.NAIVE], rows[fwd.COMPILED], rows[_sdpa(m)]
    matrix = fmt.nbytes(m.facts["score_matrix_bytes"])
    text = (
        f"One N×N score matrix is {matrix} here. Eager attention peaks at "
        f"**{eager['peak_in_matrices']:.2f}** of them, the compiled graph at "
        f"**{comp['peak_in_matrices']:.2f}**: fusion removed the intermediate copies (scaled, "
        f"masked, the boolean mask) but the score matrix itself is still written by the first "
        f"matmul and read back by the fused softmax."
    )
    if comp["peak_in_matrices"] < 2:
        text += (
            " Less than two matrices at the peak means the probabilities never got a buffer of "
            "their own: Inductor wrote them over the scores, which were dead by then."
        )
    text += f" SDPA peaks at **{sdpa['peak_in_matrices']:.2f}**" + (
        " — it never holds the whole matrix."
        if sdpa["peak_in_matrices"] < 1
        else ": at this size its fixed working buffers outweigh one score matrix, which it "
        "still never holds whole."
    )
    if m.facts.get("sdpa_op"):
        text += f" (SDPA ran `{m.facts['sdpa_op']}` on this device.)"
    return text


def speed_claim(m: Measurement, times: Sourced | Measurement) -> str:
    """Compiled and SDPA against eager, and against each other, from forward_times."""
    t = _m(times)
    shape = shape_of(m)
    sdpa = _sdpa(m)
    return (
        f"At this shape, {cmp.speedup(t, fwd.COMPILED, fwd.NAIVE, shape)}; "
        f"{cmp.speedup(t, sdpa, fwd.NAIVE, shape)}; and "
        f"{cmp.speedup(t, sdpa, fwd.COMPILED, shape)}."
    )


def size_note(m: Measurement) -> str:
    """The shape this chapter measured at, and what that size measures on this device."""
    shape = shape_of(m)
    matrix = shape.batch_size * shape.num_heads * shape.seq_len**2 * itemsize(shape.dtype)
    text = (
        f"This chapter's experiments run at {shape.text()}: one N×N score matrix is "
        f"{fmt.nbytes(matrix)}."
    )
    if m.device_kind == "cuda":
        return text + (
            " On a GPU this is a prefill-sized attention layer: each element-wise pass that "
            "fusion removes would read and write that matrix in the GPU's memory."
        )
    return text + (
        " On a CPU the size is kept small so that the chapter (three compiles included) "
        "builds in minutes; a GPU build runs a prefill-sized layer instead."
    )
