# Renderers for "Naive attention, deeper": the mask-variant comparison, the dtype comparison
# and the step shares per shape, as tables, figures and sentences whose numbers come from
# the Measurement. Speed comparisons are ratios of unprofiled timings taken in interleaved
# rounds: a ratio whose rounds overlap is "within noise", never "N× faster".
from __future__ import annotations

from collections import defaultdict

from attention_docs.findings.compare import Comparison, compare
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.kernels import is_bookkeeping
from attention_docs.records.steps import MATMULS
from attention_docs.records.timing import Timing
from attention_docs.render import words as fmt
from attention_docs.render.caption import caption_html
from attention_docs.render.figures import INK, MUTED, SERIES_COLORS, figure_html, new_figure, to_svg
from attention_docs.render.tables import markdown_table

BASELINE = "rebuild"
APOSTROPHE_S = "'s"


def ratio_text(c: Comparison) -> str:
    """`0.42× (0.40–0.45×)` or `within noise (0.98×)`, to three significant figures (a ratio
    here can be far from 1)."""
    if c.tie:
        return f"within noise ({c.ratio:.3g}×)"
    return f"{c.ratio:.3g}× ({c.low:.3g}–{c.high:.3g}×)"


def _timing(r: dict, prefix: str) -> Timing:
    median, low, high = r[f"{prefix}_us"], r[f"{prefix}_low_us"], r[f"{prefix}_high_us"]
    return Timing(median, 0.0, 0, "", (low, median, high))


def _vs_baseline(m: Measurement, prefix: str) -> dict[str, Comparison]:
    """Each variant's unprofiled time against `rebuild`'s: ratio = variant ÷ rebuild."""
    rows = {r["variant"]: r for r in m.tables["variants"].records()}
    base = _timing(rows[BASELINE], prefix)
    return {v: compare(base, _timing(r, prefix)) for v, r in rows.items() if v != BASELINE}


def mask_variants_table(sourced: Sourced) -> str:
    """Per variant: the mask step's and the forward's unprofiled time against `rebuild`'s,
    what the mask step allocates, and what is kept between calls."""
    m = sourced.measurement
    mask, forward = _vs_baseline(m, "mask"), _vs_baseline(m, "forward")
    rows = []
    for r in m.tables["variants"].records():
        v = r["variant"]
        rows.append(
            [
                f"`{v}`",
                "1× (baseline)" if v == BASELINE else ratio_text(mask[v]),
                "1× (baseline)" if v == BASELINE else ratio_text(forward[v]),
                f"{r['mask_allocations']:g}",
                fmt.nbytes(r["mask_allocated_bytes"]),
                fmt.nbytes(r["prepared_bytes"]),
            ]
        )
    header = [
        "Variant",
        f"Mask step ÷ `{BASELINE}`'s",
        f"Forward ÷ `{BASELINE}`'s",
        "Allocations in the step",
        "Allocated in the step",
        "Kept between calls",
    ]
    what = (
        f"Mask variants. Times: unprofiled, in {_rounds(m)} interleaved rounds, each variant's "
        f"median ÷ {BASELINE}'s (in brackets: the rounds' least and most favourable "
        f"readings); allocations: from the profiler, per forward."
    )
    return markdown_table(header, rows, "lrrrrr") + "\n\n" + caption_html(sourced, what)


def _rounds(m: Measurement) -> int:
    method = str(m.facts.get("timing_method", ""))
    digits = [w for w in method.split() if w.isdigit()]
    return int(digits[0]) if digits else 3


def _ratio_phrase(v: str, c: Comparison, what: str) -> str:
    if c.tie:
        return f"`{v}`'s {what} is within noise of `{BASELINE}`'s ({c.ratio:.3g}×)"
    return f"`{v}`'s {what} takes {ratio_text(c)} the time of `{BASELINE}`'s"


