# Every point of the reference dataset (records/published.toml: GPU measurements others
# published, cited, never measured here) beside this project's forecast for the same GPU and
# shape, with the ratio, and the forecast model's accuracy over all of them: where each
# published value falls against the forecast's realistic range. A forecast that is a range
# is never a ratio of two floors; a point that is the very efficiency a range divides by
# agrees with it by construction and is said to. No words: render/published.py says them.
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.analytic import gpu as gpus
from attention_docs.findings.facts import PUBLISHED, SPEC, Fact, On, Quantity, model_fact
from attention_docs.records.device import SpecSheet
from attention_docs.records.ops import recording
from attention_docs.records.published import ANY, FLASH_2, Point, dataset

# Where a published value falls against its forecast.
WITHIN = "within the range"
ABOVE = "above the range"
BELOW = "below the range"
SAME_COUNT = "the same count"  # a kernel count: the forecast's and the published are equal
MORE, FEWER = "more kernels", "fewer kernels"  # published against the forecast's count
OWN_SOURCE = "the range's own source"  # the efficiency the range divides by is this point
NO_RANGE = "no cited efficiency"  # only the floor (or the peak) to set it beside
# A throughput relative to another kernel of the same algorithm (FlexAttention against
# FlashAttention): the forecast prices both as one fused kernel, so it says 100%.
AS_FAST = "as fast as its baseline"
SLOWER = "slower than its baseline"
FASTER = "faster than its baseline"
SAME_KERNEL = frozenset({"FlashAttention-2", "FlashAttention-3"})
# What the dataset's subjects run, as the forecast prices them: a recording of the code
# (records/recorded_ops.json) or one fused forward kernel (analytic/gpu.py flash_forward).
RECORDED = {
    "naive, masked_fill_": gpus.IN_PLACE,
    "naive, masked_fill": "masked_fill",
    "SDPA math": gpus.SDPA_MATH,
}
FUSED = frozenset({"SDPA flash", "SDPA efficient", "SDPA cuDNN"})
RECORDED_OPS = "kernels of the recorded ops"  # the model of a RECORDED subject, as said
METRIC_RELATIVE = "throughput relative to a baseline"
SUBJECT_RELATIVE = "FlexAttention vs FlashAttention"
# The units a point's value is read in, as this site's facts carry them: metric, unit, and
# what the value is multiplied and divided by.
_METRICS = {
    "ms": ("forward time", "µs", 1e3, 1),
    "µs": ("forward time", "µs", 1, 1),
    "kernels": ("GPU kernels per forward", "kernels", 1, 1),
    "TFLOP/s": ("FLOP/s", "FLOP/s", 1e12, 1),
    "%": ("share of peak FLOP/s", "%", 1, 100),
    "% of baseline": (METRIC_RELATIVE, "%", 1, 100),
}
# Relative throughputs within this share of 100% are "as fast": the sources round to 1%.
AS_FAST_WITHIN = 0.005
RATIO = "published ÷ forecast"


class UnforecastPointError(LookupError):
    """A dataset point whose subject the forecast does not know how to price."""


def published_fact(point: Point) -> Fact:
    """The point as a fact: cited (device `paper:SOURCE`), never measured here."""
    metric, unit, times, per = _METRICS[point.unit]
    detail = f"{point.gpu}; {point.statistic}"
    q = Quantity(metric, point.subject, f"paper:{point.source.key}", PUBLISHED, point.shape, detail)
    return Fact(q, point.value * times / per, unit)


@dataclass(frozen=True)
class Beside:
    """One published point and the forecast for its GPU and shape.

    `forecast`: the realistic range (value None, `low`..`high`) or, with no cited efficiency,
    the floor (a count: the count). `ratio`: published ÷ forecast over that range (low =
    published ÷ the range's high end). `where`: one of WITHIN, ABOVE, BELOW, OWN_SOURCE,
    NO_RANGE (SAME_COUNT, MORE, FEWER for a kernel count). `model`: which forecast, for
    the reader ("kernels of the recorded ops"...)."""

    point: Point
    gpu: SpecSheet
    published: Fact
    forecast: Fact
    ratio: Fact
    where: str
    model: str
    kernels: int | None  # the forecast's kernel count, for a time forecast priced by kernel


def _spec_fact(point: Point, gpu: SpecSheet, what: str, value, unit, *ends) -> Fact:
    q = On.spec(gpu, point.shape).quantity(_METRICS[point.unit][0], point.subject, SPEC, what)
    return Fact(q, value, unit, *ends)


def _where(value: float, low: float, high: float) -> str:
    if value < low:
        return BELOW
    return ABOVE if value > high else WITHIN


# Each kind of point's forecast: (the forecast fact, where the value falls, the model, the
# kernels a time forecast priced or None).
_Forecast = tuple[Fact, str, str, int | None]


