# Memory verdicts for the memory chapter, as facts: one forward's peak above its inputs as the
# allocator counted it, as the tensors alone (scratch left out) and as the model predicts it;
# the scratch a backend allocates per op call; how many N×N tensors are created and how many
# are live at once; the peak sweep's rows; and the forecasts for a GPU with their checks.
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from attention_docs.analytic import gpu as gpus
from attention_docs.analytic import memory as amem
from attention_docs.findings.facts import COUNTED, MODEL, Fact, On, Quantity, model_fact
from attention_docs.findings.forecast import Check, check, forecast
from attention_docs.findings.trend import table_slopes
from attention_docs.measurements.forward import NAIVE
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape

PEAK = "peak memory"
ABOVE = "above the inputs"
TENSORS = "tensors only, above the inputs"
FUSED = "fused kernel (FlashAttention)"
LONGEST = "longest seq_len that fits"


def shape(m: Measurement, **overrides) -> Shape:
    return Shape.of(m.params, **overrides)


def without_seq_len(s: Shape) -> str:
    """`s`'s key without its seq_len, for the fact ids of a quantity over every length."""
    return s.key().replace(f" n{s.seq_len} ", " ")


# The forecast shape without its seq_len, for fact ids and sentences: `b4 h16 d128 bfloat16 causal`.
FORECAST_BASE = without_seq_len(gpus.FORECAST_SHAPE)


def peak_model(s: Shape) -> amem.PeakModel:
    """The naive forward's live buffers at its peak, at `s`."""
    return amem.naive_peak(*s.dims, s.dtype, causal=s.causal, kv_seq_len=s.kv_len)


def nxn_bytes(s: Shape) -> int:
    """The model's N×N working set at `s`: the matrices live at once and the mask."""
    p = peak_model(s)
    return p.matrices * p.matrix_bytes + p.mask_bytes


def step_bytes(m: Measurement, row: dict, column: str) -> Fact:
    """A step's bytes the allocator counted (`allocated_bytes`, `freed_bytes`,
    `live_after_bytes` of memory_timeline's steps table) as a fact of `m`'s device and shape."""
    return On.of(m)(column.replace("_", " "), row["step"], COUNTED, row[column], "B")


def peak_fact(m: Measurement, value: float | None, s: Shape, detail: str = ABOVE) -> Fact:
    """A peak the allocator counted on `m`'s device."""
    return On(m.device_id, s)(PEAK, NAIVE, COUNTED, value, "B", detail=detail)


def model_peak(s: Shape, *, with_inputs: bool = False) -> Fact:
    p = peak_model(s)
    detail, value = ("with the inputs", p.total_bytes) if with_inputs else (ABOVE, p.peak_bytes)
    return model_fact(PEAK, NAIVE, s, value, "B", detail=detail)


# One of the model's parts: its metric, subject and PeakModel field.
PARTS = {
    "matrix": ("one N×N matrix", "scores", "matrix_bytes"),
    "mask": ("bool mask", NAIVE, "mask_bytes"),
    "output": ("output", NAIVE, "output_bytes"),
}


def matrix(s: Shape, part: str = "matrix") -> Fact:
    """One of the model's parts in bytes: "matrix" (one N×N score matrix), "mask", "output"."""
    metric, subject, field = PARTS[part]
    return model_fact(metric, subject, s, getattr(peak_model(s), field), "B")


SCRATCH_BLOCK_BYTES = 64  # below this, a scratch allocation is a scalar, not a block


@dataclass(frozen=True)
class Scratch:
    """Scratch one op allocated and freed again inside one call, in one step."""

    step: str
    op: str
    per_call: Fact  # the largest such block