def mask_variants_claim(m: Measurement) -> str:
    """How each variant's mask step and forward compare with rebuilding the mask, and what
    each one allocates in the step."""
    rows = {r["variant"]: r for r in m.tables["variants"].records()}
    matrix = m.facts["matrix_bytes"]
    mask, forward = _vs_baseline(m, "mask"), _vs_baseline(m, "forward")
    fastest = min(rows.values(), key=lambda r: r["mask_us"])["variant"]
    ties = (
        [
            v
            for v in rows
            if v != fastest
            and compare(_timing(rows[fastest], "mask"), _timing(rows[v], "mask")).tie
        ]
        if fastest in rows
        else []
    )
    lead = f"Timed without the profiler, the cheapest mask step is `{fastest}`'s"
    lead += (
        f", within noise of {' and '.join(f'`{v}`' + APOSTROPHE_S for v in ties)}."
        if ties
        else ", beyond the noise of every other variant's."
    )
    alloc = ", ".join(f"`{v}` {r['mask_allocated_bytes'] / matrix:.2f}" for v, r in rows.items())
    return (
        f"{lead} Against rebuilding the mask on every call: "
        + "; ".join(_ratio_phrase(v, c, "mask step") for v, c in mask.items())
        + ". For the whole forward: "
        + "; ".join(_ratio_phrase(v, c, "forward") for v, c in forward.items())
        + f". Bytes allocated inside the step, in units of one N×N score matrix "
        f"({fmt.nbytes(matrix)}): {alloc}."
    )


