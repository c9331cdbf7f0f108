# The quadratic-wall experiment (one experiment for four sweeps that share shapes) and its
# findings and renderers. The experiment runs once at tiny shapes to test what it records;
# every sentence is tested on synthetic sweeps built from a recorded entry, never on a live
# timing's value.
import math
import re
from dataclasses import replace

import pytest
from recorded import recorded, sourced

from attention_docs import render
from attention_docs.analytic import gpu as gpus
from attention_docs.analytic.memory import naive_peak
from attention_docs.experiments.registry import get
from attention_docs.experiments.runner import run_experiment
from attention_docs.experiments.wall import SWEEPS, sweep_shapes
from attention_docs.findings import wall as fwall
from attention_docs.measurements import Measurement, Sourced, Table
from attention_docs.measurements import forward as fwd
from attention_docs.records.device import DeviceInfo
from attention_docs.records.shape import Shape
from attention_docs.records.steps import STEPS
from attention_docs.records.timing import Timing
from attention_docs.render import words

FACT = re.compile(r'<span class="ad-fact" data-fact="([^"]*)">(.*?)</span>')
TINY = {"min_seq_len": 8, "max_seq_len": 32, "tokens": 64, "model_dim": 32, "seq_len": 16,
        "min_head_dim": 8, "max_head_dim": 32}  # fmt: skip


def plain(text: str) -> str:
    return FACT.sub(lambda m: m.group(2), text)


@pytest.fixture(scope="module")
def wall() -> Measurement:
    return run_experiment("wall", TINY, device_setting="cpu")


def test_every_shape_is_measured_once_and_each_sweep_reads_it(wall):
    sweeps = sweep_shapes(dict(wall.params))
    union = list(dict.fromkeys(s for name in SWEEPS for s in sweeps[name]))
    points = wall.tables["points"].records()
    assert len(points) == len(union) < sum(len(v) for v in sweeps.values())  # shapes are shared
    shared = Shape(1, 2, 16, 16, "float32", True)  # on the heads and the head_dim sweeps
    assert shared in sweeps["heads"] and shared in sweeps["head_dim"]
    for name in SWEEPS:
        assert [p.shape for p in fwall.sweep(wall, name)] == sweeps[name]
    assert fwall.sweep(wall, "heads")[1].time == fwall.sweep(wall, "head_dim")[1].time
    for r in points:
        assert r["status"] == "ok" and r["time"].low_us <= r["time"].time_us <= r["time"].high_us
        model = naive_peak(
            r["batch_size"], r["num_heads"], r["seq_len"], r["head_dim"], causal=True
        )
        assert r["peak_bytes"] == model.peak_bytes
    profiled = {p.shape for name in ("seq_len", "head_dim") for p in fwall.sweep(wall, name)}
    for p in {p.shape: p for name in SWEEPS for p in fwall.sweep(wall, name)}.values():
        assert (p.steps is not None) == (p.shape in profiled)
        if p.steps:
            samples = wall.facts["profiled_steps"]
            assert all(len(p.steps[label].rounds_us) == samples for label in STEPS)
    assert [p.flops.value for p in fwall.sweep(wall, "tokens")] == [4 * 2 * 64 * 64 * 64 / 2**i for i in range(3)]  # fmt: skip


def test_the_last_level_cache_is_read_from_sysfs(tmp_path):
    from attention_docs.profiling.cache import cpu_last_level_cache

    for name, level, kind, size in (("index0", 1, "Data", "32K"), ("index2", 2, "Unified", "512K"),
                                    ("index3", 3, "Unified", "32768K")):  # fmt: skip
        d = tmp_path / name
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    cache = cpu_last_level_cache(tmp_path)
    assert (cache.level, cache.size_bytes) == (3, 32 * 2**20)
    assert cpu_last_level_cache(tmp_path / "missing") is None


@pytest.mark.parametrize("kind", ["cpu", "cuda"])
def test_no_default_shape_is_on_the_forward_time_grid(kind):
    """A shape the grid holds has one forward time on the site: by default the sweeps stay off
    it (a shape on it would be read from forward_times, tested below)."""
    grid = set(fwd.GRIDS[kind].shapes())
    shapes = {s for v in sweep_shapes(get("wall").resolve({}, kind)).values() for s in v}
    assert shapes and not shapes & grid


