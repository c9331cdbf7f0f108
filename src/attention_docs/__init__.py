"""Attention, Profiled: the attention algorithm taken apart under the PyTorch profiler.

The public API is flat: `from attention_docs import measure, naive_attention, render`.
Names load lazily so that `import attention_docs` stays cheap and the torch-free parts
(renderers, measurement records) never pull in torch.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__version__ = "0.1.0"

# torch.profiler's Kineto backend prints "USDT: ... profiler_start" / "profiler_stop" on stderr
# every time a profile starts and stops: it floods a notebook's output and the build log.
# Kineto reads the level when the first profile starts; 6 is above its highest (USDT, 5), so it
# also hides Kineto's ERROR lines (4). Set KINETO_LOG_LEVEL before importing to see them.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

_EXPORTS = {
    "naive_attention": "attention_docs.attention.naive",
    "causal_mask": "attention_docs.attention.naive",
    "STEPS": "attention_docs.attention.naive",
    "make_qkv": "attention_docs.inputs",
    "sdpa_attention": "attention_docs.attention.sdpa",
    "why_backend": "attention_docs.attention.sdpa",
    "BACKENDS": "attention_docs.attention.sdpa",
    "forward_backward": "attention_docs.attention.backward",
    "step_costs": "attention_docs.analytic.cost",
    "Measurement": "attention_docs.measurements.schema",
    "Sourced": "attention_docs.measurements.schema",
    "Store": "attention_docs.measurements.store",
    "run_experiment": "attention_docs.experiments.runner",
    "measure": "attention_docs.book",
    "measure_each_device": "attention_docs.book",
    "show": "attention_docs.notebook",
    "MeasurementError": "attention_docs.book",
    "ExperimentError": "attention_docs.experiments.registry",
    "tiled_attention": "attention_docs.attention.tiled",
    "tiled_attention_with_lse": "attention_docs.attention.tiled",
    "triton_flash_attention": "attention_docs.attention.triton_flash",
    "triton_available": "attention_docs.attention.triton_flash",
    "prepare_triton_flash": "attention_docs.attention.triton_flash",
}
_MODULES = {"render": "attention_docs.render", "book": "attention_docs.book"}

__all__ = [  # noqa: PLE0604 - built from the lazy-export tables above
    "__version__",
    *sorted(_EXPORTS),
    *sorted(_MODULES),
]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'attention_docs' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
