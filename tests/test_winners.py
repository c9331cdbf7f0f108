# Chapter 12: the maps drawn from forward_times, train_times and decode_steps entries whose
# winners, ties and margins are known in advance; the H200 forecast of the GPU map, alone and
# beside a made-up cuda-h200 entry; the train_times and winners_summary experiments at tiny
# shapes.
from dataclasses import replace

import pytest
import torch
from synthetic_decode import H200, decode_steps, timing, train_times
from synthetic_forward import forward_times, row
from timings import measured_in_rounds

from attention_docs.experiments.forward import candidates
from attention_docs.experiments.registry import get
from attention_docs.experiments.runner import run_experiment
from attention_docs.findings import forward as ffwd
from attention_docs.findings import winners as fwinners
from attention_docs.measurements import Sourced
from attention_docs.measurements import forward as fwd
from attention_docs.render import winners

UNAVAILABLE = "not available on this device for these inputs"


def shape(n, causal, heads=4, d=64, dtype="float32"):
    return fwd.Shape(1, heads, n, d, dtype, causal)


# Four cells of the CPU grid's teaching slice: A a clear win, B a tie, C another winner, D
# only one ran.
A, B, C, D = shape(128, True), shape(256, True), shape(128, False), shape(256, False)


def sourced(m):
    return Sourced(m, "from the store", "x.json")


@pytest.fixture(scope="module")
def known():
    rows = [
        row(fwd.NAIVE, A, 1000.0),
        row(fwd.SDPA_FLASH, A, 100.0, 95.0, 105.0),
        row(fwd.FLEX, A, 150.0, 145.0, 155.0),
        row(fwd.NAIVE, B, 4000.0),
        row(fwd.SDPA_FLASH, B, 200.0, 180.0, 220.0),
        row(fwd.FLEX, B, 210.0, 205.0, 215.0),
        row(fwd.NAIVE, C, 600.0),
        row(fwd.COMPILED, C, 300.0, 290.0, 310.0),
        row(fwd.SDPA_FLASH, C, 400.0, 390.0, 410.0),
        row(fwd.NAIVE, D, None, status="out of memory"),
        row(fwd.SDPA_FLASH, D, 500.0, 490.0, 510.0),
    ]
    for s in (A, B, C, D):
        rows.append(row(fwd.SDPA_EFFICIENT, s, None, status=UNAVAILABLE))
        rows.append(row(fwd.STEP_PREFIX + "attention.softmax", s, 1.0))  # not a contender
    # The 16-head slice: flash wins in bfloat16, compile in float32.
    for s in fwinners.map_shapes("cpu"):
        flash = 100.0 if s.dtype == "bfloat16" else 300.0
        rows += [
            row(fwd.NAIVE, s, 1000.0),
            row(fwd.SDPA_FLASH, s, flash),
            row(fwd.COMPILED, s, 200.0),
        ]
    return forward_times(decode_steps(), rows)


@pytest.fixture(scope="module")
def train(known):
    rows = []
    for s in fwinners.map_shapes("cpu"):
        if s.seq_len == 512:
            rows += [row(fwd.NAIVE, s, 3000.0), row(fwd.SDPA_FLASH, s, 900.0, 880.0, 920.0)]
            rows.append(row(fwd.FLEX, s, None, status="not available on this device: no backward"))
    return train_times(known, rows)


def test_cells_rank_the_implementations_and_find_winner_tie_and_margin(known):
    cells = {c.shape: c for c in fwinners.teaching_cells(known)}
    assert list(cells) == [A, B, C, D]  # causal first, then seq_len
    a = cells[A]
    assert (a.winner, a.runner_up, a.tied) == (fwd.SDPA_FLASH, fwd.FLEX, ())
    assert a.margin.ratio == pytest.approx(1.5)
    assert (a.margin.low, a.margin.high) == (pytest.approx(145 / 105), pytest.approx(155 / 95))
    b = cells[B]
    assert b.winner == fwd.SDPA_FLASH and b.tied == (fwd.FLEX,)
    assert cells[C].winner == fwd.COMPILED and not cells[C].tied
    assert cells[D].winner == fwd.SDPA_FLASH and cells[D].margin is None
    for c in cells.values():  # single naive steps never compete
        assert all(not name.startswith(fwd.STEP_PREFIX) for name in c.timings)


