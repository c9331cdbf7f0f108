# Experiments of the FlashAttention chapter: the tiled algorithm against naive attention and
# SDPA (time, peak memory, bytes by the traffic model), the effect of the block size, and the
# Triton kernel against SDPA's flash backend on a GPU. The tiled loop runs as hundreds of small
# eager ops, so the CPU defaults are small; GPU builds use larger shapes.
from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention

from attention_docs.attention.naive import naive_attention
from attention_docs.attention.tiled import tiled_attention
from attention_docs.attention.triton_flash import triton_available, triton_flash_attention
from attention_docs.cost import attention_flops
from attention_docs.experiments._observe import observe_forward
from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.registry import ExperimentError, Observed, Param, experiment
from attention_docs.inputs import make_qkv
from attention_docs.measurements.schema import Table
from attention_docs.profiling.memory import (
    is_out_of_memory,
    peak_memory_bytes,
    release_cached_memory,
)
from attention_docs.profiling.profile import Schedule
from attention_docs.profiling.timing import time_callable
from attention_docs.tiling import (
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

MEMORY_COLUMNS = ("naive_peak", "tiled_peak", "sdpa_flash_peak")
NO_GPU_NOTE = "the Triton kernel needs a CUDA GPU (this build ran on CPU)"


def _shape_params(seq_len: int, gpu_seq_len: int) -> dict[str, Param]:
    return {
        "batch_size": Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
        "num_heads": Param(4, gpu_default=16, minimum=1, help="attention heads"),
        "seq_len": Param(seq_len, gpu_default=gpu_seq_len, minimum=1, help="tokens (N)"),
        "head_dim": Param(64, minimum=1, help="features per head (D)"),
        "dtype": Param(
            "float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")
        ),
        "causal": Param(True, help="mask the future (decoder-style attention)"),
    }


def _sdpa_flash(q, k, v, causal):
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return scaled_dot_product_attention(q, k, v, is_causal=causal)


def _unavailable(exc: Exception) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"not available on this device: {first[:160]}"


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).norm() / ref.norm())


