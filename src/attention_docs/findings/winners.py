# Which attention wins where, decided once: for each cell of the map (a shape, in one view —
# a forward from `forward_times`, a training step from `train_times`, a decode step from
# `decode_steps`) the implementations ranked with ties (findings/rank.py), how the winner and
# its lead over naive attention change along seq_len, and the H200 forecast of each cell of
# the GPU map (naive attention's five kernels against one fused kernel). No words here.
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import product

from attention_docs.analytic import gpu as gpus
from attention_docs.findings import decode as fdecode
from attention_docs.findings import forward as ffwd
from attention_docs.findings.compare import Comparison
from attention_docs.findings.devices import time_at
from attention_docs.findings.facts import COUNTED, UNPROFILED, Fact, On, Quantity, ratio_fact
from attention_docs.findings.forecast import (
    RANGE_OF_FLASH,
    RANGE_OF_NAIVE,
    Check,
    check,
    forecast,
    realistic,
)
from attention_docs.findings.rank import Ranking, rank
from attention_docs.findings.sweep import SweepFindings, sweep_findings
from attention_docs.findings.trend import FALLS, FLAT, RISES
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape
from attention_docs.records.sweep import Sweep
from attention_docs.records.timing import Timing

FORWARD, TRAINING, DECODE = "forward", "training", "decode"

# Each map is a set of series, and a series is a sweep (records/sweep.py): a view over the
# long `times` table of forward_times (train_times: the same table, a training step per cell),
# each implementation's time against seq_len at one batch, heads, dtype, mask and head_dim.
# Its facts are forward_time's (a training step's), its ranking per length has ties.
SERIES = Sweep(
    table="times",
    x="seq_len",
    x_unit="tokens",
    lines=(),
    metric=ffwd.FORWARD_TIME,
    line="implementation",
    shape_from=tuple((c, c) for c in fwd.SHAPE_COLUMNS),
)
VIEWS = {
    FORWARD: SERIES,
    TRAINING: replace(SERIES, metric="training step time", detail="forward + backward"),
}


@dataclass(frozen=True)
class Cell:
    """One shape of one view: the implementations that ran there, ranked with ties, and each
    one's time as the quantity its view measures."""

    view: str
    shape: Shape
    timings: Mapping[str, Timing]
    ranking: Ranking
    facts: Mapping[str, Fact]

    @property
    def winner(self) -> str:
        return self.ranking.fastest

    @property
    def tied(self) -> tuple[str, ...]:
        """The others within noise of the fastest."""
        return self.ranking.leaders[1:]

    @property
    def runner_up(self) -> str | None:
        return self.ranking.order[1] if len(self.ranking.order) > 1 else None

    @property
    def margin(self) -> Comparison | None:
        """The winner against the runner-up (ratio > 1: the winner is faster)."""
        return self.ranking.against_fastest.get(self.runner_up) if self.runner_up else None


def implementations(m: Measurement) -> list[str]:
    """The implementations of a times table, in its order; single naive steps left out."""
    names = (r["implementation"] for r in fwd.rows(m))
    return [n for n in dict.fromkeys(names) if not n.startswith(fwd.STEP_PREFIX)]


def shape_count(m: Measurement) -> int:
    return len({Shape.of(r) for r in fwd.rows(m)})


@dataclass(frozen=True)
class Series:
    """One series of a map along seq_len (one dtype, mask and head_dim): its sweep (who leads
    where, with ties) and its cells. `lead`: whether the leader's lead over naive attention
    rises, falls or stays within the noise from the shortest sequence ranked to the longest
    (None where fewer than two lengths rank two or more, or naive did not run at an end)."""

    causal: bool
    head_dim: int
    sweep: SweepFindings
    cells: tuple[Cell, ...]
    lead: str | None

    @property
    def steady(self) -> tuple[str, ...]:
        """The implementations that lead (alone or within noise) at every length ranked."""
        leads = self.sweep.leads
        return tuple(sorted(set.intersection(*(set(x.leaders) for x in leads)))) if leads else ()

    @property
    def changes(self) -> bool:
        """Whether no one implementation leads at every length: the answer changes."""
        return bool(self.sweep.leads) and not self.steady


def _ran(facts: Mapping[str, Fact | None]) -> dict[str, Fact]:
    return {name: f for name, f in facts.items() if f is not None}


