# Experiments for the quadratic-wall chapter: naive attention swept over seq_len, over how
# the same tokens are split into sequences and heads, and over head_dim. Each point's peak
# memory comes from the allocator and (where the chapter shows shares) its five steps are
# profiled for a few calls, one sample per call; then every point of a sweep is timed without
# the profiler in interleaved rounds (round 1 of every point, round 2 of every point...), so
# a slow minute of the machine bends no slope on its own. Out-of-memory becomes a row.
#
# The shapes are off the forward-time grid (measurements/forward.py) on purpose: these
# points are this chapter's own measurement, and a shape the grid holds must have one time
# on the whole site (a test checks that no default point lands on the grid).
#
# GPU sizes (one H200; estimates from bytes at ~4 TB/s, FLOPs at ~700 TFLOP/s bf16, ~0.5 s
# of profiler start per profiled point):
#   wall_seq_len      batch 4, 8 heads, bf16, seq_len 128..8192 (7 points). At 8192 one N×N
#                     matrix is 4.3 GB and a forward moves ~30 GB (~8 ms); ~40 calls per
#                     point (peak, 5 profiled, 3 warm-up, 30 timed): ~6 s in all.
#   wall_batch_heads  16384 tokens at 8 heads (7 splits, the largest the same 4.3 GB matrix)
#                     and width 2048 at seq_len 4096 (7 splits, up to 64 heads: 2.1 GB);
#                     not profiled: ~3 s.
#   wall_head_dim     batch 4, 8 heads, seq_len 4096, head_dim 16..256 (5 points, 1 GB
#                     matrices, profiled): ~4 s.
from __future__ import annotations

from collections.abc import Callable, Mapping

from attention_docs.analytic.cost import attention_flops
from attention_docs.analytic.memory import naive_peak
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.cache import last_level_cache
from attention_docs.profiling.memory import is_out_of_memory, peak_memory_bytes
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.timing import ROUNDS, time_callables
from attention_docs.records.trace import step_span_rounds

MEASURES = (
    "attention/naive.py",
    "inputs.py",
    "analytic/cost.py",
    "analytic/memory.py",
    "profiling/memory.py",
    "profiling/timing.py",
    "profiling/cache.py",
)
DTYPE = Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16"))
# One profiled call per round: the spread of a step over these calls is its noise.
PROFILED = Schedule(wait=1, warmup=1, active=ROUNDS)
STEP_UNITS = dict.fromkeys(STEPS, "µs")
TIME_COLUMNS = ("time_us", "time_low_us", "time_high_us")
TIME_UNITS = dict.fromkeys(TIME_COLUMNS, "µs")
BYTE_UNITS = {"peak_bytes": "B", "score_bytes": "B", "quadratic_bytes": "B"}
SHAPE_KEYS = ("batch_size", "num_heads", "seq_len", "head_dim")


def _shape(point: Mapping, fixed: Mapping) -> dict:
    return {key: point.get(key, fixed.get(key)) for key in SHAPE_KEYS}


