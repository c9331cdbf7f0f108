# SDPA's dispatcher as data: the rules by which scaled_dot_product_attention picks a backend,
# so that a page can forecast the choice on a GPU the build does not have. The tests check
# them against torch's own selector on the CPU (`torch._fused_sdp_choice`).
# Read from aten/src/ATen/native/transformers/cuda/sdp_utils.cpp and sdp_utils_cpp.cpp at
# PyTorch commit 001f694a (2026), for dense inputs in a forward without gradients, every
# backend enabled. Not modelled: nested tensors, strides and alignment of views, GQA head
# counts, FP8 with FlashAttention 3, ROCm, cuDNN 9.11-9.13's refusal of dropout, and the
# training-only rules (head_dim > 192 on sm_86/89/120).
from __future__ import annotations

from dataclasses import dataclass, field

SOURCE = "PyTorch's sdp_utils.cpp and sdp_utils_cpp.cpp at commit 001f694a"
TORCH_CHECKED = "2.13"  # the CPU rules are tested against this torch's own selector

# How a mask is asked for: no mask, `is_causal=True`, or an `attn_mask` tensor.
NO_MASK, IS_CAUSAL, BOOL_MASK, FLOAT_MASK = "none", "is_causal", "bool", "float"
MASKS = (NO_MASK, IS_CAUSAL, BOOL_MASK, FLOAT_MASK)

# Why a backend refused: one code per rule, phrased by the renderer.
NOT_ON_DEVICE = "not on this device"
DTYPE = "dtype"
ATTN_MASK = "attn_mask"
HEAD_DIM_MAX = "head_dim too large"
HEAD_DIM_MULTIPLE = "head_dim not a multiple"
DROPOUT = "dropout"
CAPABILITY = "compute capability"
CAUSAL_NON_SQUARE = "is_causal with seq_len != kv_len"

ANY_DROPOUT, SIXTEENTHS, NO_DROPOUT = "any", "multiples of 1/16", "none"


@dataclass(frozen=True)
class Rules:
    """What one backend accepts on one kind of device (the checks of `check` in torch)."""

    backend: str
    check: str  # the torch function that applies these rules
    dtypes: tuple[str, ...]  # on sm_80 and newer (and on the CPU)
    dtypes_before_sm80: tuple[str, ...] = ()
    capability: tuple[int, int] | None = None  # inclusive sm range; None: any (CPU)
    max_head_dim: int | None = None
    # cuDNN on sm_90/sm_10x: (a wider limit, the least cuDNN version that allows it)
    max_head_dim_hopper: tuple[int, int] | None = None
    head_dim_multiple: dict[str, int] = field(default_factory=dict)  # by dtype; absent: any
    attn_mask: bool = True
    dropout: str = ANY_DROPOUT
    causal_needs_square: bool = False
    # The order torch runs its checks in: a refusal names the first that fails, as torch does.
    checks: tuple[str, ...] = ()


HALF = ("float16", "bfloat16")

CUDA_RULES: dict[str, Rules] = {
    "flash": Rules(
        "flash",
        "can_use_flash_attention",
        HALF,
        capability=(80, 121),
        max_head_dim=256,
        attn_mask=False,
        causal_needs_square=True,
        checks=(ATTN_MASK, HEAD_DIM_MAX, CAPABILITY, CAUSAL_NON_SQUARE, DTYPE),
    ),
    "efficient": Rules(
        "efficient",
        "can_use_mem_efficient_attention",
        ("float16", "float32", "bfloat16"),
        dtypes_before_sm80=("float16", "float32"),
        capability=(50, 121),
        # minimum_gemm_alignment: 128 bits on tensor cores, i.e. 8 halves or 4 floats.
        head_dim_multiple={"float16": 8, "bfloat16": 8, "float32": 4},
        checks=(CAPABILITY, HEAD_DIM_MULTIPLE, DTYPE),
    ),
    "cudnn": Rules(
        "cudnn",
        "can_use_cudnn_attention",
        HALF,
        capability=(80, 121),
        max_head_dim=128,
        max_head_dim_hopper=(256, 92201),
        head_dim_multiple={"float16": 8, "bfloat16": 8},
        dropout=SIXTEENTHS,
        checks=(DTYPE, CAPABILITY, DROPOUT, HEAD_DIM_MAX, HEAD_DIM_MULTIPLE),
    ),
    "math": Rules("math", "always", ("float16", "bfloat16", "float32", "float64")),
}
CPU_RULES: dict[str, Rules] = {
    "flash": Rules(
        "flash",
        "use_flash_attention_cpp",
        ("float32", "float64", "bfloat16", "float16"),
        dropout=NO_DROPOUT,
        checks=(DROPOUT, DTYPE),
    ),
    "math": CUDA_RULES["math"],
}

# torch's default priority order (Context's sdp_priority_order), and the one `priority_order`
# installs on sm_90 and sm_10x when the runtime cuDNN is newer than 9.15.0.
CUDA_DEFAULT_ORDER = ("flash", "efficient", "math", "cudnn")
CUDNN_FIRST_ORDER = ("cudnn", "flash", "efficient", "math")
CPU_ORDER = ("flash", "math")
CUDNN_FIRST_SINCE = 91501  # cudnn_version > 91500


