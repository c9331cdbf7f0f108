# Renderers for the fusion chapter (torch.compile on naive attention): the work before and
# after fusion, compile and recompile costs, speed and memory next to eager and SDPA. Every
# number in a sentence comes from the Measurement. Pure: no torch, no I/O.
from __future__ import annotations

import html

from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.render import _format as fmt
from attention_docs.render.caption import caption_html
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


def _cache_text(hits: int, misses: int) -> str:
    if misses and not hits:
        return (
            "a miss in Inductor's on-disk FX graph cache, so Inductor generated and compiled code"
        )
    if hits and not misses:
        return (
            "a hit in Inductor's on-disk FX graph cache (an earlier process compiled the "
            "same graph), so Dynamo still traced but Inductor reused compiled code"
        )
    return f"{hits} FX graph cache hit(s) and {misses} miss(es)"


def compile_cost(m: Measurement) -> str:
    """The first call's cost in a fresh process, and the cache state that explains it."""
    f = m.facts
    speedup = f["eager_time_us"] / f["compiled_time_us"] if f.get("compiled_time_us") else None
    calls = f["cold_compile_s"] * 1e6 / f["compiled_time_us"] if speedup else None
    text = (
        f"The first call in this fresh worker process took **{f['cold_compile_s']:.1f} s**: "
        f"{_cache_text(f['compile_cache_hits'], f['compile_cache_misses'])}. After that, one "
        f"forward takes {fmt.time_us(f['compiled_time_us'])} against "
        f"{fmt.time_us(f['eager_time_us'])} eager"
    )
    if speedup and speedup > 1:
        saved = f["eager_time_us"] - f["compiled_time_us"]
        text += (
            f" ({speedup:.2f}× faster). The compile pays for itself after about "
            f"**{f['cold_compile_s'] * 1e6 / saved:,.0f} forwards** "
            f"(the compile alone is worth {calls:,.0f} compiled forwards)."
        )
    else:
        text += "."
    return text


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


def speed_memory_table(sourced: Sourced) -> str:
    """Eager, compiled and SDPA: time per forward, speed-up, peak memory in score matrices."""
    m = sourced.measurement
    rows = [
        [
            r["variant"],
            fmt.time_us(r["time_us"]),
            f"{r['speedup_vs_eager']:.2f}×",
            fmt.nbytes(r["peak_bytes"]),
            f"{r['peak_in_matrices']:.2f}",
        ]
        for r in m.tables["variants"].records()
    ]
    header = ["Variant", "Time / forward", "Speed-up vs eager", "Peak memory", "Peak ÷ one N×N"]
    return (
        markdown_table(header, rows, "lrrrr")
        + "\n\n"
        + caption_html(sourced, "Speed and peak memory.")
    )


def speed_memory_claim(m: Measurement) -> str:
    """What fusion saved in time and memory, and what only SDPA's tiling removes."""
    rows = {r["variant"]: r for r in m.tables["variants"].records()}
    eager, comp, sdpa = rows["eager (naive)"], rows["torch.compile (naive)"], rows["SDPA"]
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


def speed_claim(m: Measurement) -> str:
    """Compiled and SDPA against eager, and against each other."""
    rows = {r["variant"]: r for r in m.tables["variants"].records()}
    comp, sdpa = rows["torch.compile (naive)"], rows["SDPA"]
    ratio = comp["time_us"] / sdpa["time_us"]
    versus = (
        f"SDPA is still **{ratio:.2f}×** faster than the compiled graph"
        if ratio > 1
        else f"the compiled graph even beats SDPA, by {1 / ratio:.2f}×"
    )
    return (
        f"Compiled, naive attention runs **{comp['speedup_vs_eager']:.2f}×** as fast as eager; "
        f"SDPA runs {sdpa['speedup_vs_eager']:.2f}× as fast — {versus}."
    )
