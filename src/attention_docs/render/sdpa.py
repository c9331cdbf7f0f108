# Renderers for the scaled_dot_product_attention chapter: the pinned-backend comparison,
# the "why this backend?" verdicts, what this torch offers to change the choice, and the
# mask variants, with the sentences whose numbers come from those measurements. A backend's
# forward time and "N× faster" come from `forward_times` (render.compare), never from these
# experiments. Pure: no torch, no I/O.
from __future__ import annotations

from dataclasses import replace

from attention_docs.analytic.cost import itemsize
from attention_docs.findings.compare import compare
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.timing import Timing
from attention_docs.render import words as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.compare import forward_table, speedup
from attention_docs.render.figures import SERIES_COLORS
from attention_docs.render.tables import markdown_table
from attention_docs.render.timeline import DEFAULT_SETTINGS, timeline_figure

STATUS_MARKS = {
    "chosen": "**chosen**",
    "eligible": "runs",
    "rejected": "✗ refused",
    "not available": "unavailable",
}
TIMELINE_COLORS = (("attention.sdpa", SERIES_COLORS[0]),)


def _code(text: str | None) -> str:
    return f"`{text}`" if text else "—"


def _num(value, formatter) -> str:
    return "—" if value is None else formatter(value)


def _available_rows(m: Measurement) -> list[dict]:
    return [r for r in m.tables["backends"].records() if r["ops_per_call"] is not None]


def implementation(backend: str) -> str:
    """The forward-time table's name for an SDPA backend (`flash` -> `SDPA flash`)."""
    return f"SDPA {backend}"


def backend_table(sourced: Sourced) -> str:
    """One row per backend pinned: status, ops (and kernels) per call, profiled CPU-side time,
    peak memory. Forward times are `backend_times`' (from forward_times), not this table's."""
    m = sourced.measurement
    gpu = m.device_kind == "cuda"
    header = ["Backend", "Status", "ATen ops / call"]
    header += ["Kernels / call"] if gpu else []
    header += ["CPU-side time (profiled)", "Peak memory"]
    rows = []
    for r in m.tables["backends"].records():
        row = [
            f"`{r['backend']}`",
            STATUS_MARKS.get(r["status"], r["status"]),
            _num(r["ops_per_call"], lambda x: f"{x:g}"),
        ]
        if gpu:
            row.append(_num(r["kernels_per_call"], lambda x: f"{x:g}"))
        row += [_num(r["cpu_us"], fmt.time_us), _num(r["peak_bytes"], fmt.nbytes)]
        rows.append(row)
    align = "ll" + "r" * (len(header) - 2)
    return (
        markdown_table(header, rows, align)
        + "\n\n"
        + caption_html(sourced, "Each SDPA backend pinned with sdpa_kernel.")
    )


def backend_times(times: Sourced, backends: Sourced) -> str:
    """Each backend's unprofiled forward time at the pinned experiment's shape, against
    `math`, from the site's one forward-time table."""
    m = backends.measurement
    shape = fwd.Shape.of(m.params)
    names = [implementation(r["backend"]) for r in m.tables["backends"].records()]
    return (
        forward_table(times, names, shape, baseline=implementation("math"))
        + "\n\n"
        + caption_html(times, f"Forward time per backend at {shape.text()}.")
    )


def sdpa_timeline(sourced: Sourced) -> str:
    """The timeline of one SDPA call left free to choose, its range in colour."""
    settings = replace(
        DEFAULT_SETTINGS,
        colors=TIMELINE_COLORS,
        title="Timeline of one SDPA call.",
        xlabel="time since the start of the call (µs)",
    )
    return timeline_figure(sourced, settings)


def unavailable_backends(sourced: Sourced) -> str:
    """A bullet per backend that could not run here, with the reason."""
    m = sourced.measurement
    lines = [f"- {note}" for note in m.notes]
    return "\n".join(lines) if lines else "Every backend ran on this device."


