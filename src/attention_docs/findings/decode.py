# Facts and verdicts of KV-cache decoding, from a device's one `decode_steps` entry (every
# decode step timed once, per layer) and its `decode_prefill_vs_decode` entry, under
# machine_ceilings' roof where that was measured on the same device, and the H200 forecast
# the chapter sets beside them. Rates use unprofiled times only. No words here.
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from attention_docs.analytic import cost
from attention_docs.analytic import decode as decode_model
from attention_docs.analytic import gpu as gpus
from attention_docs.findings import sweep as fsw
from attention_docs.findings.compare import Comparison, compare
from attention_docs.findings.facts import (
    PROFILED,
    UNPROFILED,
    Fact,
    On,
    Quantity,
    llc_fact,
    model_fact,
    per_second,
)
from attention_docs.findings.forecast import Check, check, forecast
from attention_docs.findings.forward import Versus, ceiling
from attention_docs.findings.share import Largest, largest, shares
from attention_docs.findings.trend import end_to_end
from attention_docs.measurements.schema import Measurement
from attention_docs.records.device import SpecSheet
from attention_docs.records.shape import Shape
from attention_docs.records.sweep import Sweep
from attention_docs.records.timing import Timing

STEP_TIME = "decode step time"
PER_TOKEN = "decode time per token"
INTENSITY = "arithmetic intensity"
SPEED = "decode speed ratio"
VARIANTS = ("MHA", "GQA", "MQA")
# The chapter's forecast: the GPU and shape every chapter uses (analytic/gpu.py), with 32 heads
# as in the models whose decode is studied, and the extremes of a realistic decode.
GPU_HEADS, GPU_KV_HEADS = 32, {"MHA": 32, "GQA": 8, "MQA": 1}
GPU_POINTS = ((1, 4096), (8, 16384))  # (batch_size, cache_len)
# The cache sweep, a view over the steps table (records/sweep.py): each variant on SDPA at
# batch 1 as the cache grows, its facts the very step_time facts of those points.
CACHE = Sweep(
    table="steps",
    x="cache_len",
    x_unit="tokens",
    lines=VARIANTS,
    metric=STEP_TIME,
    subject="{impl}",
    line="variant",
    where=(("impl", "sdpa"), ("batch_size", 1)),
    shape_from=(
        ("batch_size", "batch_size"),
        ("seq_len", 1),
        ("num_kv_heads", "num_kv_heads"),
        ("kv_len", "cache_len"),
    ),
    detail="per layer, {working_set_mb} MB read per timed step",
)


@dataclass(frozen=True)
class Point:
    """One timed decode step: a variant on a path at a shape, per layer (a steps row), with
    its quantity as CACHE's view derives it, so a table cell and a sweep cell agree."""

    variant: str
    impl: str
    quantity: Quantity  # its step time's: one new token against kv_len cached ones, per layer
    layers: int
    time: Timing | None  # None: the path did not run here (`status` says why)
    status: str

    @property
    def shape(self) -> Shape:
        return self.quantity.shape

    @property
    def cost(self) -> decode_model.DecodeCost:
        return cost_of(self.shape)

    @property
    def token_time(self) -> Timing | None:
        """The step's time per sequence of its batch."""
        return self.time.scaled(1 / self.shape.batch_size) if self.time else None

    @property
    def label(self) -> str:
        return f"{self.variant} · {self.impl}"


def cost_of(s: Shape) -> decode_model.DecodeCost:
    """The cost model's FLOPs and bytes of `s.seq_len` new tokens against `s.keys` cached."""
    return decode_model.decode_cost(
        s.batch_size, s.num_heads, s.keys, s.head_dim, s.dtype,
        num_kv_heads=s.kv_heads, q_len=s.seq_len,
    )  # fmt: skip


def step_shape(s: Shape, cache_len: int) -> Shape:
    """One new token of `s`'s batch and heads against `cache_len` cached ones."""
    return replace(s, seq_len=1, causal=False, kv_len=cache_len)


def points(m: Measurement, **want: Any) -> list[Point]:
    """The points of a decode_steps entry whose row holds every value in `want`
    (`impl="sdpa"`, `batch_size=1`), in their order."""

    def quantity(r) -> Quantity:
        return fsw.quantity(CACHE, m.params, m.device_id, r.variant, r.cache_len, row=vars(r))

    return [
        Point(r.variant, r.impl, quantity(r), r.layers, r.time, r.status)
        for r in fsw.rows_of(m.tables["steps"])
        if all(getattr(r, k) == v for k, v in want.items())
    ]


