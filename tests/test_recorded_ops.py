"""The GPU forecast prices the ops the code under study records (issue 28, item 1), and the
reference dataset of published GPU measurements loads and validates (item 2)."""

from dataclasses import replace

import pytest

from attention_docs.analytic import gpu
from attention_docs.records import published
from attention_docs.records.ops import OpList, load_recordings, recording
from attention_docs.records.shape import Shape

H200 = gpu.sheet("h200")
SHAPE = gpu.FORECAST_SHAPE


def test_committed_recordings_are_the_code_as_it_is():
    from attention_docs.profiling.ops import code_under_study

    now = {r.subject: r for r in code_under_study()}
    committed = load_recordings()
    assert set(now) == set(committed)
    for subject, ops in now.items():
        assert ops == committed[subject], (
            f"{subject} records other ops than records/recorded_ops.json: run "
            "attention_docs.profiling.ops.rerecord() and commit the file"
        )


def test_naive_forecast_counts_the_kernels_the_code_launches():
    kernels = [(k.label, k.op) for k in gpu.naive_kernels(H200, SHAPE)]
    # The rebuilt mask (ones -> fill_, triu) and the out-of-place masked_fill (clone -> copy_).
    mask = [op for step, op in kernels if step == "attention.mask"]
    assert mask == ["aten::fill_", "aten::triu", "aten::copy_", "aten::masked_fill_"]
    assert len(kernels) == 8
    assert len(gpu.naive_kernels(H200, SHAPE, recording("masked_fill"))) == 6
    assert len(gpu.naive_kernels(H200, SHAPE, recording("masked_fill_"))) == 5
    # Without a mask the code records no mask step at all.
    full = replace(SHAPE, causal=False)
    assert "attention.mask" not in {k.label for k in gpu.naive_kernels(H200, full)}


def test_changing_the_op_list_changes_the_forecast():
    code = recording("naive_attention")
    # The same code with masked_fill in place: drop the clone and its copy.
    edited = OpList(
        "edited",
        code.shape,
        tuple(
            o for o in code.ops if o.name not in ("aten::clone",) and "aten::clone" not in o.within
        ),
    )
    before, after = gpu.naive_kernels(H200, SHAPE), gpu.naive_kernels(H200, SHAPE, edited)
    assert len(after) == len(before) - 1
    copy = next(k for k in before if k.op == "aten::copy_" and k.label == "attention.mask")
    assert sum(k.bytes for k in before) - sum(k.bytes for k in after) == pytest.approx(copy.bytes)
    assert gpu.naive_floor_us(H200, SHAPE, edited) < gpu.naive_floor_us(H200, SHAPE)
    # The copy reads and writes one bf16 N×N matrix.
    assert copy.bytes == 2 * 4 * 16 * 4096 * 4096 * 2


def test_an_op_the_forecast_does_not_know_is_an_error():
    code = recording("naive_attention")
    odd = replace(code.ops[0], name="aten::frobnicate")
    with pytest.raises(gpu.UnpricedOpError, match="aten::frobnicate"):
        gpu.naive_kernels(H200, SHAPE, OpList("odd", code.shape, (odd, *code.ops[1:])))


def test_realistic_range_divides_the_floor_by_the_cited_efficiencies():
    kernels = gpu.naive_kernels(H200, SHAPE)
    r = gpu.realistic(H200, kernels)
    memory = published.dataset().efficiency("90", "memory")
    assert all(k.limit == "memory" for k in kernels)
    fixed = len(kernels) * gpu.KERNEL_FIXED_US  # every kernel's fixed cost
    assert r.low_us == pytest.approx(r.floor_us / memory.high + fixed)
    # Each kernel takes the slower of its two ceilings: at the low end of the tensor cores'
    # share, a matmul whose floor is its bytes (QKᵀ: 128 FLOP per byte written, under the
    # H200's ridge) computes for longer than its bytes take.
    data = published.dataset()
    slower = [
        max(k.compute_us / data.efficiency("90", "compute", k.kernel).low, k.memory_us / memory.low)
        for k in kernels
    ]
    assert r.high_us == pytest.approx(sum(slower) + fixed) and r.high_us > r.floor_us / memory.low
    # SDPA's flash backend is FlashAttention-2: held to its own share of the peak, over the
    # whole tiles it computes (at 4,096 tokens every tile is whole, diagonal ones included).
    flash = gpu.flash_range(H200, SHAPE)
    compute = published.dataset().efficiency("90", "compute", published.FLASH_2)
    k = gpu.flash_forward(H200, SHAPE)
    assert k.limit == "compute" and k.tile_flops == k.flops
    assert flash.high_us == pytest.approx(
        k.tile_flops / k.peak * 1e6 / compute.low + gpu.KERNEL_FIXED_US
    )
    # No cited compute efficiency for Blackwell: no range, said so by None.
    matmul = gpu.KernelForecast("a matmul", 1e15, 1.0, 2.25e15, 8e12)
    b200 = gpu.realistic(gpu.sheet("b200"), (matmul,))
    assert b200.low_us is None and b200.high_us is None