def backend_ops_table(sourced: Sourced) -> str:
    """The most expensive ops (and kernels) each pinned backend dispatched, per call."""
    m = sourced.measurement
    records = m.tables["backend_ops"].records()
    gpu = any(r["where"] == "GPU" for r in records)
    rows = [
        [
            f"`{r['backend']}`",
            _code(r["name"]),
            *([r["where"]] if gpu else []),
            f"{r['calls']:g}",
            fmt.time_us(r["self_us"]),
        ]
        for r in records
    ]
    header = ["Backend", "Op or kernel", *(["Where"] if gpu else []), "Calls", "Self time"]
    return (
        markdown_table(header, rows, "ll" + ("l" if gpu else "") + "rr")
        + "\n\n"
        + caption_html(sourced, "Top ops per pinned backend.")
    )


def backend_claims(m: Measurement, times: Sourced | Measurement) -> str:
    """Which backend SDPA chose, and how it compares with math: time from forward_times,
    ops and memory from the pinned runs."""
    rows = {r["backend"]: r for r in _available_rows(m)}
    chosen = m.facts.get("chosen")
    lines = [f"Left to choose, SDPA dispatches to **`{chosen}`** (`{m.facts.get('chosen_op')}`)."]
    if chosen in rows and "math" in rows and chosen != "math":
        c, base = rows[chosen], rows["math"]
        faster = speedup(
            times, implementation(chosen), implementation("math"), fwd.Shape.of(m.params)
        )
        lines.append(
            f"Without the profiler, {faster}. Pinned, `{chosen}` dispatches "
            f"{c['ops_per_call']:g} ATen ops instead of {base['ops_per_call']:g}, and peaks at "
            f"{fmt.nbytes(c['peak_bytes'])} of memory instead of {fmt.nbytes(base['peak_bytes'])} "
            f"(**{base['peak_bytes'] / max(c['peak_bytes'], 1):.2g}×** less)."
        )
    missing = [r["backend"] for r in m.tables["backends"].records() if r["ops_per_call"] is None]
    if missing:
        names = ", ".join(f"`{b}`" for b in missing)
        lines.append(f"{names} could not run on this device (see below).")
    return " ".join(lines)


def priority_claim(m: Measurement) -> str:
    """What this torch offers to change SDPA's choice, as the measurement recorded it."""
    f = m.facts
    where = "this GPU" if m.device_kind == "cuda" else "this CPU"
    parts = []
    order = f.get("sdpa_priority")
    if order:
        parts.append(
            f"This torch ({f.get('torch_version')}) reports SDPA's priority order, read after "
            f"a call on {where}, as "
            + " → ".join(f"`{b}`" for b in order)
            + " (`torch._C._get_sdp_priority_order()`, a private function)."
        )
    if f.get("set_priority_supported"):
        chose = f.get("set_priority_math_first")
        follows = (
            "so its selector follows the order"
            if chose == "math"
            else "so its selector does not follow that order: it has a fixed one of its own"
        )
        parts.append(
            f"`sdpa_kernel(backends, set_priority=True)` reorders it. Asked to try `math` "
            f"first with every backend allowed, SDPA on {where} dispatched to `{chose}`, {follows}."
        )
    elif "set_priority_supported" in f:
        parts.append("This torch's `sdpa_kernel` has no `set_priority` argument.")
    impls = f.get("flash_impls")
    if impls:
        active = f.get("flash_impl_active")
        parts.append(
            "`torch.nn.attention.list_flash_attention_impls()` lists "
            + ", ".join(f"`{i}`" for i in impls)
            + ": other implementations of the `flash` backend that "
            "`activate_flash_attention_impl(name)` switches it to "
            + (
                f"(`{active}` was active in this run)."
                if active
                else "(none was active in this run)."
            )
            + " Whether they run on a device was not measured here."
        )
    elif "flash_impls" in f:
        parts.append("This torch has no `list_flash_attention_impls()`: one flash implementation.")
    return " ".join(parts)


