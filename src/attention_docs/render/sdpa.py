# Renderers for the scaled_dot_product_attention chapter. Forward times and speed-ups come
# from `forward_times` (render.compare), the backend each variant gets on a GPU from
# findings/sdpa.py; every number is a fact (render.words). Pure: no torch, no I/O.
from __future__ import annotations

from attention_docs.analytic import sdpa_dispatch as rules
from attention_docs.analytic.gpu import FORECAST_GPU, FORECAST_SHAPE, sheet
from attention_docs.findings import sdpa as fsdpa
from attention_docs.findings.forecast import measured_on
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.shape import Shape
from attention_docs.render import claims, words
from attention_docs.render.caption import caption_html
from attention_docs.render.compare import forward_table, speedup
from attention_docs.render.forecast import choice_box
from attention_docs.render.tables import captioned_table, markdown_table

STATUS_MARKS = {"chosen": "**chosen**", "eligible": "runs", "rejected": "✗ refused"}
STATUS_MARKS["not available"] = "unavailable"


def _where(m: Measurement) -> str:
    return "this GPU" if m.device_kind == "cuda" else "this CPU"


def finding(backends: Sourced, times: Sourced, why: Measurement) -> str:
    """The chapter's opening: the backend SDPA ran here and its speed against `math`; the
    peaks, the variants it picked it for and the GPU forecast go in its caption."""
    m = backends.measurement
    pinned = fsdpa.backends(m)
    chosen, shape = m.facts["chosen"], Shape.of(m.params)
    here, gpu = fsdpa.picks(why), fsdpa.forecast(sheet(FORECAST_GPU), why.params["big_head_dim"])
    default = gpu.picks("default order")
    peaks = ", ".join(
        f"SDPA {b} {words.fact(pinned[b].peak)}" for b in dict.fromkeys((chosen, "math"))
    )
    detail = (
        f"Forward time, unprofiled: {speedup(times, f'SDPA {chosen}', 'SDPA math', shape)}. "
        f"Peak memory: {peaks}. SDPA picked {chosen} for {fsdpa.tally(here, chosen)} of "
        f"{len(here)} input variants here; on an {gpu.gpu.label} torch's rules forecast flash "
        f"for {fsdpa.tally(default, 'flash')} of them "
        f"({fsdpa.tally(gpu.picks('cuDNN first'), 'flash')} when cuDNN comes first)."
    )
    fused = ", which never writes the N×N matrix" if chosen != "math" else ""
    return claims.opening(
        f"On {_where(m)} SDPA chose its **`{chosen}`** backend{fused}: "
        f"{speedup(times, f'SDPA {chosen}', 'SDPA math', shape, with_spread=False)}.",
        backends,
        detail,
        times,
    )


def backend_table(sourced: Sourced) -> str:
    """One row per backend pinned: status, ATen ops (and GPU kernels) per call, the costliest
    ones by name, peak memory; on a GPU the profiled CPU-side time of a call (the launches)."""
    m = sourced.measurement
    gpu = m.device_kind == "cuda"
    header = ["Backend", "Status", "ATen ops / call (counted)", "Costliest (profiled)"]
    header += ["Kernels / call", "CPU-side time / call (profiled)"] if gpu else []
    header += ["Peak memory (counted)"]
    top: dict[str, list[str]] = {}
    for r in m.tables["backend_ops"].records():
        top.setdefault(r["backend"], []).append(f"`{r['name'].removeprefix('aten::')}`")
    rows, pinned = [], fsdpa.backends(m)
    for r in m.tables["backends"].records():
        b = pinned[r["backend"]]
        row = [f"`{r['backend']}`", STATUS_MARKS.get(r["status"], r["status"]), b.ops]
        row += [", ".join(top.get(r["backend"], [])[:3]) or "—"]
        row += [b.kernels, b.cpu_time] if gpu else []
        rows.append([*row, b.peak])
    # The costliest ops are names, left-aligned so that a list wraps between them.
    align = "llrl" + "r" * (len(header) - 4)
    what = "Each SDPA backend pinned with sdpa_kernel."
    return captioned_table(header, rows, align, sourced, what)


def backend_times(times: Sourced, backends: Sourced) -> str:
    """Each backend's unprofiled forward time at the pinned experiment's shape, against
    `math`, from the site's one forward-time table."""
    m = backends.measurement
    shape = Shape.of(m.params)
    names = [f"SDPA {r['backend']}" for r in m.tables["backends"].records()]
    table = forward_table(times, names, shape, baseline="SDPA math")
    return f"{table}\n\n{caption_html(times, f'Forward time per backend at {shape.text()}.')}"


