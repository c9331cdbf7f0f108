# SDPA's dispatcher rules as data (analytic/sdpa_dispatch.py): checked against torch's own
# selector where it runs without a GPU (the CPU's, and the priority order torch reports), on
# a real GPU when there is one, and against the cases torch's source documents for CUDA. The
# forecast built on them (findings/sdpa.py) and its box (render.sdpa) read the same rules.
import itertools
import warnings

import pytest
import torch
from torch.nn.attention import SDPBackend

from attention_docs.analytic import sdpa_dispatch as rules
from attention_docs.analytic.gpu import sheet
from attention_docs.analytic.sdpa_dispatch import Inputs, Platform
from attention_docs.findings import sdpa as fsdpa
from attention_docs.measurements.schema import Measurement, Table

NAMES = {int(v): n for n, v in SDPBackend.__members__.items()}
SITE = {
    "MATH": "math",
    "FLASH_ATTENTION": "flash",
    "EFFICIENT_ATTENTION": "efficient",
    "CUDNN_ATTENTION": "cudnn",
}
DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


def torch_choice(i: Inputs, device: str = "cpu") -> str:
    """The backend torch's own selector picks for `i` (`torch._fused_sdp_choice`)."""
    dtype = DTYPES[i.dtype]
    kv = i.kv_len or i.seq_len
    q = torch.randn(1, 2, i.seq_len, i.head_dim, dtype=dtype, device=device)
    k, v = (torch.randn(1, 2, kv, i.head_dim, dtype=dtype, device=device) for _ in range(2))
    mask = None
    if i.mask == rules.BOOL_MASK:
        mask = torch.ones(i.seq_len, kv, dtype=torch.bool, device=device).tril()
    elif i.mask == rules.FLOAT_MASK:
        mask = torch.zeros(i.seq_len, kv, dtype=dtype, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        choice = torch._fused_sdp_choice(q, k, v, mask, i.dropout_p, i.mask == rules.IS_CAUSAL)
    return SITE[NAMES[int(choice)]]


CPU_CASES = [
    Inputs(dtype, head_dim, mask, dropout, seq_len=16, kv_len=kv)
    for dtype, head_dim, mask, dropout, kv in itertools.product(
        DTYPES, (8, 36, 512), rules.MASKS, (0.0, 0.1), (None, 24)
    )
    if not (mask == rules.IS_CAUSAL and kv)
]


@pytest.mark.parametrize("inputs", CPU_CASES, ids=str)
def test_the_cpu_rules_pick_what_torchs_own_selector_picks(inputs):
    assert rules.choose(Platform("cpu"), inputs).backend == torch_choice(inputs)


def test_the_default_priority_order_is_the_one_torch_reports():
    reported = [SITE.get(NAMES[int(i)]) for i in torch._C._get_sdp_priority_order()]
    assert tuple(b for b in reported if b) == rules.CUDA_DEFAULT_ORDER


def test_on_the_cpu_the_cuda_kernels_are_not_there_as_torch_says():
    from torch.backends.cuda import SDPAParams, can_use_efficient_attention

    q = torch.randn(1, 2, 16, 8)
    can = can_use_efficient_attention(SDPAParams(q, q, q, None, 0.0, False, False))
    said = rules.refusal("efficient", Platform("cpu"), Inputs("float32", 8))
    assert not can and said == rules.NOT_ON_DEVICE
    assert rules.refusal("cudnn", Platform("cpu"), Inputs("bfloat16", 64)) == rules.NOT_ON_DEVICE


H200_OLD = Platform("cuda", 90, cudnn=91500)  # torch's default order
H200_NEW = Platform("cuda", 90, cudnn=91501)  # cuDNN newer than 9.15.0: cuDNN first


# (platform, inputs, backend, the backends tried first with their refusal), from the checks
# of sdp_utils.cpp: can_use_flash_attention, can_use_mem_efficient_attention,
# can_use_cudnn_attention and priority_order.
CUDA_CASES = [
    (H200_OLD, Inputs("bfloat16", 128, rules.IS_CAUSAL), "flash", ()),
    (H200_NEW, Inputs("bfloat16", 128, rules.IS_CAUSAL), "cudnn", ()),
    (H200_OLD, Inputs("float32", 128), "efficient", (("flash", rules.DTYPE),)),
    (H200_OLD, Inputs("bfloat16", 64, rules.BOOL_MASK), "efficient", (("flash", rules.ATTN_MASK),)),
    (H200_NEW, Inputs("bfloat16", 64, rules.FLOAT_MASK), "cudnn", ()),
    (H200_NEW, Inputs("bfloat16", 64, dropout_p=0.1), "flash", (("cudnn", rules.DROPOUT),)),
    (H200_NEW, Inputs("bfloat16", 64, dropout_p=0.125), "cudnn", ()),
    (H200_NEW, Inputs("bfloat16", 192), "flash", (("cudnn", rules.HEAD_DIM_MAX),)),
    (Platform("cuda", 90, cudnn=92201), Inputs("bfloat16", 256), "cudnn", ()),
    (Platform("cuda", 80, cudnn=92201), Inputs("bfloat16", 256), "flash", ()),  # A100: no d256
    (H200_OLD, Inputs("bfloat16", 512), "efficient", (("flash", rules.HEAD_DIM_MAX),)),
    (H200_OLD, Inputs("float16", 36), "flash", ()),
    (
        H200_OLD,
        Inputs("float16", 36, rules.BOOL_MASK),
        "math",
        (("flash", rules.ATTN_MASK), ("efficient", rules.HEAD_DIM_MULTIPLE)),
    ),
    (H200_OLD, Inputs("float64", 64), "math", (("flash", rules.DTYPE), ("efficient", rules.DTYPE))),
    (
        H200_OLD,
        Inputs("bfloat16", 64, rules.IS_CAUSAL, seq_len=3, kv_len=7),
        "efficient",
        (("flash", rules.CAUSAL_NON_SQUARE),),
    ),
    (
        Platform("cuda", 75),
        Inputs("bfloat16", 64),
        "math",
        (("flash", rules.CAPABILITY), ("efficient", rules.DTYPE)),
    ),
    (Platform("cuda", 75), Inputs("float16", 64), "efficient", (("flash", rules.CAPABILITY),)),
    (Platform("cuda", 89, cudnn=91600), Inputs("bfloat16", 64), "flash", ()),  # not sm_90: no
    (Platform("cuda", 100, cudnn=91600), Inputs("bfloat16", 64), "cudnn", ()),  # sm_100: yes
    (Platform("cuda", 90, cudnn=91600, cuda=12080), Inputs("bfloat16", 64), "cudnn", ()),
    (Platform("cuda", 120, cudnn=91600), Inputs("bfloat16", 64), "flash", ()),
]


@pytest.mark.parametrize(("platform", "inputs", "backend", "passed"), CUDA_CASES)
def test_the_cuda_rules_give_torchs_documented_choices(platform, inputs, backend, passed):
    assert rules.choose(platform, inputs) == rules.Choice(backend, passed)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(
    "inputs",
    [i for _, i, _, _ in CUDA_CASES] + [i for _, i in rules.why_variants("bfloat16", 64, 512)],
)
def test_the_cuda_rules_pick_what_torch_picks_on_this_gpu(inputs):
    major, minor = torch.cuda.get_device_capability()
    here = Platform("cuda", 10 * major + minor, torch.backends.cudnn.version())
    assert rules.choose(here, inputs).backend == torch_choice(inputs, "cuda")


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda'"):
        Platform("tpu")
    with pytest.raises(ValueError, match="needs its compute capability"):
        Platform("cuda")
    with pytest.raises(ValueError, match="mask must be one of"):
        Inputs("float32", 64, mask="causal")
    with pytest.raises(ValueError, match="dropout_p must be in"):
        Inputs("float32", 64, dropout_p=1.5)
    with pytest.raises(ValueError, match="no compute capability"):
        rules.capability_of(None)


def test_the_h200_forecast_sends_float32_and_masks_away_from_flash():
    cast = fsdpa.forecast(sheet("h200"), 512)
    default, cudnn = cast.picks("default order"), cast.picks("cuDNN first")
    assert default == {
        "baseline": "flash",
        "float32": "efficient",
        "float64": "math",
        "is_causal": "flash",
        "bool mask": "efficient",
        "float mask": "efficient",
        "head_dim 512": "efficient",
        "dropout 0.1": "flash",
    }
    assert fsdpa.tally(default, "flash") == 3 and fsdpa.tally(cudnn, "flash") == 1
    assert cudnn["bool mask"] == cudnn["baseline"] == "cudnn" and cudnn["dropout 0.1"] == "flash"


def test_measured_picks_read_the_chosen_row_of_each_variant():
    rows = [
        ("baseline", "math", "eligible"),
        ("baseline", "flash", "chosen"),
        ("dropout 0.1", "math", "chosen"),
        ("dropout 0.1", "flash", "rejected"),
    ]
    table = Table(("variant", "backend", "status"), tuple(rows))
    m = Measurement("sdpa_why", "k", "f", {}, {}, None, tables={"verdicts": table})
    assert fsdpa.picks(m) == {"baseline": "flash", "dropout 0.1": "math"}