class _Sweep:
    """One sweep: measures each point, keeps its forward for the interleaved timing after."""

    def __init__(self, ctx, fixed: Mapping, *, x: str, steps: bool) -> None:
        self.ctx, self.fixed, self.x, self.steps = ctx, dict(fixed), x, steps
        self.fns: dict[object, Callable[[], object]] = {}
        self.step_rows: list[tuple] = []

    def estimate(self, point: Mapping) -> int:
        """What a point needs: its inputs and the memory model's peak."""
        s = _shape(point, self.fixed)
        model = naive_peak(*s.values(), self.fixed["dtype"], causal=self.fixed["causal"])
        return model.total_bytes

    def measure(self, point: Mapping) -> dict:
        s = _shape(point, self.fixed)
        dtype, causal = self.fixed["dtype"], self.fixed["causal"]
        q, k, v = make_qkv(*s.values(), dtype=dtype, device=self.ctx.device)

        def fn():
            return naive_attention(q, k, v, causal=causal)

        model = naive_peak(*s.values(), dtype, causal=causal)
        result: dict = {
            "peak_bytes": peak_memory_bytes(fn, self.ctx.device),
            "flops": attention_flops(*s.values()),
            "score_bytes": model.matrix_bytes,
            "quadratic_bytes": model.matrices * model.matrix_bytes + model.mask_bytes,
        }
        if self.steps:
            run = profile_callable(
                fn,
                self.ctx.device,
                sched=PROFILED,
                record_shapes=False,
                profile_memory=False,
                with_flops=False,
            )
            for label, samples in step_span_rounds(run.trace, STEPS).items():
                ordered = sorted(samples)
                result[label] = ordered[len(ordered) // 2]
                self.step_rows.append((point[self.x], label, ordered[0], ordered[-1]))
        self.fns[point[self.x]] = fn
        return result

    def run(self, points: list[dict], columns: tuple[str, ...]) -> tuple[Table, list[str]]:
        """The sweep, then every point that ran timed in interleaved rounds."""
        measured = (*columns, "peak_bytes", "flops", "score_bytes", "quadratic_bytes")
        if self.steps:
            measured += STEPS
        table, notes = sweep(
            points,
            self.measure,
            columns=measured,
            units={**BYTE_UNITS, **(STEP_UNITS if self.steps else {})},
            estimate_bytes=self.estimate,
            device=self.ctx.device,
        )
        timings = {}
        try:
            timings = time_callables(
                {str(x): fn for x, fn in self.fns.items()},
                self.ctx.device,
                min_run_time=0.2,
                cuda_runs=30,
            )
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            notes.append("Timing the points together ran out of memory; no times are shown.")
        self.fns.clear()
        full = (*columns, *TIME_COLUMNS, *measured[len(columns) :], "status")
        rows = []
        for r in table.records():
            t = timings.get(str(r[self.x])) if r["status"] == "ok" else None
            times = (t.median_us, t.low_us, t.high_us) if t else (None, None, None)
            rows.append(
                tuple({**r, **dict(zip(TIME_COLUMNS, times, strict=True))}[c] for c in full)
            )
        units = {**table.units, **TIME_UNITS}
        return Table(columns=full, rows=tuple(rows), units=units), notes

    def step_table(self) -> Table:
        return Table(
            columns=(self.x, "step", "low_us", "high_us"),
            rows=tuple(self.step_rows),
            units={"low_us": "µs", "high_us": "µs"},
        )


def _doubling(lo: int, hi: int) -> list[int]:
    points = []
    n = lo
    while n <= hi:
        points.append(n)
        n *= 2
    return points


def token_splits(tokens: int) -> list[dict]:
    """(batch_size, seq_len) pairs holding `tokens` fixed, down to 16 tokens a sequence."""
    return [
        {"batch_size": b, "seq_len": tokens // b}
        for b in _doubling(1, 64)
        if tokens % b == 0 and tokens // b >= 16
    ]


def head_splits(model_dim: int) -> list[dict]:
    """(num_heads, head_dim) pairs holding `model_dim` fixed, down to head_dim 8."""
    return [
        {"num_heads": h, "head_dim": model_dim // h}
        for h in _doubling(1, 64)
        if model_dim % h == 0 and model_dim // h >= 8
    ]


def sweep_shapes(name: str, params: dict) -> list[dict]:
    """Every point an experiment of this module runs with `params`, as full shapes
    (batch_size, num_heads, seq_len, head_dim, dtype, causal)."""
    p = params
    common = {"dtype": p["dtype"], "causal": p["causal"]}
    if name == "wall_seq_len":
        fixed = {
            "batch_size": p["batch_size"],
            "num_heads": p["num_heads"],
            "head_dim": p["head_dim"],
        }
        return [
            {**fixed, **common, "seq_len": n} for n in _doubling(p["min_seq_len"], p["max_seq_len"])
        ]
    if name == "wall_head_dim":
        fixed = {
            "batch_size": p["batch_size"],
            "num_heads": p["num_heads"],
            "seq_len": p["seq_len"],
        }
        return [
            {**fixed, **common, "head_dim": d}
            for d in _doubling(p["min_head_dim"], p["max_head_dim"])
        ]
    if name == "wall_batch_heads":
        tokens = [
            {**s, **common, "num_heads": p["num_heads"], "head_dim": p["head_dim"]}
            for s in token_splits(p["tokens"])
        ]
        heads = [
            {**s, **common, "batch_size": 1, "seq_len": p["seq_len"]}
            for s in head_splits(p["model_dim"])
        ]
        return tokens + heads
    raise ValueError(f"{name} is not an experiment of experiments/wall.py")


def _facts(ctx) -> dict:
    cache = last_level_cache(ctx.device)
    return {
        "rounds": ROUNDS,
        "timing_method": "interleaved rounds across the sweep's points, no profiler",
        **(cache.to_facts() if cache else {}),
    }


@experiment(
    "wall_seq_len",
    summary="Naive attention's time, peak memory and step shares as seq_len doubles.",
    measures=MEASURES,
    batch_size=Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    num_heads=Param(2, gpu_default=8, minimum=1, help="attention heads"),
    head_dim=Param(64, minimum=1, help="features per head (D)"),
    dtype=DTYPE,
    causal=Param(True, help="mask the future (decoder-style attention)"),
    min_seq_len=Param(16, gpu_default=128, minimum=1, help="the shortest sequence"),
    max_seq_len=Param(2048, gpu_default=8192, minimum=1, help="the longest sequence"),
)
def wall_seq_len(
    ctx, *, batch_size, num_heads, head_dim, dtype, causal, min_seq_len, max_seq_len
) -> Observed:
    fixed = {
        "batch_size": batch_size,
        "num_heads": num_heads,
        "head_dim": head_dim,
        "dtype": dtype,
        "causal": causal,
    }
    run = _Sweep(ctx, fixed, x="seq_len", steps=True)
    points = [{"seq_len": n} for n in _doubling(min_seq_len, max_seq_len)]
    table, notes = run.run(points, ("seq_len",))
    return Observed(
        tables={"seq_len": table, "step_rounds": run.step_table()},
        facts=_facts(ctx),
        notes=tuple(notes),
    )


@experiment(
    "wall_batch_heads",
    summary="The same tokens split into more, shorter sequences; the same width split into more heads.",
    measures=MEASURES,
    tokens=Param(2048, gpu_default=16384, minimum=1, help="batch_size × seq_len, held fixed"),
    num_heads=Param(2, gpu_default=8, minimum=1, help="heads in the tokens sweep"),
    head_dim=Param(64, minimum=1, help="head_dim in the tokens sweep"),
    model_dim=Param(
        1024, gpu_default=2048, minimum=1, help="num_heads × head_dim in the heads sweep"
    ),
    seq_len=Param(512, gpu_default=4096, minimum=1, help="seq_len in the heads sweep"),
    dtype=DTYPE,
    causal=Param(True, help="mask the future (decoder-style attention)"),
)
def wall_batch_heads(
    ctx, *, tokens, num_heads, head_dim, model_dim, seq_len, dtype, causal
) -> Observed:
    by_batch = _Sweep(
        ctx,
        {"num_heads": num_heads, "head_dim": head_dim, "dtype": dtype, "causal": causal},
        x="batch_size",
        steps=False,
    )
    tokens_table, notes = by_batch.run(token_splits(tokens), ("batch_size", "seq_len"))
    by_heads = _Sweep(
        ctx,
        {"batch_size": 1, "seq_len": seq_len, "dtype": dtype, "causal": causal},
        x="num_heads",
        steps=False,
    )
    heads_table, more = by_heads.run(head_splits(model_dim), ("num_heads", "head_dim"))
    return Observed(
        tables={"tokens": tokens_table, "heads": heads_table},
        facts=_facts(ctx),
        notes=(*notes, *more),
    )


@experiment(
    "wall_head_dim",
    summary="Naive attention's time and step shares as head_dim grows at a fixed seq_len.",
    measures=MEASURES,
    batch_size=Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    num_heads=Param(2, gpu_default=8, minimum=1, help="attention heads"),
    seq_len=Param(512, gpu_default=4096, minimum=1, help="tokens per sequence (N)"),
    dtype=DTYPE,
    causal=Param(True, help="mask the future (decoder-style attention)"),
    min_head_dim=Param(16, minimum=1, help="the smallest head_dim"),
    max_head_dim=Param(256, minimum=1, help="the largest head_dim"),
)
def wall_head_dim(
    ctx, *, batch_size, num_heads, seq_len, dtype, causal, min_head_dim, max_head_dim
) -> Observed:
    fixed = {
        "batch_size": batch_size,
        "num_heads": num_heads,
        "seq_len": seq_len,
        "dtype": dtype,
        "causal": causal,
    }
    run = _Sweep(ctx, fixed, x="head_dim", steps=True)
    points = [{"head_dim": d} for d in _doubling(min_head_dim, max_head_dim)]
    table, notes = run.run(points, ("head_dim",))
    return Observed(
        tables={"head_dim": table, "step_rounds": run.step_table()},
        facts=_facts(ctx),
        notes=tuple(notes),
    )
