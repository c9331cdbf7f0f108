# Experiments on torch.compile applied to naive attention: which kernels it fuses, what
# compiling costs with cold and warm caches, the compiled forward's peak memory
# (fusion_kernels), and what a new shape costs (fusion_recompile). Forward times are
# `forward_times`' (one fact, one number). Every compiled graph costs seconds, so each
# experiment compiles as few as it can.
from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from attention_docs.analytic.cost import score_matrix_bytes, step_costs
from attention_docs.attention.compiled import compiled_attention
from attention_docs.attention.naive import STEPS, naive_attention
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments.registry import Observed, Param, Work, experiment, shape_params
from attention_docs.inputs import make_qkv
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Table
from attention_docs.profiling.device import synchronize
from attention_docs.profiling.memory import peak_memory_bytes
from attention_docs.records.kernels import (
    fused_ops,
    is_bookkeeping,
    names_per_step,
    steps_of,
    work_items,
)

MEASURES = (
    "attention/naive.py",
    "attention/compiled.py",
    "attention/sdpa.py",
    "inputs.py",
    "records/kernels.py",
    "profiling/memory.py",
)
# The profiles here are for structure (which kernels, which steps): no memory or FLOP
# bookkeeping inflating the ops' times.
STRUCTURE = {"profile_memory": False, "with_flops": False}
# sdpa_backends' shape, a shape of the forward grid: the chapter reads forward times and
# SDPA's peak memory there.
COMPILE_PARAMS = shape_params(
    seq_len=Param(512, gpu_default=4096, minimum=1, help="tokens per sequence (N)"),
    causal=Param(True, help="mask the future (decoder-style attention)"),
)


