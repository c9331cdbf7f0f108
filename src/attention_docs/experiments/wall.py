# The experiment behind the quadratic-wall chapter: naive attention swept over seq_len, token
# and head splits, and head_dim. The sweeps share points, so they are one experiment: each
# distinct shape is measured once (peak memory, a few profiled calls where a sweep shows
# shares), then all are timed in interleaved rounds, so a slow minute bends no slope on its
# own. A shape the forward-time grid holds is read from forward_times by the page.
from __future__ import annotations

from attention_docs.analytic.memory import naive_peak
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.registry import Observed, Param, Work, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.cache import last_level_cache
from attention_docs.profiling.memory import is_out_of_memory, peak_memory_bytes
from attention_docs.profiling.profile import Schedule, profile_callable
from attention_docs.profiling.timing import time_callables
from attention_docs.records.shape import Shape
from attention_docs.records.timing import Timing
from attention_docs.records.trace import step_span_rounds

DTYPE = Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16"))
# One profiled call per round: the spread of a step over these calls is its noise.
PROFILED = Schedule(wait=1, warmup=1, active=3)  # three profiled steps: shares and a range
DIMS = ("batch_size", "num_heads", "seq_len", "head_dim")
SWEEPS = ("seq_len", "tokens", "heads", "head_dim")
PROFILED_SWEEPS = ("seq_len", "head_dim")  # the sweeps whose page shows step shares


def _doubling(lo: int, hi: int) -> list[int]:
    points, n = [], lo
    while n <= hi:
        points.append(n)
        n *= 2
    return points


def sweep_shapes(p: dict) -> dict[str, list[Shape]]:
    """Each sweep's shapes, in order, for the parameters `p` of the wall experiment."""
    dtype, causal = p["dtype"], p["causal"]
    b, h, d, n = p["batch_size"], p["num_heads"], p["head_dim"], p["seq_len"]
    return {
        "seq_len": [
            Shape(b, h, x, d, dtype, causal) for x in _doubling(p["min_seq_len"], p["max_seq_len"])
        ],
        # The same tokens as more, shorter sequences, down to 16 tokens a sequence.
        "tokens": [
            Shape(k, h, p["tokens"] // k, d, dtype, causal)
            for k in _doubling(1, 64)
            if p["tokens"] % k == 0 and p["tokens"] // k >= 16
        ],
        # The same width as more, narrower heads (one sequence), down to head_dim 8.
        "heads": [
            Shape(1, k, n, p["model_dim"] // k, dtype, causal)
            for k in _doubling(1, 64)
            if p["model_dim"] % k == 0 and p["model_dim"] // k >= 8
        ],
        "head_dim": [
            Shape(b, h, n, x, dtype, causal)
            for x in _doubling(p["min_head_dim"], p["max_head_dim"])
        ],
    }


def _largest_bytes(p: dict) -> int:
    """The most any shape of the sweeps needs at once: its inputs and the model's peak."""
    shapes = {s for v in sweep_shapes(p).values() for s in v}
    return max(naive_peak(*s.dims, s.dtype, causal=s.causal).total_bytes for s in shapes)


def _profiled(samples: list[float]) -> Timing:
    return Timing.from_rounds(samples, "profiled, one sample per call")


@experiment(
    "wall",
    # One profile and one timing per distinct shape of the sweeps.
    gpu_work=lambda p: Work(
        profiles=(n := len({s for shapes in sweep_shapes(dict(p)).values() for s in shapes})),
        timed=n,
        device_s=4.0,
    ),
    summary="Naive attention's time, peak memory and step shares over seq_len, token and head "
    "splits, and head_dim: every shape measured once, all timed in interleaved rounds.",
    measures=(
        "attention/naive.py",
        "inputs.py",
        "profiling/memory.py",
        "profiling/timing.py",
        "profiling/cache.py",
    ),
    estimate_bytes=_largest_bytes,
    batch_size=Param(1, gpu_default=4, minimum=1, help="sequences per batch (seq_len, head_dim)"),
    num_heads=Param(2, gpu_default=8, minimum=1, help="heads (seq_len, tokens, head_dim sweeps)"),
    head_dim=Param(64, minimum=1, help="head_dim (seq_len and tokens sweeps)"),
    seq_len=Param(512, gpu_default=4096, minimum=1, help="seq_len (heads and head_dim sweeps)"),
    dtype=DTYPE,
    causal=Param(True, help="mask the future (decoder-style attention)"),
    min_seq_len=Param(16, gpu_default=128, minimum=1, help="the shortest sequence"),
    max_seq_len=Param(2048, gpu_default=8192, minimum=1, help="the longest sequence"),
    tokens=Param(2048, gpu_default=16384, minimum=1, help="batch_size × seq_len, held fixed"),
    model_dim=Param(1024, gpu_default=2048, minimum=1, help="num_heads × head_dim, held fixed"),
    min_head_dim=Param(16, minimum=1, help="the smallest head_dim"),
    max_head_dim=Param(256, minimum=1, help="the largest head_dim"),
)
def wall(ctx, **params) -> Observed:
    sweeps = sweep_shapes(params)
    shapes = list(dict.fromkeys(s for name in SWEEPS for s in sweeps[name]))
    profiled = {s for name in PROFILED_SWEEPS for s in sweeps[name]}
    fns = {}

    def measure(point: dict) -> dict:
        s = Shape.of(point, dtype=params["dtype"], causal=params["causal"])
        q, k, v = make_qkv(*s.dims, dtype=s.dtype, device=ctx.device)

        def fn():
            return naive_attention(q, k, v, causal=s.causal)

        fn()  # a backend's one-off allocations (a cuBLAS workspace) are not this shape's peak
        result: dict = {"peak_bytes": peak_memory_bytes(fn, ctx.device)}
        if s in profiled:
            run = profile_callable(
                fn, ctx.device, sched=PROFILED, record_shapes=False, profile_memory=False,
                with_flops=False,
            )  # fmt: skip
            for label, samples in step_span_rounds(run.trace, STEPS).items():
                result[label] = _profiled(samples)
        fns[s] = fn
        return result

    def estimate(point: dict) -> int:
        s = Shape.of(point, dtype=params["dtype"], causal=params["causal"])
        return naive_peak(*s.dims, s.dtype, causal=s.causal).total_bytes

    table, notes = sweep(
        [dict(zip(DIMS, s.dims, strict=True)) for s in shapes],
        measure,
        columns=(*DIMS, "peak_bytes", *STEPS),
        units={"peak_bytes": "B"},
        estimate_bytes=estimate,
        device=ctx.device,
    )
    timings = {}
    try:
        timings = time_callables(
            {s.key(): fn for s, fn in fns.items()}, ctx.device, min_run_time=0.2, cuda_runs=30
        )
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        notes.append("Timing the shapes together ran out of memory; no times are shown.")
    fns.clear()
    rows = []
    for s, row in zip(shapes, table.rows, strict=True):
        rows.append((*row[: len(DIMS)], timings.get(s.key()), *row[len(DIMS) :]))
    columns = (*DIMS, "time", *table.columns[len(DIMS) :])
    members = Table(
        ("sweep", *DIMS), tuple((name, *s.dims) for name in SWEEPS for s in sweeps[name])
    )
    cache = last_level_cache(ctx.device)
    return Observed(
        tables={
            "points": Table(columns, tuple(rows), {"time": "µs", "peak_bytes": "B"}),
            "sweeps": members,
        },
        facts={
            "profiled_steps": PROFILED.active,
            **(cache.to_facts() if cache else {}),
        },
        notes=tuple(notes),
    )
