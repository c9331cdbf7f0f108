# Experiments of the FlashAttention chapter: the tiled algorithm against naive attention and
# SDPA (profile, peak memory, numerics, bytes by the traffic model), the effect of the block
# size, and the Triton kernel: against SDPA's fused backends on a GPU, and on a CPU under
# Triton's interpreter, where its output is checked against SDPA and float64. Forward times
# at the chapter's shape are `forward_times`' (one fact, one number): what is timed here is
# the tiled loop at other block sizes and the fused kernels' kernel times off that grid.
from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable, Mapping

import torch
from torch.profiler import ProfilerActivity, profile

from attention_docs.analytic.cost import useful_flops
from attention_docs.analytic.tiling import (
    TILED_STEPS,
    computed_fraction,
    fused_traffic,
    naive_traffic,
    tile_counts,
    tile_grid,
    tiled_loop_traffic,
    tiled_step_costs,
    working_set_bytes,
)
from attention_docs.attention.naive import naive_attention
from attention_docs.attention.sdpa import sdpa_attention
from attention_docs.attention.tiled import tiled_attention
from attention_docs.attention.triton_flash import (
    INPUT_PRECISIONS,
    prepare_triton_flash,
    triton_available,
)
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.forward import unavailable
from attention_docs.experiments.registry import (
    ExperimentError,
    Observed,
    Param,
    Work,
    count_items,
    experiment,
    shape_params,
)
from attention_docs.inputs import make_qkv
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Table
from attention_docs.profiling.memory import (
    is_out_of_memory,
    peak_memory_bytes,
    release_cached_memory,
)
from attention_docs.profiling.profile import Schedule
from attention_docs.profiling.timing import ROUNDS, time_callables
from attention_docs.records.timing import Timing

MEMORY_COLUMNS = ("naive_peak", "tiled_peak", "sdpa_flash_peak")
NO_GPU_NOTE = "the Triton kernel needs a CUDA GPU (this build ran on CPU)"
NO_TRITON = "not run: triton is not installed"
FA3 = "SDPA flash, FA3"  # SDPA's flash backend with torch's FlashAttention-3 switch on


CAUSAL = Param(True, help="mask the future (decoder-style attention)")


def _sdpa_flash(q, k, v, causal):
    return sdpa_attention(q, k, v, causal=causal, backend="flash")


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).norm() / ref.norm())


# The implementations of the chapter's comparison, named as forward_times names them, so that
# a page can put each row's peak memory beside its forward time from that entry.
def _implementations(q, k, v, *, causal, block_q, block_k) -> dict[str, Callable[[], object]]:
    return {
        fwd.NAIVE: lambda: naive_attention(q, k, v, causal=causal),
        fwd.TILED: lambda: tiled_attention(
            q, k, v, causal=causal, block_q=block_q, block_k=block_k
        ),
        fwd.SDPA_FLASH: lambda: _sdpa_flash(q, k, v, causal),
    }