def _series(m: Measurement, view: str, s: fwd.Slice, key: tuple[str, bool, int]) -> Series:
    dtype, causal, head_dim = key
    where = (("batch_size", s.batch_size), ("num_heads", s.num_heads), ("dtype", dtype),
             ("causal", causal), ("head_dim", head_dim))  # fmt: skip
    spec = replace(VIEWS[view], lines=tuple(implementations(m)), where=where)
    found = sweep_findings(m, spec=spec)
    ranked = [p for p in found.points if p.ranking and p.x in s.seq_lens]
    cells = tuple(
        Cell(view, Shape.of(next(iter(p.rows.values()))), p.timings, p.ranking, _ran(p.facts))
        for p in ranked
    )
    ranked = [p for p in ranked if len(p.ranking.order) >= 2]
    lead = None
    if len(ranked) >= 2:
        a, b = (p.ranking.against_fastest.get(fwd.NAIVE) for p in (ranked[0], ranked[-1]))
        if a is not None and b is not None:
            lead = RISES if b.low > a.high else FALLS if b.high < a.low else FLAT
    return Series(causal, head_dim, found, cells, lead)


def teaching(m: Measurement) -> list[Series]:
    """The teaching slice of the entry's device, a series per dtype, mask and head_dim."""
    t = fwd.GRIDS[m.device_kind].teaching
    return [_series(m, FORWARD, t, key) for key in product(t.dtypes, t.causal, t.head_dims)]


def teaching_cells(m: Measurement) -> list[Cell]:
    """The forward map at the teaching slice, in its order (dtype, mask, head_dim, seq_len)."""
    return [c for s in teaching(m) for c in s.cells]


def series(m: Measurement) -> list[Series]:
    """The teaching slice's series whose leaders can be followed: two lengths or more ranked."""
    return [s for s in teaching(m) if sum(len(lead.xs) for lead in s.sweep.leads) >= 2]


def map_cells(m: Measurement, view: str = FORWARD) -> list[Cell]:
    """The model-like panel: the map slice's batch, heads and head_dim, causal, in both
    dtypes, at its sequence lengths (on a GPU the bfloat16 ones lie in the teaching slice)."""
    s = fwd.GRIDS[m.device_kind].slices[1]
    # The order the cells are listed in (alt text, the finding's counts): float32 first in
    # forward_times' map, as map_shapes; by name in train_times', as its table sorts.
    dtypes = ("float32", "bfloat16") if view == FORWARD else ("bfloat16", "float32")
    return [c for d in dtypes for c in _series(m, view, s, (d, True, s.head_dims[0])).cells]


def map_shapes(kind: str) -> list[Shape]:
    s = fwd.GRIDS[kind].slices[1]
    return [
        Shape(s.batch_size, s.num_heads, n, s.head_dims[0], dtype, True)
        for dtype in ("float32", "bfloat16")
        for n in s.seq_lens
    ]


def decode_cell(m: Measurement) -> Cell | None:
    """Grouped-query decode at the base point of decode_steps: every path, ranked."""
    ran = [p for p in fdecode.base_points(m) if p.variant == "GQA" and p.time is not None]
    if not ran:
        return None
    timings = {p.impl: p.time for p in ran}
    facts = _ran({p.impl: fdecode.step_time(m, p) for p in ran})
    return Cell(DECODE, ran[0].shape, timings, rank(timings), facts)


def lead_fact(m: Measurement, c: Cell, slow: str | None = None) -> Fact | None:
    """The winner's lead over `slow` (default the runner-up) in the cell's view."""
    slow = slow or c.runner_up
    if slow not in c.ranking.against_fastest:  # None, the winner, or not run here
        return None
    if c.view == FORWARD:
        q = ffwd.versus(m, c.winner, slow, c.shape).quantity
    elif c.view == DECODE:
        a, b = (fdecode.point(m, "GQA", n) for n in (c.winner, slow))
        q = fdecode.versus(m, a, b).quantity
    else:
        subject = f"{c.winner} vs {slow}"
        q = Quantity("training speed ratio", subject, m.device_id, UNPROFILED, c.shape)
    return ratio_fact(q, c.ranking.against_fastest[slow])


