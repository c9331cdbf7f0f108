# The GPU model checked against every GPU timing the site holds, none measured by this
# build: the reference dataset's published times (records/published.toml), each attention
# kernel in the traces others recorded on an H100 (docs/assets/cited/tracelens-h100/), and
# NVIDIA's cuDNN calls, forwards on an H200 and decode and prefill on an A100
# (docs/assets/cited/cudnn-frontend/). Per source and kind of kernel: how many timings, how
# many lie inside the realistic range, how far outside the others lie, and how many lie above
# the floor. No words: render/method.py says them.
from __future__ import annotations

import csv
import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from attention_docs.analytic.gpu import Range, sheet
from attention_docs.findings import gpu_forecast
from attention_docs.findings import published as fpublished
from attention_docs.findings.gpu_trace import CITED, load_chrome, read_trace
from attention_docs.records.shape import Shape

CUDNN = "assets/cited/cudnn-frontend/"
TRACES = (
    "facebook_timesformer-base-finetuned-k400__1016002.json.gz",
    "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "gaunernst_bert-small-uncased__1016001.json.gz",
)
# Kinds of kernel, as the model prices them.
FUSED_FA2 = "fused forward, FlashAttention-2's generation"
FUSED_CUDNN = "fused forward, cuDNN"
DECODE = "decode step"
DECODE_MANY = "decode step of 2 to 16 queries (a fused forward)"
MATMUL = "naive: a matmul"
SOFTMAX = "naive: softmax"
ELEMENTWISE = "naive: element-wise"
NAIVE_FORWARD = "naive forward, every kernel"
# What a chapter's forecast of naive attention stands on: its kernels, one at a time.
NAIVE_KINDS = (MATMUL, SOFTMAX, ELEMENTWISE, NAIVE_FORWARD)
ALL = "all"  # a group that spans sources, GPUs or kinds
# Sources, as the reader knows them.
POINTS = "published points (records/published.toml)"
TRACED = "TraceLens's recorded traces"
TRAINING = "cuDNN training sweep"
PREFILL = "cuDNN prefill sweep"
DECODING = "cuDNN decode sweep"
STEP_KINDS = {
    "attention.scores": MATMUL,
    "attention.weighted_sum": MATMUL,
    "attention.softmax": SOFTMAX,
    "attention.scale": ELEMENTWISE,
    "attention.mask": ELEMENTWISE,
    "attention.sdpa": FUSED_FA2,
}


@dataclass(frozen=True)
class Check:
    """One timing beside the model's forecast for its GPU and shape."""

    source: str
    gpu: str  # the data sheet's slug
    kind: str
    recorded_us: float
    forecast: Range

    @property
    def above_floor(self) -> bool:
        return self.recorded_us > self.forecast.floor_us

    @property
    def inside(self) -> bool:
        return self.under >= 1 and self.over <= 1

    @property
    def over(self) -> float:
        """Recorded over the range's high end: above 1, it took longer than the range allows."""
        return self.recorded_us / self.forecast.high_us

    @property
    def under(self) -> float:
        """Recorded over the range's low end: below 1, it was faster than the range allows."""
        return self.recorded_us / self.forecast.low_us


@dataclass(frozen=True)
class KindCheck:
    """Every check of one group: a source, GPU and kind of kernel (ALL where the group
    spans them)."""

    source: str
    gpu: str
    kind: str
    checks: tuple[Check, ...]

    @property
    def inside(self) -> int:
        return sum(c.inside for c in self.checks)

    @property
    def above(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.over > 1)

    @property
    def far(self) -> int:
        """How many lie above the range by more than twice its high end."""
        return sum(1 for c in self.checks if c.over > 2)

    @property
    def below(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.under < 1)

    @property
    def worst_over(self) -> float | None:
        """The largest recorded ÷ high end among the timings above the range."""
        return max((c.over for c in self.above), default=None)

    @property
    def worst_under(self) -> float | None:
        """The smallest recorded ÷ low end among the timings below the range."""
        return min((c.under for c in self.below), default=None)

    @property
    def above_floor(self) -> int:
        return sum(c.above_floor for c in self.checks)


