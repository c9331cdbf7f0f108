# The rest of "Naive attention": mask variants, float32 against bfloat16, step shares per
# shape. Verdicts (ties from interleaved unprofiled rounds) are findings/variants.py's.
from __future__ import annotations

from attention_docs.findings import steps as fs
from attention_docs.findings import variants as fv
from attention_docs.findings.compare import Comparison
from attention_docs.findings.facts import Fact
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.records.steps import MATMULS, STEPS
from attention_docs.render import words
from attention_docs.render.plots import stacked_share_figure
from attention_docs.render.tables import captioned_table

BASELINE = fv.BASELINE


def _ratio(ratio: tuple[Fact, Comparison] | None) -> str:
    return "baseline" if ratio is None else words.versus_fact(*ratio)


def mask_variants(sourced: Sourced) -> str:
    """Per variant: the mask step's and the forward's unprofiled time against `rebuild`'s,
    what the mask step allocates, and what is kept between calls; then the cheapest mask step,
    alone beyond the noise or not."""
    found = fv.mask_variants(sourced.measurement)
    rows = [(f"`{v.name}`", _ratio(v.mask), _ratio(v.forward), *v.counts) for v in found.variants]
    header = (
        f"Variant | Mask step ÷ `{BASELINE}`'s (unprofiled) | Forward ÷ `{BASELINE}`'s "
        f"(unprofiled) | Allocations in the step (profiler) | Allocated in the step | "
        f"Kept between calls"
    )
    what = (
        f"Mask variants. Times: each variant's time ÷ {BASELINE}'s, timed in interleaved rounds "
        f"(brackets: the least and most favourable readings); allocations per forward."
    )
    r = found.cheapest
    table = captioned_table(header, rows, "lrrrrr", sourced, what)
    lead = f"{table}\n\nTimed alone on the same scores, "
    if r.clear:
        return f"{lead}the cheapest mask step is `{r.fastest}`'s, beyond the noise of every other."
    # "Cheapest" only of a clear leader (findings/rank): a leader within noise of others ties.
    others = words.series(f"`{x}`'s" for x in r.leaders[1:])
    return f"{lead}the mask step with the lowest time is `{r.fastest}`'s, within noise of {others}."


def _short(name: str | None, limit: int = 44) -> str:
    return f"`{words.clipped(name or '—', limit)}`"


def dtypes(sourced: Sourced) -> str:
    """Per step, each half-precision dtype's unprofiled time against float32's and the op
    (or kernel) that took the most time in each dtype; then the forward in words, and what the
    two matmuls run."""
    found = fv.dtypes(sourced.measurement)
    base, others = found.dtypes[0], found.dtypes[1:]

    def ratio(step: str, d: str) -> str:
        s = found.found[(step, d)]
        return words.versus_fact(s.ratio, s.versus)

    rows = [
        [
            "forward" if step == "forward" else f"`{step}`",
            *(ratio(step, d) for d in others),
            *("" if step == "forward" else _short(found.top(d, step)) for d in found.dtypes),
        ]
        for step in found.steps
    ]
    header = ["Step", *(f"{d} ÷ {base} (unprofiled)" for d in others)]
    header += [f"Most time in {d} (profiled)" for d in found.dtypes]
    what = (
        "Per step, per dtype: the steps timed without the profiler one after another as the "
        "forward runs them, in interleaved rounds (brackets: the least and most favourable "
        "readings of the two intervals); what runs, from a profile."
    )
    align = "l" + "r" * len(others) + "l" * len(found.dtypes)
    parts = [captioned_table(header, rows, align, sourced, what) + "\n\n"]
    for d in others:
        versus = found.found[("forward", d)].versus
        # versus compares float32 (first) with d: in order, d is the slower one.
        word = "slower" if versus.as_ordered else "faster"
        parts.append(
            f"In {d} the unprofiled forward is **{ratio('forward', d)}** of float32's."
            if versus.tie
            else f"In {d} the unprofiled forward takes **{ratio('forward', d)}** float32's time: {word}."
        )
    if found.capability:
        parts.append(
            f"PyTorch reports this CPU's best vector instruction set as **{found.capability}**."
        )
    parts.append("\n\n")
    for d in others:
        for step in MATMULS:
            s = found.found[(step, d)]
            text = f"In {d}, `{step}` spends most time in {_short(found.top(d, step))}"
            if s.extra:
                listed = words.series(
                    f"{words.fact(n)} calls of {_short(x, 30)}" for x, n in s.extra
                )
                text += f", and runs what float32 does not: {listed} per forward"
            if s.per_matrix:
                name, each = s.per_matrix
                text += (
                    f" — {words.fact(each)} {_short(name, 30)} per matrix of the batch "
                    f"(batch_size × num_heads = {found.matrices}): the batched product is "
                    f"taken apart matrix by matrix"
                )
            parts.append(text + ".")
        # A ratio to float32, not a slowdown: on a CPU with bf16 arithmetic it is a speed-up.
        ratios = f"{d} ÷ {base} ratios"
        if not found.matmuls_apart(d):
            parts.append(f"Their {ratios} are within noise of each other.")
        elif found.matmuls_same_path(d):
            parts.append(
                f"They take the same path in {d}, yet their {ratios} differ beyond noise: what "
                f"the matrix-multiply library does differently for the two shapes (a reduction "
                f"over head_dim against one over seq_len) is not measured here."
            )
        else:
            parts.append(
                f"Their {ratios} differ beyond noise, and so does what they run: the extra "
                f"work listed is the measured difference."
            )
    return " ".join(parts)


def step_shares_figure(sweep: Sourced, naive: Sourced) -> str:
    """Stacked shares of the five steps per shape, naive_steps' shape read from naive_steps."""
    labels, shares = fs.share_bars(sweep.measurement, naive.measurement)
    what = (
        "Share of each step's profiled time per shape (median over the profiled forwards; "
        "medians need not sum to 100%)."
    )
    return stacked_share_figure(
        sweep, labels, shares, x="shape", x_unit="seq_len×head_dim", parts=STEPS, what=what
    )


def step_shares_claim(sweep: Measurement, naive: Measurement) -> str:
    """Per shape the largest step (or those within noise of it), and the matmuls' share."""
    found = fs.shares_by_shape(sweep, naive)
    parts = []
    for s in found:
        top = s.largest.part
        rivals = words.series(f"`{x}`" for x in s.largest.rivals)
        tie = "" if s.largest.clear else f" (within noise: {rivals})"
        parts.append(f"{s.label}: `{top}`, {words.fact(s.shares[top])}{tie}")
    first, last = found[0], found[-1]
    return (
        "The largest step per seq_len×head_dim: " + "; ".join(parts) + ". The two matmuls "
        f"together take {words.fact(first.matmuls)} at {first.label} and "
        f"{words.fact(last.matmuls)} at {last.label}."
    )