def peak_fact(summary: Measurement, row: Mapping) -> Fact:
    """An implementation's peak memory in a forward at winners_summary's shape."""
    name, peak = row["implementation"], row["peak_bytes"]
    return On.of(summary)("peak memory", name, COUNTED, peak, "B", detail="forward")


# --- the GPU forecast ------------------------------------------------------------------------


@dataclass(frozen=True)
class ForecastCell:
    """One cell of the GPU map: naive attention's floor and the fused kernel's, each with
    its realistic range (floor over cited efficiencies), and the fused kernel's lead as a
    range of realistic times (never a ratio of two floors)."""

    shape: Shape
    fused: str
    naive: Check
    fused_floor: Check
    lead: Check

    @property
    def winner(self) -> str:
        """The fused kernel where it leads over the whole range, naive where it trails over
        the whole range, else "within the range" (the ranges overlap)."""
        f = self.lead.forecast
        if f.low > 1:
            return self.fused
        return fwd.NAIVE if f.high < 1 else "within the forecast range"


def forecast_cells(gpu: SpecSheet, measured: Measurement | None = None) -> list[ForecastCell]:
    """Each shape of the GPU map's model-like panel on `gpu`, from its data sheet; beside each,
    the `measured` forward_times entry of that GPU when it holds the shape."""
    out = []
    for shape in map_shapes("cuda"):
        # The fused SDPA kernel a GPU runs: FlashAttention takes only fp16/bf16; in float32
        # the memory-efficient kernel is the fused one.
        fused = fwd.SDPA_FLASH if shape.dtype in ("bfloat16", "float16") else fwd.SDPA_EFFICIENT
        # Each side's floor and realistic range; the model names itself in `detail`: another
        # chapter's model of the same quantity is another forecast, not a second value of it.
        sides = (
            (fwd.NAIVE, gpus.naive_range(gpu, shape), "floor: naive_floor_us", RANGE_OF_NAIVE),
            (fused, gpus.flash_range(gpu, shape), "floor: flash_forward", RANGE_OF_FLASH),
        )
        ranges = [realistic(ffwd.FORWARD_TIME, name, gpu, span, "µs", shape=shape, detail=detail)
                  for name, span, _, detail in sides]  # fmt: skip
        if None in ranges:
            raise ValueError(f"no cited efficiency for the {gpu.label}: no realistic range to rank by")  # fmt: skip
        floors = [
            check(forecast(ffwd.FORWARD_TIME, name, gpu, span.floor_us, "µs", shape=shape,
                           detail=model), measured and time_at(measured, name, shape), r)
            for (name, span, model, _), r in zip(sides, ranges, strict=True)
        ]  # fmt: skip
        (_, n_r, *_), (_, f_r, *_) = sides
        lead_q = forecast(ffwd.SPEED, f"{fused} vs {fwd.NAIVE}", gpu, 0.0, "×", shape=shape,
                          detail="realistic ranges: naive_range / flash_range").quantity  # fmt: skip
        lead = Fact(lead_q, None, "×", n_r.low_us / f_r.high_us, n_r.high_us / f_r.low_us)
        got = None
        if all(c.measured for c in floors):
            v = ffwd.versus(measured, fused, fwd.NAIVE, shape)
            got = ratio_fact(v.quantity, v.comparison)
        out.append(ForecastCell(shape, fused, *floors, check(lead, got)))
    return out


def recommended(found: Sequence[Cell]) -> tuple[str, int]:
    """The implementation to use: the one that leads (alone or within noise) at the most
    cells, clear wins breaking a tie; and at how many cells it leads."""
    leads = Counter(name for c in found for name in c.ranking.leaders)
    clear = Counter(c.winner for c in found if not c.tied)
    best = max(leads, key=lambda name: (leads[name], clear[name]))
    return best, leads[best]


def largest_cell(found: Sequence[Cell]) -> Cell:
    """The cell at the longest sequence (bfloat16 before float32 at the same length): the
    map's far corner, where the chapter states its lead."""
    return max(found, key=lambda c: (c.shape.seq_len, c.shape.dtype == "bfloat16"))


def lead_ends(found: Sequence[ForecastCell]) -> tuple[ForecastCell, ForecastCell]:
    """The forecast cells whose realistic lead over naive attention can be smallest and
    largest."""
    smallest = min(found, key=lambda c: c.lead.forecast.low)
    return smallest, max(found, key=lambda c: c.lead.forecast.high)