def test_the_map_draws_a_tie_as_a_tie(known):
    cells = {c.shape: c for c in fwinners.teaching_cells(known)}
    assert winners.cell_label(cells[A]) == "SDPA flash\n1.5× (1.38–1.63×)"
    assert winners.cell_label(cells[B]).startswith("tie: SDPA flash\n≈ FlexAttention")
    assert "only one ran" in winners.cell_label(cells[D])
    figure = winners.map_figure(sourced(known))
    assert "FlexAttention within noise (1.05× apart)" in figure  # the alt text
    assert figure.count("<figcaption") == 1 and "hatched: a tie" in figure
    assert "batch_size=1, num_heads=4, float32" in figure  # the caption states the shapes


@pytest.fixture(scope="module")
def steps():
    """decode_steps where SDPA decodes fastest: 50 µs against 80 µs (±2%)."""
    return decode_steps(lambda v, impl, b, c: 50.0 if impl == "sdpa" else 80.0)


def test_the_model_map_has_both_dtypes_training_and_a_decode_cell(known, train, steps):
    figure = winners.model_figure(sourced(known), sourced(train), sourced(steps))
    assert "forward, 512, bfloat16: SDPA flash" in figure
    assert "forward, 512, float32: naive + torch.compile" in figure
    assert "training (forward + backward), 512, float32: SDPA flash" in figure
    assert "decode step (GQA), 1, 64: sdpa" in figure
    caption = figure.split("<figcaption")[1]
    assert "num_heads=16, head_dim=128, causal" in caption and "2 k/v heads, cache 64" in caption


def test_the_finding_names_one_implementation_and_captions_the_counts(known):
    claim, caption = winners.finding(sourced(known)).split('<p class="ad-caption">')
    # Flash leads at A, ties at B and runs alone at D; compile wins C: 3 of 4, ties included.
    assert claim.startswith("Use SDPA flash on this CPU: its forward is the fastest, or within")
    assert "at 3 of the 4 float32 shapes" in claim and "wins" not in claim
    assert "SDPA flash in 2 and naive + torch.compile in 1 of the 4 shapes at 4 heads" in caption
    assert "(1 within noise)" in caption and "raw data (JSON)" in caption


def test_the_model_claim_counts_wins_per_view(known, train, steps):
    text = winners.model_claim(sourced(known), sourced(train), sourced(steps))
    assert "naive + torch.compile in 2 and SDPA flash in 2 of the 4 cells at 16 heads" in text
    assert "At seq_len 1,024 in bfloat16, " in text
    assert "SDPA flash is 10× (" in text and "faster than naive (eager)" in text
    assert "training step beyond the noise is SDPA flash in 2 of the 2 cells timed" in text
    assert "In a grouped-query decode step, <span" in text
    assert ">sdpa is 1.6× (1.54–1.67×) faster than naive</span>." in text


def test_a_view_with_no_clear_winner_says_so(known, steps):
    s = next(s for s in fwinners.map_shapes("cpu") if s.seq_len == 512)
    rows = [row(fwd.NAIVE, s, 1000.0, 900.0, 1100.0), row(fwd.SDPA_FLASH, s, 950.0, 850.0, 1050.0)]
    text = winners.model_claim(sourced(known), sourced(train_times(known, rows)), sourced(steps))
    assert "No training step is fastest beyond the noise in any of the 1 cells timed" in text
    assert "each is a tie" in text and "training step beyond the noise is" not in text


