# The experiment registry. An experiment is a function that answers one question a chapter
# asks and returns what it observed; its declaration says which parameters it takes (with
# larger defaults on a GPU), which source files it measures (its fingerprint), and how much
# memory a choice of parameters needs at least (checked before the experiment starts), and
# how long it takes on the lent GPU (its `gpu_work`, which gpu_plan.py sums into a plan).
from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attention_docs.analytic import cost
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.keys import (
    PACKAGE_ROOT,
    code_fingerprint_text,
    fingerprint,
    measured_closure,
    store_key,
)
from attention_docs.measurements.schema import OpStat, StepStat, Table
from attention_docs.records.shape import DTYPES
from attention_docs.records.timing import Timing
from attention_docs.records.trace import Trace


class ExperimentError(ValueError):
    """A bad experiment name or parameter; the message says what is valid."""


# What an experiment has imported before it starts, unless its declaration says less
# (`imports=`): torch, and what torch.profiler (Dynamo) and torch.compile (Dynamo and
# Inductor) import on first use, so that no compile time or profiled region includes an
# import. They cost 2-3 s in a new process; an experiment that neither profiles nor compiles
# may declare ("torch",), and its worker then skips them (runner.py checks the declaration).
PRELOAD = ("torch", "torch._dynamo", "torch._inductor.compile_fx")


@dataclass(frozen=True)
class Param:
    """One parameter: its default (and a larger one on a GPU), valid choices, and help."""

    default: Any
    gpu_default: Any = None
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    help: str = ""

    @property
    def type(self) -> type:
        return type(self.default)

    def default_for(self, device_kind: str) -> Any:
        return (
            self.gpu_default
            if device_kind == "cuda" and self.gpu_default is not None
            else self.default
        )

    def coerce(self, name: str, value: Any) -> Any:
        """Check `value` (or parse it from a command-line string)."""
        kind = self.type
        if isinstance(value, str) and kind is not str:
            value = _parse(name, value, kind)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ExperimentError(f"parameter {name} must be {kind.__name__}, got {value!r}")
        if self.choices and value not in self.choices:
            valid = ", ".join(str(c) for c in self.choices)
            raise ExperimentError(
                f"parameter {name}={value!r} is not valid; choose one of: {valid}"
            )
        if self.minimum is not None and value < self.minimum:
            raise ExperimentError(f"parameter {name}={value!r} must be at least {self.minimum}")
        return value


def _parse(name: str, text: str, kind: type) -> Any:
    if kind is bool:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ExperimentError(f"parameter {name} must be true or false, got {text!r}")
    try:
        return kind(text)
    except ValueError:
        raise ExperimentError(f"parameter {name} must be {kind.__name__}, got {text!r}") from None


@dataclass(frozen=True)
class Observed:
    """What an experiment function returns; the runner adds key and provenance."""

    steps: tuple[StepStat, ...] = ()
    ops: tuple[OpStat, ...] = ()
    timing: Timing | None = None
    timeline: Trace | None = None
    tables: Mapping[str, Table] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    chrome: Mapping | None = None  # the Chrome trace behind `timeline`, stored gzipped


EstimateBytes = Callable[[Mapping[str, Any]], "int | None"]


# Seconds on the lent machine (one H200, 16 cores), from the experiments' sizing notes.
START_S = 6.0  # a worker: fork, CUDA context, the measured code imported afresh
COMPILE_S = 15.0  # one torch.compile graph, cold (Dynamo, Inductor, Triton code generation)
WARM_COMPILE_S = 3.0  # the same graph found in Inductor's on-disk cache (Dynamo still traces)
FLEX_COMPILE_S = 10.0  # one FlexAttention mod: a kernel of its own
TRITON_S = 30.0  # the site's Triton kernel, first compile in a process (Triton's start too)
TRITON_SPEC_S = 8.0  # each further specialisation (dtype, head_dim, causal)
PROFILE_S = 0.5  # one profiler session: start, warm-up and active steps, trace processing
# One callable at one shape: 20 rounds of 3 CUDA-event runs, each after a warm-up call.
TIMED_S = 0.2


