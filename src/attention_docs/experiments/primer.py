# Experiments for the profiler primer ("Reading a profile"): why the first profiled step
# lies, what the profiler itself costs, and where a small op stops being overhead and starts
# being work. This module drives torch.profiler by hand on purpose: its raw use is the
# chapter's lesson, and the chapter shows the code below through snippet markers.
from __future__ import annotations

import statistics
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch.profiler import profile, schedule

from attention_docs.analytic.cost import itemsize, score_matrix_bytes
from attention_docs.attention.naive import naive_attention
from attention_docs.experiments._sweep import timed_sweep
from attention_docs.experiments.registry import Observed, Param, Work, experiment, shape_params
from attention_docs.inputs import make_qkv, resolve_dtype
from attention_docs.measurements.schema import Table
from attention_docs.profiling.device import synchronize
from attention_docs.profiling.profile import activities_on, chrome_of, minor_faults
from attention_docs.profiling.timing import time_callables
from attention_docs.records.timing import Timing
from attention_docs.records.trace import Trace, trim_chrome

MEASURES = (
    "attention/naive.py",
    "inputs.py",
    "analytic/cost.py",
    "profiling/profile.py",
    "profiling/timing.py",
)
# One row per profiled call: wall time and profiler step in the cold session, wall time in the
# warm one, page faults in both, and the CUDA allocator's growth (None on a CPU).
PER_CALL_COLUMNS = (
    "call",
    "cold_wall_us",
    "cold_step_us",
    "warm_session_wall_us",
    "minor_page_faults",
    "warm_session_page_faults",
    "reserve_growth_bytes",
)
# Span kinds whose extra time on the first call the chapter lists (steps are not ops).
FIRST_CALL_KINDS = ("range", "op", "runtime", "kernel", "memcpy", "memset")


@dataclass
class PerCall:
    """What each call cost besides its ops: wall time, minor page faults (first touches of
    fresh memory) and growth of the CUDA caching allocator's reserve (None on a CPU)."""

    device: torch.device
    wall_us: list[float] = field(default_factory=list)
    page_faults: list[int | None] = field(default_factory=list)
    reserve_growth: list[int | None] = field(default_factory=list)

    @contextmanager
    def call(self) -> Iterator[None]:
        cuda = self.device.type == "cuda"
        faults = minor_faults()  # None where the operating system does not count them
        reserved = torch.cuda.memory_reserved(self.device) if cuda else None
        started = time.perf_counter()
        yield
        synchronize(self.device)  # GPU work is asynchronous: wait for it before reading the clock
        self.wall_us.append((time.perf_counter() - started) * 1e6)
        if faults is not None:
            faults = minor_faults() - faults
        self.page_faults.append(faults)
        self.reserve_growth.append(
            torch.cuda.memory_reserved(self.device) - reserved if cuda else None
        )


def profile_every_call(
    fn: Callable[[], object], device: torch.device, calls: int
) -> tuple[Trace, PerCall]:
    """Profile `calls` calls of `fn` with every call recorded: no wait, no warmup.

    Returns the Trace (one profiler step per call) and what each call cost besides its ops.
    """
    per_call = PerCall(device)
    with warnings.catch_warnings():
        # torch warns that a schedule without warmup skews results: that skew is the lesson.
        warnings.simplefilter("ignore", UserWarning)
        # --8<-- [start:every-call]
        with profile(
            activities=activities_on(device),  # [CPU], plus CUDA on a GPU
            schedule=schedule(wait=0, warmup=0, active=calls, repeat=1),
            record_shapes=True,
        ) as prof:
            for _ in range(calls):
                with per_call.call():  # wall clock, page faults, allocator growth
                    fn()
                prof.step()  # ends this call's ProfilerStep#n
        chrome = chrome_of(prof)  # prof.export_chrome_trace(path), read back as JSON
        # --8<-- [end:every-call]
    return Trace.from_chrome(trim_chrome(chrome)), per_call


