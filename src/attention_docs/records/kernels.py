# Which work a trace did, and which labelled step each piece of work came from. Compiled
# code loses the `record_function` ranges (Dynamo drops them), so the steps of a fused kernel
# are recovered from its name: Inductor names a fused kernel after the ATen ops it absorbed
# (`cpp_fused__softmax_div_masked_fill_0`, `triton_per_fused__softmax_div_0`), and the eager
# trace says which step ran which op. Plain data in, plain data out; no torch here.
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from attention_docs.records.trace import GPU_KINDS, GPU_WORK, Span, Trace, attribute

# Spans that do no arithmetic on tensor data: aliasing views, allocation, conjugation
# bookkeeping, and the wrappers torch.compile puts around a compiled graph. They are listed
# in tables but not counted as work.
BOOKKEEPING_OPS = frozenset(
    {
        "aten::view",
        "aten::_unsafe_view",
        "aten::reshape",
        "aten::_reshape_alias",
        "aten::expand",
        "aten::transpose",
        "aten::t",
        "aten::as_strided",
        "aten::permute",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::alias",
        "aten::lift_fresh",
        "aten::empty",
        "aten::empty_strided",
        "aten::resolve_conj",
        "aten::resolve_neg",
        "aten::detach",
    }
)
WRAPPER_PREFIXES = (
    "TorchDynamo Cache Lookup",
    "Torch-Compiled Region",
    "Pregraph bytecode",
    "AOTDispatcher",
    "## Call CompiledFxGraph",
    "## ",
    "CompiledFunction",
)
_FUSED = re.compile(r"fused_(?P<ops>.+?)(?:_\d+)?$")


@dataclass(frozen=True)
class WorkItem:
    """One name that did work in a forward: an ATen op (CPU), a kernel (GPU), a fused kernel."""

    name: str
    where: str  # "CPU" or "GPU"
    calls: int
    time_us: float
    fused: bool


def is_bookkeeping(name: str) -> bool:
    """True for views, allocations and torch.compile's own wrapper ranges."""
    return name in BOOKKEEPING_OPS or name.startswith(WRAPPER_PREFIXES)


def fused_ops(name: str) -> str | None:
    """The op part of an Inductor kernel name (`_softmax_div_masked_fill`), or None."""
    found = _FUSED.search(name)
    return found.group("ops") if found else None


def work_items(trace: Trace, *, every_depth: bool = False) -> list[WorkItem]:
    """The work of a trace, in order of first appearance.

    On a GPU trace that is every kernel, memcpy and memset. On a CPU trace it is every
    outermost op, bookkeeping excluded: the ops the Python code (or the compiled graph)
    called, not the ops they call in turn (`aten::div` by a Python float calls `aten::copy_`
    to make the divisor a tensor; the division is still one op). With `every_depth`, the
    ops they call count too: what one call into a library op (SDPA's math backend, for one)
    really dispatched. A compiled graph's fused kernels appear here as ops when Inductor's
    kernel profiling is on.
    """
    if trace.has_gpu:
        spans = [s for s in trace.spans if s.kind in GPU_KINDS and s.kind != "gpu_range"]
    else:
        ops = [s for s in trace.spans if s.kind == "op" and not is_bookkeeping(s.name)]
        if not every_depth:
            ops = [s for s in ops if not any(_inside(s, o) for o in ops if o is not s)]
        spans = ops
    items: dict[str, list[Span]] = {}
    for s in sorted(spans, key=lambda s: s.start_us):
        items.setdefault(s.name, []).append(s)
    return [
        WorkItem(
            name=name,
            where="GPU" if found[0].kind in GPU_KINDS else "CPU",
            calls=len(found),
            time_us=sum(s.dur_us for s in found),
            fused=fused_ops(name) is not None,
        )
        for name, found in items.items()
    ]


def _inside(inner: Span, outer: Span) -> bool:
    eps = 1e-3
    return (
        inner.lane == outer.lane
        and inner.depth > outer.depth
        and outer.start_us - eps <= inner.start_us
        and inner.end_us <= outer.end_us + eps
    )


def names_per_step(trace: Trace, labels: Iterable[str]) -> dict[str, set[str]]:
    """Per labelled range: the names of the ops inside it and of the kernels it launched.

    Ops and launches on any thread count as `attribute` says, so a backward's names include
    those of the autograd engine's thread.
    """
    return {
        label: {s.name for s in spans if s.kind == "op" or s.kind in GPU_WORK}
        for label, spans in attribute(trace, labels).items()
    }


def steps_of(name: str, step_names: Mapping[str, set[str]]) -> list[str]:
    """Which steps a piece of compiled work stands for.

    A name the eager run also used (an ATen op, a cuBLAS kernel) maps to the steps that used
    it. A fused kernel maps to every step whose ATen ops appear in its name; views and
    allocations are ignored, since every step has some.
    """
    direct = [label for label, names in step_names.items() if name in names]
    if direct:
        return direct
    ops = fused_ops(name)
    if ops is None:
        return []
    padded = f"_{ops}_"
    found = []
    for label, names in step_names.items():
        short = {n.removeprefix("aten::") for n in names if n.startswith("aten::")}
        short -= {n.removeprefix("aten::") for n in BOOKKEEPING_OPS}
        if any(f"_{op}_" in padded for op in short):
            found.append(label)
    return found
