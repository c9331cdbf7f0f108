# SDPA's choice of backend, measured and forecast: which backend `sdpa_why` saw SDPA pick for
# each input variant on the device it ran on, and which one torch's dispatcher rules
# (analytic/sdpa_dispatch.py) pick for the same variants on a named GPU, under each priority
# order torch may use there. Data only; render/sdpa.py says it.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from attention_docs.analytic import sdpa_dispatch as rules
from attention_docs.analytic.gpu import FORECAST_SHAPE
from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import UNPROFILED, Fact, Quantity, ratio_fact
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape

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


def mask_ratios(m: Measurement) -> dict[str, tuple[Fact, Comparison]]:
    """Each way of asking for the causal mask after the first (is_causal) against is_causal:
    the time ratio as a fact, and the comparison of their interleaved rounds."""
    base, *rest = m.tables["masks"].records()
    out = {}
    for r in rest:
        who = f"SDPA with the causal mask as {r['mask']}"
        q = Quantity("time ratio to is_causal", who, m.device_id, UNPROFILED, Shape.of(m.params))
        c = compare(base["time"], r["time"])
        out[r["mask"]] = (ratio_fact(q, c), c)
    return out