def math_score_bytes(m: Measurement) -> str:
    """The size of one N×N score matrix at the measured shape, for comparison with math's peak."""
    p = m.params
    n = p["batch_size"] * p["num_heads"] * p["seq_len"] * p["seq_len"] * itemsize(p["dtype"])
    return (
        f"At this shape one `seq_len × seq_len` score matrix for all heads is {fmt.nbytes(n)} "
        f"in {p['dtype']}."
    )


def why_matrix(sourced: Sourced) -> str:
    """Variants × backends: which one SDPA picks, which run when pinned, which refuse."""
    table = sourced.measurement.tables["verdicts"]
    backends = list(dict.fromkeys(table.column("backend")))
    variants: dict[str, dict] = {}
    for r in table.records():
        entry = variants.setdefault(r["variant"], {"row": r, "cells": {}, "chosen": None})
        entry["cells"][r["backend"]] = STATUS_MARKS.get(r["status"], r["status"])
        if r["status"] == "chosen":
            entry["chosen"] = r["backend"]
    header = ["Variant", "SDPA picks", *(f"`{b}`" for b in backends)]
    rows = []
    for name, e in variants.items():
        r = e["row"]
        label = name
        if name == "baseline":
            label = f"baseline: {r['dtype']}, head_dim {r['head_dim']}, no mask"
        rows.append(
            [
                label,
                f"`{e['chosen']}`" if e["chosen"] else "—",
                *(e["cells"].get(b, "—") for b in backends),
            ]
        )
    return (
        markdown_table(header, rows, "ll" + "l" * len(backends))
        + "\n\n"
        + caption_html(sourced, "Why this backend? Each backend pinned, per input variant.")
    )


def why_reasons(sourced: Sourced) -> str:
    """Each distinct refusal: the backend, the variants it refused, and torch's reason."""
    table = sourced.measurement.tables["verdicts"]
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for r in table.records():
        if r["status"] in ("rejected", "not available"):
            grouped.setdefault((r["backend"], r["status"], r["reason"]), []).append(r["variant"])
    all_variants = list(dict.fromkeys(table.column("variant")))
    rows = []
    for (backend, status, reason), names in grouped.items():
        which = "all" if names == all_variants else ", ".join(names)
        rows.append([f"`{backend}`", STATUS_MARKS[status], which, reason])
    if not rows:
        return "No backend refused any variant on this device."
    return (
        markdown_table(["Backend", "Verdict", "Variants", "Reason (torch's words)"], rows, "llll")
        + "\n\n"
        + caption_html(sourced, "Why the others were not picked.")
    )


def why_claims(m: Measurement) -> str:
    """Which variants change SDPA's choice from the baseline's."""
    picks = {
        r["variant"]: r["backend"]
        for r in m.tables["verdicts"].records()
        if r["status"] == "chosen"
    }
    baseline = picks.get("baseline")
    changed = [f"{v} (→ `{b}`)" for v, b in picks.items() if b != baseline]
    same = [v for v, b in picks.items() if b == baseline and v != "baseline"]
    text = f"For the baseline SDPA picks **`{baseline}`**."
    if changed:
        text += " The choice changes for: " + ", ".join(changed) + "."
    if same:
        text += f" It stays `{baseline}` for: " + ", ".join(same) + "."
    return text


def _mask_timing(r: dict) -> Timing:
    return Timing(
        median_us=r["time_us"],
        iqr_us=0.0,
        runs=0,
        method="",
        rounds_us=(r["time_low_us"], r["time_us"], r["time_high_us"]),
    )


def versus_causal(base: dict, r: dict) -> str:
    """A mask variant's time against `is_causal`'s, with its range over the rounds, or a tie."""
    c = compare(_mask_timing(base), _mask_timing(r))
    if c.tie:
        return f"within noise ({c.ratio:.2f}×)"
    return f"{c.ratio:.2f}× ({c.low:.2f}–{c.high:.2f}×)"