@experiment(
    "flash_tiled_vs_naive",
    gpu_work=lambda p: Work(profiles=3, device_s=3.0),
    summary="FlashAttention's tiled loop in PyTorch against naive attention and SDPA's flash "
    "backend: profile of the tiles, peak memory, numerics, modelled bytes, memory vs seq_len. "
    "Forward times are forward_times'.",
    measures=(
        "attention/tiled.py",
        "attention/naive.py",
        "analytic/tiling.py",
        "analytic/cost.py",
        "inputs.py",
    ),
    # A shape of forward_times' grid (tiled loop included) on both kinds of device.
    **shape_params(
        seq_len=Param(512, gpu_default=2048, minimum=1, help="tokens per sequence (N)"),
        causal=CAUSAL,
    ),
    block_q=Param(64, minimum=1, help="queries per tile (forward_times times 64)"),
    block_k=Param(64, minimum=1, help="keys per tile (forward_times times 64)"),
)
def flash_tiled_vs_naive(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal, block_q, block_k
) -> Observed:
    dev = ctx.device
    shape = (batch_size, num_heads, seq_len, head_dim)
    q, k, v = make_qkv(*shape, dtype=dtype, device=dev)
    # The float64 reference on one (batch, head) pair: at GPU shapes the full one is large.
    ref = naive_attention(*(t[:1, :1].double() for t in (q, k, v)), causal=causal)

    def tiled():
        return tiled_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k)

    observed = observe_forward(
        tiled,
        ctx,
        labels=TILED_STEPS,
        costs=tiled_step_costs(*shape, dtype, causal=causal, block_q=block_q, block_k=block_k),
        sched=Schedule(wait=1, warmup=1, active=1),  # one forward is hundreds of ops already
    )
    rows, notes, peaks = [], [], {}
    impls = _implementations(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    for (name, fn), peak_column in zip(impls.items(), MEMORY_COLUMNS, strict=True):
        try:
            err = _rel_err(fn()[:1, :1], ref)
            peaks[peak_column] = peak_memory_bytes(fn, dev)
        except RuntimeError as exc:
            status = unavailable(exc)
            release_cached_memory()
            rows.append((name, None, None, status))
            notes.append(f"{name}: {status}")
            peaks[peak_column] = None
            continue
        rows.append((name, peaks[peak_column], err, "ok"))
    impl_table = Table(
        columns=("implementation", "peak_bytes", "rel_error", "status"),
        rows=tuple(rows),
        units={"peak_bytes": "B"},
    )
    model = {"causal": causal, "block_q": block_q, "block_k": block_k}
    traffic = Table(
        columns=("model", "bytes"),
        rows=(
            ("naive: five unfused steps", naive_traffic(*shape, dtype, causal=causal)),
            ("tiled loop, one PyTorch op per line", tiled_loop_traffic(*shape, dtype, **model)),
            ("fused kernel (FlashAttention)", fused_traffic(*shape, dtype, **model)),
        ),
        units={"bytes": "B"},
    )
    shape_kw = {
        "batch_size": batch_size,
        "num_heads": num_heads,
        "head_dim": head_dim,
        "dtype": dtype,
        "causal": causal,
        "block_q": block_q,
        "block_k": block_k,
    }
    memory, oom_notes = _memory_by_seq_len(ctx, known=peaks, seq_len=seq_len, **shape_kw)
    counts = tile_counts(tile_grid(seq_len, block_q, block_k, causal=causal))
    online, online_facts = _online_softmax_row(q, k, block_k)
    return Observed(
        steps=observed.steps,
        ops=observed.ops,
        chrome=observed.chrome,
        tables={
            "implementations": impl_table,
            "traffic": traffic,
            "memory_by_seq_len": memory,
            "online_softmax_row": online,
        },
        facts={
            **observed.facts,
            **{f"tiles_{k}": v for k, v in counts.items()},
            # What one profiled forward recorded (ops nested in ops included).
            "ops_per_forward": sum(s.kind == "op" for s in observed.timeline.spans),
            "kernels_per_forward": sum(s.kind == "kernel" for s in observed.timeline.spans),
            **online_facts,
        },
        notes=tuple(notes + oom_notes),
    )


def _online_softmax_row(q: torch.Tensor, k: torch.Tensor, block_k: int) -> tuple[Table, dict]:
    """The online softmax's running max and sum, tile by tile, for one query against all keys.

    Of the first head's queries, the one whose running max grows most often is shown (with
    random inputs most maxima are found early, which would show no rescaling at all); how
    often it grows for a median query is a fact beside it. Computed in float64 so that the
    comparison with the whole row's log-sum-exp shows the algorithm's error, not float32's.
    """
    scores = (q[0, 0].double() @ k[0, 0].double().T) / math.sqrt(q.size(-1))
    tile_max = torch.stack([t.amax(dim=-1) for t in scores.split(block_k, dim=-1)], dim=-1)
    growths = (tile_max[:, 1:] > tile_max.cummax(dim=-1).values[:, :-1]).sum(dim=-1)
    query = int(growths.argmax())
    m, total, rows = -math.inf, 0.0, []  # the running max m and sum l
    for tile, s in enumerate(scores[query].split(block_k)):
        m_new = max(m, s.max().item())
        alpha = math.exp(m - m_new)  # 0 for the first tile: nothing was summed yet
        total = alpha * total + torch.exp(s - m_new).sum().item()
        k0 = tile * block_k
        rows.append((tile, k0, k0 + s.numel(), s.max().item(), m_new, alpha, total))
        m = m_new
    table = Table(
        columns=("tile", "first_key", "end_key", "tile_max", "m", "alpha", "l"),
        rows=tuple(rows),
    )
    facts = {
        "online_query": query,
        "online_growths_median": float(growths.double().median()),
        "online_lse": m + math.log(total),
        "whole_row_lse": torch.logsumexp(scores[query], dim=0).item(),
    }
    return table, facts


def _memory_by_seq_len(
    ctx, *, known, batch_size, num_heads, seq_len, head_dim, dtype, causal, block_q, block_k
):
    """Peak memory of the three implementations at seq_len/8 .. seq_len (`known` at seq_len)."""
    dev = ctx.device
    lengths = sorted({max(1, seq_len // f) for f in (8, 4, 2, 1)})

    def measure(point):
        if point["seq_len"] == seq_len:
            return known
        q, k, v = make_qkv(
            batch_size, num_heads, point["seq_len"], head_dim, dtype=dtype, device=dev
        )
        result = {}
        impls = _implementations(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
        for (name, fn), column in zip(impls.items(), MEMORY_COLUMNS, strict=True):
            try:
                result[column] = peak_memory_bytes(fn, dev)
            except RuntimeError as exc:
                if is_out_of_memory(exc) or name != fwd.SDPA_FLASH:
                    raise
                result[column] = None  # the flash backend does not take these inputs here
        return result

    return sweep(
        [{"seq_len": n} for n in lengths],
        measure,
        columns=("seq_len", *MEMORY_COLUMNS),
        units=dict.fromkeys(MEMORY_COLUMNS, "B"),
    )


@experiment(
    "flash_block_sweep",
    gpu_work=lambda p: Work(timed=count_items(p["blocks"]), device_s=4.0),
    summary="The tiled loop at several square block sizes, timed in interleaved rounds: time "
    "with its spread, peak memory, tiles computed, and the modelled bytes of the loop and of a "
    "fused kernel.",
    measures=("attention/tiled.py", "analytic/tiling.py", "analytic/cost.py", "inputs.py"),
    # Off forward_times' grid on purpose (2 heads on the CPU, batch 1 on a GPU): the 64×64 row
    # would otherwise be a second, differently timed value of the tiled loop's forward time.
    **shape_params(
        batch_size=Param(1, minimum=1, help="sequences per batch"),
        num_heads=Param(2, gpu_default=16, minimum=1, help="attention heads"),
        causal=CAUSAL,
    ),
    blocks=Param(
        "32,64,128,256", gpu_default="32,64,128,256,512", help="block sizes, comma-separated"
    ),
)
def flash_block_sweep(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal, blocks
) -> Observed:
    dev = ctx.device
    shape = (batch_size, num_heads, seq_len, head_dim)
    q, k, v = make_qkv(*shape, dtype=dtype, device=dev)
    try:
        sizes = [int(b) for b in blocks.split(",") if b.strip()]
    except ValueError:
        raise ExperimentError(
            f"blocks={blocks!r}: give block sizes as integers separated by commas, e.g. 32,64,128"
        ) from None
    if not sizes or min(sizes) < 1:
        raise ExperimentError(f"blocks={blocks!r}: give at least one block size of 1 or more")
    if max(sizes) > seq_len:  # one tile would hold the whole matrix, and more
        raise ExperimentError(
            f"blocks={blocks!r}: a block of {max(sizes)} is longer than seq_len={seq_len}; give "
            "blocks up to seq_len"
        )
    sizes = sorted(set(sizes))

    def loop(b: int) -> Callable[[], torch.Tensor]:
        return lambda: tiled_attention(q, k, v, causal=causal, block_q=b, block_k=b)

    # Every block size in the same rounds: a slow moment of the machine hurts all of them.
    timings = time_callables(
        {str(b): loop(b) for b in sizes}, dev, min_run_time=0.3 * len(sizes), cuda_runs=9
    )

    def measure(point):
        b = point["block"]
        model = {"causal": causal, "block_q": b, "block_k": b}
        grid = tile_grid(seq_len, b, b, causal=causal)
        t = timings[str(b)]
        return {
            "tiles_computed": tile_counts(grid)["computed"],
            "scores_computed": computed_fraction(grid),
            "time": t,
            "peak_bytes": peak_memory_bytes(loop(b), dev),
            "loop_bytes": tiled_loop_traffic(*shape, dtype, **model),
            "fused_bytes": fused_traffic(*shape, dtype, **model),
            "tile_working_set": working_set_bytes(b, b, head_dim, dtype),
        }

    columns = (
        "block",
        "tiles_computed",
        "scores_computed",
        "time",
        "peak_bytes",
        "loop_bytes",
        "fused_bytes",
        "tile_working_set",
    )
    table, notes = sweep(
        [{"block": b} for b in sizes],
        measure,
        columns=columns,
        units={
            "time": "µs",
            "peak_bytes": "B",
            "loop_bytes": "B",
            "fused_bytes": "B",
            "tile_working_set": "B",
        },
    )
    method = next(iter(timings.values())).method
    return Observed(tables={"blocks": table}, facts={"method": method}, notes=tuple(notes))


@experiment(
    "flash_triton_vs_sdpa",
    gpu_work=lambda p: Work(triton=1, timed=5 * 5, device_s=3.0),
    summary="The Triton FlashAttention kernel beside SDPA's flash, memory-efficient and cuDNN "
    "backends (and FlashAttention-3 where torch offers it) on a GPU: kernel times in "
    "interleaved rounds (do_bench, cold L2). On a CPU, the kernel under Triton's interpreter "
    "against SDPA flash and float64 (relative errors).",
    measures=(
        "attention/triton_flash.py",
        "attention/_flash_kernel.py",
        "attention/sdpa.py",
        "attention/naive.py",
        "analytic/cost.py",
        "inputs.py",
    ),
    # Batch 2 keeps every length off forward_times' GPU grid (batch 4): these are kernel
    # times with a cold L2, not the forward times that entry states.
    batch_size=Param(1, gpu_default=2, minimum=1, help="sequences per batch"),
    num_heads=Param(2, gpu_default=16, minimum=1, help="attention heads"),
    seq_len=Param(64, gpu_default=16384, minimum=16, help="longest sequence of the sweep"),
    head_dim=Param(32, gpu_default=128, minimum=1, help="features per head (D)"),
    dtype=Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
    causal=Param(True, help="mask the future (halves the useful FLOPs)"),
    input_precision=Param(
        "ieee",
        choices=INPUT_PRECISIONS,
        help="what tl.dot does with float32 inputs (ieee: exact float32 products)",
    ),
)
def flash_triton_vs_sdpa(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal, input_precision
) -> Observed:
    ok, why = triton_available()
    if ctx.device.type != "cuda":
        return interpreter_check(batch_size, num_heads, seq_len, head_dim, causal)
    if not ok:
        return Observed(notes=(f"the Triton kernel cannot run here: {why}",), facts={"triton": why})
    return compare_kernels(
        ctx,
        batch_size=batch_size,
        num_heads=num_heads,
        seq_len=seq_len,
        head_dim=head_dim,
        dtype=dtype,
        causal=causal,
        input_precision=input_precision,
    )


def flash_impls() -> tuple[list[str], str]:
    """The flash implementations torch's switch offers (`list_flash_attention_impls`), and
    a note when this torch has no such switch."""
    try:
        from torch.nn.attention import list_flash_attention_impls
    except ImportError:
        return [], "this torch has no flash-implementation switch (list_flash_attention_impls)"
    return list(list_flash_attention_impls()), ""


@contextlib.contextmanager
def _fa3_active():
    """SDPA's flash backend routed to FlashAttention-3 for the duration of the block."""
    from torch.nn.attention import activate_flash_attention_impl, restore_flash_attention_impl

    activate_flash_attention_impl("FA3")
    try:
        yield
    finally:
        restore_flash_attention_impl()


def _fa3_status(q, k, v, causal) -> str:
    """ "ok" when FA3 can be switched on and its kernel is what then runs, else why not."""
    offered, why = flash_impls()
    if "FA3" not in offered:
        return why or f"not offered by this torch (it offers: {', '.join(offered) or 'none'})"
    try:
        with _fa3_active(), profile(activities=[ProfilerActivity.CPU]) as prof:
            _sdpa_flash(q, k, v, causal)
    except Exception as exc:  # a missing flash_attn_interface module, an unsupported GPU...
        return unavailable(exc)
    names = {e.key for e in prof.key_averages()}
    if not any("flash_attn_3" in n for n in names):
        return "switched on, but no flash_attn_3 op ran"
    return fwd.OK


def _kernel_timings(
    fns: Mapping[str, tuple[Callable[[], object], Callable]],
    device: torch.device,
    *,
    failed: dict[str, str],
    rep_ms: float = 40.0,
) -> dict[str, Timing]:
    """Each callable's kernel time in ROUNDS interleaved rounds, entering its context first.

    On CUDA each round is `time_kernel_us` (Triton's do_bench: an L2 flush before every call,
    CUDA events around it); on the CPU (the interpreter, in tests) plain interleaved rounds.
    A callable that fails in a later round is left out and its reason put in `failed`.
    """
    if device.type != "cuda":

        def wrapped(fn, context):
            def call():
                with context():
                    return fn()

            return call

        return time_callables(
            {n: wrapped(fn, c) for n, (fn, c) in fns.items()}, device, min_run_time=0.03
        )
    from attention_docs.profiling.gpu_timing import time_kernel_us

    calls: dict[str, list[list[float]]] = {n: [] for n in fns}
    live = dict(fns)
    for _ in range(ROUNDS):
        for name, (fn, context) in list(live.items()):
            try:
                with context():
                    times = time_kernel_us(fn, warmup_ms=10, rep_ms=rep_ms)
            except Exception as exc:
                # A switch that cannot be turned on twice, a kernel that fails on a later
                # call: that candidate leaves the rounds, the others go on. Out of memory ends
                # the whole length (the caller says so).
                if is_out_of_memory(exc):
                    raise
                failed[name] = unavailable(exc)
                del live[name]
                continue
            calls[name].append(times)
    result = {}
    for name in live:
        result[name] = Timing.from_calls(
            calls[name],
            f"triton.testing.do_bench (L2 flushed before each call), {ROUNDS} interleaved rounds",
        )
    return result


def _kernel_candidates(
    q, k, v, *, causal: bool, input_precision: str, fa3: bool
) -> dict[str, tuple[Callable[[], object], Callable]]:
    """The kernels compared at one length, each with the context it runs in."""
    plain = contextlib.nullcontext
    candidates = {
        fwd.TRITON: (
            prepare_triton_flash(q, k, v, causal=causal, input_precision=input_precision),
            plain,
        ),
        **{
            f"SDPA {b}": (
                functools.partial(sdpa_attention, q, k, v, causal=causal, backend=b),
                plain,
            )
            for b in ("flash", "efficient", "cudnn")
        },
    }
    if fa3:
        candidates[FA3] = (functools.partial(_sdpa_flash, q, k, v, causal), _fa3_active)
    return candidates


def _time_ready(
    candidates: Mapping[str, tuple[Callable[[], object], Callable]], device: torch.device
) -> tuple[dict[str, str], dict[str, Timing]]:
    """Run each candidate once ("ok" or why not), then time those that ran, interleaved."""
    statuses, ready = {}, {}
    for name, (fn, context) in candidates.items():
        try:
            with context():
                fn()
        except Exception as exc:  # "No available kernel", an unsupported GPU, out of memory
            statuses[name] = unavailable(exc)
            continue
        statuses[name] = fwd.OK
        ready[name] = (fn, context)
    failed: dict[str, str] = {}
    try:
        timings = _kernel_timings(ready, device, failed=failed)
        return {**statuses, **failed}, timings
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
    release_cached_memory()
    return {name: ("out of memory" if s == fwd.OK else s) for name, s in statuses.items()}, {}


KERNEL_COLUMNS = ("seq_len", "implementation", "flops", "time", "status")


def compare_kernels(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal, input_precision="ieee"
) -> Observed:
    """The Triton kernel, SDPA's fused backends and FA3 over seq_len = seq_len/16 .. seq_len.

    Runs on any device the kernel runs on (a CUDA GPU, or the CPU under the interpreter, which
    is how the tests exercise this code without a GPU).
    """
    dev = ctx.device
    lengths = sorted({max(16, seq_len >> s) for s in (4, 3, 2, 1, 0)})
    q, k, v = make_qkv(batch_size, num_heads, lengths[0], head_dim, dtype=dtype, device=dev)
    try:
        launch = prepare_triton_flash(q, k, v, causal=causal, input_precision=input_precision)
        triton_out = launch()
    except Exception as exc:  # a compile failure on an untested GPU must not end the build
        return Observed(
            notes=(f"the Triton kernel failed on this device: {type(exc).__name__}: {exc}"[:400],),
            facts={"triton": triton_available()[1]},
        )
    reference = naive_attention(*(t[:1, :2].double() for t in (q, k, v)), causal=causal)
    offered, switch_note = flash_impls()
    fa3 = _fa3_status(q, k, v, causal)
    cfg = launch.config
    facts = {
        "triton": triton_available()[1],
        "triton_rel_error": _rel_err(triton_out[:1, :2], reference),
        # What tl.dot did with the inputs: "ieee"/"tf32"/"tf32x3" for float32, None for 16-bit.
        "input_precision": launch.input_precision,
        "kernel_config": f"{cfg.block_m}×{cfg.block_n} tiles, {cfg.num_warps} warps, "
        f"{cfg.num_stages} stages",
        "flash_impls_offered": offered,
        "flash_impl_switch": switch_note or "torch.nn.attention.activate_flash_attention_impl",
        "fa3_status": fa3,
    }
    notes: list[str] = []
    if fa3 != fwd.OK:
        notes.append(f"FlashAttention-3 was not measured: {fa3}")
    rows: list[tuple] = []
    stopped = False
    for n in lengths:
        flops = useful_flops(batch_size, num_heads, n, head_dim, causal=causal)
        if stopped:
            rows.append((n, fwd.TRITON, flops, None, "skipped after an out-of-memory"))
            continue
        q, k, v = make_qkv(batch_size, num_heads, n, head_dim, dtype=dtype, device=dev)
        candidates = _kernel_candidates(
            q, k, v, causal=causal, input_precision=input_precision, fa3=fa3 == fwd.OK
        )
        statuses, timings = _time_ready(candidates, dev)
        stopped = "out of memory" in statuses.values()
        for name, status in statuses.items():
            rows.append((n, name, flops, timings.get(name), status))
        del candidates, q, k, v
    table = Table(
        columns=KERNEL_COLUMNS,
        rows=tuple(rows),
        units={"flops": "FLOP", "time": "µs"},
    )
    n = lengths[len(lengths) // 2]  # profile both kernels once, at a middle length
    q, k, v = make_qkv(batch_size, num_heads, n, head_dim, dtype=dtype, device=dev)
    middle = prepare_triton_flash(q, k, v, causal=causal, input_precision=input_precision)
    observed = observe_forward(
        lambda: (middle(), _sdpa_flash(q, k, v, causal)),
        ctx,
        sched=Schedule(wait=1, warmup=1, active=1),
    )
    return Observed(
        ops=observed.ops,
        chrome=observed.chrome,
        tables={"kernels": table},
        facts={**facts, "profiled_seq_len": n},
        notes=tuple(notes),
    )


_CHECK = """
import json, sys
from attention_docs.attention.naive import naive_attention
from attention_docs.attention.sdpa import sdpa_attention
from attention_docs.attention.triton_flash import triton_flash_attention
from attention_docs.inputs import make_qkv
b, h, n, d, causal = json.loads(sys.argv[1])
def err(out, ref):
    return None if out is None else float((out.double() - ref).norm() / ref.norm())
rows = []
for dtype in ("float32", "bfloat16"):
    q, k, v = make_qkv(b, h, n, d, dtype=dtype, seed=1)
    tri = triton_flash_attention(q, k, v, causal=causal, block_m=16, block_n=16)
    try:
        sdpa = sdpa_attention(q, k, v, causal=causal, backend="flash")
    except RuntimeError:
        sdpa = None
    ref = naive_attention(q.double(), k.double(), v.double(), causal=causal)
    rows.append([dtype, err(tri, ref), err(sdpa, ref),
                 None if sdpa is None else err(tri, sdpa.double())])
print(json.dumps(rows))
"""
INTERPRETER_COLUMNS = (
    "dtype",
    "triton_vs_float64",
    "sdpa_flash_vs_float64",
    "triton_vs_sdpa_flash",
)


def interpreter_check(batch_size, num_heads, seq_len, head_dim, causal) -> Observed:
    """The kernel under Triton's interpreter, in a fresh process (TRITON_INTERPRET must be set
    before the kernel is defined): its relative error against a float64 reference and against
    SDPA's flash backend on the same inputs, in float32 and bfloat16. The float32 run uses the
    kernel's default input precision, "ieee" (exact float32 products)."""
    if importlib.util.find_spec("triton") is None:
        return Observed(notes=(NO_GPU_NOTE,), facts={"interpreter_check": NO_TRITON})
    args = json.dumps([batch_size, num_heads, seq_len, head_dim, causal])
    proc = subprocess.run(
        [sys.executable, "-c", _CHECK, args],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={**os.environ, "TRITON_INTERPRET": "1"},
    )
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        return Observed(
            notes=(NO_GPU_NOTE,), facts={"interpreter_check": f"failed: {tail[0][:200]}"}
        )
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    return Observed(
        tables={"interpreter": Table(INTERPRETER_COLUMNS, tuple(tuple(r) for r in rows))},
        facts={"interpreter_check": "ok", "interpreter_input_precision": "ieee"},
        notes=(NO_GPU_NOTE,),
    )