def _self_time_by_name(trace: Trace, step: int) -> dict[tuple[str, str], list[float]]:
    """(kind, name) -> [calls, self µs] within one profiler step."""
    table: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for s in trace.spans:
        if s.step != step or s.kind not in FIRST_CALL_KINDS:
            continue
        entry = table[(s.kind, s.name)]
        entry[0] += 1
        entry[1] += s.dur_us if s.kind in ("kernel", "memcpy", "memset") else s.self_us
    return table


def first_call_extra(trace: Trace, limit: int = 12) -> Table:
    """What the first profiled step did that a warm step did not, by op, runtime call or kernel.

    The warm reference is the mean over the second half of the steps. Rows: names that only
    the first step has, then the largest extra self times; at most `limit` rows.
    """
    ids = [s.step for s in trace.steps]
    first = _self_time_by_name(trace, ids[0])
    warm_ids = ids[len(ids) // 2 :]
    warm: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for sid in warm_ids:
        for key, (calls, self_us) in _self_time_by_name(trace, sid).items():
            warm[key][0] += calls / len(warm_ids)
            warm[key][1] += self_us / len(warm_ids)
    rows = []
    for (kind, name), (calls, self_us) in first.items():
        w_calls, w_self = warm.get((kind, name), (0.0, 0.0))
        rows.append((name, kind, calls, w_calls, self_us, w_self, self_us - w_self))
    # Names only the first call has come first, then the largest extra self time.
    kept = sorted(rows, key=lambda r: (r[3] > 0, -r[6], r[0]))[:limit]
    return Table(
        columns=(
            "name",
            "kind",
            "calls_first",
            "calls_warm",
            "self_first_us",
            "self_warm_us",
            "extra_us",
        ),
        rows=tuple(
            (n, k, int(c), round(wc, 2), round(s, 3), round(ws, 3), round(x, 3))
            for n, k, c, wc, s, ws, x in kept
        ),
        units={"self_first_us": "µs", "self_warm_us": "µs", "extra_us": "µs"},
    )


PAGE = 4096


def fault_cost(device: torch.device, nbytes: int) -> dict | None:
    """What a first touch of fresh memory costs here, on buffers of `nbytes`.

    One byte per page written into a freshly mapped anonymous buffer (mapped, touched, then
    unmapped: every page faults, whatever the C library's `malloc` would have reused)
    against the same writes into a buffer mapped once and already touched. The difference,
    divided by the faults the fresh buffer takes, is the cost of one fresh page: the fault,
    plus its share of mapping and unmapping. Both are timed without the profiler in
    interleaved rounds, so the result carries the rounds' range. None on a GPU (device
    memory does not fault) or without the POSIX counters.
    """
    import mmap

    if device.type != "cpu" or minor_faults() is None:
        return None
    size = max(nbytes // PAGE, 1) * PAGE
    kept_pages = torch.frombuffer(mmap.mmap(-1, size), dtype=torch.uint8)[::PAGE]
    kept_pages.fill_(1)

    def fresh():
        buffer = mmap.mmap(-1, size)
        pages = torch.frombuffer(buffer, dtype=torch.uint8)[::PAGE]
        pages.fill_(1)
        del pages
        buffer.close()

    def mapped():
        kept_pages.fill_(1)

    fresh()
    before, calls = minor_faults(), 16
    for _ in range(calls):
        fresh()
    faults = (minor_faults() - before) / calls
    t = time_callables({"fresh": fresh, "mapped": mapped}, device, min_run_time=0.3)
    return {
        "buffer_bytes": size,
        "faults_per_buffer": faults,
        "fresh": t["fresh"].to_json(),
        "mapped": t["mapped"].to_json(),
    }


@experiment(
    "profile_first_calls",
    gpu_work=lambda p: Work(profiles=2, device_s=0.05 * p["calls"]),
    summary="Calls 1..N of a fresh forward under the profiler: the first is slow, and why.",
    measures=MEASURES,
    **shape_params(causal=Param(True, help="mask the future (decoder-style attention)")),
    calls=Param(8, minimum=2, help="forwards profiled, every one recorded"),
)
def profile_first_calls(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal, calls
) -> Observed:
    # GPU (4×16×2048², bf16): ~1 ms per forward; 2 × 8 profiled calls, two profiler
    # start-ups: about 2 s.
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)

    def forward():
        return naive_attention(q, k, v, causal=causal)

    # Session 1 starts cold: nothing in this process has run attention yet.
    cold, cold_calls = profile_every_call(forward, ctx.device, calls)
    # Session 2 repeats it with the forward warm: what remains on call 1 is the profiler's.
    _, again_calls = profile_every_call(forward, ctx.device, calls)
    cold_steps = [s.dur_us for s in cold.steps]
    per_call = Table(
        columns=PER_CALL_COLUMNS,
        rows=tuple(
            (
                i + 1,
                round(cold_calls.wall_us[i], 3),
                round(cold_steps[i], 3) if i < len(cold_steps) else None,
                round(again_calls.wall_us[i], 3),
                cold_calls.page_faults[i],
                again_calls.page_faults[i],
                cold_calls.reserve_growth[i],
            )
            for i in range(calls)
        ),
        units={
            "cold_wall_us": "µs",
            "cold_step_us": "µs",
            "warm_session_wall_us": "µs",
            "reserve_growth_bytes": "B",
        },
    )
    first_id, last_id = cold.steps[0].step, cold.steps[-1].step
    notes = ()
    if ctx.device.type != "cuda":
        notes = ("The CPU allocator keeps no reserve: reserve_growth_bytes applies to CUDA only.",)
    # The forward's large allocations are N×N score matrices: price a fault on buffers of
    # that size.
    matrix_bytes = score_matrix_bytes(batch_size, num_heads, seq_len, dtype)
    # The profile of a settled forward (its op table, timeline and dispatch tree) is
    # naive_steps': one profile of the naive forward per shape.
    return Observed(
        tables={"per_call": per_call, "first_call_ops": first_call_extra(cold)},
        facts={
            "cold_ops_first": sum(1 for s in cold.spans if s.kind == "op" and s.step == first_id),
            "cold_ops_last": sum(1 for s in cold.spans if s.kind == "op" and s.step == last_id),
            "fault_cost": fault_cost(ctx.device, matrix_bytes),
        },
        notes=notes,
    )


# Profiler settings compared by profile_overhead, cheapest first. Each adds to the previous.
OVERHEAD_CONFIGS: tuple[tuple[str, Mapping[str, bool]], ...] = (
    ("activities only", {}),
    ("+ record_shapes", {"record_shapes": True}),
    (
        "+ profile_memory, with_flops",
        {"record_shapes": True, "profile_memory": True, "with_flops": True},
    ),
    (
        "+ with_stack",
        {"record_shapes": True, "profile_memory": True, "with_flops": True, "with_stack": True},
    ),
)


def _wall_per_call(fn: Callable[[], object], device: torch.device, iterations: int) -> list[float]:
    times = []
    for _ in range(iterations):
        started = time.perf_counter()
        fn()
        synchronize(device)
        times.append((time.perf_counter() - started) * 1e6)
    return times


# What each setting adds is findings/primer.py's to compute: the table keeps the timings.
# Ten rounds, not profiling/timing.py's twenty: each round starts the profiler four times, and
# ten rounds are the fewest whose lower quartile has a 90 % interval (records/timing.py).
OVERHEAD_ROUNDS = 10
OVERHEAD_COLUMNS = ("configuration", "time", "events_per_forward")


@experiment(
    "profile_overhead",
    gpu_work=lambda p: Work(profiles=2, timed=2, device_s=0.05 * p["iterations"]),
    summary="The same forward with and without torch.profiler: the profiler's cost per recorded event.",
    measures=MEASURES,
    **shape_params(causal=Param(True, help="mask the future (decoder-style attention)")),
    iterations=Param(30, minimum=2, help="timed forwards per configuration and round"),
)
def profile_overhead(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal, iterations
) -> Observed:
    # GPU (4×16×2048², bf16): ~1 ms per forward; 3 rounds × (10 + 4 × 13) forwards, the
    # profiler started 12 times (with_stack is the slow one): about 3 s.
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)

    def forward():
        return naive_attention(q, k, v, causal=causal)

    warm = 3
    _wall_per_call(forward, ctx.device, warm)
    # Rounds interleave the configurations, so that a slow drift of the machine (clock,
    # other processes) spreads over all of them instead of landing on one. The loop without
    # the profiler is the baseline each overhead is taken against, in the same rounds; the
    # page states the forward's own time from `forward_times`, never from this loop.
    baseline: list[list[float]] = []
    times: dict[str, list[list[float]]] = {label: [] for label, _ in OVERHEAD_CONFIGS}
    events: dict[str, list[float]] = {label: [] for label, _ in OVERHEAD_CONFIGS}
    for _ in range(OVERHEAD_ROUNDS):
        baseline.append(_wall_per_call(forward, ctx.device, iterations))
        for label, options in OVERHEAD_CONFIGS:
            with profile(activities=activities_on(ctx.device), **options) as prof:
                _wall_per_call(forward, ctx.device, warm)  # the profiler's own first calls
                times[label].append(_wall_per_call(forward, ctx.device, iterations))
            events[label].append(len(prof.events()) / (warm + iterations))
    method = f"time.perf_counter around each forward, {OVERHEAD_ROUNDS} interleaved rounds"
    rows = [("no profiler", Timing.from_calls(baseline, method), 0.0)]
    for label, _ in OVERHEAD_CONFIGS:
        per_forward = statistics.median(events[label])
        rows.append((label, Timing.from_calls(times[label], method), round(per_forward, 2)))
    return Observed(
        tables={"overhead": Table(OVERHEAD_COLUMNS, tuple(rows), {"time": "µs"})},
        facts={"iterations": iterations, "rounds": OVERHEAD_ROUNDS, "timer": method},
    )