def test_a_shape_too_large_for_the_free_memory_is_a_row_in_words(monkeypatch):
    import attention_docs.experiments._sweep as sweep_module

    monkeypatch.setattr(sweep_module, "free_memory_bytes", lambda device: 200_000)
    m = run_experiment("wall", {**TINY, "max_seq_len": 64, "tokens": 32, "model_dim": 16}, device_setting="cpu")  # fmt: skip
    status = {p.shape.seq_len: p.status for p in fwall.sweep(m, "seq_len")}
    assert status[8] == status[16] == "ok" and status[64] == "too large for the free memory"
    assert fwall.sweep(m, "seq_len")[-1].time is None and any("was not run" in n for n in m.notes)


XS = [16, 32, 64, 128, 256, 512]


def timing(median: float, spread: float, turn: int = 0) -> Timing:
    """Five rounds at ±`spread` around `median` (its lower quartile: records/timing.py),
    their order turned by `turn` (so that steps given different turns do not rise and fall
    together, call by call)."""
    rounds = (median * (1 - spread), median, median, median, median * (1 + spread))
    return Timing(rounds[turn % 5 :] + rounds[: turn % 5], 5, "test")


def synthetic(base: Measurement, times, *, spread=0.01, steps=None, llc=None) -> Measurement:
    """A seq_len sweep at batch 1, 2 heads, head_dim 64 with the given medians; its steps
    (medians per x, five each) profiled with a ±`spread` range, alike by default."""
    params = {**base.params, "batch_size": 1, "num_heads": 2, "head_dim": 64, "dtype": "float32", "causal": True}  # fmt: skip
    rows = []
    for x, t in zip(XS, times, strict=True):
        parts = (steps or {}).get(x, (t / 5,) * 5)
        step_cells = tuple(timing(v, spread, i) for i, v in enumerate(parts))
        peak = naive_peak(1, 2, x, 64, causal=True).peak_bytes
        rows.append((1, 2, x, 64, timing(t, spread), peak, *step_cells, "ok"))
    columns = ("batch_size", "num_heads", "seq_len", "head_dim", "time", "peak_bytes", *STEPS, "status")  # fmt: skip
    sweeps = Table(("sweep", "batch_size", "num_heads", "seq_len", "head_dim"), tuple(("seq_len", 1, 2, x, 64) for x in XS))  # fmt: skip
    facts = {"rounds": 3, **({"llc_bytes": llc, "llc_level": 3} if llc else {})}
    return replace(base, params=params, facts=facts,
                   tables={"points": Table(columns, tuple(rows)), "sweeps": sweeps})  # fmt: skip


@pytest.fixture(scope="module")
def base() -> Measurement:
    return recorded("wall")


def claim(m: Measurement, times: Measurement | None = None) -> str:
    s = Sourced(m, "x", "x.json", base="")
    return plain(render.wall.seq_len_claim(s, times and Sourced(times, "x", "t.json", base="")))


def test_slopes_name_the_overhead_range_and_the_wall(base):
    text = claim(synthetic(base, [100, 110, 120, 400, 1600, 6400]))
    assert "Up to seq_len 64 each doubling costs less than double" in text
    assert "From **64** tokens on, every doubling multiplies time by at least 2.83×" in text
    assert "No doubling is steeper than N² outside the rounds' noise." in text
    m = synthetic(base, [100, 110, 120, 400, 1600, 6400])
    t = fwall.time_trend(m, fwall.sweep(m, "seq_len"))
    assert t.whole.value == pytest.approx(math.log(64) / math.log(32))
    assert t.whole.low < t.whole.value < t.whole.high
    flat = claim(synthetic(base, [1, 2, 4, 8, 16, 32]))
    assert (
        "No stretch at the end keeps every doubling at 2.83×" in flat
        and "less than double" not in flat
    )


def test_trend_words_are_withheld_inside_the_noise(base):
    noisy = claim(synthetic(base, [100, 110, 120, 400, 1600, 6400], spread=0.5))
    assert "less than double" not in noisy and "From **64** tokens on" not in noisy


