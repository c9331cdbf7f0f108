# Verdicts of "Naive attention": four ways to apply the causal mask against rebuilding it on
# every call, and each step in a half-precision dtype against float32 — ratios of unprofiled
# timings taken in interleaved rounds (a tie when their rounds overlap), with what the profile
# says each variant allocates and what each step runs. Facts and flags only.
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import COUNTED, UNPROFILED, Fact, On
from attention_docs.findings.rank import Ranking, rank
from attention_docs.measurements.schema import Measurement
from attention_docs.records.kernels import is_bookkeeping
from attention_docs.records.steps import MATMULS

BASELINE = "rebuild"
# What the profiler counts of each variant: metric, what it counts in, column, unit.
COUNTS = (
    ("allocations per forward", "mask step", "mask_allocations", ""),
    ("bytes allocated per forward", "mask step", "mask_allocated_bytes", "B"),
    ("bytes kept between calls", "mask", "prepared_bytes", "B"),
)


@dataclass(frozen=True)
class Variant:
    name: str
    # The mask step's and the forward's time ÷ the baseline's (None for the baseline).
    mask: tuple[Fact, Comparison] | None
    forward: tuple[Fact, Comparison] | None
    counts: tuple[Fact, ...]  # COUNTS' facts, from the profiler


@dataclass(frozen=True)
class MaskVariants:
    variants: tuple[Variant, ...]
    cheapest: Ranking  # of the mask steps' unprofiled times


def mask_variants(m: Measurement) -> MaskVariants:
    rows, on = {r["variant"]: r for r in m.tables["variants"].records()}, On.of(m)
    base = rows[BASELINE]

    def ratio(name: str, part: str, what: str) -> tuple[Fact, Comparison] | None:
        if name == BASELINE:
            return None
        c = compare(base[part], rows[name][part])
        return on(f"time ÷ {BASELINE}'s", f"{what}, {name} variant", UNPROFILED, c), c

    out = [
        Variant(
            name,
            ratio(name, "mask", "mask step"),
            ratio(name, "forward", "forward"),
            tuple(
                on(metric, f"{what}, {name} variant", COUNTED, r[column], unit)
                for metric, what, column, unit in COUNTS
            ),
        )
        for name, r in rows.items()
    ]
    return MaskVariants(tuple(out), rank({name: r["mask"] for name, r in rows.items()}))


@dataclass(frozen=True)
class DtypeStep:
    """One step (or "forward") in one dtype against float32."""

    versus: Comparison  # this dtype's time ÷ float32's
    ratio: Fact
    extra: tuple[tuple[str, Fact], ...]  # (name, calls per forward) float32 does not run
    # An extra op called a whole number of times per matrix of the batch (batch_size ×
    # num_heads): the batched product taken apart matrix by matrix. (name, calls per matrix)
    per_matrix: tuple[str, Fact] | None


@dataclass(frozen=True)
class Dtypes:
    dtypes: tuple[str, ...]
    steps: tuple[str, ...]  # "forward" first, then the step labels
    found: dict[tuple[str, str], DtypeStep]  # (step, dtype), float32 excluded
    capability: str | None  # the CPU's best vector instruction set, as PyTorch reports it
    matrices: int  # batch_size × num_heads
    # (dtype, step) -> {name: (calls, time)} of the work (CPU ops or GPU kernels) it runs
    work: Mapping[tuple[str, str], Mapping[str, tuple[float, float]]]

    def top(self, dtype: str, step: str) -> str | None:
        """The op (CPU, by self time) or kernel (GPU) that took the most time in `step`."""
        work = self.work.get((dtype, step), {})
        return max(work, key=lambda n: work[n][1]) if work else None

    def matmuls_apart(self, dtype: str) -> bool:
        """The two matmuls' ratios to float32 differ beyond the noise."""
        a, b = (self.found[(x, dtype)].versus for x in MATMULS)
        return a.low > b.high or b.low > a.high

    def matmuls_same_path(self, dtype: str) -> bool:
        """Both matmuls run the same extra work (or none) in this dtype."""
        a, b = ({n for n, _ in self.found[(x, dtype)].extra} for x in MATMULS)
        return a == b


def dtypes(m: Measurement) -> Dtypes:
    names = tuple(str(m.facts["dtypes"]).split(","))
    timings = {(r["step"], r["dtype"]): r["time"] for r in m.tables["dtypes"].records()}
    order = tuple(dict.fromkeys(step for step, _ in timings))
    where = "GPU" if m.device_kind == "cuda" else "CPU"
    work: dict[tuple[str, str], dict[str, tuple[float, float]]] = defaultdict(dict)
    for r in m.tables["step_ops"].records():
        if r["where"] == where and not is_bookkeeping(r["name"]):
            work[(r["dtype"], r["step"])][r["name"]] = (r["calls"], r["time_us"])
    matrices = int(m.params.get("batch_size", 1)) * int(m.params.get("num_heads", 1))
    found = {}
    for d, step in ((d, step) for d in names[1:] for step in order):
        on = On.of(m, dtype=d)
        c = compare(timings[(step, names[0])], timings[(step, d)])
        subject = "naive (eager)" if step == "forward" else step
        detail = "forward" if step == "forward" else "step in the forward"
        ratio = on(f"time ÷ {names[0]}'s", subject, UNPROFILED, c, detail=detail)
        here, base = work.get((d, step), {}), work.get((names[0], step), {})

        def calls(name: str, n: float, per: str, step=step, on=on) -> tuple[str, Fact]:
            return name, on(f"calls per {per}", name, COUNTED, n, detail=step)

        extra = tuple(calls(n, here[n][0], "forward") for n in sorted(here) if n not in base)
        whole = [
            calls(n, f.value / matrices, "matrix of the batch")
            for n, f in extra
            if f.value >= matrices and f.value % matrices == 0
        ]
        found[(step, d)] = DtypeStep(c, ratio, extra, whole[0] if whole else None)
    return Dtypes(names, order, found, m.facts.get("cpu_capability"), matrices, work)