def test_the_trend_claim_checks_ranges_and_names_a_changing_winner(known):
    # Each series is a sweep over seq_len (findings/winners.series): a length where one
    # implementation alone ran ranks no one, so compile runs at D too here.
    table = known.tables["times"]
    rows = (*table.rows, row(fwd.COMPILED, D, 700.0, 690.0, 710.0))
    known = replace(known, tables={"times": replace(table, rows=rows)})
    trend = winners.trend_claim(sourced(known))
    assert "fastest implementation changes in 1 of the 2 series" in trend
    no_mask = next(line for line in trend.splitlines() if line.startswith("| no mask, head_dim 64"))
    assert "naive + torch.compile at 128 tokens; SDPA flash at 256 tokens" in no_mask
    # causal: flash alone at 128, within noise of FlexAttention at 256: one implementation
    # leads (alone or tied) at every length, so the answer does not change there.
    causal = next(t for t in fwinners.series(known) if t.causal)
    assert [(x.leaders, x.xs) for x in causal.sweep.leads] == [
        ((fwd.SDPA_FLASH,), (128,)),
        (tuple(sorted((fwd.FLEX, fwd.SDPA_FLASH))), (256,)),
    ]
    assert not causal.changes and causal.steady == (fwd.SDPA_FLASH,)
    row_ = next(line for line in trend.splitlines() if line.startswith("| causal, head_dim 64"))
    assert "SDPA flash at 128 tokens; FlexAttention and SDPA flash (within noise) at 256" in row_
    # Its facts are forward_time's: one quantity, one id, whichever sweep states it.
    fact = causal.sweep.points[0].facts[fwd.SDPA_FLASH]
    assert fact.id == ffwd.forward_time(known, fwd.SDPA_FLASH, A).id
    # causal: 10× (9.52–10.5×) at 128 against 20× (18.2–22.2×) at 256: grows beyond the noise;
    # no mask: naive ran out of memory at 256, so that series is not compared.
    assert "grows beyond the noise in 1." in trend
    assert (
        '">10× (9.52–10.5×)</span> → <span' in row_ and '">20× (18.2–22.2×)</span>: grows |' in row_
    )
    assert no_mask.endswith("| — |") and trend.count('<p class="ad-caption">') == 1


def test_what_did_not_run_is_said_in_the_sites_words(known, train):
    text = winners.not_run(sourced(known), sourced(train))
    assert (
        "**SDPA efficient** (forward, 4 shapes): not available on this device: PyTorch has" in text
    )
    assert "memory-efficient kernel for the CPU" in text
    assert "**naive (eager)** (forward, 1 shapes): ran out of memory" in text
    assert (
        "**FlexAttention** (training, every shape): not available on this device: no backward"
        in text
    )
    gpu = winners.why_not(fwd.SDPA_CUDNN, UNAVAILABLE, "cuda")
    assert "cuDNN backend refused them when pinned" in gpu


def test_every_timing_is_in_a_tab_with_winner_and_ties_marked(known, train):
    tabs = winners.times_tabs(sourced(known), sourced(train))
    assert '=== "causal, head_dim 64"' in tabs and '=== "16 heads, bfloat16: training"' in tabs
    causal = tabs.split('=== "no mask')[0]
    flex_row = next(line for line in causal.splitlines() if "| FlexAttention |" in line)
    assert flex_row.count("≈ ") == 1  # tied with the winner at seq_len 256 only
    flash_row = next(line for line in causal.splitlines() if "| SDPA flash |" in line)
    assert flash_row.count("**") == 4  # bold in both cells: the winner (or tied first) twice
    assert 'data-fact="training step time;SDPA flash;b1 h16 n512 d128 float32 causal;' in tabs
    # Each range under its value: five such columns fit a laptop's column only so.
    assert '">100 µs<br>(95–105 µs)</span>**' in flash_row


def test_devices_claim_depends_on_the_devices_in_the_store(known):
    assert "one device only" in winners.devices_claim([sourced(known)])
    gpu = replace(known, provenance=replace(known.provenance, device=H200, device_id="cuda-h200"))
    two = winners.devices_claim([sourced(known), sourced(gpu)])
    assert "from 2 devices" in two and two.count("- **") == 2


