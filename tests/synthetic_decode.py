# Measurements made up for the decode and winners renderer tests: decode_steps,
# decode_prefill_vs_decode, machine_ceilings and train_times entries with known timings, so
# that a verdict (a tie, a saturating batch, a slope, a forecast check) is known before the
# renderer runs. Built from the experiments' own columns, on a named device.
from __future__ import annotations

from dataclasses import replace

from timings import stated

from attention_docs.experiments.decode import STEP_COLUMNS, step_points
from attention_docs.experiments.registry import get
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement, Provenance, StepStat, Table
from attention_docs.records.device import DeviceInfo, device_id
from attention_docs.records.timing import Timing

CPU = DeviceInfo(kind="cpu", name="Test CPU", threads=2)
H200 = DeviceInfo(kind="cuda", name="NVIDIA H200", capability="90")


def timing(median: float, low: float | None = None, high: float | None = None) -> Timing:
    low = median * 0.98 if low is None else low
    high = median * 1.02 if high is None else high
    return stated(median, low, high)


def measurement(experiment: str, params: dict, *, device=CPU, **fields) -> Measurement:
    resolved = get(experiment).resolve(params, device.kind)
    prov = Provenance(device, "2.13.0", None, "3.12", "0", "2026-01-01T00:00:00Z", 1.0)
    return Measurement(experiment, "k", "f", dict(params), resolved, prov, **fields)


def decode_steps(step_us=None, *, device=CPU, **params) -> Measurement:
    """Every point of decode_steps at `params` (tiny by default). `step_us(variant, impl,
    batch, cache)` gives a point's median (±2% rounds); by default its bytes at 1 GB/s plus 5
    µs per step — a step that reads at the memory's pace, with a fixed cost."""
    if device.kind == "cpu":  # tiny by default; a GPU entry takes the GPU defaults
        params = {"num_heads": 4, "head_dim": 8, "gqa_kv_heads": 2, "cache_len": 64,
                  "min_cache_len": 16, "max_cache_len": 256, "max_batch_size": 8,
                  "working_set_mb": 1, **params}  # fmt: skip
    resolved = get("decode_steps").resolve(params, device.kind)
    heads = dict(
        zip(
            ("MHA", "GQA", "MQA"), (resolved["num_heads"], resolved["gqa_kv_heads"], 1), strict=True
        )
    )
    itemsize = 2 if resolved["dtype"] == "bfloat16" else 4

    def default(v, impl, b, m):
        return 5.0 + 2 * b * heads[v] * m * resolved["head_dim"] * itemsize / 1e3

    rows = []
    for v, impl, b, m in step_points(resolved):
        us = (step_us or default)(v, impl, b, m)
        t = us if isinstance(us, Timing) else timing(us) if us is not None else None
        rows.append((v, impl, b, heads[v], m, 4, t, "ok" if t else "not available here"))
    table = Table((*STEP_COLUMNS, "status"), tuple(rows), {"time": "µs"})
    ops = {v: ["aten::_scaled_dot_product_flash_attention_for_cpu"] for v in heads}
    facts = {"kv_heads": heads, "sdpa_ops": ops, "rounds": 3}
    m = measurement("decode_steps", params, device=device, tables={"steps": table}, facts=facts)
    return replace(m, provenance=replace(m.provenance, device_id=device_id(device)))


def ceilings(m: Measurement, bandwidth: float = 20e9, peak: float = 100e9) -> Measurement:
    """A machine_ceilings entry on `m`'s device."""
    key = f"peak_flops_{m.params.get('dtype', 'float32')}"
    facts = {"bandwidth_bs": bandwidth, "bandwidth_bs_low": bandwidth * 0.98,
             "bandwidth_bs_high": bandwidth * 1.02, key: peak}  # fmt: skip
    return measurement("machine_ceilings", {}, device=m.provenance.device, facts=facts)


LABELS = ("decode.append", "attention.scores", "attention.scale", "attention.mask",
          "attention.softmax", "attention.weighted_sum")  # fmt: skip


def prefill_vs_decode(times: dict | None = None, **params) -> Measurement:
    """decode_prefill_vs_decode with `times` ({mode: Timing or median}) and a profile whose
    per-step shares are known: softmax the largest in every profiled step."""
    from attention_docs.experiments.decode import DECODE, FLOOR, PREFILL, PROFILED

    params = {"num_heads": 4, "head_dim": 8, "num_kv_heads": 2, "prompt_len": 24, **params}
    resolved = get("decode_prefill_vs_decode").resolve(params, "cpu")
    n = resolved["prompt_len"]
    given = {PREFILL: 100.0, DECODE: 2400.0, FLOOR: 20.0, PROFILED: 90.0, **(times or {})}
    rows = tuple(
        (mode, n if mode in (PREFILL, DECODE) else 1, 1 if mode == FLOOR else n,
         t if isinstance(t, Timing) else timing(t))
        for mode, t in given.items()
    )  # fmt: skip
    per_forward = Table(
        ("forward", *LABELS),
        tuple((i, 1.0, 10.0, 2.0, 1.0, 20.0 + i, 10.0) for i in (1, 2, 3)),
        dict.fromkeys(LABELS, "µs"),
    )
    steps = tuple(StepStat(label, 1, 10.0, 10.0, 100.0, 1000.0) for label in LABELS)
    tables = {
        "times": Table(("mode", "tokens", "cache_len", "time"), rows),
        "per_forward": per_forward,
    }
    return measurement("decode_prefill_vs_decode", params, tables=tables, steps=steps)


def train_times(base: Measurement, rows: list[tuple]) -> Measurement:
    """A train_times entry holding `rows` (synthetic_forward.row tuples)."""
    return replace(
        base,
        experiment="train_times",
        params={"seq_lens": "512", "dtypes": "float32,bfloat16"},
        tables={"times": Table(fwd.COLUMNS, tuple(rows))},
        facts={"method": "test"},
        notes=(),
    )