@dataclass(frozen=True)
class Work:
    """What one request does on the GPU, counted from its parameters: an experiment declares
    it (`gpu_work=lambda p: Work(...)`) and gpu_plan.py turns it into seconds."""

    compiles: int = 0
    warm_compiles: int = 0
    flex_compiles: int = 0
    triton: int = 0  # 1 when the request compiles the Triton kernel
    triton_specs: int = 0  # further specialisations of it
    profiles: int = 0
    timed: int = 0
    device_s: float = 0.0  # the forwards' own time, where they are large (bytes, FLOPs)

    @property
    def seconds(self) -> float:
        return (
            START_S
            + self.compiles * COMPILE_S
            + self.warm_compiles * WARM_COMPILE_S
            + self.flex_compiles * FLEX_COMPILE_S
            + self.triton * TRITON_S
            + self.triton_specs * TRITON_SPEC_S
            + self.profiles * PROFILE_S
            + self.timed * TIMED_S
            + self.device_s
        )


EstimateWork = Callable[[Mapping[str, Any]], Work]


def forward_grid_work(shapes: Sequence[Any]) -> Work:
    """A forward grid's work (forward_times): nine implementations and the five steps alone
    per shape; per (dtype, causal, head_dim) one compiled graph, one FlexAttention kernel and
    one specialisation of the Triton kernel, which compiles once."""
    groups = len({(s.dtype, s.causal, s.head_dim) for s in shapes})
    return Work(
        compiles=groups,
        flex_compiles=groups,
        triton=1,
        triton_specs=groups - 1,
        timed=14 * len(shapes),
        device_s=0.25 * len(shapes),
    )


def count_items(text: Any) -> int:
    """How many items a comma-separated parameter names (`"float32,bfloat16"`: 2)."""
    return len([t for t in str(text).split(",") if t.strip()])


def score_matrix_bytes(params: Mapping[str, Any]) -> int | None:
    """Bytes of one batch_size×num_heads×seq_len² matrix: the least an experiment needs that
    materialises attention scores at one shape. None without a `seq_len` parameter.

    The shared default of `estimate_bytes`: naive attention holds two such matrices (scores
    and probabilities), so one of them larger than the device's free memory cannot run.
    """
    if "seq_len" not in params:
        return None
    dtype = params.get("dtype", "float32")
    return cost.score_matrix_bytes(
        int(params.get("batch_size", 1)),
        int(params.get("num_heads", 1)),
        int(params["seq_len"]),
        dtype if isinstance(dtype, str) and dtype in cost.ITEMSIZE else "float32",
    )


def shape_params(**overrides: Param) -> dict[str, Param]:
    """The shape parameters an experiment takes, defaulting to the forward grid's teaching
    slice on each kind of device (so that its shape has a forward time), with `overrides`
    (another default seq_len, a `causal` flag) on top. One definition for every experiment."""
    cpu, cuda = fwd.GRIDS["cpu"].teaching, fwd.GRIDS["cuda"].teaching
    return {
        "batch_size": Param(
            cpu.batch_size, gpu_default=cuda.batch_size, minimum=1, help="sequences per batch"
        ),
        "num_heads": Param(
            cpu.num_heads, gpu_default=cuda.num_heads, minimum=1, help="attention heads"
        ),
        "seq_len": Param(256, gpu_default=2048, minimum=1, help="tokens per sequence (N)"),
        "head_dim": Param(64, minimum=1, help="features per head (D)"),
        "dtype": Param(cpu.dtypes[0], gpu_default=cuda.dtypes[0], choices=DTYPES),
        **overrides,
    }


