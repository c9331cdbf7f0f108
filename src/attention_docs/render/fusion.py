# Renderers for the fusion chapter (torch.compile on naive attention). Forward times and
# ratios come from `forward_times` (render.compare), compiles, break-evens, work and peaks
# (SDPA's from `sdpa_backends`) from findings/compile.py; every number is a fact. Pure.
from __future__ import annotations

import html

from attention_docs.analytic.gpu import FORECAST_GPU, FORECAST_SHAPE, sheet
from attention_docs.findings import compile as fcompile
from attention_docs.findings import forward as ffwd
from attention_docs.findings.forecast import measured_on
from attention_docs.findings.model_check import NAIVE_KINDS
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.shape import Shape
from attention_docs.render import claims, words
from attention_docs.render import compare as cmp
from attention_docs.render.caption import on_one_device
from attention_docs.render.forecast import forecast_box
from attention_docs.render.tables import captioned_table

NEVER = {fcompile.TIE: "never: within noise", fcompile.SLOWER: "never: compiled is slower"}
NEVER_SAID = {fcompile.TIE: "at this shape", fcompile.SLOWER: "(the compiled forward is slower)"}


def _repaid(m: Measurement, times: Measurement, label: str) -> str:
    took = fcompile.compile_time(m, label)
    b = fcompile.break_even(took, times, fwd.COMPILED, fwd.NAIVE, Shape.of(m.params))
    return NEVER[b.never] if b.forwards is None else words.fact(b.forwards)


@on_one_device
def finding(kernels: Sourced, times: Sourced, backends: Measurement) -> str:
    """The chapter's opening: what compiling bought here; the compile's cost, the N×N matrix
    it keeps and what fusion saves on the forecast GPU go in its caption."""
    fk, t = kernels.measurement, times.measurement
    shape = Shape.of(fk.params)
    where = "this GPU" if fk.device_kind == "cuda" else "this CPU"
    cold, repaid, (compiled_peak, sdpa, sdpa_peak) = _costs(fk, t, backends)
    saved = fcompile.bytes_saved(sheet(FORECAST_GPU), FORECAST_SHAPE)
    speedup = cmp.speedup(t, fwd.COMPILED, fwd.NAIVE, shape, with_spread=False)
    detail = (
        f"Unprofiled, {cmp.speedup(t, fwd.COMPILED, fwd.NAIVE, shape)}. The cold compile took "
        f"{words.fact(cold)}, {repaid}. Fusion keeps the N×N matrix: the compiled forward peaks "
        f"at {compiled_peak}, {sdpa} at {sdpa_peak}. On an {sheet(FORECAST_GPU).label} at "
        f"{FORECAST_SHAPE.text()}, fusing scale, mask and softmax spares {words.fact(saved)} of "
        "HBM traffic per forward (a forecast from the data sheet)."
    )
    return claims.opening(
        f"On {where}, at seq_len {shape.seq_len:,}, {speedup}.", kernels, detail, times
    )


def _costs(fk: Measurement, t: Measurement, backends: Measurement) -> tuple:
    """The cold compile, when it is repaid (words), and the peaks of the compiled forward and
    of SDPA's backend (words): what the finding and the chapter's advice both state."""
    peaks = fcompile.peaks(fk, backends)
    compiled, sdpa = next(p for p in peaks if p.implementation == fwd.COMPILED), peaks[-1]
    cold = fcompile.compile_time(fk, "cold")
    b = fcompile.break_even(cold, t, fwd.COMPILED, fwd.NAIVE, Shape.of(fk.params))
    repaid = (
        f"repaid after {words.fact(b.forwards)}"
        if b.forwards
        else f"never repaid {NEVER_SAID[b.never]}"
    )
    return cold, repaid, (words.fact(compiled.peak), sdpa.implementation, words.fact(sdpa.peak))


def what_to_do(fk: Measurement, times: Measurement, backends: Measurement) -> str:
    """What fusion's numbers mean for your own attention, each action backed by the page."""
    cold, repaid, (compiled_peak, sdpa, sdpa_peak) = _costs(fk, times, backends)
    return claims.what_to_do(
        f"Compile what runs many times, and time it warm: the cold compile took "
        f"{words.fact(cold)} here, {repaid}.",
        "Keep shapes steady, or mark the ones that vary with `dynamic=True`: a new length "
        "fails a guard and compiles again (the table above).",
        f"For attention itself, call SDPA rather than compiling the naive code: the compiled "
        f"forward still peaks at {compiled_peak}, {sdpa} at {sdpa_peak}.",
    )


def work_table(sourced: Sourced, which: str) -> str:
    """The work per forward, `which` = "eager" (ops, by step) or "compiled" (kernels, with the
    steps each one does): calls counted, time profiled."""
    rows = []
    for r, calls, time in fcompile.work(sourced.measurement, which):
        steps = r["step"] if which == "eager" else r["steps"]
        name = f"`{r['name'][:69]}`" + (f"<br>*{r['kind']}*" if which == "compiled" else "")
        rows.append([
            name,
            "<br>".join(f"`{s.strip()}`" for s in steps.split(",")) if steps != "—" else "—",
            calls,
            time,
        ])  # fmt: skip
    header = ["Op or kernel", "Steps it does", "Calls", "Time / forward (profiled)"]
    what = f"{which.capitalize()}: the work per forward."
    return captioned_table(header, rows, "llrr", sourced, what)