@experiment(
    "flash_tiled_vs_naive",
    summary="FlashAttention's tiled loop in PyTorch against naive attention and SDPA's flash "
    "backend: profile of the tiles, time, peak memory, modelled bytes, memory vs seq_len.",
    measures=("attention/tiled.py", "attention/naive.py", "tiling.py", "cost.py", "inputs.py"),
    **_shape_params(512, 4096),
    block_q=Param(64, gpu_default=128, minimum=1, help="queries per tile"),
    block_k=Param(64, gpu_default=128, minimum=1, help="keys per tile"),
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
    impls = {
        "naive (five steps)": lambda: naive_attention(q, k, v, causal=causal),
        "tiled (PyTorch loop)": tiled,
        "SDPA, flash backend": lambda: _sdpa_flash(q, k, v, causal),
    }
    rows, notes, peaks = [], [], {}
    for (name, fn), peak_column in zip(impls.items(), MEMORY_COLUMNS, strict=True):
        try:
            err = _rel_err(fn()[:1, :1], ref)
            # The tiled loop launches hundreds of kernels per forward: fewer CUDA-event runs.
            timing = time_callable(fn, dev, cuda_runs=10 if fn is tiled else 50)
            peaks[peak_column] = peak_memory_bytes(fn, dev)
        except RuntimeError as exc:
            status = "out of memory" if is_out_of_memory(exc) else _unavailable(exc)
            release_cached_memory()
            rows.append((name, None, None, None, status))
            notes.append(f"{name}: {status}")
            peaks[peak_column] = None
            continue
        rows.append((name, timing.median_us, peaks[peak_column], err, "ok"))
    impl_table = Table(
        columns=("implementation", "time_us", "peak_bytes", "rel_error", "status"),
        rows=tuple(rows),
        units={"time_us": "µs", "peak_bytes": "B"},
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
    memory, oom_notes = _memory_by_seq_len(
        ctx,
        known=peaks,
        batch_size=batch_size,
        num_heads=num_heads,
        seq_len=seq_len,
        head_dim=head_dim,
        dtype=dtype,
        causal=causal,
        block_q=block_q,
        block_k=block_k,
    )
    counts = tile_counts(tile_grid(seq_len, block_q, block_k, causal=causal))
    online, online_facts = _online_softmax_row(q, k, block_k)
    return Observed(
        steps=observed.steps,
        ops=observed.ops,
        timing=observed.timing,
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
        result = {
            "naive_peak": peak_memory_bytes(lambda: naive_attention(q, k, v, causal=causal), dev),
            "tiled_peak": peak_memory_bytes(
                lambda: tiled_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k),
                dev,
            ),
        }
        try:
            result["sdpa_flash_peak"] = peak_memory_bytes(lambda: _sdpa_flash(q, k, v, causal), dev)
        except RuntimeError as exc:
            if "out of memory" in str(exc):
                raise
            result["sdpa_flash_peak"] = None
        return result

    return sweep(
        [{"seq_len": n} for n in lengths],
        measure,
        columns=("seq_len", *MEMORY_COLUMNS),
        units=dict.fromkeys(MEMORY_COLUMNS, "B"),
    )


@experiment(
    "flash_block_sweep",
    summary="The tiled loop at several square block sizes: time, peak memory, tiles computed, "
    "and the modelled bytes of the loop and of a fused kernel.",
    measures=("attention/tiled.py", "tiling.py", "cost.py", "inputs.py"),
    **_shape_params(256, 4096),
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

    def measure(point):
        b = point["block"]

        def fn():
            return tiled_attention(q, k, v, causal=causal, block_q=b, block_k=b)

        model = {"causal": causal, "block_q": b, "block_k": b}
        grid = tile_grid(seq_len, b, b, causal=causal)
        return {
            "tiles_computed": tile_counts(grid)["computed"],
            "scores_computed": computed_fraction(grid),
            "time_us": time_callable(fn, dev, cuda_runs=10).median_us,
            "peak_bytes": peak_memory_bytes(fn, dev),
            "loop_bytes": tiled_loop_traffic(*shape, dtype, **model),
            "fused_bytes": fused_traffic(*shape, dtype, **model),
            "tile_working_set": working_set_bytes(b, b, head_dim, dtype),
        }

    columns = (
        "block",
        "tiles_computed",
        "scores_computed",
        "time_us",
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
            "time_us": "µs",
            "peak_bytes": "B",
            "loop_bytes": "B",
            "fused_bytes": "B",
            "tile_working_set": "B",
        },
    )
    return Observed(tables={"blocks": table}, notes=tuple(notes))


@experiment(
    "flash_triton_vs_sdpa",
    summary="The Triton FlashAttention kernel beside SDPA's flash backend on a GPU: time, "
    "TFLOP/s and share of a measured bf16 matmul ceiling.",
    measures=("attention/triton_flash.py", "attention/_flash_kernel.py", "cost.py", "inputs.py"),
    batch_size=Param(1, gpu_default=4, minimum=1, help="sequences per batch"),
    num_heads=Param(2, gpu_default=16, minimum=1, help="attention heads"),
    seq_len=Param(64, gpu_default=16384, minimum=16, help="longest sequence of the sweep"),
    head_dim=Param(32, gpu_default=128, minimum=1, help="features per head (D)"),
    dtype=Param("float32", gpu_default="bfloat16", choices=("float32", "bfloat16", "float16")),
    causal=Param(True, help="mask the future (halves the useful FLOPs)"),
)
def flash_triton_vs_sdpa(
    ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal
) -> Observed:
    ok, why = triton_available()
    if ctx.device.type != "cuda":
        check = interpreter_check(batch_size, num_heads, seq_len, head_dim, causal)
        return Observed(notes=(NO_GPU_NOTE,), facts={"triton": why, **check})
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
    )


def compare_kernels(ctx, *, batch_size, num_heads, seq_len, head_dim, dtype, causal) -> Observed:
    """Triton kernel and SDPA's flash backend over seq_len = seq_len/16 .. seq_len.

    Runs on any device the kernel runs on (a CUDA GPU, or the CPU under the interpreter, which
    is how the tests exercise this code without a GPU).
    """
    dev = ctx.device
    lengths = sorted({max(16, seq_len >> s) for s in (4, 3, 2, 1, 0)})
    q, k, v = make_qkv(batch_size, num_heads, lengths[0], head_dim, dtype=dtype, device=dev)
    notes = []
    try:
        triton_out = triton_flash_attention(q, k, v, causal=causal)
    except Exception as exc:  # a compile failure on an untested GPU must not end the build
        return Observed(
            notes=(f"the Triton kernel failed on this device: {type(exc).__name__}: {exc}"[:400],),
            facts={"triton": triton_available()[1]},
        )
    facts = {
        "triton": triton_available()[1],
        "triton_rel_error": _rel_err(
            triton_out, naive_attention(q.double(), k.double(), v.double(), causal=causal)
        ),
    }
    ceiling = _matmul_ceiling(dev, dtype)
    facts["matmul_tflops"] = ceiling

    def measure(point):
        n = point["seq_len"]
        q, k, v = make_qkv(batch_size, num_heads, n, head_dim, dtype=dtype, device=dev)
        flops = attention_flops(batch_size, num_heads, n, head_dim) * (0.5 if causal else 1.0)
        t_triton = time_callable(
            lambda: triton_flash_attention(q, k, v, causal=causal), dev
        ).median_us
        try:
            t_sdpa = time_callable(lambda: _sdpa_flash(q, k, v, causal), dev).median_us
        except RuntimeError as exc:
            if "out of memory" in str(exc):
                raise
            t_sdpa = None
            notes.append(f"SDPA flash at seq_len={n}: {_unavailable(exc)}")

        def tflops(us):
            return flops / (us * 1e-6) / 1e12 if us else None

        return {
            "flops": flops,
            "triton_us": t_triton,
            "sdpa_flash_us": t_sdpa,
            "triton_tflops": tflops(t_triton),
            "sdpa_flash_tflops": tflops(t_sdpa),
            "matmul_tflops": ceiling,
            "triton_pct_of_matmul": 100 * tflops(t_triton) / ceiling,
            "sdpa_flash_pct_of_matmul": 100 * tflops(t_sdpa) / ceiling if t_sdpa else None,
        }

    table, oom_notes = sweep(
        [{"seq_len": n} for n in lengths],
        measure,
        columns=(
            "seq_len", "flops", "triton_us", "sdpa_flash_us", "triton_tflops",
            "sdpa_flash_tflops", "matmul_tflops", "triton_pct_of_matmul", "sdpa_flash_pct_of_matmul",
        ),
        units={"triton_us": "µs", "sdpa_flash_us": "µs", "triton_tflops": "TFLOP/s", "sdpa_flash_tflops": "TFLOP/s", "matmul_tflops": "TFLOP/s", "triton_pct_of_matmul": "%", "sdpa_flash_pct_of_matmul": "%"},
    )  # fmt: skip
    n = lengths[len(lengths) // 2]  # profile both kernels once, at a middle length
    q, k, v = make_qkv(batch_size, num_heads, n, head_dim, dtype=dtype, device=dev)
    observed = observe_forward(
        lambda: (triton_flash_attention(q, k, v, causal=causal), _sdpa_flash(q, k, v, causal)),
        ctx,
        sched=Schedule(wait=1, warmup=1, active=1),
    )
    return Observed(
        ops=observed.ops,
        chrome=observed.chrome,
        tables={"kernels": table},
        facts=facts,
        notes=tuple(notes + oom_notes),
    )


def _matmul_ceiling(dev: torch.device, dtype: str) -> float:
    """TFLOP/s of one large square matmul in `dtype`: the ceiling attention's matmuls aim at."""
    n = 8192 if dev.type == "cuda" else 256
    a, b, _ = make_qkv(1, 1, n, n, dtype=dtype, device=dev)
    timing = time_callable(lambda: a @ b, dev)
    return 2.0 * n**3 / (timing.median_us * 1e-6) / 1e12


_CHECK = """
import json, sys
import torch
from attention_docs.attention.naive import naive_attention
from attention_docs.attention.triton_flash import triton_flash_attention
from attention_docs.inputs import make_qkv
b, h, n, d, causal = json.loads(sys.argv[1])
errors = {}
for dtype in ("float32", "bfloat16"):
    q, k, v = make_qkv(b, h, n, d, dtype=dtype, seed=1)
    out = triton_flash_attention(q, k, v, causal=causal, block_m=16, block_n=16)
    ref = naive_attention(q.double(), k.double(), v.double(), causal=causal)
    errors[dtype] = float((out.double() - ref).norm() / ref.norm())
print(json.dumps(errors))
"""


def interpreter_check(batch_size, num_heads, seq_len, head_dim, causal) -> dict:
    """Run the kernel under Triton's interpreter in a fresh process; its errors vs float64.

    A fresh process because TRITON_INTERPRET must be set before the kernel is defined.
    """
    if importlib.util.find_spec("triton") is None:
        return {"interpreter_check": "not run: triton is not installed"}
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
        return {"interpreter_check": f"failed: {tail[0][:200]}"}
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        "interpreter_check": "ok",
        "interpreter_shape": f"{batch_size}×{num_heads}×{seq_len}×{head_dim}",
        **{f"interpreter_rel_error_{k}": v for k, v in errors.items()},
    }
