# SDPA's choice of backend, measured and forecast: which backend `sdpa_why` saw SDPA pick for
# each input variant on the device it ran on, and which one torch's dispatcher rules
# (analytic/sdpa_dispatch.py) pick for the same variants on a named GPU, under each priority
# order torch may use there; what each backend pinned and each way of giving the causal mask
# cost, as facts. Data only; render/sdpa.py says it.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from attention_docs.analytic import sdpa_dispatch as rules
from attention_docs.analytic.gpu import FORECAST_SHAPE
from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import COUNTED, NUMERIC, PROFILED, UNPROFILED, Fact, On
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet

# The runtime cuDNN decides the order on sm_90: torch's default order up to 9.15.0, cuDNN
# first from 9.15.1 on. A forecast states both.
SCENARIOS = {"default order": rules.CUDNN_FIRST_SINCE - 1, "cuDNN first": rules.CUDNN_FIRST_SINCE}


def picks(m: Measurement) -> dict[str, str | None]:
    """Variant -> the backend SDPA chose for it, as `sdpa_why` measured."""
    chosen: dict[str, str | None] = {}
    for r in m.tables["verdicts"].records():
        chosen.setdefault(r["variant"], None)
        if r["status"] == "chosen":
            chosen[r["variant"]] = r["backend"]
    return chosen


def tally(chosen: Mapping[str, str | None], backend: str) -> int:
    """How many variants went to `backend`."""
    return sum(1 for b in chosen.values() if b == backend)


@dataclass(frozen=True)
class Forecast:
    """The dispatcher's choice for each variant on `gpu`, per scenario (SCENARIOS' keys)."""

    gpu: SpecSheet
    variants: tuple[tuple[str, rules.Inputs], ...]
    choices: Mapping[str, Mapping[str, rules.Choice]]  # scenario -> variant -> choice

    def picks(self, scenario: str) -> dict[str, str | None]:
        return {name: c.backend for name, c in self.choices[scenario].items()}


def forecast(gpu: SpecSheet, big_head_dim: int) -> Forecast:
    """The variants `sdpa_why` asks about, at the forecast shape's dtype and head_dim, on
    `gpu` under each scenario."""
    variants = rules.why_variants(FORECAST_SHAPE.dtype, FORECAST_SHAPE.head_dim, big_head_dim)
    cap = rules.capability_of(gpu.capability)
    choices = {
        name: {v: rules.choose(rules.Platform("cuda", cap, cudnn), i) for v, i in variants}
        for name, cudnn in SCENARIOS.items()
    }
    return Forecast(gpu, variants, choices)


@dataclass(frozen=True)
class Backend:
    """One backend pinned with sdpa_kernel (sdpa_backends' row) as facts; None where nothing
    was recorded (kernels and the launches' CPU-side time exist on a GPU only)."""

    ops: Fact | None  # ATen ops per call, counted
    kernels: Fact | None  # GPU kernels per call, counted
    cpu_time: Fact | None  # CPU-side time per call, profiled
    peak: Fact | None


def backends(m: Measurement) -> dict[str, Backend]:
    """Each backend sdpa_backends pinned, by name, in its table's order."""
    on = On.of(m)

    def fact(r: dict, metric: str, column: str, unit: str, clock: str = COUNTED) -> Fact | None:
        return on(metric, f"SDPA {r['backend']}", clock, r[column], unit)

    return {
        r["backend"]: Backend(
            fact(r, "ATen ops per call", "ops_per_call", "ops"),
            fact(r, "kernels per call", "kernels_per_call", "kernels"),
            fact(r, "CPU-side time per call", "cpu_us", "µs", PROFILED),
            fact(r, "peak memory", "peak_bytes", "B"),
        )
        for r in m.tables["backends"].records()
    }


@dataclass(frozen=True)
class Mask:
    """One way of asking for the causal mask (sdpa_masks' row) as facts."""

    mask: str
    mask_bytes: Fact | None  # None: no mask tensor
    peak: Fact
    error: Fact | None  # the largest absolute error against float64; None: NaN
    # The time against is_causal's (interleaved rounds) and their comparison; None for
    # is_causal itself, the baseline.
    ratio: tuple[Fact, Comparison] | None


def masks(m: Measurement) -> list[Mask]:
    """Each way of asking for the causal mask, is_causal first."""
    on, rows = On.of(m), m.tables["masks"].records()
    found = []
    for r in rows:
        who = f"SDPA with the causal mask as {r['mask']}"
        ratio = None
        if r is not rows[0]:
            c = compare(rows[0]["time"], r["time"])
            ratio = (on("time ratio to is_causal", who, UNPROFILED, c), c)
        error = on("max abs error vs float64", who, NUMERIC, r["max_abs_error"], "abs error")
        size = on("mask tensor size", who, COUNTED, r["mask_bytes"] or None, "B")
        peak = on("peak memory", who, COUNTED, r["peak_bytes"], "B")
        found.append(Mask(r["mask"], size, peak, error, ratio))
    return found