def _count(point: Point, gpu: SpecSheet, value: float) -> _Forecast:
    if point.subject in FUSED:
        count, model = 1, "one fused kernel"
    elif point.subject in RECORDED:
        count = len(gpus.priced(recording(RECORDED[point.subject]), gpu, point.shape))
        model = RECORDED_OPS
    else:
        raise UnforecastPointError(f"no kernel count forecast for {point.subject!r}")
    where = SAME_COUNT if value == count else (MORE if value > count else FEWER)
    return _spec_fact(point, gpu, model, float(count), "kernels"), where, model, None


def time_forecast(point: Point, gpu: SpecSheet) -> tuple[gpus.Range, str, int | None]:
    """The forecast of a published time: its range, the model that priced it (for the
    reader), and the kernels a recording launches (None: one fused kernel)."""
    kernels = None
    if point.subject in FUSED:
        kind = ANY if point.subject == "SDPA cuDNN" else FLASH_2  # as findings/gpu_forecast.py
        priced = (gpus.flash_forward(gpu, point.shape, kernel=kind),)
        model = "one fused forward kernel (flash_forward)"
    elif point.subject in RECORDED:
        priced = gpus.priced(recording(RECORDED[point.subject]), gpu, point.shape)
        model, kernels = RECORDED_OPS, len(priced)
    else:
        raise UnforecastPointError(f"no time forecast for {point.subject!r}")
    return gpus.realistic(gpu, priced), model, kernels


def _time(point: Point, gpu: SpecSheet, value: float) -> _Forecast:
    r, model, kernels = time_forecast(point, gpu)
    floor = _spec_fact(point, gpu, f"floor: {model}", r.floor_us, "µs")
    if r.low_us is None:
        return floor, NO_RANGE, model, kernels
    what = f"realistic range: {model} over cited efficiencies"
    fact = _spec_fact(point, gpu, what, None, "µs", r.low_us, r.high_us)
    return fact, _where(value, r.low_us, r.high_us), model, kernels


def _rate(point: Point, gpu: SpecSheet, value: float) -> _Forecast:
    """A throughput or a share of the peak: the cited compute efficiency of its GPU, for
    FlashAttention-2's generation of kernels where the point is one of them."""
    kind = FLASH_2 if point.subject.startswith("FlashAttention-2") else ANY
    e = dataset().efficiency(gpu.capability, "compute", kind)
    share = point.unit == "%"
    peak = 1.0 if share else gpus.matmul_peak(gpu, point.dtype)
    unit = "%" if share else "FLOP/s"
    floor = _spec_fact(point, gpu, "the data sheet's peak", peak, unit)
    model = "the cited share of the data sheet's peak"
    if e is None:
        return floor, NO_RANGE, model, None
    low, high = peak * e.low, peak * e.high
    fact = _spec_fact(point, gpu, model, None, unit, low, high)
    own = e.source is not None and e.source.key == point.source.key
    return fact, OWN_SOURCE if own else _where(value, low, high), model, None


def _relative(point: Point, gpu: SpecSheet, value: float) -> _Forecast:
    """A kernel's throughput as a share of its baseline's: FlexAttention against a
    FlashAttention, which the forecast prices as the same fused kernel (flash_forward or
    flash_backward: the same FLOPs and bytes), so 100%."""
    if not point.subject.startswith("FlexAttention") or point.baseline not in SAME_KERNEL:
        raise UnforecastPointError(
            f"no relative forecast for {point.subject!r} against {point.baseline!r}"
        )
    model = f"the same fused kernel as {point.baseline}"
    off = value - 1.0
    where = AS_FAST if abs(off) <= AS_FAST_WITHIN else SLOWER if off < 0 else FASTER
    return _spec_fact(point, gpu, model, 1.0, "%"), where, model, None


# A throughput or a share of the peak (TFLOP/s, %) is a rate.
_FORECASTS = {"kernels": _count, "ms": _time, "µs": _time, "% of baseline": _relative}


def beside(point: Point) -> Beside:
    """The forecast for `point`'s GPU and shape, and where the published value falls."""
    gpu = gpus.sheet(point.gpu)
    published = published_fact(point)
    value = published.value
    fact, where, model, kernels = _FORECASTS.get(point.unit, _rate)(point, gpu, value)
    # A forecast of one value (value set) or a range (low..high, value None).
    low, high = (fact.low, fact.high) if fact.value is None else (fact.value,) * 2
    what = f"{point.source.key}; {point.statistic}"
    q = On.spec(gpu, point.shape).quantity(RATIO, point.subject, SPEC, what)
    ratio = (
        Fact(q, value / low, "×") if low == high else Fact(q, None, "×", value / high, value / low)
    )
    return Beside(point, gpu, published, fact, ratio, where, model, kernels)


def every_point() -> tuple[Beside, ...]:
    """Every point of the dataset beside its forecast, in the dataset's order."""
    return tuple(beside(p) for p in dataset().points)


