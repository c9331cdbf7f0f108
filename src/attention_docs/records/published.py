# The reference dataset (published.toml beside this module): published GPU measurements of
# attention and the cited efficiencies the forecasts' realistic ranges use, each naming its
# source. Loaded once and validated: every point names a known source, a GPU with a data
# sheet (records/device.py), a unit and a shape or the sweep it is the best of. Cited, never
# measured here: findings/published.py sets each point beside the forecast for its GPU and
# shape.
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from attention_docs.records.device import SPEC_SHEETS
from attention_docs.records.shape import Shape

DATASET = Path(__file__).with_name("published.toml")
UNITS = ("ms", "µs", "kernels", "TFLOP/s", "%", "% of baseline")
STATED = "stated"  # an efficiency this project states without a citation
# The kinds of kernel an efficiency may be on record for: FlashAttention-2's generation of
# fused kernels (SDPA's flash and memory-efficient backends), work on the CUDA cores in
# float32 (no tensor cores), or any kernel.
ANY, FLASH_2, FLOAT32 = "any", "flash-2", "float32"
KERNELS = (ANY, FLASH_2, FLOAT32)


class DatasetError(ValueError):
    """The reference dataset has an entry this module cannot use; the message names it."""


@dataclass(frozen=True)
class Source:
    key: str
    title: str
    url: str
    software: str
    scripts: str = ""
    authors: str = ""  # for a citation: "Dao", "Shah et al."
    year: int | None = None


@dataclass(frozen=True)
class Constant:
    """A headline figure a source states (a value, or the range it states), quoted by a
    chapter: `metric`, `subject` and `unit` as the site's facts carry them."""

    key: str
    source: Source
    metric: str
    subject: str
    unit: str
    value: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Efficiency:
    """How close published kernels get to one ceiling of a GPU architecture: the realistic
    range of a forecast is its floor divided by `high` .. `low`."""

    capability: str  # "80", "90", or "any"
    limit: str  # "compute" or "memory"
    low: float
    high: float
    source: Source | None  # None: stated by this project, not cited
    what: str
    kernel: str = "any"  # the kind of kernel it holds for (KERNELS), or any


@dataclass(frozen=True)
class Point:
    """One published figure: what was measured where, how, and its value in `unit`."""

    source: Source
    gpu: str  # a SPEC_SHEETS slug
    subject: str
    statistic: str
    value: float
    unit: str
    shape: Shape | None  # None: the best point of `sweep`
    sweep: str = ""
    sweep_dtype: str = ""  # a sweep's dtype, where the source states one
    baseline: str = ""  # what a "% of baseline" throughput is a share of

    @property
    def dtype(self) -> str:
        """The point's dtype ("" where the source states none)."""
        return self.shape.dtype if self.shape else self.sweep_dtype


@dataclass(frozen=True)
class Dataset:
    sources: dict[str, Source]
    efficiencies: tuple[Efficiency, ...]
    points: tuple[Point, ...]
    constants: dict[str, Constant]

    def constant(self, key: str) -> Constant:
        if key not in self.constants:
            raise DatasetError(f"{DATASET.name} has no constant {key!r}")
        return self.constants[key]

    def efficiency(
        self, capability: str | None, limit: str, kernel: str = ANY
    ) -> Efficiency | None:
        """The range on record for `limit` on that architecture (or one that holds for any),
        for that kind of kernel where one is on record, else for any kernel."""
        found = [
            e for e in self.efficiencies if e.limit == limit and e.capability in (capability, ANY)
        ]
        for e in sorted(found, key=lambda e: e.kernel != kernel):
            if e.kernel in (kernel, ANY):
                return e
        return None


def parse(text: str, name: str = DATASET.name) -> Dataset:
    """The dataset in `text` (TOML), validated; DatasetError names the first bad entry."""
    data = tomllib.loads(text)
    sources = {}
    for s in data.get("source", []):
        try:
            sources[s["key"]] = Source(s["key"], s["title"], s["url"], s["software"],
                                       s.get("scripts", ""), s.get("authors", ""),
                                       s.get("year"))  # fmt: skip
        except KeyError as e:
            raise DatasetError(f"{name}: source {s.get('key')!r} lacks {e}") from None

    def source(key: str, where: str) -> Source:
        if key not in sources:
            raise DatasetError(f"{name}: {where} cites unknown source {key!r}")
        return sources[key]

    effs = []
    for e in data.get("efficiency", []):
        where = f"efficiency {e.get('capability')}/{e.get('limit')}"
        if e.get("limit") not in ("compute", "memory") or not 0 < e["low"] <= e["high"] <= 1:
            raise DatasetError(f"{name}: {where} needs a limit and 0 < low <= high <= 1")
        if e.get("kernel", ANY) not in KERNELS:
            raise DatasetError(f"{name}: {where} names kernel {e['kernel']!r}; known: {', '.join(KERNELS)}")  # fmt: skip
        cited = None if e["source"] == STATED else source(e["source"], where)
        effs.append(Efficiency(e["capability"], e["limit"], e["low"], e["high"], cited, e["what"],
                               e.get("kernel", ANY)))  # fmt: skip
    slugs = {s.slug for s in SPEC_SHEETS}
    points = []
    for i, p in enumerate(data.get("point", []), 1):
        where = f"point {i} ({p.get('subject')!r})"
        if p.get("gpu") not in slugs:
            raise DatasetError(f"{name}: {where} names GPU {p.get('gpu')!r} with no data sheet")
        if p.get("unit") not in UNITS:
            raise DatasetError(f"{name}: {where} has unit {p.get('unit')!r}; known: {', '.join(UNITS)}")  # fmt: skip
        if "shape" not in p and not p.get("sweep"):
            raise DatasetError(f"{name}: {where} needs a shape or the sweep it is the best of")
        if p["unit"] == "% of baseline" and not p.get("baseline"):
            raise DatasetError(f"{name}: {where} is a share of a baseline and names none")
        known = (p["gpu"], p["subject"], p["statistic"], float(p["value"]), p["unit"])
        shape = Shape.of(p["shape"]) if "shape" in p else None
        optional = (p.get("sweep", ""), p.get("dtype", ""), p.get("baseline", ""))
        points.append(Point(source(p["source"], where), *known, shape, *optional))
    constants = {}
    for c in data.get("constant", []):
        where = f"constant {c.get('key')!r}"
        has_value, has_range = "value" in c, "low" in c and "high" in c
        if has_value == has_range or not all(k in c for k in ("metric", "subject", "unit")):
            raise DatasetError(f"{name}: {where} needs metric, subject, unit and a value or low and high")  # fmt: skip
        constants[c["key"]] = Constant(
            c["key"], source(c["source"], where), c["metric"], c["subject"], c["unit"],
            c.get("value"), c.get("low"), c.get("high"),
        )  # fmt: skip
    return Dataset(sources, tuple(effs), tuple(points), constants)


@cache
def dataset() -> Dataset:
    """The committed reference dataset."""
    return parse(DATASET.read_text(encoding="utf-8"))