@dataclass(frozen=True)
class DtypePeak:
    """One forward's peak in one dtype: counted, tensors alone, predicted; what ran the
    matmul; and the scratch each op allocated. `exact`: the tensors equal the model."""

    dtype: str
    measured: Fact
    tensors: Fact
    model: Fact
    scratch_at_peak: Fact
    exact: bool
    backend: str
    kernel: str | None
    isa: str | None
    scratch: tuple[Scratch, ...]

    @property
    def matches_model(self) -> bool:
        """The counted peak is the model's prediction to the byte."""
        return self.measured.value == self.model.value

    @property
    def scratch_blocks(self) -> tuple[Scratch, ...]:
        """The scratch that is a block of data (64 bytes or more per call), not the 2–4 byte
        scalar of `√d`."""
        return tuple(x for x in self.scratch if x.per_call.value >= SCRATCH_BLOCK_BYTES)


def _scratch(m: Measurement, s: Shape, x: dict) -> Scratch:
    q = Quantity("scratch per call", x["op"], m.device_id, COUNTED, s, x["step"])
    return Scratch(x["step"], x["op"], Fact(q, x["largest_bytes"], "B"))


def dtype_peaks(m: Measurement) -> tuple[DtypePeak, ...]:
    """Per dtype the timeline profiled (memory_timeline's `dtypes` and `scratch` tables)."""
    out = []
    for r in m.tables["dtypes"].records():
        s = shape(m, dtype=r["dtype"])
        found = m.tables["scratch"].records()
        scratch = tuple(_scratch(m, s, x) for x in found if x["dtype"] == r["dtype"])
        measured, tensors = r["measured_peak_bytes"], r["tensor_peak_bytes"]
        out.append(
            DtypePeak(
                r["dtype"],
                peak_fact(m, measured, s),
                peak_fact(m, tensors, s, TENSORS),
                model_peak(s),
                peak_fact(m, measured - tensors, s, "scratch live at the peak"),
                tensors == r["model_peak_bytes"],
                r["backend"],
                r["kernel"],
                r["isa"],
                scratch,
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class Matrices:
    """N×N tensors one forward creates (and in which steps), and the most live at once."""

    created: Fact
    makers: tuple[str, ...]
    live_at_once: Fact


def matrices(m: Measurement) -> Matrices:
    """Counted by size, event by event: allocations of exactly a score matrix's size minus
    frees of that size (the mask and the output are other sizes, and are not counted)."""
    live = most = 0
    for e in m.tables["events"].records():
        if amem.is_matrix_sized(e["bytes"], m.facts["matrix_bytes"]):
            live += 1 if e["bytes"] > 0 else -1
            most = max(most, live)
    steps = m.tables["steps"].records()

    on = On.of(m)
    return Matrices(
        on("N×N tensors created", NAIVE, COUNTED, sum(r["score_sized"] for r in steps)),
        tuple(r["step"] for r in steps if r["score_sized"]),
        on("N×N tensors live at once", NAIVE, COUNTED, most),
    )


@dataclass(frozen=True)
class PeakRow:
    seq_len: int
    model: Fact
    total: Fact
    measured: Fact | None
    ratio: Fact | None  # measured ÷ model
    nxn: Fact | None  # the model's N×N part (two matrices and the mask) over the measured peak
    status: str


def peaks_to_the_byte(rows: Iterable[PeakRow]) -> bool:
    """Every row that ran measured exactly the model's peak (a ratio of 1)."""
    return all(r.ratio.value == 1 for r in rows if r.ratio is not None)


def peak_rows(m: Measurement) -> tuple[PeakRow, ...]:
    """memory_peak's rows as facts (a row that did not run has no measured value)."""
    out = []
    for r in m.tables["peak"].records():
        s, value = shape(m, seq_len=r["seq_len"]), r["measured_peak_bytes"]
        measured = None if value is None else peak_fact(m, value, s)
        ratio = nxn = None
        if value:
            q = Quantity("measured ÷ model", PEAK, m.device_id, COUNTED, s, ABOVE)
            ratio = Fact(q, r["measured_over_predicted"], "×")
            q = Quantity("N×N share", PEAK, m.device_id, COUNTED, s, ABOVE)
            nxn = Fact(q, nxn_bytes(s) / value, "%")
        total = model_peak(s, with_inputs=True)
        status = r["status"].split(" (")[0]
        out.append(PeakRow(r["seq_len"], model_peak(s), total, measured, ratio, nxn, status))
    return tuple(out)


def longest(m: Measurement, *, free: bool) -> Fact:
    """The model's longest seq_len whose inputs and peak fit in the device's memory (all of
    it, or what was free when the sweep began)."""
    key = "predicted_max_seq_len_free" if free else "predicted_max_seq_len"
    detail = f"{without_seq_len(shape(m, seq_len=1))}; {'free' if free else 'all'} memory"
    return On(m.device_id)(LONGEST, NAIVE, MODEL, m.facts[key], "tokens", detail=detail)


def memory_fact(m: Measurement, key: str) -> Fact:
    """The device's memory (`memory_bytes`) or what was free at the start (`free_bytes`)."""
    q = Quantity(key.replace("_", " "), m.facts["memory_kind"], m.device_id, COUNTED)
    return Fact(q, m.facts[key], "B")


def longest_forecast(gpu: SpecSheet) -> Fact:
    """The longest seq_len whose naive forward fits in all of `gpu`'s memory, at the forecast
    shape's batch, heads, head_dim and dtype, rounded down to two significant figures: the
    model leaves out the CUDA context and the libraries' workspaces, so its last digits
    would promise a precision it does not have."""
    n = gpus.longest_naive_seq_len(gpu, gpus.FORECAST_SHAPE)
    step = 10 ** max(len(str(n)) - 2, 0)
    return forecast(
        LONGEST, NAIVE, gpu, n // step * step, "tokens", detail=f"{FORECAST_BASE}; all memory"
    )


def forecasts(gpu: SpecSheet, stored: Measurement | None = None) -> dict[str, Check]:
    """The memory chapter's forecasts for `gpu` at the site's forecast shape: the naive
    peak (checked against a stored memory_timeline of that GPU at that shape), the longest
    seq_len whose naive forward fits, and what a fused kernel keeps instead."""
    s = gpus.FORECAST_SHAPE
    naive, memory = peak_model(s), gpus.memory_bytes(gpu)
    fused, workspace = amem.fused_peak(*s.dims, s.dtype), amem.CUBLAS_WORKSPACE_HOPPER
    found = {
        "naive peak": forecast(PEAK, NAIVE, gpu, naive.peak_bytes, "B", shape=s, detail=ABOVE),
        "matrix": forecast("one N×N matrix", "scores", gpu, naive.matrix_bytes, "B", shape=s),
        "longest": longest_forecast(gpu),
        "fused peak": forecast(PEAK, FUSED, gpu, fused, "B", shape=s, detail=ABOVE),
        "memory": forecast("memory", "HBM", gpu, memory, "B"),
        "data sheet memory": forecast("memory, data sheet", "HBM", gpu, gpu.memory_gb * 1e9, "B"),
        "workspace": forecast("workspace per stream", "cuBLAS", gpu, workspace, "B"),
    }
    if gpu.reported_mib is not None:
        found["memory MiB"] = forecast(
            "memory as the driver reports it", "HBM", gpu, gpu.reported_mib, "MiB"
        )
        found["memory GiB"] = forecast("memory in GiB", "HBM", gpu, memory / 2**30, "GiB")
    measured = None
    if stored is not None and shape(stored) == s:
        measured = peak_fact(stored, stored.facts["measured_peak_bytes"], s)
    return {k: check(f, measured if k == "naive peak" else None) for k, f in found.items()}


PEAK_LINES = ("predicted_peak_bytes", "measured_peak_bytes")


def peak_slopes(m: Measurement) -> dict[str, float | None]:
    """The fitted log-log slope of the predicted and the measured peak against seq_len."""
    return table_slopes(m.tables["peak"], "seq_len", PEAK_LINES)
