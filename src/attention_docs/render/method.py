# docs/method.md's measured paragraphs: steps alone against steps in sequence, threads, and
# the GPU model against every GPU timing others recorded.
from __future__ import annotations

from attention_docs.findings import method as fmethod
from attention_docs.findings import model_check as fcheck
from attention_docs.findings.model_check import KindCheck
from attention_docs.measurements.schema import Sourced
from attention_docs.render import words
from attention_docs.render.tables import captioned_table, markdown_table


def steps_table(sourced: Sourced) -> str:
    """Per step, its time in sequence against its time alone, in one run."""
    found = fmethod.steps(sourced.measurement)
    rows = [(f"`{r.label}`", words.versus_fact(r.ratio, r.comparison)) for r in found.ratios]
    what = (
        "Each step timed alone (a loop of that step on the same inputs) and in sequence (the "
        "five one after another, each with its own clock), in one run, interleaved rounds."
    )
    return captioned_table("Step | In sequence ÷ alone (unprofiled)", rows, "lr", sourced, what)


def finding(sourced: Sourced) -> str:
    """What the five steps' times sum to, of the forward, timed alone and in sequence."""
    found = fmethod.steps(sourced.measurement)
    said = {
        fmethod.ADDS_UP_TO: "within a fifth of it over their whole interval",
        fmethod.SHORT_OF: "short of it by more than a fifth over their whole interval",
        fmethod.UNDECIDED: "where the noise does not decide whether within a fifth of it",
    }
    verdicts = (
        f"both {said[found.alone_verdict]}"
        if found.alike
        else f"timed alone, {said[found.alone_verdict]}; in sequence, "
        f"{said[found.in_sequence_verdict]}"
    )
    return (
        f"On {sourced.measurement.provenance.device.label}, naive attention's five steps timed "
        f"alone sum to {words.fact(found.alone)} of the forward timed in the same run; timed in "
        f"sequence, as this site times them, to {words.fact(found.in_sequence)}: {verdicts}."
    )


def threads(sourced: Sourced) -> str:
    """What one other busy process does to the forward with the worker's threads and with a
    thread per core; or a sentence saying why it was not measured."""
    found = fmethod.threads(sourced.measurement)
    if found is None:
        return (
            "Threads were not measured here: the run was on a GPU or on a machine with one "
            "core, where the host's threads set no kernel's pace."
        )
    rows = [
        (words.plural(n.threads, "thread"), words.versus_fact(n.ratio, n.comparison))
        for n in found.neighbours
    ]
    what = (
        f"The forward on {words.plural(found.cores, 'core')}, with each thread count alone and "
        "beside one CPU-bound process, each timed after the other in one run."
    )
    header = "Threads | Forward beside one busy process ÷ alone (unprofiled)"
    table = captioned_table(header, rows, "lr", sourced, what)
    base = words.plural(found.worker.threads, "thread")
    cores = words.plural(found.cores, "thread")
    if found.idle_comparison.tie:
        idle = f"On an idle machine {cores} and {base} were within noise of each other"
    else:
        idle = (
            f"On an idle machine {base} took "
            f"{words.versus_fact(found.idle_speedup, found.idle_comparison)} the time of {cores}"
        )
    slowed, kept = (
        "within noise of its time alone"
        if n.comparison.tie
        else f"{words.versus_fact(n.ratio, n.comparison)} its time alone"
        for n in (found.every_core, found.worker)
    )
    text = f"{table}\n\n{idle}. Beside one busy process, the forward on {cores} took {slowed}, on {base} {kept}"
    if not found.every_core_hurt_more:
        return text + (
            ": in this run a thread per core was not hurt more than half the cores' beyond "
            "the noise of both."
        )
    return text + (
        ": an op split over every core ends when its last thread does, and the other "
        "process holds one of those cores. A worker gives torch half the cores so that its "
        "numbers depend on the forward, not on whatever else the machine is running."
    )


def model_check(kinds: list[KindCheck]) -> str:
    """The GPU model against every GPU timing the site holds: a sentence, then a row per
    source, GPU and kind of kernel."""
    s = fcheck.total(kinds)
    header = ["Source", "GPU", "Kind of kernel", "Timings", "Inside the range",
              "Above it (the worst: recorded ÷ high end)", "Below it (the worst)",
              "Above the floor"]  # fmt: skip
    rows = []
    for k in kinds:
        above = f"{len(k.above)} ({words.times(k.worst_over)})" if k.above else "0"
        below = f"{len(k.below)} ({words.times(k.worst_under)})" if k.below else "0"
        rows.append([k.source, k.gpu, k.kind, str(len(k.checks)), str(k.inside), above, below,
                     f"{k.above_floor} of {len(k.checks)}"])  # fmt: skip
    said = (
        f"Of {len(s.checks):,} GPU timings others recorded, {s.above_floor:,} lie above the "
        f"model's floor and {s.inside:,} inside its realistic range; "
        f"{len(s.above) - s.far:,} lie above the range by at most 2×, {s.far:,} by more."
    )
    caption = (
        "Each timing beside the forecast this site states for its GPU and shape (what "
        "<code>python -m attention_docs forecast</code> and <code>trace</code> print). "
        "Recorded by others, none by this build: the reference dataset's sources; TraceLens's "
        "H100 traces (MIT licence); NVIDIA's cuDNN frontend benchmarks (<a href=\""
        '@site/assets/cited/cudnn-frontend/README.txt">README and licence</a>), bfloat16 rows.'
    )
    table = markdown_table(header, rows, "lllrrrrr")
    return f'{said}\n\n{table}\n\n<p class="ad-caption">{caption}</p>'