def test_the_h200_forecast_is_the_analytic_model_and_checks_a_gpu_entry(known):
    from attention_docs.analytic import gpu as gpus

    h200 = gpus.sheet("h200")
    found = fwinners.forecast_cells(h200)
    assert [c.shape for c in found] == fwinners.map_shapes("cuda")
    for c in found:
        assert c.fused == (fwd.SDPA_FLASH if c.shape.dtype == "bfloat16" else fwd.SDPA_EFFICIENT)
        assert c.naive.forecast.value == pytest.approx(gpus.naive_floor_us(h200, c.shape))
        assert c.fused_floor.forecast.value == pytest.approx(
            gpus.flash_forward(h200, c.shape).floor_us
        )
        # The lead is a range of realistic times, never the ratio of the two floors.
        naive, fused = gpus.naive_range(h200, c.shape), gpus.flash_range(h200, c.shape)
        assert c.lead.forecast.value is None
        assert c.lead.forecast.low == pytest.approx(naive.low_us / fused.high_us)
        assert c.lead.forecast.high == pytest.approx(naive.high_us / fused.low_us)
        assert c.naive.realistic.low == pytest.approx(naive.low_us)
        assert c.winner == c.fused and c.naive.measured is None
    box = winners.gpu_forecast([sourced(known)])
    assert "predictions only" in box and "**SDPA flash** in bfloat16" in box
    # A cuda-h200 forward_times entry holding the GPU map's shapes: measured beside forecast.
    gpu_rows = [
        row(n, s, t)
        for s in fwinners.map_shapes("cuda")
        for n, t in ((fwd.NAIVE, 2000.0), (fwd.SDPA_FLASH, 250.0), (fwd.SDPA_EFFICIENT, 400.0))
    ]
    m = forward_times(known, gpu_rows)
    gpu = replace(m, provenance=replace(m.provenance, device=H200, device_id="cuda-h200"))
    checked = fwinners.forecast_cells(h200, gpu)
    assert all(c.naive.measured and c.fused_floor.measured and c.lead.measured for c in checked)
    bf16 = next(c for c in checked if c.shape.dtype == "bfloat16")
    assert bf16.lead.measured.value == pytest.approx(8.0)
    assert bf16.naive.ratio == pytest.approx(2000.0 / bf16.naive.forecast.value)
    box = winners.gpu_forecast([sourced(known), sourced(gpu)])
    assert "Measured on the NVIDIA H200" in box and "predictions only" not in box


def test_train_times_never_times_chapter_09s_shape_and_stays_on_the_forward_grid():
    from attention_docs.experiments.winners import train_shapes

    for kind in ("cpu", "cuda"):
        train = train_shapes(get("train_times").resolve({}, kind))
        backward = fwd.Shape.of(get("backward_compare").resolve({}, kind))
        assert backward not in train, kind
        assert set(train) <= set(fwd.GRIDS[kind].shapes()), kind  # a forward cell beside each
        assert set(train) <= set(fwinners.map_shapes(kind)), kind


def test_train_times_times_every_implementation_with_a_backward():
    m = run_experiment(
        "train_times",
        {"seq_lens": "32", "dtypes": "float32", "num_heads": 2, "head_dim": 16},
        device_setting="cpu",
    )
    rows = {r["implementation"]: r for r in fwd.rows(m)}
    for name in (fwd.NAIVE, fwd.SDPA_MATH, fwd.SDPA_FLASH, fwd.COMPILED):
        assert rows[name]["status"] == fwd.OK and measured_in_rounds(rows[name]["time"])
    assert rows[fwd.TILED]["status"].startswith("not timed")
    assert rows[fwd.SDPA_EFFICIENT]["status"] == UNAVAILABLE
    assert {fwd.Shape.of(r) for r in rows.values()} == {fwd.Shape(1, 2, 32, 16, "float32", True)}


def test_implementations_agree_numerically():
    from attention_docs.inputs import make_qkv

    impls, _ = candidates(torch.device("cpu"))
    q, k, v = make_qkv(1, 2, 128, 16, seed=int(torch.randint(0, 10_000, ()).item()))
    for causal in (True, False):
        outs = {}
        for c in impls:
            try:
                outs[c.name] = c.build(causal)(q, k, v)
            except RuntimeError:
                continue  # a backend this device does not have
        reference = outs.pop(fwd.NAIVE)
        assert fwd.SDPA_FLASH in outs and fwd.FLEX in outs
        for name, out in outs.items():
            torch.testing.assert_close(out, reference, atol=2e-5, rtol=2e-5, msg=name)


