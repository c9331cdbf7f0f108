# The experiment behind "Cost model first": this machine's two ceilings (a large matmul for
# FLOP/s, a large copy for bandwidth), which every chapter that sets a time against them
# reads (one fact, one number). The steps placed under them are naive_steps' (their structure:
# op calls, kernels and the gaps between them) and forward_times' (their unprofiled times).
from __future__ import annotations

from attention_docs.experiments._sweep import sweep
from attention_docs.experiments.registry import Observed, Param, experiment
from attention_docs.profiling.ceilings import (
    COLUMNS,
    UNITS,
    ceiling_facts,
    ceiling_points,
    measure_point,
)


@experiment(
    "machine_ceilings",
    summary="This machine's ceilings: matmul FLOP/s per dtype and copy bandwidth, beside the spec sheet.",
    measures=("profiling/ceilings.py", "profiling/timing.py"),
    matmul_size=Param(2048, gpu_default=8192, minimum=16, help="largest matmul side n"),
    copy_mb=Param(128, gpu_default=2048, minimum=1, help="largest copied buffer, in MiB"),
    dtypes=Param("float32", gpu_default="bfloat16,float32", help="comma-separated matmul dtypes"),
)
def machine_ceilings(ctx, *, matmul_size, copy_mb, dtypes) -> Observed:
    """The one measurement of this device's ceilings that every chapter cites."""
    names = tuple(d.strip() for d in dtypes.split(",") if d.strip())
    points = ceiling_points(matmul_size=matmul_size, copy_mb=copy_mb, dtypes=names)
    # An out-of-memory copy must not skip the other kind: each kind stops on its own.
    table, notes = sweep(
        points,
        lambda point: measure_point(ctx.device, ctx.info, point),
        columns=COLUMNS,
        units=UNITS,
        stop_after_oom=False,
    )
    return Observed(
        tables={"ceilings": table}, facts=ceiling_facts(table.records()), notes=tuple(notes)
    )