@dataclass(frozen=True)
class Platform:
    """Where SDPA runs: a CPU, or a CUDA GPU of a compute capability (90 for sm_90) with a
    runtime cuDNN version as torch reports it (91501 for 9.15.1)."""

    device: str
    capability: int | None = None
    cudnn: int | None = None
    cuda: int = 13000

    def __post_init__(self) -> None:
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        if self.device == "cuda" and self.capability is None:
            raise ValueError("a CUDA platform needs its compute capability (90 for sm_90)")


@dataclass(frozen=True)
class Inputs:
    """One SDPA call's inputs, as far as the dispatcher looks at them."""

    dtype: str
    head_dim: int
    mask: str = NO_MASK
    dropout_p: float = 0.0
    seq_len: int = 1024
    kv_len: int | None = None

    def __post_init__(self) -> None:
        if self.mask not in MASKS:
            raise ValueError(f"mask must be one of {', '.join(MASKS)}, got {self.mask!r}")
        if not 0.0 <= self.dropout_p < 1.0:
            raise ValueError(f"dropout_p must be in [0, 1), got {self.dropout_p}")


@dataclass(frozen=True)
class Choice:
    """The backend SDPA picks, and each backend it tried first with the rule that refused it."""

    backend: str | None  # None: nothing can run (only when math is disabled)
    passed_over: tuple[tuple[str, str], ...]


def rules_for(platform: Platform) -> dict[str, Rules]:
    return CUDA_RULES if platform.device == "cuda" else CPU_RULES


def priority(platform: Platform) -> tuple[str, ...]:
    """The order SDPA tries the backends in on `platform`."""
    if platform.device == "cpu":
        return CPU_ORDER
    cap = platform.capability or 0
    hopper_or_blackwell = cap // 10 in (9, 10)
    if platform.cuda < 13000:  # older CUDA: only the base parts (sm_90, sm_100, sm_103)
        hopper_or_blackwell = hopper_or_blackwell and cap % 10 in (0, 3)
    if hopper_or_blackwell and (platform.cudnn or 0) >= CUDNN_FIRST_SINCE:
        return CUDNN_FIRST_ORDER
    return CUDA_DEFAULT_ORDER


def max_head_dim(rules: Rules, platform: Platform) -> int | None:
    cap = platform.capability or 0
    wide = rules.max_head_dim_hopper
    if wide and (cap == 90 or cap // 10 == 10) and (platform.cudnn or 0) >= wide[1]:
        return wide[0]
    return rules.max_head_dim


def refusal(backend: str, platform: Platform, inputs: Inputs) -> str | None:
    """Why `backend` cannot run `inputs` on `platform` (a reason code), or None if it can."""
    rules = rules_for(platform).get(backend)
    if rules is None:
        return NOT_ON_DEVICE
    cap = platform.capability
    limit = max_head_dim(rules, platform)
    multiple = rules.head_dim_multiple.get(inputs.dtype)
    square = inputs.kv_len is None or inputs.kv_len == inputs.seq_len
    fails = {
        CAPABILITY: bool(rules.capability and cap is not None)
        and not rules.capability[0] <= cap <= rules.capability[1],
        DTYPE: inputs.dtype
        not in (rules.dtypes if cap is None or cap >= 80 else rules.dtypes_before_sm80),
        ATTN_MASK: inputs.mask in (BOOL_MASK, FLOAT_MASK) and not rules.attn_mask,
        HEAD_DIM_MAX: limit is not None and inputs.head_dim > limit,
        HEAD_DIM_MULTIPLE: bool(multiple) and inputs.head_dim % multiple != 0,
        CAUSAL_NON_SQUARE: rules.causal_needs_square and inputs.mask == IS_CAUSAL and not square,
        DROPOUT: (inputs.dropout_p > 0 and rules.dropout == NO_DROPOUT)
        or (rules.dropout == SIXTEENTHS and (inputs.dropout_p * 16) % 1 != 0),
    }
    return next((check for check in rules.checks if fails[check]), None)


def choose(platform: Platform, inputs: Inputs) -> Choice:
    """The backend SDPA's selector picks for `inputs` on `platform`, and why not the others
    before it in the priority order."""
    passed: list[tuple[str, str]] = []
    for backend in priority(platform):
        why = refusal(backend, platform, inputs)
        if why is None:
            return Choice(backend, tuple(passed))
        passed.append((backend, why))
    return Choice(None, tuple(passed))


def why_variants(dtype: str, head_dim: int, big_head_dim: int) -> tuple[tuple[str, Inputs], ...]:
    """The input variants the chapter asks SDPA about, one change at a time from a baseline
    (no mask): (name, inputs). The experiment `sdpa_why` runs these; the forecast reads them."""
    other = "float32" if dtype != "float32" else "bfloat16"
    return (
        ("baseline", Inputs(dtype, head_dim)),
        (other, Inputs(other, head_dim)),
        ("float64", Inputs("float64", head_dim)),
        ("is_causal", Inputs(dtype, head_dim, IS_CAUSAL)),
        ("bool mask", Inputs(dtype, head_dim, BOOL_MASK)),
        ("float mask", Inputs(dtype, head_dim, FLOAT_MASK)),
        (f"head_dim {big_head_dim}", Inputs(dtype, big_head_dim)),
        ("dropout 0.1", Inputs(dtype, head_dim, dropout_p=0.1)),
    )


def capability_of(slug_capability: str | None) -> int:
    """A data sheet's compute capability ("90") as the dispatcher compares it (90)."""
    if not slug_capability or not slug_capability.isdigit():
        raise ValueError(f"no compute capability on this data sheet: {slug_capability!r}")
    return int(slug_capability)