def test_summary_counts_work_at_every_depth_and_reads_times_from_forward_times():
    params = {"seq_len": 128, "head_dim": 16, "num_heads": 2}
    m = run_experiment("winners_summary", params, device_setting="cpu")
    rows = {r["implementation"]: r for r in m.tables["summary"].records()}
    naive, flash, math = rows[fwd.NAIVE], rows[fwd.SDPA_FLASH], rows[fwd.SDPA_MATH]
    # SDPA's math backend is one call that dispatches dozens of ops: all of them count.
    assert math["work_per_forward"] > naive["work_per_forward"] > flash["work_per_forward"]
    assert flash["work_per_forward"] >= 2  # the SDPA entry op and the CPU flash kernel
    # Compiled code counts its generated kernels (Inductor's kernel profiling is on).
    assert rows[fwd.FLEX]["work_per_forward"] >= 1
    assert rows[fwd.COMPILED]["work_per_forward"] >= 3  # two bmm and the fused kernel
    assert naive["peak_bytes"] > flash["peak_bytes"] > 0
    assert rows[fwd.SDPA_EFFICIENT]["status"] == UNAVAILABLE
    assert "time" not in " ".join(m.tables["summary"].columns)
    s = fwd.Shape.of(m.params)
    times = forward_times(
        m,
        [
            row(fwd.NAIVE, s, 800.0, 790.0, 810.0),
            row(fwd.SDPA_FLASH, s, 200.0, 195.0, 205.0),
            *(row(n, s, 400.0, 300.0, 500.0) for n in rows if n not in (fwd.NAIVE, fwd.SDPA_FLASH)),
        ],
    )
    table = winners.summary_table(Sourced(m, "measured now", "x.json"), times)
    assert "Ops (every depth) / forward" in table
    assert "200 µs (195–205 µs)" in table and "4× (3.85–4.15×)" in table
    assert "PyTorch has no memory-efficient kernel for the CPU" in table
    assert 'data-fact="peak memory;SDPA flash;' in table  # a counted fact, not a bare number


@pytest.mark.parametrize("kind", ["cpu", "cuda"])
def test_every_experiment_that_reads_forward_times_runs_at_a_shape_of_its_grid(kind):
    grid = set(fwd.GRIDS[kind].shapes())
    for name in ("fusion_kernels", "sdpa_backends", "winners_summary", "flex_masks"):
        params = get(name).resolve({}, kind)
        assert fwd.Shape.of({"causal": True, **params}) in grid, (name, kind, params)


def test_the_decode_cell_reads_chapter_11s_experiment():
    steps = decode_steps(lambda v, impl, b, c: timing(50.0) if impl == "sdpa" else 80.0)
    cell = fwinners.decode_cell(steps)
    assert cell.winner == "sdpa" and set(cell.timings) == {"naive", "naive_repeat_kv", "sdpa"}
    assert cell.shape.kv_heads == 2 and cell.shape.keys == 64
    lead = fwinners.lead_fact(steps, cell)
    assert lead.quantity.metric == "decode speed ratio"  # chapter 11's quantity, not a new one


def test_the_whole_chapter_states_every_number_as_one_fact(known, train):
    import re

    import markdown
    import site_facts
    from recorded import sourced as stored

    steps = stored("decode_steps")
    gpu = replace(known, provenance=replace(known.provenance, device=H200, device_id="cuda-h200"))
    parts = [
        winners.finding(sourced(known)),
        winners.model_claim(sourced(known), sourced(train), steps),
        winners.trend_claim(sourced(known)),
        winners.times_tabs(sourced(known), sourced(train)),
        winners.not_run(sourced(known), sourced(train)),
        winners.gpu_forecast([sourced(known), sourced(gpu)]),
        winners.devices_claim([sourced(known), sourced(gpu)]),
    ]
    extensions = ["tables", "admonition", "pymdownx.superfences", "pymdownx.tabbed"]
    page = markdown.markdown("\n\n".join(parts), extensions=extensions)
    found = site_facts.read_page(f"<article>{page}</article>")
    assert found.unmarked == [] and len(found.marked) > 40
    values: dict[str, set[str]] = {}
    for fact_id, text in re.findall(r'data-fact="([^"]+)">(.*?)</span>', page):
        value = re.search(r"\d[\d.,]*\s?[^\s(<]*", re.sub(r"<[^>]+>", "", text)).group(0)
        values.setdefault(fact_id, set()).add(value)
    assert all(len(v) == 1 for v in values.values()), values