def ranges_note(m: Measurement) -> str:
    """What became of the five record_function ranges under torch.compile."""
    f = m.facts
    kept = f["step_ranges_in_compiled_trace"]
    text = f"The compiled trace holds **{kept} of the five** `attention.*` ranges."
    if f.get("record_function_warning"):
        text += f" While tracing, torch {f['torch_version']} logged: *{html.escape(f['record_function_warning'])}*."
    wrappers = [f"`{w.removesuffix(' ##').strip()[:47]}`" for w in f.get("compiled_wrappers") or []]
    if wrappers:
        text += f" The trace shows torch.compile's own wrappers instead: {words.series(wrappers)}."
    return text


@on_one_device
def compile_table(sourced: Sourced, times: Sourced) -> str:
    """Cold and warm compile: first-call time, cache hits, and the forwards that repay it;
    and what a new process pays once before either, importing the compiler."""
    m, t = sourced.measurement, times.measurement
    what = {"cold": "cold: empty cache folders", "warm": "warm: same folders, Dynamo reset"}
    rows = [
        [what[r["compile"]], words.fact(fcompile.compile_time(m, r["compile"])),
         f"{r['cache_hits']} / {r['cache_misses']}", f"{r['aot_cache_hits']} / {r['aot_cache_misses']}",
         _repaid(m, t, r["compile"])]
        for r in m.tables["compiles"].records()
    ]  # fmt: skip
    took = fcompile.import_time(m)
    if took is not None:
        rows.append(
            ["before either, once per process: import Dynamo and Inductor", took, "—", "—", "—"]
        )
    header = ["Compile", "First call (unprofiled)", "FX graph cache hit / miss",
              "AOTAutograd cache hit / miss", "Repaid after (forward_times)"]  # fmt: skip
    caption = f"The first call of {fcompile.COMPILED_FN}, twice" + (
        "; Inductor's precompiled C++ headers were already on disk."
        if m.facts.get("precompiled_headers_before") else "."
    )  # fmt: skip
    return captioned_table(header, rows, "lrrrl", sourced, caption)


def recompile_table(sourced: Sourced) -> str:
    """Each call of the recompile experiment: shape, wall time, graphs compiled, cache use."""
    m = sourced.measurement
    rows = [
        [r["call"], str(r["seq_len"]), first, str(r["new_graphs"]),
         f"{r['fx_cache_hits']} / {r['fx_cache_misses']}"]
        for r, first in zip(m.tables["calls"].records(), fcompile.recompile_times(m), strict=True)
    ]  # fmt: skip
    header = ["Call", "seq_len", "Wall time (unprofiled)", "New graphs", "FX cache hit / miss"]
    what = "Calls in order, in one fresh process."
    return captioned_table(header, rows, "lrrrr", sourced, what)


def recompile_claim(m: Measurement) -> str:
    """The guard that failed, and what Dynamo does after too many recompiles."""
    f = m.facts
    text = f"Changing `seq_len` from {f['first_seq_len']} to {f['second_seq_len']} failed a guard"
    text += (
        f", recorded by Dynamo as `{f['guard_failures'][0]}`." if f.get("guard_failures") else "."
    )
    if f.get("recompile_limit"):
        text += (f" After {f['recompile_limit']} recompiles of one function "
                 "(`torch._dynamo.config.recompile_limit`) Dynamo stops compiling it and runs it eagerly.")  # fmt: skip
    return text


def speed_memory_table(sourced: Sourced, times: Sourced, backends: Sourced) -> str:
    """Eager, compiled and SDPA: forward time and speed against eager (forward_times), peak
    memory (this experiment; SDPA's from sdpa_backends) and that peak in N×N matrices."""
    m, t = sourced.measurement, times.measurement
    shape = Shape.of(m.params)
    rows = []
    for p in fcompile.peaks(m, backends.measurement):
        name = p.implementation
        v = ffwd.versus(t, name, fwd.NAIVE, shape) if name != fwd.NAIVE else None
        rows.append(
            [name, cmp.forward_time(t, name, shape), cmp.versus_cell(v), p.peak, p.matrices]
        )
    header = ["Implementation", "Forward time (unprofiled)", f"vs {fwd.NAIVE}",
              "Peak memory (counted)", "Peak ÷ one N×N"]  # fmt: skip
    what = (
        "Times: forward_times' rows (unprofiled, in interleaved rounds). Peak memory of one "
        "forward: fusion_kernels' for eager and compiled, sdpa_backends' for the backend SDPA "
        "picks by itself at this shape."
    )
    return captioned_table(header, rows, "lrrrr", sourced, what)


def fusion_forecast(each_device: list[Sourced]) -> str:
    """What fusing the element-wise steps saves on the forecast GPU: their HBM bytes and the
    time those take at the data sheet's bandwidth, and the forward's floor eager and compiled
    (beside the GPU's stored forward times, when there are any)."""
    gpu, shape = sheet(FORECAST_GPU), FORECAST_SHAPE
    f = fcompile.fusion_forecast(gpu, shape, measured_on(each_device, gpu))
    labels = (
        f"HBM bytes of scale, mask, softmax: eager ({f.elementwise_kernels} kernels)",
        "… fused into one kernel (compiled)",
        "Their floor time saved, at the HBM bandwidth",
        f"Forward floor, eager ({f.naive_kernels} kernels, as the code records them)",
        "Forward floor, compiled (2 matmuls + 1 fused kernel)",
    )
    return forecast_box(
        gpu,
        list(zip(labels, f.checks, strict=True)),
        shape=shape,
        lead=f"On an {gpu.label} the three element-wise passes do almost no arithmetic per byte, "
        "so each is bound by HBM bandwidth: what fusion saves there is their bytes.",
        model="The fused kernel reads the scores once and writes the probabilities once.",
        floors=True,
        sources=f.sources,
        kinds=NAIVE_KINDS,
    )