def base_points(m: Measurement, **want: Any) -> list[Point]:
    """Every path at the base batch and cache (the chapter's table and roofline)."""
    return points(m, batch_size=m.params["batch_size"], cache_len=m.params["cache_len"], **want)


def point(m: Measurement, variant: str, impl: str = "sdpa") -> Point | None:
    return next(iter(base_points(m, variant=variant, impl=impl)), None)


def cache_series(m: Measurement, variant: str) -> list[Point]:
    """`variant` as the cache grows: the rows CACHE's view is (SDPA at batch 1)."""
    found = points(m, variant=variant, **dict(CACHE.where))
    return sorted(found, key=lambda p: p.shape.keys)


def batch_series(m: Measurement) -> list[Point]:
    """Grouped-query on SDPA at the base cache as the batch grows."""
    found = points(m, variant="GQA", impl="sdpa", cache_len=m.params["cache_len"])
    return sorted(found, key=lambda p: p.shape.batch_size)


def _quantity(p: Point, metric: str) -> Quantity:
    return replace(p.quantity, metric=metric)


def step_time(m: Measurement, p: Point) -> Fact | None:
    """The unprofiled time of one step of one layer, with its rounds' range."""
    return Fact.of_timing(_quantity(p, STEP_TIME), p.time) if p.time else None


def per_token(m: Measurement, p: Point) -> Fact | None:
    return Fact.of_timing(_quantity(p, PER_TOKEN), p.token_time) if p.time else None


def read_rate(m: Measurement, p: Point) -> Fact | None:
    """Bytes the step must move (cost model) over its unprofiled time."""
    if p.time is None:
        return None
    return per_second(_quantity(p, "cache read rate"), p.cost.bytes, p.time, "B/s")


def roof(m: Measurement, ceilings: Measurement | None) -> tuple[Fact | None, Fact | None]:
    """machine_ceilings' copy bandwidth and matmul rate in `m`'s dtype, each where measured
    on `m`'s device (else None)."""
    if ceilings is None or ceilings.device_id != m.device_id:
        return None, None
    keys = ("bandwidth_bs", f"peak_flops_{m.params['dtype']}")
    bw, peak = (ceiling(ceilings, k) if ceilings.facts.get(k) else None for k in keys)
    return bw, peak


def copy_share(m: Measurement, p: Point, ceilings: Measurement | None) -> Fact | None:
    """The read rate as a fraction of the copy bandwidth measured on the same device."""
    bw, rate = roof(m, ceilings)[0], read_rate(m, p)
    if bw is None or rate is None:
        return None
    q, v = _quantity(p, "share of copy bandwidth"), bw.value
    return Fact(q, rate.value / v, "%", rate.low / v, rate.high / v)


def working_set(p: Point) -> Fact:
    """What one timed call of the point cycles through: its layers' K and V caches (cost
    model), each read once per call."""
    value, what = p.cost.cache_bytes * p.layers, "working set of a timed call"
    return model_fact(
        what, "K and V, every layer", p.shape, value, "B", detail=f"{p.layers} layers"
    )


def working_sets(points: list[Point]) -> list[Fact]:
    """Each distinct working set among `points`, once, in their order (variants sized to one
    working set share one value)."""
    found: dict[float, Fact] = {}
    for p in points:
        f = working_set(p)
        found.setdefault(f.value, f)
    return list(found.values())


def cache_resident(points: list[Point], ceilings: Measurement | None) -> Fact | None:
    """The last-level cache, where every one of `points` cycles through less than it holds
    (so their bytes may come from that cache, not from memory); None where one does not, or
    where the ceilings recorded no cache."""
    llc = llc_fact(ceilings.facts, ceilings.device_id) if ceilings else None
    if llc is None or not points or any(working_set(p).value > llc.value for p in points):
        return None
    return llc


def cache_size(p: Point) -> Fact:
    """The K and V cache of one layer (cost model)."""
    return model_fact("K/V cache size", "K and V", p.shape, p.cost.cache_bytes, "B")


def intensity(p: Point) -> Fact:
    """FLOPs per byte the step must move (cost model)."""
    return model_fact(INTENSITY, "decode step", p.shape, p.cost.intensity, "FLOP/B")