@dataclass(frozen=True)
class Accuracy:
    """The forecast model over every reference point, by where the published value fell."""

    points: tuple[Beside, ...]

    def where(self, *verdicts: str) -> tuple[Beside, ...]:
        return tuple(b for b in self.points if b.where in verdicts)

    @property
    def tested(self) -> tuple[Beside, ...]:
        """The points that test the model: not its own inputs, and with a range to fall in."""
        return self.where(WITHIN, ABOVE, BELOW)

    @property
    def counts(self) -> tuple[Beside, ...]:
        return self.where(SAME_COUNT, MORE, FEWER)

    @property
    def relative(self) -> tuple[Beside, ...]:
        """The throughputs relative to a baseline the model prices alike."""
        return self.where(AS_FAST, SLOWER, FASTER)

    @property
    def relative_forecast(self) -> Fact:
        """What the model forecasts for every relative throughput: 100%."""
        what = "the same fused kernel as its baseline"
        return model_fact(METRIC_RELATIVE, SUBJECT_RELATIVE, None, 1.0, "%", detail=what)

    @property
    def relative_miss(self) -> Fact | None:
        """The largest share by which a relative throughput misses the model's 100%."""
        if not self.relative:
            return None
        worst = max(self.relative, key=lambda b: abs(b.published.value - 1.0))
        q = Quantity("largest miss of a relative throughput", SUBJECT_RELATIVE,
                     "paper:several", PUBLISHED, None, "published ÷ the model's 100%, less 1")  # fmt: skip
        return Fact(q, abs(worst.published.value - 1.0), "%")

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(b.gpu.label for b in self.points))


def accuracy() -> Accuracy:
    return Accuracy(every_point())


def on(gpu_slug: str, subject: str, unit: str) -> Beside:
    """The one point of `subject` on that GPU in `unit` ("kernels", "ms"...)."""
    found = [b for b in every_point()
             if b.point.gpu == gpu_slug and b.point.subject == subject and b.point.unit == unit]  # fmt: skip
    if len(found) != 1:
        raise LookupError(f"{len(found)} points of {subject!r} on {gpu_slug} in {unit}")
    return found[0]


# --- chapter 02: the mask variants' kernels on a GPU, beside Hugging Face's counts --------

# The variants, as chapter 02 names them, and the recording each is priced from.
MASK_CODE = (("rebuild", gpus.NAIVE_CODE), ("masked_fill", "masked_fill"),
             ("masked_fill_", gpus.IN_PLACE))  # fmt: skip
HF_SUBJECT = {"masked_fill": "naive, masked_fill", "masked_fill_": "naive, masked_fill_"}


@dataclass(frozen=True)
class MaskKernels:
    """One mask variant's forward on the forecast GPU: the kernels its recorded ops launch
    (ATen op names, in order), their count and HBM bytes, and Hugging Face's published count
    for the same code (None: the post has no such variant)."""

    variant: str
    ops: tuple[str, ...]
    count: Fact
    bytes: Fact
    published: Beside | None


@dataclass(frozen=True)
class InPlace:
    """What the in-place variant saves against the code under study, per forward: the
    kernels it does not launch (their ops), their bytes, and their time as a realistic
    range (the saved kernels' floors over the cited efficiencies)."""

    variants: tuple[MaskKernels, ...]
    saved_ops: tuple[str, ...]
    saved_bytes: Fact
    saved_time: Fact
    extra_over_published: tuple[str, ...]  # the code under study's kernels HF's code lacks


def in_place(gpu: SpecSheet | None = None, shape=None) -> InPlace:
    gpu = gpu or gpus.sheet()
    shape = shape or gpus.FORECAST_SHAPE

    def spec(metric: str, subject: str, value, unit: str, *ends, detail=RECORDED_OPS) -> Fact:
        return Fact(On.spec(gpu, shape).quantity(metric, subject, SPEC, detail), value, unit, *ends)

    rows, kernels_of = [], {}
    for variant, subject in MASK_CODE:
        ks = kernels_of[variant] = gpus.priced(recording(subject), gpu, shape)
        count = spec("GPU kernels per forward", variant, float(len(ks)), "kernels")
        moved = spec("HBM bytes", f"naive forward, {variant}", sum(k.bytes for k in ks), "B")
        hf = on("a100-sxm4-80gb", HF_SUBJECT[variant], "kernels") if variant in HF_SUBJECT else None
        rows.append(MaskKernels(variant, tuple(k.op for k in ks), count, moved, hf))
    saved = _without(kernels_of["rebuild"], kernels_of["masked_fill_"])
    extra = _without(kernels_of["rebuild"], kernels_of["masked_fill"])
    r = gpus.realistic(gpu, saved)
    against = "masked_fill_ against rebuild"
    saved_bytes = spec("HBM bytes saved", against, sum(k.bytes for k in saved), "B")
    what = "realistic range of the kernels it does not launch"
    saved_time = spec("time saved", against, None, "µs", r.low_us, r.high_us, detail=what)
    ops = tuple(k.op for k in saved)
    return InPlace(tuple(rows), ops, saved_bytes, saved_time, tuple(k.op for k in extra))


def _without(these, those) -> tuple:
    """`these` kernels less one of each (step, op) that `those` launch too."""
    left = [(k.label, k.op) for k in those]
    out = []
    for k in these:
        if (k.label, k.op) in left:
            left.remove((k.label, k.op))
        else:
            out.append(k)
    return tuple(out)