def mask_table(sourced: Sourced) -> str:
    """Causal attention asked for in several ways: backend, mask bytes, memory, time against
    is_causal (interleaved rounds), error against float64."""
    m = sourced.measurement
    records = m.tables["masks"].records()
    base = records[0]
    rows = []
    for r in records:
        err = r["max_abs_error"]
        rows.append(
            [
                r["mask"],
                f"`{r['backend']}`",
                fmt.nbytes(r["mask_bytes"]) if r["mask_bytes"] else "none",
                fmt.nbytes(r["peak_bytes"]),
                "1 (baseline)" if r is base else versus_causal(base, r),
                "NaN" if err is None else f"{err:.1e}",
            ]
        )
    header = [
        "Causal mask given as",
        "Backend",
        "Mask tensor",
        "Peak memory",
        "Time ÷ is_causal's",
        "Max error",
    ]
    return (
        markdown_table(header, rows, "llrrrr")
        + "\n\n"
        + caption_html(
            sourced,
            "One causal attention, four ways of asking for it; times in interleaved rounds, "
            "without the profiler.",
        )
    )


def mask_claims(m: Measurement) -> str:
    """What the explicit masks cost over is_causal, and what the wrong polarity does."""
    rows = m.tables["masks"].records()
    causal, keep, add, wrong = rows[0], rows[1], rows[2], rows[3]
    lines = [
        f"`is_causal=True` needs no mask tensor and peaks at {fmt.nbytes(causal['peak_bytes'])}. "
        f"The boolean mask is {fmt.nbytes(keep['mask_bytes'])} and the call peaks at "
        f"{fmt.nbytes(keep['peak_bytes'])} "
        f"({keep['peak_bytes'] / max(causal['peak_bytes'], 1):.2g}× `is_causal`); the float "
        f"mask is {fmt.nbytes(add['mask_bytes'])} by itself, "
        f"{add['mask_bytes'] / max(keep['mask_bytes'], 1):.2g}× the boolean one. Against "
        f"`is_causal`'s time, the boolean mask takes {versus_causal(causal, keep)} and the "
        f"float mask {versus_causal(causal, add)}."
    ]
    for r in (keep, add):
        if r["prep_ops"] != "none":
            ops = ", ".join(f"`{o}`" for o in r["prep_ops"].split(", "))
            lines.append(
                f"Before its kernel runs, SDPA turns the {r['mask'].split(',')[0]} mask into an "
                f"additive one with {ops}: a new `seq_len × seq_len` tensor on every call."
            )
    err = wrong["max_abs_error"]
    bad = "NaN" if err is None else f"{err:.2g}"
    lines.append(
        f"With `masked_fill`'s polarity (True = hide) the call runs without a complaint and "
        f"returns attention to the *future* instead: the largest error against the float64 "
        f"causal reference is **{bad}**, against {keep['max_abs_error']:.1e} for the right one"
        + (f", and {wrong['nan_rows']} rows are NaN." if wrong["nan_rows"] else ".")
    )
    return " ".join(lines)


def empty_row_claim(m: Measurement) -> str:
    """What each implementation returned for the query row the wrong mask hides entirely,
    for the backends and the device the measurement checked."""
    rows = m.tables["empty_row"].records()
    device = "this GPU" if m.device_kind == "cuda" else "this CPU"
    ran = [r for r in rows if r["empty_row"] != "did not run"]
    skipped = [r for r in rows if r["empty_row"] == "did not run"]
    by_result: dict[str, list[str]] = {}
    for r in ran:
        by_result.setdefault(r["empty_row"], []).append(r["implementation"])
    said = "; ".join(
        f"{' and '.join(names)} returned {result}" for result, names in by_result.items()
    )
    text = (
        f"With the wrong polarity the last query has no key left to look at. Measured on "
        f"{device}: {said}."
    )
    if skipped:
        reasons = dict.fromkeys(r["why_not_run"] for r in skipped)
        text += (
            " "
            + " and ".join(r["implementation"] for r in skipped)
            + " did not run here ("
            + "; ".join(reasons)
            + "), so this page says nothing about them."
        )
    sdpa = [r for r in ran if r["implementation"].startswith("SDPA")]
    if sdpa and all(r["empty_row"] == "zeros" for r in sdpa):
        text += (
            " On the SDPA backends that ran, the wrong mask does not even leave a NaN to notice."
        )
    return text