def priority_claim(m: Measurement) -> str:
    """What this torch offers to change SDPA's choice, as the measurement recorded it."""
    f, where = m.facts, _where(m)
    parts = []
    if f.get("sdpa_priority"):
        order = " → ".join(f"`{b}`" for b in f["sdpa_priority"])
        parts.append(
            f"This torch ({f['torch_version']}) reports SDPA's priority order on {where} as "
            f"{order} (`torch._C._get_sdp_priority_order()`, a private function)."
        )
    if f.get("set_priority_supported"):
        chose = f.get("set_priority_math_first")
        follows = "follows the order" if chose == "math" else "keeps a fixed order of its own"
        parts.append(
            f"`sdpa_kernel(backends, set_priority=True)` reorders it. Asked to try `math` first "
            f"with all allowed, SDPA on {where} dispatched to `{chose}`: its selector {follows}."
        )
    return " ".join(parts)


def _label(name: str, dtype: str, head_dim: int) -> str:
    return f"baseline: {dtype}, head_dim {head_dim}, no mask" if name == "baseline" else name


def why_matrix(sourced: Sourced) -> str:
    """Variants × backends: which one SDPA picks, which run when pinned, which refuse."""
    m = sourced.measurement
    table = m.tables["verdicts"]
    backends = list(dict.fromkeys(table.column("backend")))
    chosen, cells = fsdpa.picks(m), {}
    for r in table.records():
        cells.setdefault((r["variant"], r["dtype"], r["head_dim"]), {})[r["backend"]] = r["status"]
    rows = [
        [_label(*v), f"`{chosen[v[0]]}`" if chosen[v[0]] else "—"]
        + [STATUS_MARKS.get(c.get(b), "—") for b in backends]
        for v, c in cells.items()
    ]
    header = ["Variant", "SDPA picks", *(f"`{b}`" for b in backends)]
    what = "Why this backend? Each backend pinned, per input variant."
    return captioned_table(header, rows, "l" * len(header), sourced, what)


def why_reasons(sourced: Sourced) -> str:
    """Each distinct refusal: the backend, the variants it refused, and torch's reason."""
    table = sourced.measurement.tables["verdicts"]
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for r in table.records():
        if r["status"] in ("rejected", "not available"):
            grouped.setdefault((r["backend"], r["status"], r["reason"]), []).append(r["variant"])
    everything = list(dict.fromkeys(table.column("variant")))
    rows = [
        [f"`{b}`", STATUS_MARKS[status], "all" if names == everything else ", ".join(names), why]
        for (b, status, why), names in grouped.items()
    ]
    header = ["Backend", "Verdict", "Variants", "Reason (torch's words)"]
    what = "Why the others were not picked."
    return captioned_table(header, rows, "llll", sourced, what) if rows else "No refusals here."


def rules_table() -> str:
    """torch's CUDA dispatch rules, as analytic/sdpa_dispatch.py holds them (sm_80 and newer)."""
    rows = []
    for r in rules.CUDA_RULES.values():
        head = "any" if r.max_head_dim is None else f"≤ {r.max_head_dim}"
        if r.max_head_dim_hopper:
            head += f" (≤ {r.max_head_dim_hopper[0]} on sm_90, recent cuDNN)"
        # layout: the rule's own order
        for n in sorted(set(r.head_dim_multiple.values()), reverse=True):
            dtypes = " or ".join(d for d, k in r.head_dim_multiple.items() if k == n)
            head += f"; a multiple of {n} in {dtypes}"
        where = f"sm_{r.capability[0]}–sm_{r.capability[1]}" if r.capability else "any"
        mask = "yes" if r.attn_mask else "no"
        rows.append([f"`{r.backend}`", ", ".join(r.dtypes), head, mask, r.dropout, where])
    header = ["Backend", "dtypes", "head_dim", "attn_mask", "dropout", "GPUs"]
    caption = f"<strong>torch's rules, as data.</strong> Read from {rules.SOURCE}; not measured."
    return markdown_table(header, rows, "llllll") + f'\n\n<p class="ad-caption">{caption}</p>'


def _choice(c) -> str:
    said = "; ".join(f"`{b}`: {why}" for b, why in c.passed_over)
    return f"`{c.backend}`" + (f" ({said})" if said else "")