def test_a_super_quadratic_doubling_is_put_down_to_the_cache_only_when_it_crosses_it(base):
    times = [100, 400, 1600, 6400, 25600, 25600 * 2**3.2]
    # The N×N working set is 1.11 MB at 256 tokens and 4.46 MB at 512.
    crossing = claim(synthetic(base, times, llc=2_000_000))
    assert "Between 256 and 512 tokens the local slope is 3.2" in crossing
    assert "grows past the 2 MB last-level cache, which is consistent with the bend" in crossing
    assert "was already larger than" in claim(synthetic(base, times, llc=1_000_000))
    inside = claim(synthetic(base, times, llc=10**9))
    # A CPU's reported cache is shared by its cores (and a guest's with other guests): how
    # much of it the run had is unmeasured, so staying inside it rules nothing out.
    assert base.device_id.startswith("cpu-")
    assert "stays inside" in inside and "the cache is not ruled out" in inside
    assert "does not explain it" not in inside
    gpu = replace(base, provenance=replace(base.provenance, device_id="cuda-h200"))
    owned = claim(synthetic(gpu, times, llc=10**9))
    assert "stays inside" in owned and "so the cache does not explain it" in owned
    assert "does not record the last-level cache" in claim(synthetic(base, times))


def test_the_largest_step_is_named_only_outside_the_noise(base):
    times = [100.0] * 6
    steps = {16: (50, 10, 48, 10, 10), 32: (50, 10, 48, 10, 10), 64: (60, 10, 10, 10, 10)}
    steps |= dict.fromkeys((128, 256, 512), (10, 10, 10, 70, 10))
    wide = synthetic(base, times, spread=0.1, steps=steps)
    rows = shares_rows(wide)
    assert (
        rows[16][:2] == rows[32][:2] == ["within noise: `attention.scores`, `attention.mask`", "—"]
    )
    assert rows[64][:2] == ["`attention.scores`", "60% (56.8–62.9%)"]
    assert all(rows[x][0] == "`attention.softmax`" for x in (128, 256, 512))
    assert all(rows[x][2].endswith("%)") for x in XS)  # the matmuls' share, with its range
    tight = shares_rows(synthetic(base, times, spread=0.001, steps=steps))
    assert all(tight[x][0] == "`attention.scores`" for x in (16, 32, 64))


def shares_rows(m: Measurement) -> dict[int, list[str]]:
    """The step-share table's rows by seq_len: largest step, its share, the matmuls' share."""
    table = plain(render.wall.step_shares_table(Sourced(m, "x", "x.json", base=""), "seq_len"))
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:] if line.startswith("|")]  # fmt: skip
    return {int(r[0].replace(",", "")): r[1:] for r in rows}


def test_a_change_of_time_is_a_ratio_with_its_range_or_a_tie(base):
    m = synthetic(base, [100, 300, 1, 1, 1, 1])
    a, b = fwall.sweep(m, "seq_len")[:2]
    fact_id, c, rises = fwall.change(m, a, b)
    assert not c.tie and c.ratio == pytest.approx(3.0) and "→" in fact_id and rises
    _, back, falls = fwall.change(m, b, a)
    assert back.ratio == c.ratio and not falls
    assert "multiplies time by 3× (2.94–3.06×)" in plain(render.wall._change(m, a, b))
    wide = synthetic(base, [100, 110, 1, 1, 1, 1], spread=0.2)
    a, b = fwall.sweep(wide, "seq_len")[:2]
    assert "leaves time within noise (1.1× apart)" in plain(render.wall._change(wide, a, b))


def test_a_shape_on_the_forward_time_grid_is_read_from_forward_times(base):
    m = synthetic(base, [100, 400, 1600, 6400, 25600, 102400])
    times = recorded("forward_times")
    shape = Shape(1, 2, 64, 64, "float32", True)
    row = ("naive (eager)", 1, 2, 64, 64, "float32", True, timing(777.0, 0.01), "ok")
    t = replace(times, tables={"times": Table(fwd.COLUMNS, (*times.tables["times"].rows, row))})
    point = next(p for p in fwall.sweep(m, "seq_len", t) if p.shape == shape)
    assert point.time.value == 777.0
    assert point.time.id == fwall.ffwd.forward_quantity(t, "naive (eager)", shape).id
    table = render.wall.sweep_table(Sourced(m, "x", "x.json", base=""), "seq_len", Sourced(t, "x", "t.json", base=""))  # fmt: skip
    assert "777 µs" in plain(table) and "777 µs" not in plain(render.wall.sweep_table(Sourced(m, "x", "x.json", base=""), "seq_len"))  # fmt: skip