def checks(docs: Path) -> list[Check]:
    """Every timing of every source beside its forecast (`docs`: the site's docs folder)."""
    return [
        *_points(),
        *_traces(docs / CITED),
        *_cudnn(docs / CUDNN / "training_llama3.1_h200.csv", TRAINING),
        *_cudnn(docs / CUDNN / "prefill_sweep_a100.csv", PREFILL),
        *_cudnn(docs / CUDNN / "decode_sweep_a100.csv", DECODING),
    ]


def by_kind(found: Iterable[Check], *, across: bool = False) -> list[KindCheck]:
    """The checks grouped by source, GPU and kind (`across`: by kind alone), in the order
    they first appear."""
    groups: dict[tuple[str, str, str], list[Check]] = {}
    for c in found:
        key = (ALL, ALL, c.kind) if across else (c.source, c.gpu, c.kind)
        groups.setdefault(key, []).append(c)
    return [KindCheck(*key, tuple(group)) for key, group in groups.items()]


def total(kinds: Iterable[KindCheck]) -> KindCheck:
    """Every check of `kinds` as one group."""
    return KindCheck(ALL, ALL, ALL, tuple(c for k in kinds for c in k.checks))


def _points() -> Iterator[Check]:
    for b in fpublished.accuracy().tested:
        if b.point.unit not in ("ms", "µs"):  # shares and rates: the method page's own list
            continue
        r, model, _ = fpublished.time_forecast(b.point, b.gpu)
        if model == fpublished.RECORDED_OPS:
            kind = NAIVE_FORWARD
        else:
            kind = FUSED_CUDNN if b.point.subject == "SDPA cuDNN" else FUSED_FA2
        yield Check(POINTS, b.gpu.slug, kind, fpublished.published_fact(b.point).value, r)


def _traces(folder: Path) -> Iterator[Check]:
    """Each step of every attention site in the traces (the model prices their steps)."""
    for name in TRACES:
        reading = read_trace(load_chrome(folder / name))
        for site in reading.sites:
            for t in site.steps:
                if t.forecast is not None and t.forecast.high_us:
                    yield Check(TRACED, reading.gpu.slug, STEP_KINDS[t.step], t.gpu_us, t.forecast)


def _cudnn(path: Path, source: str) -> Iterator[Check]:
    """NVIDIA's bfloat16 rows: the training sweep's forwards (its mask named), the
    inference sweeps' calls (causal, aligned bottom-right, where more than one query)."""
    gpu_of = {"NVIDIA H200": "h200", "NVIDIA A100 80GB PCIe": "a100-pcie-80gb"}
    with path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row.get("kv_cache_dtype", row["data_type"]) != "bfloat16":
                continue
            if row["data_type"] != "bfloat16" or row["success"] != "True":
                continue
            training = "q_seqlen" in row
            queries = int(row["q_seqlen" if training else "q_tokens"])
            causal = row["attn_mask"] == "top_left" if training else queries > 1
            shape = Shape(
                int(row["batch_size"]),
                int(row["num_q_heads"]),
                queries,
                int(row["head_dim_qk"]),
                "bfloat16",
                causal,
                int(row["num_kv_heads"]),
                int(row["kv_seqlen" if training else "kv_len"]),
            )
            gpu = sheet(gpu_of[row["gpu_name"]])
            said = gpu_forecast.forecast(gpu, gpu_forecast.SDPA_CUDNN, shape)
            if said.model == gpu_forecast.DECODE:
                kind = DECODE
            else:
                kind = FUSED_CUDNN if source != DECODING else DECODE_MANY
            ms = float(row["fwd_time_ms" if training else "time_ms"])
            yield Check(source, gpu.slug, kind, ms * 1e3, said.range)


def records(docs: Path = Path("docs")) -> dict[str, KindCheck]:
    """Per kind of kernel, its checks over every source in `docs` (the site's folder, from
    where a build runs); empty where the cited files are not there (a notebook run alone)."""
    return _records(docs.resolve())


@functools.cache
def _records(docs: Path) -> dict[str, KindCheck]:
    if not (docs / CITED).is_dir() or not (docs / CUDNN).is_dir():
        return {}
    return {k.kind: k for k in by_kind(checks(docs), across=True)}