def test_the_reference_dataset_has_cited_points_on_three_gpus():
    data = published.dataset()
    assert len(data.points) >= 12
    assert len({p.gpu for p in data.points}) >= 3
    for p in data.points:
        assert p.source.url.startswith("https://")
        assert p.shape is not None or p.sweep


def test_the_dataset_refuses_a_point_on_a_gpu_without_a_data_sheet():
    text = published.DATASET.read_text(encoding="utf-8").replace('gpu = "b200"', 'gpu = "nonesuch"')
    with pytest.raises(published.DatasetError, match="nonesuch"):
        published.parse(text)


def test_sdpa_math_is_priced_from_its_recorded_ops_in_float32():
    # The math backend upcasts bfloat16 q, k, v to float32: its matmuls run at the FP32
    # peak, not the tensor cores', and its score-sized kernels move 4-byte elements.
    a100 = gpu.sheet("a100-sxm4-80gb")
    shape = replace(SHAPE, batch_size=8, num_heads=16, seq_len=1024, head_dim=64)
    kernels = gpu.priced(recording(gpu.SDPA_MATH), a100, shape)
    ops = [k.op for k in kernels]
    assert ops.count("aten::bmm") == 2 and "aten::_softmax" in ops
    assert ops[:3] == ["aten::copy_"] * 3  # q, k, v to float32
    matmul = next(k for k in kernels if k.op == "aten::bmm")
    assert matmul.peak == gpu.matmul_peak(a100, "float32")
    softmax = next(k for k in kernels if k.op == "aten::_softmax")
    assert softmax.bytes == 2 * 8 * 16 * 1024 * 1024 * 4
    # The causal mask is float (where(mask, 0, -inf)), added in place to the float32 scores.
    add = next(k for k in kernels if k.op == "aten::add_")
    assert add.bytes == softmax.bytes + 1024 * 1024 * 4


def test_the_math_recording_is_sdpa_attention_on_a_square_shape_and_prices_only_those():
    """sdpa_attention passes `is_causal` on a square shape and a bottom-right mask otherwise:
    the recording is of the square call the forecasts price, and refuses a rectangular one."""
    import torch

    from attention_docs.attention.sdpa import sdpa_attention
    from attention_docs.inputs import make_qkv
    from attention_docs.profiling.ops import SDPA_STEP, record_ops

    math = recording(gpu.SDPA_MATH)
    assert math.shape.seq_len == math.shape.keys
    with torch.no_grad():
        q, k, v = make_qkv(*math.shape.dims, dtype=math.shape.dtype)
        ours = record_ops(lambda: sdpa_attention(q, k, v, causal=True, backend="math"), "a", math.shape, (SDPA_STEP,))  # fmt: skip
    assert ours.names() == math.names() and len(ours.ops) > 5
    assert gpu.priced(math, H200, SHAPE)  # a square target: priced
    rectangular = replace(SHAPE, kv_len=2 * SHAPE.seq_len)
    with pytest.raises(ValueError, match="as many keys as queries"):
        gpu.priced(math, H200, rectangular)


def test_n_by_n_tensors_that_fit_in_l2_leave_the_floor_but_not_the_range():
    """A floor must be a floor: where the scores, the probabilities and the mask fit in L2
    at once, HBM need not see them, so the floor counts only q, k, v and the output (and
    the rest of the inputs); the realistic range still counts every byte."""
    h100 = gpu.sheet("h100-sxm")
    small = Shape(1, 8, 512, 64, "bfloat16", True)  # N×N: 4 MiB in bf16, well inside 50 MB
    resident = gpu.naive_kernels(h100, small)
    streamed = gpu.naive_kernels(replace(h100, l2_mb=None), small)
    qkv_out = 4 * 8 * 512 * 64 * 2
    mask = 4 * 512 * 512  # the 2-D bool mask: built (fill, triu) and read once, per forward
    assert sum(k.bytes for k in resident) == qkv_out + mask < sum(k.bytes for k in streamed)
    assert all(k.bytes == 0 for k in resident if k.op in ("aten::div", "aten::_softmax"))
    for a, b in zip(resident, streamed, strict=True):
        assert a.bytes + a.reread == pytest.approx(b.bytes + b.reread)
    assert gpu.realistic(h100, resident).high_us == pytest.approx(
        gpu.realistic(replace(h100, l2_mb=None), streamed).high_us
    )
    # The site's forecast shape is far larger than L2: its forecast is unchanged.
    assert all(k.reread == 0 for k in gpu.naive_kernels(H200, SHAPE))