def test_sweep_renderers_on_the_recorded_entry(base):
    s = sourced("wall")
    table = plain(render.wall.sweep_table(s, "seq_len"))
    assert "| seq_len | Forward time, unprofiled (with its confidence interval) |" in table
    assert 'class="ad-caption"' in table
    for name, y in (("seq_len", "time"), ("seq_len", "peak"), ("head_dim", "time")):
        fig = render.wall.sweep_figure(s, name, y=y, what="W.")
        assert fig == render.wall.sweep_figure(s, name, y=y, what="W.") and 'role="img"' in fig
    shares = render.wall.step_share_figure(s, "seq_len", x="seq_len", what="Shares.")
    assert "attention.softmax" in shares
    assert "leaves the matmul FLOPs at" in plain(render.wall.heads_claim(s))
    assert "With the tokens fixed, work is proportional to seq_len" in plain(render.wall.tokens_claim(s))  # fmt: skip
    assert plain(render.wall.head_dim_claim(s)).startswith(
        "From head_dim 16 to 256 the FLOPs grow 16×"
    )
    claim, caption = render.wall.finding(s).split('<p class="ad-caption">')
    assert "hits the quadratic wall at seq_len **" in claim and claim.count('class="ad-fact"') == 1
    assert "Log-log slope" in caption and "raw data (JSON)" in caption


def test_the_gpu_forecast_is_the_analytic_roofline_and_memory_model(base):
    h200 = gpus.sheet("h200")
    longest, pts = fwall.forecasts(h200)
    assert longest.value == gpus.longest_naive_seq_len(h200) // 1000 * 1000  # two figures
    for p in pts:
        s = Shape(4, 16, p.seq_len, 128, "bfloat16", True)
        assert p.fused.forecast.value == pytest.approx(gpus.flash_forward(h200, s).floor_us)
        assert (p.naive is None) == (p.seq_len > longest.value)
        if p.naive:
            assert p.naive.forecast.value == pytest.approx(gpus.naive_floor_us(h200, s))
            assert p.naive.forecast.value > p.fused.forecast.value
    box = plain(render.wall.forecast())
    assert "predictions only" in box and f"{longest.value:,} tokens" in box
    # The code as written, not five idealised kernels; and each floor's realistic range.
    at = next(p for p in pts if p.seq_len == gpus.FORECAST_SHAPE.seq_len)
    assert at.kernels == len(gpus.naive_kernels(h200, gpus.FORECAST_SHAPE)) != 5
    assert "five kernels" not in box and f"naive ({at.kernels} kernels), floor" in box
    r = gpus.naive_range(h200, gpus.FORECAST_SHAPE)
    assert (at.naive.realistic.low, at.naive.realistic.high) == (r.low_us, r.high_us)
    assert at.naive.realistic.low > at.naive.forecast.value  # a range lies above its floor
    assert "Realistic range" in box and words.fact(at.naive.realistic) in render.wall.forecast()
    assert "efficiencies on record (" in box


def test_the_gpu_forecast_shows_a_stored_h200_forward_times_beside_it():
    times = recorded("forward_times")
    s = Shape(4, 16, 4096, 128, "bfloat16", True)
    rows = (("naive (eager)", *s.dims, "bfloat16", True, timing(5000.0, 0.02), "ok"),
            ("SDPA flash", *s.dims, "bfloat16", True, timing(400.0, 0.02), "ok"))  # fmt: skip
    device = DeviceInfo("cuda", "NVIDIA H200", capability="90", memory_bytes=141 * 10**9)
    gpu = replace(times, tables={"times": Table(fwd.COLUMNS, rows)},
                  provenance=replace(times.provenance, device=device, device_id="cuda-h200"))  # fmt: skip
    _, pts = fwall.forecasts(gpus.sheet("h200"), gpu)
    at = next(p for p in pts if p.seq_len == 4096)
    assert at.naive.measured.value == 5000.0 and at.fused.measured.value == 400.0
    assert at.fused.ratio == pytest.approx(
        400.0 / gpus.flash_forward(gpus.sheet("h200"), s).floor_us
    )
    box = plain(render.wall.forecast([Sourced(gpu, "x", "y.json", base="")]))
    assert "Measured on the NVIDIA H200" in box and "5 ms" in box and "not in the store" in box