@experiment(
    "op_size_sweep",
    gpu_work=lambda p: Work(timed=p["max_log2"] - p["min_log2"] + 1, device_s=2.0),
    summary="torch.add over 2^min..2^max elements: a flat per-call floor, then time linear in bytes.",
    measures=("profiling/timing.py",),
    min_log2=Param(4, minimum=0, help="smallest size, as log2 of the element count"),
    max_log2=Param(
        22, gpu_default=28, minimum=1, help="largest size, as log2 of the element count"
    ),
    dtype=Param("float32", choices=("float32", "bfloat16", "float16")),
)
def op_size_sweep(ctx, *, min_log2, max_log2, dtype) -> Observed:
    if max_log2 < min_log2:
        raise ValueError(f"max_log2={max_log2} is smaller than min_log2={min_log2}")
    # GPU: 25 sizes up to 2^28 elements (3 GiB moved per call, ~1 ms at 4 TB/s), 53 calls
    # each: about 2 s with the allocations.
    torch_dtype = resolve_dtype(dtype)
    moved_per_element = 3 * itemsize(dtype)  # read a, read b, write the result

    def prepare(point):
        n = point["elements"]
        a = torch.randn(n, device=ctx.device).to(torch_dtype)
        b = torch.randn(n, device=ctx.device).to(torch_dtype)
        return {"bytes": n * moved_per_element}, lambda: torch.add(a, b)

    # Every size in the same interleaved rounds: the page reads a floor and a slope off them.
    points = [{"elements": 2**p} for p in range(min_log2, max_log2 + 1)]
    table, notes = timed_sweep(
        points,
        prepare,
        columns=("elements", "bytes"),
        device=ctx.device,
        units={"bytes": "B"},
        min_run_time=0.05,
    )
    return Observed(
        tables={"sizes": table},
        facts={"op": "torch.add(a, b)", "bytes_per_element": moved_per_element},
        notes=tuple(notes),
    )