def bytes_text(n: float) -> str:
    """`3.2 GiB`, `8.0 EiB`: binary units, one decimal."""
    units = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")
    value, unit = float(n), 0
    while value >= 1024 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    return f"{int(value)} bytes" if unit == 0 else f"{value:.1f} {units[unit]}"


@dataclass(frozen=True)
class Experiment:
    name: str
    summary: str
    func: Callable[..., Observed]
    params: Mapping[str, Param]
    measures: tuple[str, ...]  # package-relative source files whose code is measured
    # As `experiment()` declares them (its docstring says what each is for).
    estimate_bytes: EstimateBytes | None = score_matrix_bytes
    imports: tuple[str, ...] = PRELOAD
    gpu_work: EstimateWork | None = None
    # The file that declares it (absolute): part of its fingerprint. Default: `func`'s.
    file: str = ""

    def __post_init__(self) -> None:
        if not self.file:
            object.__setattr__(self, "file", str(Path(inspect.getfile(self.func)).resolve()))

    @property
    def source_files(self) -> tuple[str, ...]:
        """The files whose code this experiment's entries depend on, relative to the package:
        its own module, the files it names in `measures`, and every measuring module (under
        experiments/, profiling/, attention/, analytic/, inputs.py) they import, transitively.
        A change in profiling/timing.py thus re-measures the experiments that time, and no
        other."""
        own = Path(self.file)
        named = self.measures
        if own.is_relative_to(PACKAGE_ROOT):
            named = (own.relative_to(PACKAGE_ROOT).as_posix(), *named)
        return measured_closure(named)

    def defaults_text(self) -> str:
        """The parameters' defaults on each device: a request that leaves a parameter at its
        default has no key of its own for it, so a changed default must change the key."""
        return repr({n: (p.default, p.gpu_default) for n, p in sorted(self.params.items())})

    def fingerprint(self, root: Path = PACKAGE_ROOT) -> str:
        own = Path(self.file)
        extra = "" if own.is_relative_to(PACKAGE_ROOT) else code_fingerprint_text(own.read_text())
        files = (
            self.source_files if root == PACKAGE_ROOT else measured_closure(self.source_files, root)
        )
        return fingerprint(files, root, extra=self.defaults_text() + extra)

    def check(self, requested: Mapping[str, Any]) -> dict[str, Any]:
        """Validate requested parameters; returns them coerced to their types."""
        checked = {}
        for name, value in requested.items():
            if name not in self.params:
                valid = ", ".join(self.params) or "(none)"
                raise ExperimentError(
                    f"experiment {self.name} has no parameter {name!r}; its parameters are: {valid}"
                )
            checked[name] = self.params[name].coerce(name, value)
        return checked

    def resolve(self, requested: Mapping[str, Any], device_kind: str) -> dict[str, Any]:
        """Every parameter's value for a run on `device_kind`."""
        checked = self.check(requested)
        params = {n: checked.get(n, p.default_for(device_kind)) for n, p in self.params.items()}
        # A sweep from min_X to max_X (decode's cache lengths, the wall's sequences) whose
        # ends are swapped would sweep nothing, and say nothing about it.
        for low in (n for n in params if n.startswith("min_")):
            high = "max_" + low.removeprefix("min_")
            if high in params and params[low] > params[high]:
                raise ExperimentError(
                    f"parameter {low}={params[low]} is more than {high}={params[high]}: the "
                    "sweep between them would be empty; swap them"
                )
        return params

    def canonical(
        self, requested: Mapping[str, Any], device_kind: str | None = None
    ) -> dict[str, Any]:
        """`requested`, checked, without the parameters given at their default value.

        With `device_kind` None a parameter is dropped only when it equals its default on
        every device (a `seq_len=256` whose GPU default is 2048 is a request of its own);
        with `device_kind` ("cpu", "cuda") when it equals that device's default — what the
        command line does for a run on that device, so that it lands on the chapter's key.
        """
        kinds = (device_kind,) if device_kind else ("cpu", "cuda")
        kept = {}
        for name, value in self.check(requested).items():
            defaults = [self.params[name].default_for(kind) for kind in kinds]
            if not all(type(value) is type(d) and value == d for d in defaults):
                kept[name] = value
        return kept

    def key(self, requested: Mapping[str, Any]) -> str:
        """The store key: parameters given at their default make no key of their own."""
        return store_key(self.name, self.canonical(requested), self.fingerprint())

    def memory_problem(
        self, params: Mapping[str, Any], free_bytes: int | None, where: str
    ) -> str | None:
        """Why `params` (resolved) cannot fit in `free_bytes` on `where`, or None if they may."""
        need = self.estimate_bytes(params) if self.estimate_bytes else None
        if need is None or free_bytes is None or need <= free_bytes:
            return None
        how = ""
        if self.estimate_bytes is score_matrix_bytes:
            dims = "×".join(
                str(params.get(n, 1)) for n in ("batch_size", "num_heads", "seq_len", "seq_len")
            )
            how = (
                f" for one batch_size×num_heads×seq_len² score matrix of "
                f"{params.get('dtype', 'float32')} ({dims} elements)"
            )
        # The parameters that differ from their CPU default (`seq_len=100000`).
        changed = [
            f"{n}={v}"
            for n, v in params.items()
            if n in self.params and v != self.params[n].default
        ]
        return (
            f"{self.name} with {', '.join(changed) or 'its default parameters'} needs at least "
            f"{bytes_text(need)}{how}, but {where} has {bytes_text(free_bytes)} free; "
            "choose smaller parameters (see `python -m attention_docs list`)"
        )