def mask_variants_svg(m: Measurement) -> str:
    """Horizontal bars: each variant's mask step ÷ `rebuild`'s, with the rounds' range as
    an error bar; a bar whose range crosses 1 is drawn hatched, a tie."""
    mask = _vs_baseline(m, "mask")
    names = [BASELINE, *mask]
    values = [1.0, *(c.ratio for c in mask.values())]
    lows = [0.0, *(c.ratio - c.low for c in mask.values())]
    highs = [0.0, *(c.high - c.ratio for c in mask.values())]
    alt = [f"Mask step time of each variant divided by {BASELINE}'s, unprofiled."]
    with new_figure(7.0, 0.8 + 0.4 * len(names)) as fig:
        ax = fig.add_subplot()
        for i, name in enumerate(names):
            tie = name == BASELINE or mask[name].tie
            ax.barh(
                [i],
                [values[i]],
                color="none" if tie else SERIES_COLORS[i % len(SERIES_COLORS)],
                edgecolor=SERIES_COLORS[i % len(SERIES_COLORS)],
                hatch="//" if tie and name != BASELINE else None,
            )
            if name != BASELINE:
                ax.errorbar(
                    [values[i]], [i], xerr=[[lows[i]], [highs[i]]], fmt="none", color=INK, capsize=3
                )
                c = mask[name]
                label = f"within noise ({c.ratio:.2f}×)" if c.tie else ratio_text(c)
                alt.append(f"{name}: {label}.")
                ax.annotate(
                    label,
                    (max(values[i] + highs[i], 1.0), i),
                    xytext=(6, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=7,
                    color=INK,
                )
        ax.axvline(1.0, color=MUTED, lw=0.8, ls=":")
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
        ax.set_xlabel(f"mask step time ÷ {BASELINE}'s (unprofiled)")
        ax.set_xlim(0, max(v + h for v, h in zip(values, highs, strict=True)) * 1.45)
        ax.spines[["top", "right"]].set_visible(False)
        return to_svg(fig, " ".join(alt))


def mask_variants_figure(sourced: Sourced) -> str:
    """The mask-step comparison as a captioned figure; hatched bars are ties."""
    return figure_html(
        mask_variants_svg(sourced.measurement),
        sourced,
        f"The attention.mask step of each variant against {BASELINE}'s, without the profiler; "
        "error bars span the rounds, hatched bars are within noise of the baseline.",
    )


# --- float32 or bfloat16 -------------------------------------------------------------------


def _dtypes(m: Measurement) -> list[str]:
    return str(m.facts["dtypes"]).split(",")


def _dtype_timings(m: Measurement) -> dict[tuple[str, str], Timing]:
    return {
        (r["step"], r["dtype"]): Timing(
            r["median_us"], 0.0, 0, "", (r["low_us"], r["median_us"], r["high_us"])
        )
        for r in m.tables["dtypes"].records()
    }


def _step_names(m: Measurement) -> list[str]:
    seen: list[str] = []
    for r in m.tables["dtypes"].records():
        if r["step"] not in seen:
            seen.append(r["step"])
    return seen


def _work(m: Measurement) -> dict[tuple[str, str], dict[str, tuple[float, float]]]:
    """(dtype, step) -> {name: (calls, µs)} for the work that did something: kernels on a
    GPU, non-bookkeeping ops (by self time) on a CPU."""
    where = "GPU" if m.device_kind == "cuda" else "CPU"
    found: dict[tuple[str, str], dict[str, tuple[float, float]]] = defaultdict(dict)
    for r in m.tables["step_ops"].records():
        if r["where"] == where and not is_bookkeeping(r["name"]):
            found[(r["dtype"], r["step"])][r["name"]] = (r["calls"], r["time_us"])
    return found


def _short(name: str, limit: int = 44) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _runs_text(work: dict[str, tuple[float, float]], base: dict[str, tuple[float, float]]) -> str:
    """The name that took the most time, and names the float32 step does not run."""
    if not work:
        return "—"
    top = max(work, key=lambda n: work[n][1])
    text = f"`{_short(top)}`"
    extra = [n for n in sorted(work) if n not in base and n != top]
    if extra:
        text += " + " + ", ".join(f"{work[n][0]:g}× `{_short(n, 30)}`" for n in extra[:3])
    return text


def dtype_table(sourced: Sourced) -> str:
    """Per step: each dtype's unprofiled time against float32's (with the rounds' range),
    and what runs in the step (the op or kernel that took the most time, plus what float32
    does not run)."""
    m = sourced.measurement
    dtypes = _dtypes(m)
    others = [d for d in dtypes if d != "float32"]
    timings = _dtype_timings(m)
    work = _work(m)
    rows = []
    for step in _step_names(m):
        label = "forward" if step == "forward" else f"`{step}`"
        ratios = [
            ratio_text(compare(timings[(step, "float32")], timings[(step, d)])) for d in others
        ]
        runs = (
            [_runs_text(work.get((d, step), {}), work.get(("float32", step), {})) for d in dtypes]
            if step != "forward"
            else ["", *("" for _ in others)]
        )
        rows.append([label, *ratios, *runs])
    header = [
        "Step",
        *(f"{d} ÷ float32 (unprofiled)" for d in others),
        *(f"Runs in {d}" for d in dtypes),
    ]
    what = (
        f"Per step, per dtype: time without the profiler, each step timed alone, in "
        f"{_rounds(m)} interleaved rounds (in brackets: the rounds' least and most favourable "
        f"readings); what runs, from the profile ({'kernels' if m.device_kind == 'cuda' else 'ops by self time'})."
    )
    return markdown_table(header, rows, "l" + "r" * len(others) + "l" * len(dtypes)) + (
        "\n\n" + caption_html(sourced, what)
    )


def dtype_claim(m: Measurement) -> str:
    """How much faster or slower each half-precision dtype is, unprofiled and with noise:
    the forward, then which steps differ from float32 beyond noise."""
    timings = _dtype_timings(m)
    steps = [s for s in _step_names(m) if s != "forward"]
    parts = []
    for d in _dtypes(m):
        if d == "float32":
            continue
        c = compare(timings[("forward", "float32")], timings[("forward", d)])
        if c.tie:
            parts.append(
                f"In {d} the unprofiled forward is within noise of float32's ({c.ratio:.3g}×)."
            )
        else:
            word = "slower" if c.ratio > 1 else "faster"
            parts.append(
                f"In {d} the unprofiled forward takes **{ratio_text(c)}** the time of "
                f"float32's — {word}."
            )
        per_step = {s: compare(timings[(s, "float32")], timings[(s, d)]) for s in steps}
        apart = {s: c for s, c in per_step.items() if not c.tie}
        tied = [f"`{s}`" for s, c in per_step.items() if c.tie]
        if apart:
            listed = ", ".join(
                f"`{s}` {ratio_text(c)}"
                for s, c in sorted(apart.items(), key=lambda item: -item[1].ratio)
            )
            parts.append(f"Step by step, each timed alone, beyond noise: {listed}.")
        if tied:
            parts.append(f"Within noise of float32: {', '.join(tied)}.")
    capability = m.facts.get("cpu_capability")
    if capability:
        parts.append(f"PyTorch reports this CPU's best vector instruction set as **{capability}**.")
    return " ".join(parts)


def dtype_ops_claim(m: Measurement) -> str:
    """What the profile shows about the matmul steps in each dtype: the work that runs, what
    differs from float32, and whether that accounts for a difference between the two
    matmuls' slowdowns — or that the cause is not measured here."""
    work = _work(m)
    timings = _dtype_timings(m)
    matrices = int(m.params.get("batch_size", 1)) * int(m.params.get("num_heads", 1))
    parts = []
    for d in _dtypes(m):
        if d == "float32":
            continue
        extras = {}
        for step in MATMULS:
            base, here = work.get(("float32", step), {}), work.get((d, step), {})
            extras[step] = {n: here[n] for n in here if n not in base}
            top_base = max(base, key=lambda n: base[n][1]) if base else None
            top_here = max(here, key=lambda n: here[n][1]) if here else None
            text = f"In {d}, `{step}` spends its time in `{_short(top_here or '—')}`"
            if top_base and top_here != top_base:
                text += f" (float32: `{_short(top_base)}`)"
            if extras[step]:
                listed = ", ".join(
                    f"{calls:g}× `{_short(n, 30)}` ({fmt.time_us(us)})"
                    for n, (calls, us) in sorted(extras[step].items())
                )
                text += f" and also runs what float32 does not: {listed} per forward"
                per_matrix = {
                    n: calls / matrices
                    for n, (calls, _) in extras[step].items()
                    if calls >= matrices and calls % matrices == 0
                }
                if per_matrix:
                    name, each = next(iter(per_matrix.items()))
                    text += (
                        f" — {each:g} `{_short(name, 30)}` per matrix of the batch "
                        f"(batch_size × num_heads = {matrices}): the batched product is taken "
                        f"apart matrix by matrix"
                    )
            parts.append(text + ".")
        c_scores = compare(
            timings[("attention.scores", "float32")], timings[("attention.scores", d)]
        )
        c_sum = compare(
            timings[("attention.weighted_sum", "float32")], timings[("attention.weighted_sum", d)]
        )
        apart = c_scores.low > c_sum.high or c_sum.low > c_scores.high
        if not apart:
            parts.append(
                f"The two matmuls' slowdowns in {d} ({ratio_text(c_scores)} and "
                f"{ratio_text(c_sum)}) are within noise of each other: there is no difference "
                f"to explain."
            )
        elif set(extras["attention.scores"]) == set(extras["attention.weighted_sum"]):
            parts.append(
                f"The two matmuls take the same path in {d}, yet their slowdowns differ "
                f"beyond noise ({ratio_text(c_scores)} for `attention.scores`, "
                f"{ratio_text(c_sum)} for `attention.weighted_sum`). The profile stops at the "
                f"op that calls the matrix-multiply library: what that library does "
                f"differently for the two shapes (a reduction over head_dim against one over "
                f"seq_len) is not measured here."
            )
        else:
            parts.append(
                f"The two matmuls' slowdowns differ beyond noise ({ratio_text(c_scores)} and "
                f"{ratio_text(c_sum)}), and so does what they run: the extra work listed above "
                f"is the measured difference between them."
            )
    return " ".join(parts)


# --- Which step dominates at which shape ---------------------------------------------------


def shape_shares_claim(m: Measurement, table: str = "shares", x: str = "shape") -> str:
    """Per row of a per-step table: the largest step, or the steps within noise of it (their
    ranges over the profiled forwards overlap); and the matmuls' share at both ends."""
    records = m.tables[table].records()
    steps = [c for c in m.tables[table].columns if c.startswith("attention.") and " " not in c]
    parts = []
    matmul_shares = []
    for r in records:
        total = sum(r[s] for s in steps)
        if not total:
            continue
        top = max(steps, key=lambda s: r[s])
        low_of = {s: r.get(f"{s} low", r[s]) for s in steps}
        high_of = {s: r.get(f"{s} high", r[s]) for s in steps}
        tied = [s for s in steps if s != top and high_of[s] >= low_of[top]]
        share = fmt.percent(r[top] / total)
        if tied:
            names = ", ".join(f"`{s}`" for s in [top, *tied])
            parts.append(f"{x} {r[x]}: {names} within noise of one another (largest {share})")
        else:
            parts.append(f"{x} {r[x]}: `{top}` ({share}), beyond the noise of every other step")
        matmul_shares.append((r[x], sum(r[s] for s in steps if s in MATMULS) / total))
    if not parts:
        return ""
    (first_x, first), (last_x, last) = matmul_shares[0], matmul_shares[-1]
    return (
        "The largest step, with the spread over the profiled forwards: "
        + "; ".join(parts)
        + f". The two matmuls together take {fmt.percent(first)} of the five steps' profiled "
        f"time at {x} {first_x} and {fmt.percent(last)} at {last_x}."
    )
