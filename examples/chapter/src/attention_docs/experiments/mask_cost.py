# The experiment behind the chapter "Preparing a mask": how long preparing a causal mask takes —
# a boolean mask, or a float bias of 0 and -inf — against seq_len. It times existing library
# code (attention/masking.py), nothing that forward_times already states.
from __future__ import annotations

from attention_docs.attention.masking import prepare_mask
from attention_docs.experiments._declared_sweep import measure_sweep
from attention_docs.experiments.registry import Observed, Param, Work, experiment
from attention_docs.records.sweep import Sweep

# The sweep, declared once: its lines are timed together at each seq_len, in interleaved
# rounds; the page's table, figure, ranking and fact ids all follow from it.
SWEEP = Sweep(
    table="prepare",
    x="seq_len",
    x_unit="tokens",
    lines=("bool mask", "float bias"),
    metric="causal mask preparation time",
)


@experiment(
    "mask_cost",
    summary="Time to prepare a causal mask (bool) and a causal bias (float), against seq_len.",
    # The files whose code this measures: an edit to one of them re-measures the entry.
    # (This module is fingerprinted too; renderers and prose are not.)
    measures=("attention/masking.py", "attention/naive.py"),
    # The least memory a run needs: the largest bool mask (1 byte) and float bias (4 bytes).
    # `run` and the build refuse parameters that cannot fit before the experiment starts.
    estimate_bytes=lambda p: 5 * p["max_seq_len"] ** 2,
    # It neither profiles nor compiles: its worker need not import Dynamo and Inductor.
    imports=("torch",),
    # Its work on the lent GPU, which plans the call (gpu_plan.py): 1024..16384 is 5 sizes x
    # 2 lines, each 50 timed runs of at most ~1 ms (1 GiB written at ~4 TB/s).
    gpu_work=lambda p: Work(
        timed=len(SWEEP.lines) * len(seq_lens(p["min_seq_len"], p["max_seq_len"])),
        device_s=1.0,
    ),
    min_seq_len=Param(128, gpu_default=1024, minimum=1, help="the shortest sequence"),
    max_seq_len=Param(2048, gpu_default=16384, minimum=1, help="the longest sequence"),
)
def mask_cost(ctx, *, min_seq_len, max_seq_len) -> Observed:
    return measure_sweep(
        SWEEP,
        seq_lens(min_seq_len, max_seq_len),
        lambda seq_len: _preparations(seq_len, ctx.device),
        ctx.device,
    )


def seq_lens(low: int, high: int) -> list[int]:
    """The sequence lengths measured: from `low`, doubling, up to `high`."""
    sizes = [low]
    while sizes[-1] * 2 <= high:
        sizes.append(sizes[-1] * 2)
    return sizes


def _preparations(seq_len, device):
    """Both ways to prepare a causal mask of `seq_len`, as callables to time: the lines."""
    return {
        "bool mask": lambda: prepare_mask("masked_fill", seq_len, device=device),
        "float bias": lambda: prepare_mask("additive", seq_len, device=device),
    }