def versus(m: Measurement, a: Point, b: Point) -> Versus | None:
    """How `a` compares with `b` (by their labels), said the way round that makes the ratio
    at least 1."""
    if a.time is None or b.time is None:
        return None
    if compare(a.time, b.time).ratio < 1:
        a, b = b, a
    q = Quantity(SPEED, f"{a.label} vs {b.label}", m.device_id, UNPROFILED, a.shape, b.shape.key())
    return Versus.of(q, a.label, b.label, compare(a.time, b.time))


@dataclass(frozen=True)
class BytesTest:
    """Whether time followed bytes from a step to step `fewer`: `fewer` moves `bytes_ratio`
    times fewer bytes, so if bytes alone set the pace it would be that many times faster.
    `side`: "within" when the byte ratio lies inside the range of the speed-up over the
    rounds, "short" when the speed-up is less than the byte ratio in every round, "beyond"
    when it is more (a smaller working set can sit in a faster cache)."""

    fewer: Point
    bytes_ratio: Fact
    side: str


def bytes_test(m: Measurement, more: Point, fewer: Point) -> BytesTest | None:
    """`fewer`'s speed-up over `more` against the ratio of the bytes each step moves."""
    if more.time is None or fewer.time is None or not fewer.cost.bytes:
        return None
    ratio = more.cost.bytes / fewer.cost.bytes
    subject, at = f"{more.label} ÷ {fewer.label}", fewer.shape.key()
    fact = model_fact("bytes moved, ratio", subject, more.shape, ratio, "×", detail=at)
    c = compare(fewer.time, more.time)
    side = "short" if c.high < ratio else "beyond" if c.low > ratio else "within"
    return BytesTest(fewer, fact, side)


def ridge(m: Measurement, ceilings: Measurement | None) -> float | None:
    """FLOP per byte where the measured matmul rate meets the measured copy bandwidth."""
    bw, peak = roof(m, ceilings)
    return peak.value / bw.value if bw and peak else None


def below_ridge(m: Measurement, ceilings: Measurement | None, p: Point) -> bool | None:
    """Whether the step sits left of the measured ridge (bytes bound it); None: no roof here."""
    r = ridge(m, ceilings)
    return None if r is None else p.cost.intensity < r


# --- the cache and the batch ---------------------------------------------------------------