@contextmanager
def _captured_torch_logs() -> Iterator[list[str]]:
    """Collect the warnings torch logs (Dynamo's notes on what it ignored, for instance)."""
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Collect(level=logging.WARNING)
    # torch's loggers do not propagate past these two: each has its own stderr handler.
    loggers = [logging.getLogger(name) for name in ("torch", "torch._dynamo")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield messages
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def _inductor_counters() -> dict[str, int]:
    from torch._dynamo.utils import counters

    return {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "cache_hits": int(counters["inductor"]["fxgraph_cache_hit"]),
        "cache_misses": int(counters["inductor"]["fxgraph_cache_miss"]),
        "aot_cache_hits": int(counters["aot_autograd"]["autograd_cache_hit"]),
        "aot_cache_misses": int(counters["aot_autograd"]["autograd_cache_miss"]),
    }


@contextmanager
def _cache_folders(folder: str) -> Iterator[None]:
    """Point Inductor's and Triton's on-disk caches at `folder` for the duration."""
    names = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    saved = {name: os.environ.get(name) for name in names}
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(folder) / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(Path(folder) / "triton")
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _forget_compiled_code() -> None:
    """Reset Dynamo and Inductor's in-memory caches, as a new process would start: what is
    left is what the cache folders on disk hold."""
    from torch._inductor import utils

    torch._dynamo.reset()
    clear = getattr(utils, "clear_caches", None) or utils.clear_inductor_caches
    clear()


def _precompiled_headers_present() -> bool:
    """Inductor keeps precompiled C++ headers in one global folder on purpose (not under
    TORCHINDUCTOR_CACHE_DIR), so a cold compile on the CPU may still find them."""
    from torch._inductor import codecache

    folder = getattr(codecache, "_HEADER_DIR", None)
    return bool(folder) and Path(folder).is_dir() and any(Path(folder).iterdir())


def compile_cold_and_warm(build, call, device, then=None) -> tuple[list[dict], object]:
    """Compile `build()` twice and time each first call `call(fn)`: cold (Inductor's and
    Triton's cache folders new and empty, Dynamo reset) and warm (the same folders, Dynamo
    and the in-memory caches reset again: a later process on the same machine). One row per
    compile: seconds, graphs compiled, FX graph and AOTAutograd cache hits and misses; and
    what `then(fn)` returns for the warm function, while its code still exists. The process
    is left with nothing compiled."""
    rows, after_warm = [], None
    with tempfile.TemporaryDirectory(prefix="attention-docs-compile-") as folder:
        with _cache_folders(folder):
            for label in ("cold", "warm"):
                _forget_compiled_code()
                fn = build()
                before = _inductor_counters()
                seconds, _ = _timed_call(lambda fn=fn: call(fn), device)
                after = _inductor_counters()
                rows.append(
                    {
                        "compile": label,
                        "seconds": round(seconds, 3),
                        **{k: after[k] - before[k] for k in after},
                    }
                )
            if then is not None:
                after_warm = then(fn)
        _forget_compiled_code()  # nothing may point into the folder about to go
    return rows, after_warm


def compiler_import_seconds() -> float:
    """Seconds a new interpreter takes to import Dynamo and Inductor after torch: what a
    process pays once, before its first compile. Timed in a new interpreter, because this
    one may have them imported already (a worker forked from the worker server does, so the
    compiles timed here leave the imports out)."""
    code = (
        "import time, torch; t = time.perf_counter(); "
        "import torch._dynamo, torch._inductor.compile_fx; print(time.perf_counter() - t)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    return float(out.stdout.strip().splitlines()[-1])


def _timed_call(fn, device) -> tuple[float, object]:
    synchronize(device)
    started = time.perf_counter()
    out = fn()
    synchronize(device)
    return time.perf_counter() - started, out


@experiment(
    "fusion_kernels",
    # Compiles dominate; the later requests find kernels in Inductor's cache.
    gpu_work=lambda p: Work(compiles=1, warm_compiles=2, profiles=2),
    summary="What Inductor fuses in naive attention (eager ops against compiled kernels), what "
    "the compile costs with cold and with warm caches, and the peak memory it leaves.",
    measures=MEASURES,
    **COMPILE_PARAMS,
)
def fusion_kernels(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal) -> Observed:
    q, k, v = make_qkv(batch_size, num_heads, seq_len, head_dim, dtype=dtype, device=ctx.device)
    eager_seen = observe_forward(
        lambda: naive_attention(q, k, v, causal=causal),
        ctx,
        labels=STEPS,
        costs=step_costs(batch_size, num_heads, seq_len, head_dim, dtype, causal=causal),
        **STRUCTURE,
    )
    headers_before = ctx.device.type == "cpu" and _precompiled_headers_present()

    def eager():
        return naive_attention(q, k, v, causal=causal)

    def peaks(fn) -> list[tuple]:
        """Peak memory of one forward, eager and compiled, in bytes and in N×N matrices."""
        matrix = score_matrix_bytes(batch_size, num_heads, seq_len, dtype)
        found = []
        for name, call in ((fwd.NAIVE, eager), (fwd.COMPILED, lambda: fn(q, k, v, causal=causal))):
            peak = peak_memory_bytes(call, ctx.device)
            found.append((name, peak, peak / matrix))
        return found

    with _captured_torch_logs() as logs:
        # The compile's cost and the peak memory are measured on the function forward_times
        # times (symbolic sizes, dynamic=True), so that they and the forward time it buys
        # belong to one compiled function.
        compiles, peak_rows = compile_cold_and_warm(
            lambda: compiled_attention(dynamic=True),
            lambda fn: fn(q, k, v, causal=causal),
            ctx.device,
            then=peaks,
        )
        # The kernels are read from the graph specialised to this shape (dynamic=False):
        # with symbolic sizes Inductor leaves the division by √head_dim out of the fused
        # kernel's name although the kernel does it, and names are all a trace shows.
        compiled = compiled_attention()
        compiled(q, k, v, causal=causal)
    observed = observe_forward(lambda: compiled(q, k, v, causal=causal), ctx, **STRUCTURE)

    step_names = names_per_step(eager_seen.timeline, STEPS)
    eager_rows = []
    for item in work_items(eager_seen.timeline):
        steps = [s for s, names in step_names.items() if item.name in names]
        eager_rows.append((item.name, ", ".join(steps) or "—", item.calls, item.time_us))
    compiled_rows = []
    for item in work_items(observed.timeline):
        kind = "fused kernel" if item.fused else "library call"
        steps = steps_of(item.name, step_names)
        compiled_rows.append(
            (
                item.name,
                kind,
                ", ".join(steps) or "—",
                item.calls,
                item.time_us,
                fused_ops(item.name),
            )
        )
    ranges_kept = sum(1 for s in observed.timeline.spans if s.kind == "range" and s.name in STEPS)
    wrappers = sorted(
        {s.name.split(" fq")[0] for s in observed.timeline.spans if is_bookkeeping(s.name)}
        - {s.name for s in observed.timeline.spans if s.name.startswith("aten::")}
    )
    dropped = [m for m in logs if "record function" in m.lower() or "record_function" in m]
    compile_columns = (
        "compile",
        "seconds",
        "graphs",
        "cache_hits",
        "cache_misses",
        "aot_cache_hits",
        "aot_cache_misses",
    )
    return Observed(
        steps=eager_seen.steps,
        ops=observed.ops,
        timeline=observed.timeline,
        chrome=observed.chrome,
        tables={
            "eager_work": Table(
                columns=("name", "step", "calls", "time_us"),
                rows=tuple(eager_rows),
                units={"time_us": "µs"},
            ),
            "compiled_work": Table(
                columns=("name", "kind", "steps", "calls", "time_us", "fused_ops"),
                rows=tuple(compiled_rows),
                units={"time_us": "µs"},
            ),
            "compiles": Table(
                columns=compile_columns,
                rows=tuple(tuple(r[c] for c in compile_columns) for r in compiles),
                units={"seconds": "s"},
            ),
            "peaks": Table(
                columns=("variant", "peak_bytes", "peak_in_matrices"),
                rows=tuple(peak_rows),
                units={"peak_bytes": "B"},
            ),
        },
        facts={
            "compile_cost_of": "compiled_attention(dynamic=True)",
            "kernels_of": "compiled_attention(dynamic=False)",
            "precompiled_headers_before": headers_before,
            "compiler_import_s": round(compiler_import_seconds(), 3),
            "eager_work_calls": sum(r[2] for r in eager_rows),
            "compiled_work_calls": sum(r[3] for r in compiled_rows),
            "fused_kernels": sum(r[3] for r in compiled_rows if r[1] == "fused kernel"),
            "step_ranges_in_compiled_trace": ranges_kept,
            "record_function_warning": dropped[0] if dropped else None,
            "compiled_wrappers": wrappers,
            "torch_version": torch.__version__,
        },
    )


@experiment(
    "fusion_recompile",
    gpu_work=lambda p: Work(warm_compiles=2, device_s=5.0),
    summary="What a new shape costs a torch.compile'd function with dynamic=False: guards, recompiles.",
    measures=MEASURES,
    **COMPILE_PARAMS,
    new_seq_len=Param(0, minimum=0, help="the second shape's seq_len (0: seq_len + seq_len // 2)"),
)
def fusion_recompile(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal, new_seq_len
) -> Observed:
    from torch._dynamo import config as dynamo_config
    from torch._dynamo.utils import guard_failures

    other = new_seq_len or seq_len + seq_len // 2
    inputs = {
        n: make_qkv(batch_size, num_heads, n, head_dim, dtype=dtype, device=ctx.device)
        for n in (seq_len, other)
    }
    compiled = compiled_attention()
    calls = [
        (seq_len, "first call: trace, compile, run"),
        (seq_len, "same shape: guards pass, cached graph runs"),
        (other, "new seq_len: a guard fails, recompile"),
        (other, "new shape again: second cached graph"),
        (seq_len, "first shape again: first graph still cached"),
    ]
    rows = []
    code = naive_attention.__code__  # guard failures are recorded per code object
    seen = len(guard_failures.get(code, []))
    before = _inductor_counters()
    for n, what in calls:
        q, k, v = inputs[n]
        seconds, _ = _timed_call(lambda q=q, k=k, v=v: compiled(q, k, v, causal=causal), ctx.device)
        after = _inductor_counters()
        rows.append(
            (
                what,
                n,
                seconds,
                after["graphs"] - before["graphs"],
                after["cache_hits"] - before["cache_hits"],
                after["cache_misses"] - before["cache_misses"],
            )
        )
        before = after
    reasons = list(guard_failures.get(code, []))[seen:]
    limit = getattr(dynamo_config, "recompile_limit", None) or getattr(
        dynamo_config, "cache_size_limit", None
    )
    return Observed(
        tables={
            "calls": Table(
                columns=(
                    "call",
                    "seq_len",
                    "seconds",
                    "new_graphs",
                    "fx_cache_hits",
                    "fx_cache_misses",
                ),
                rows=tuple(rows),
                units={"seconds": "s"},
            )
        },
        facts={
            "first_seq_len": seq_len,
            "second_seq_len": other,
            "guard_failures": reasons,
            "recompile_limit": limit,
        },
    )
