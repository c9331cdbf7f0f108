# The site's vocabulary of labelled steps: the names of the `record_function` ranges the
# implementations open, which profiles, tables, figures, cost models and prose all use. One
# list, so that a renamed range cannot leave a table or a cost model behind.
from __future__ import annotations

# Naive attention, in order (attention/naive.py).
STEPS: tuple[str, ...] = (
    "attention.scores",
    "attention.scale",
    "attention.mask",
    "attention.softmax",
    "attention.weighted_sum",
)
MATMULS: tuple[str, ...] = ("attention.scores", "attention.weighted_sum")
ELEMENTWISE: tuple[str, ...] = ("attention.scale", "attention.mask", "attention.softmax")

# The tiled (FlashAttention-style) loop, in order (attention/tiled.py).
TILED_STEPS: tuple[str, ...] = (
    "tiled.scores",
    "tiled.online_softmax",
    "tiled.accumulate",
    "tiled.normalize",
)

# A training step's two halves (attention/backward.py).
PHASES: tuple[str, ...] = ("attention.forward", "attention.backward")

# FlexAttention's profiled step: build the BlockMask, then call the compiled kernel.
FLEX_STEPS: tuple[str, ...] = ("flex.block_mask", "flex.compiled")
