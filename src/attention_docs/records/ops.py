# The ATen ops a piece of code records under the profiler, as plain data: each op's name, the
# labelled step it ran in, the ops that enclose it, and its tensor inputs (dims and dtype).
# A GPU forecast (analytic/gpu.py) prices the kernels these ops launch, so that the forecast
# models the code as written (an out-of-place `masked_fill` records `aten::clone` ->
# `aten::copy_`: a copy kernel) rather than a hand-written list of steps. profiling/ops.py
# records them with torch; `recorded_ops.json` beside this module holds the recordings of
# the code under study, and tests/test_recorded_ops.py re-records that code and fails when
# the file no longer matches it. No torch here.
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from attention_docs.records.shape import Shape

SCHEMA_VERSION = 1
RECORDED_OPS = Path(__file__).with_name("recorded_ops.json")
# What the profiler's "Input type" says, in this package's dtype names (bool stays bool).
_DTYPES = {
    "float": "float32",
    "c10::BFloat16": "bfloat16",
    "c10::Half": "float16",
    "double": "float64",
    "bool": "bool",
}


class UnknownRecordingError(LookupError):
    """No recording of that subject in the committed file."""


@dataclass(frozen=True)
class TensorArg:
    """One tensor input of an op: its dims and its dtype ("float32", "bool"...)."""

    dims: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n


@dataclass(frozen=True)
class RecordedOp:
    """One ATen op as the profiler recorded it, in the step (`record_function` range) it ran in.

    `within`: the names of the ATen ops that enclose it, outermost first (an op a composite
    op called: `aten::copy_` within `aten::masked_fill`, `aten::clone`)."""

    step: str
    name: str
    within: tuple[str, ...]
    inputs: tuple[TensorArg, ...]

    def to_json(self) -> dict:
        return {
            "step": self.step,
            "name": self.name,
            "within": list(self.within),
            "inputs": [[list(t.dims), t.dtype] for t in self.inputs],
        }

    @classmethod
    def from_json(cls, data: Mapping) -> RecordedOp:
        inputs = tuple(TensorArg(tuple(dims), dtype) for dims, dtype in data["inputs"])
        return cls(data["step"], data["name"], tuple(data["within"]), inputs)


@dataclass(frozen=True)
class OpList:
    """What one forward of `subject` recorded at `shape`, in order."""

    subject: str
    shape: Shape
    ops: tuple[RecordedOp, ...]

    def names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.ops)

    def to_json(self) -> dict:
        s = self.shape
        shape = {"batch_size": s.batch_size, "num_heads": s.num_heads, "seq_len": s.seq_len,
                 "head_dim": s.head_dim, "dtype": s.dtype, "causal": s.causal,
                 "kv_len": s.keys}  # fmt: skip
        return {"subject": self.subject, "shape": shape, "ops": [o.to_json() for o in self.ops]}

    @classmethod
    def from_json(cls, data: Mapping) -> OpList:
        ops = tuple(RecordedOp.from_json(o) for o in data["ops"])
        return cls(data["subject"], Shape.of(data["shape"]), ops)


def ops_from_chrome(events: Iterable[Mapping], steps: Sequence[str]) -> tuple[RecordedOp, ...]:
    """The ATen ops of a chrome trace's events (recorded with shapes) inside the ranges named
    `steps`, in time order, each with the ATen ops that enclose it on its thread."""
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e]
    ranges = [e for e in spans if e.get("name") in steps]
    ops = sorted(
        (e for e in spans if str(e.get("name", "")).startswith("aten::")),
        key=lambda e: (e["ts"], -e["dur"]),
    )

    def inside(inner: Mapping, outer: Mapping) -> bool:
        return (
            inner.get("tid") == outer.get("tid")
            and outer["ts"] <= inner["ts"]
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
        )

    out = []
    for i, op in enumerate(ops):
        step = next((r["name"] for r in ranges if inside(op, r)), None)
        if step is None:
            continue
        within = tuple(o["name"] for o in ops[:i] if o is not op and inside(op, o))
        out.append(RecordedOp(step, op["name"], within, tensor_inputs(op.get("args", {}))))
    return tuple(out)


def tensor_inputs(args: Mapping) -> tuple[TensorArg, ...]:
    """The tensor inputs of a recorded op, from its Chrome-trace `args` ("Input Dims",
    "Input type"), in order; scalars, lists and tensors of other dtypes are left out."""
    dims, types = args.get("Input Dims", []), args.get("Input type", [])
    return tuple(
        TensorArg(tuple(d), _DTYPES[t])
        for d, t in zip(dims, types, strict=False)
        if t in _DTYPES and isinstance(d, list)
    )


def load_recordings(path: Path = RECORDED_OPS) -> dict[str, OpList]:
    """The committed recordings, by subject."""
    data = json.loads(path.read_text())
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path.name}: schema version {data.get('schema_version')!r}, not 1")
    return {r["subject"]: OpList.from_json(r) for r in data["recordings"]}


@cache
def committed() -> dict[str, OpList]:
    """The committed recordings, read once per process (every forecast prices one)."""
    return load_recordings()


def recording(subject: str) -> OpList:
    """The committed recording of `subject` ("naive_attention", "masked_fill_"...)."""
    found = committed()
    if subject not in found:
        raise UnknownRecordingError(
            f"no recorded ops for {subject!r}; recorded: {', '.join(found)}"
        )
    return found[subject]


def dumps(recordings: Iterable[OpList]) -> str:
    """The committed file's text for `recordings`."""
    body = {"schema_version": SCHEMA_VERSION, "recordings": [r.to_json() for r in recordings]}
    return json.dumps(body, indent=1) + "\n"