REGISTRY: dict[str, Experiment] = {}


def experiment(
    name: str,
    *,
    summary: str,
    measures: tuple[str, ...] = (),
    estimate_bytes: EstimateBytes | None = score_matrix_bytes,
    imports: tuple[str, ...] = PRELOAD,
    gpu_work: EstimateWork | None = None,
    **params: Param,
) -> Callable[[Callable[..., Observed]], Callable[..., Observed]]:
    """Register `func(ctx, **params) -> Observed` as experiment `name`.

    `estimate_bytes(params)` says the least memory a run at resolved parameters needs
    (default: one batch_size×num_heads×seq_len² matrix when the experiment has a `seq_len`),
    and `run` and the worker refuse parameters that cannot fit before it starts; pass your own
    for an experiment that never materialises one, or None to skip the check. `imports`: what
    must be imported before it starts (PRELOAD: an experiment that neither profiles nor
    compiles may say `("torch",)`, and its worker starts seconds sooner). `gpu_work(params)`:
    what a run does on the lent GPU at its GPU parameters (compiles, profiles, timed
    callables), from which gpu_plan.py orders and sizes a call (without it, gpu_plan's DEFAULT,
    and tests/test_gpu_run.py fails until it is declared); it is no part of the fingerprint
    (measurements/keys.py), so an estimate edit re-measures nothing.
    """

    def register(func: Callable[..., Observed]) -> Callable[..., Observed]:
        if name in REGISTRY:
            first = REGISTRY[name].func.__module__
            raise ExperimentError(
                f"experiment {name} is registered twice (in {first} and in "
                f"{func.__module__}); rename one of them"
            )
        REGISTRY[name] = Experiment(
            name=name,
            summary=summary,
            func=func,
            params=dict(params),
            measures=tuple(measures),
            estimate_bytes=estimate_bytes,
            imports=tuple(imports),
            gpu_work=gpu_work,
        )
        return func

    return register


def get(name: str) -> Experiment:
    from attention_docs.experiments import load_all

    load_all()
    try:
        return REGISTRY[name]
    except KeyError:
        valid = ", ".join(sorted(REGISTRY))
        raise ExperimentError(
            f"no experiment named {name!r}; the experiments are: {valid}"
        ) from None