def tail_slope(m: Measurement, variant: str) -> Fact | None:
    """The log-log slope of step time over cache length across the longer half of the caches,
    with its range over the rounds (1: time proportional to the bytes read)."""
    series = [p for p in cache_series(m, variant) if p.time is not None]
    tail = series[len(series) // 2 :]
    if len(tail) < 2:
        return None
    s = end_to_end([p.shape.keys for p in tail], [p.time for p in tail])
    q = _quantity(tail[-1], "log-log slope of step time over cache length")
    detail = f"cache_len {tail[0].shape.keys}–{tail[-1].shape.keys}, {q.detail}"
    return Fact(replace(q, subject=variant, detail=detail), s.slope, "", s.low, s.high)


def saturation(m: Measurement) -> Point | None:
    """The first batch from which no larger batch decodes a token faster beyond the noise;
    None when the time per token still falls at the largest batch measured."""
    series = [p for p in batch_series(m) if p.time is not None]
    tokens = [p.token_time for p in series]
    for i, t in enumerate(tokens[:-1]):
        if all(compare(x, t).tie or x.time_us >= t.time_us for x in tokens[i + 1 :]):
            return series[i]
    return None


def token_gain(m: Measurement) -> tuple[Quantity, Comparison] | None:
    """Time per token at the largest batch against the smallest (ratio > 1: batching helped)."""
    series = [p for p in batch_series(m) if p.time is not None]
    if len(series) < 2:
        return None
    first, last = series[0], series[-1]
    subject = f"batch {last.shape.batch_size} vs batch {first.shape.batch_size}, per token"
    q = replace(_quantity(last, SPEED), subject=subject)
    return q, compare(last.token_time, first.token_time)


# --- prefill against decode ------------------------------------------------------------------

PREFILL, DECODE = "prefill (all at once)", "decode (one at a time)"
FLOOR, PROFILED_STEP = "decode step, one cached token", "decode step at the full cache (naive)"


def prompt_shape(m: Measurement) -> Shape:
    return Shape.of(m.params, seq_len=m.params["prompt_len"], causal=True)


def _times(m: Measurement) -> dict[str, Timing]:
    return {r["mode"]: r["time"] for r in m.tables["times"].records()}


def moved_bytes(m: Measurement, mode: str) -> float:
    """The least bytes each way must move: prefill reads the cache once, decode re-reads it at
    every step; both read the queries and write the outputs once."""
    s = prompt_shape(m)
    if mode == PREFILL:
        return cost_of(s).bytes
    return sum(cost_of(step_shape(s, t)).bytes for t in range(1, s.seq_len + 1))


def _mode_quantity(m: Measurement, metric: str, mode: str) -> Quantity:
    subject = f"{mode}, {m.params['impl']}"
    return Quantity(metric, subject, m.device_id, UNPROFILED, prompt_shape(m))


def mode_time(m: Measurement, mode: str) -> Fact:
    """The unprofiled time of one mode: all the tokens (prefill, decode), or one step."""
    s = prompt_shape(m)
    if mode in (FLOOR, PROFILED_STEP):
        impl = "naive" if mode == PROFILED_STEP else m.params["impl"]
        shape = step_shape(s, 1 if mode == FLOOR else s.seq_len)
        q = Quantity(STEP_TIME, impl, m.device_id, UNPROFILED, shape, "one layer, cache warm")
    else:
        q = _mode_quantity(m, "time for the tokens", mode)
    return Fact.of_timing(q, _times(m)[mode])


def mode_per_token(m: Measurement, mode: str) -> Fact:
    t = _times(m)[mode].scaled(1 / m.params["prompt_len"])
    return Fact.of_timing(_mode_quantity(m, PER_TOKEN, mode), t)


def mode_costs(m: Measurement, mode: str) -> tuple[Fact, Fact, Fact]:
    """One mode's useful FLOP rate (unprofiled), and its bytes and intensity (cost model).
    Causal attention does the same work either way: query t meets keys 0..t, the visible
    pairs of the prompt's square causal mask."""
    flops, moved = cost.useful_flops(*prompt_shape(m).dims, causal=True), moved_bytes(m, mode)
    return (
        per_second(_mode_quantity(m, "useful FLOP rate", mode), flops, _times(m)[mode], "FLOP/s"),
        model_fact("bytes moved", mode, prompt_shape(m), moved, "B"),
        model_fact(INTENSITY, mode, prompt_shape(m), flops / moved, "FLOP/B"),
    )


def prefill_speed(m: Measurement) -> tuple[Quantity, Comparison]:
    """Prefill against decode of the same tokens (ratio > 1: prefill is faster)."""
    t = _times(m)
    return _mode_quantity(m, SPEED, "prefill vs decode"), compare(t[PREFILL], t[DECODE])


def bytes_ratio(m: Measurement) -> Fact:
    """How many times prefill's bytes decode must move (cost model)."""
    value = moved_bytes(m, DECODE) / moved_bytes(m, PREFILL)
    return model_fact("bytes ratio", "decode vs prefill", prompt_shape(m), value, "×")


@dataclass(frozen=True)
class Split:
    """Decode's time against two causes: its bytes at the copy bandwidth, and `steps` steps on
    a one-token cache (what taking a step costs with nothing to read). `holds` is False when
    the two (at their medians) add up to more than decoding's slowest round: the one-token
    step is then no floor on this run, and no split is stated."""

    bytes_share: Fact
    steps_share: Fact
    holds: bool
    steps_dominate: bool


def split(m: Measurement, ceilings: Measurement | None) -> Split | None:
    bw = roof(m, ceilings)[0]
    if not bw:
        return None
    t, n, s = _times(m), m.params["prompt_len"], prompt_shape(m)
    bytes_us, steps_us = moved_bytes(m, DECODE) / bw.value * 1e6, n * t[FLOOR].time_us

    def share(subject: str, part_us: float) -> Fact:
        q = Quantity("share of decode time", subject, m.device_id, UNPROFILED, s)
        return Fact(q, part_us / t[DECODE].time_us, "%")

    return Split(
        share("bytes at the copy bandwidth", bytes_us),
        share(f"{n} steps on a one-token cache", steps_us),
        bytes_us + steps_us <= t[DECODE].high_us,
        steps_us > bytes_us,
    )


def step_shares(m: Measurement) -> tuple[dict[str, Fact], Largest]:
    """Each labelled range's share of the profiled decode step, with its range over the
    profiled steps (structure from a profile: the times themselves are inflated), and the
    range with the largest share, with whether it clears every other beyond the noise."""
    table, s = m.tables["per_forward"], prompt_shape(m)
    found = shares({c: table.column(c) for c in table.columns if c != "forward"})
    on = On(m.device_id, step_shape(s, s.seq_len))
    facts = {
        label: on("share of the profiled step", label, PROFILED, sh) for label, sh in found.items()
    }
    return facts, largest(found)


# --- the H200 forecast -----------------------------------------------------------------------


def gpu_shape(variant: str, batch_size: int, cache_len: int) -> Shape:
    g = gpus.FORECAST_SHAPE
    return Shape(
        batch_size, GPU_HEADS, 1, g.head_dim, g.dtype, False, GPU_KV_HEADS[variant], cache_len
    )


def floor(gpu: SpecSheet, variant: str, batch_size: int, cache_len: int) -> Fact:
    """A decode step's floor on `gpu`: its bytes at the data sheet's bandwidth."""
    shape = gpu_shape(variant, batch_size, cache_len)
    value = gpus.decode_step(gpu, shape).floor_us
    return forecast(STEP_TIME, "sdpa", gpu, value, "µs", shape=shape, detail="floor: decode_step")


def floor_checks(
    gpu: SpecSheet, measured: Measurement | None = None
) -> list[tuple[str, int, int, Check]]:
    """A decode step's floor (bytes ÷ bandwidth) on `gpu` at each forecast point, beside the
    SDPA step `measured` on that GPU when its decode_steps entry holds the same shape."""
    sdpa = {p.shape: p for p in points(measured, impl="sdpa")} if measured else {}
    rows = []
    for variant in VARIANTS:
        for b, c in GPU_POINTS:
            f = floor(gpu, variant, b, c)
            p = sdpa.get(f.quantity.shape)
            rows.append((variant, b, c, check(f, step_time(measured, p) if p else None)))
    return rows


def memory_bound_everywhere(gpu: SpecSheet) -> bool:
    """Whether every forecast point's floor is set by the bandwidth, not the FLOPs."""
    return all(
        gpus.decode_step(gpu, gpu_shape(v, b, c)).limit == "memory"
        for v in VARIANTS
        for b, c in GPU_POINTS
    )


def fill_batch(gpu: SpecSheet, variant: str) -> Fact:
    """The smallest batch whose unsplit FlashAttention 2 decode step fills the GPU."""
    kv = GPU_KV_HEADS[variant]
    value = decode_model.batch_filling_gpu(GPU_HEADS, kv, gpu.sm_count)
    subject = f"{variant}, {GPU_HEADS} heads, {kv} k/v heads, {gpus.FORECAST_SHAPE.dtype}"
    return forecast("batch filling the GPU without split-KV", subject, gpu, value, "sequences")


def splits(gpu: SpecSheet, variant: str, batch_size: int, cache_len: int) -> Fact:
    """How many parts FlashAttention 2 splits the cache into at that point."""
    shape = gpu_shape(variant, batch_size, cache_len)
    blocks = decode_model.decode_blocks(batch_size, GPU_HEADS, GPU_KV_HEADS[variant])
    value = decode_model.num_splits(blocks, gpu.sm_count, cache_len, shape.head_dim)
    return forecast("split-KV parts", "FlashAttention 2 decode", gpu, value, "parts", shape=shape)


def ridge_tokens(gpu: SpecSheet, variant: str) -> Fact:
    """New tokens per step (speculative decoding) from which a step at the longest forecast
    cache reaches the ridge."""
    s = gpu_shape(variant, 1, GPU_POINTS[-1][1])
    at = gpus.ridge(gpu, s.dtype)
    value = decode_model.queries_to_ridge(
        GPU_HEADS, s.kv_heads, s.head_dim, s.dtype, ridge=at, cache_len=s.keys
    )
    return forecast("new tokens per step at the ridge", variant, gpu, value, "tokens", shape=s)


def gpu_ridge(gpu: SpecSheet) -> Fact:
    dtype = gpus.FORECAST_SHAPE.dtype
    subject = f"{dtype} tensor-core peak over HBM bandwidth"
    return forecast("ridge point", subject, gpu, gpus.ridge(gpu, dtype), "FLOP/B")


def host_bound(floors: list[Fact], host_step: Fact) -> int:
    """How many forecast floors are shorter than one eager step's host cost measured here: at
    those, a GPU decoder launched op by op would wait on its host (what CUDA graphs remove)."""
    return sum(f.value < host_step.value for f in floors)