def dispatch_forecast(each_device: list[Sourced]) -> str:
    """The backend each variant gets on the forecast GPU by torch's rules (both priority
    orders), beside what a stored run on that GPU picked."""
    cast = fsdpa.forecast(sheet(FORECAST_GPU), each_device[0].measurement.params["big_head_dim"])
    gpu, there = cast.gpu, measured_on(each_device, cast.gpu)
    measured = fsdpa.picks(there) if there else None
    header = ["Variant", "Default order: flash first", "cuDNN ≥ 9.15.1: cudnn first"]
    header += [f"Measured on the {gpu.label}"] if measured else []
    rows = [
        [_label(name, i.dtype, i.head_dim), *(_choice(cast.choices[s][name]) for s in fsdpa.SCENARIOS)]
        + ([f"`{measured.get(name)}`"] if measured else [])
        for name, i in cast.variants
    ]  # fmt: skip
    lead = (f"The backend torch's rules pick on an {gpu.label} (sm_{gpu.capability}) for the same "
            f"variants in {FORECAST_SHAPE.dtype}, and why those tried before it refused.")  # fmt: skip
    model = "The rules: analytic/sdpa_dispatch.py; the order depends on the runtime cuDNN."
    return choice_box(gpu, header, rows, measured=bool(measured), lead=lead, model=model)


def mask_table(sourced: Sourced) -> str:
    """Causal attention asked for in several ways: backend, mask bytes, peak memory, time
    against is_causal's (interleaved rounds, unprofiled), error against float64."""
    m = sourced.measurement
    rows = [
        [x.mask, f"`{r['backend']}`", x.mask_bytes or "none", x.peak,
         words.versus_fact(*x.ratio) if x.ratio else "1 (baseline)", x.error or "NaN"]
        for r, x in zip(m.tables["masks"].records(), fsdpa.masks(m), strict=True)
    ]  # fmt: skip
    header = ["Causal mask given as", "Backend", "Mask tensor", "Peak memory (counted)",
              "Time ÷ is_causal's (unprofiled)", "Max error"]  # fmt: skip
    what = "One causal attention, four ways of asking for it."
    return captioned_table(header, rows, "llrrrr", sourced, what)


def what_to_do(backends: Measurement, times: Sourced, why: Measurement) -> str:
    """What SDPA's numbers mean for your own model, each action backed by the page."""
    chosen, shape = backends.facts["chosen"], Shape.of(backends.params)
    gpu = fsdpa.forecast(sheet(FORECAST_GPU), why.params["big_head_dim"])
    default = gpu.picks("default order")
    others = [name for name, b in default.items() if b != "flash"]
    return claims.what_to_do(
        f"Call SDPA and let it choose: here it ran `{chosen}`, and "
        f"{speedup(times, f'SDPA {chosen}', 'SDPA math', shape)}.",
        f"Check that your inputs keep the fast kernels: on an {gpu.gpu.label} torch's rules "
        f"send {words.series(others)} to other kernels than `flash` (the table above).",
        "Pass `is_causal=True` for a causal mask, not a tensor: no mask is read, and none "
        "can be upside down (the polarity warning above).",
    )


def mask_claims(m: Measurement) -> str:
    """What SDPA does to an explicit mask before its kernel runs, as the profile saw it."""
    return " ".join(
        f"Before its kernel runs, SDPA turns the {r['mask'].split(',')[0]} mask into an additive "
        f"one with {words.series(f'`{o}`' for o in r['prep_ops'].split(', '))}: a new "
        "`seq_len × seq_len` tensor on every call."
        for r in m.tables["masks"].records()[1:3]
        if r["prep_ops"] != "none"
    )


def empty_row_claim(m: Measurement) -> str:
    """What each implementation returned for the query row the wrong mask hides entirely."""
    rows = m.tables["empty_row"].records()
    by_result: dict[str, list[str]] = {}
    for r in rows:
        if r["empty_row"] != "did not run":
            by_result.setdefault(r["empty_row"], []).append(r["implementation"])
    said = "; ".join(f"{words.series(n)} returned {res}" for res, n in by_result.items())
    text = f"The last query has no key left to look at. Measured on {_where(m)}: {said}."
    if skipped := [r for r in rows if r["empty_row"] == "did not run"]:
        why = "; ".join(dict.fromkeys(r["why_not_run"] for r in skipped))
        text += f" {words.series(r['implementation'] for r in skipped)} did not run here ({why})."
    sdpa = {res for res, names in by_result.items() for n in names if n.startswith("SDPA")}
    if sdpa == {"zeros"}:
        text += " On the SDPA backends that ran, the wrong mask leaves not even a NaN to notice."
    return text
