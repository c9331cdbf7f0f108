# Naive attention handed to torch.compile. Nothing here is new arithmetic: the point of the
# fusion chapter is that the same five steps, traced by Dynamo and lowered by Inductor, run
# as fewer, larger kernels. The chapter shows this file through pymdown snippets.
from __future__ import annotations

from collections.abc import Callable

import torch

from attention_docs.attention.naive import naive_attention

# Inductor's C++ backend runs its fused loops inside one opaque `CompiledFxGraph` call
# unless asked to wrap each generated kernel in a profiler range. On a GPU the Triton kernels
# appear in the trace by name anyway; the option is harmless there.
KERNEL_PROFILE_OPTIONS = {"cpp.enable_kernel_profile": True}


# --8<-- [start:compile]
def compiled_attention(*, dynamic: bool = False) -> Callable[..., torch.Tensor]:
    """`naive_attention` compiled by TorchDynamo + Inductor, one whole graph, fixed shapes.

    `fullgraph=True` turns any graph break into an error instead of a silent fallback to
    eager Python between two compiled pieces. `dynamic=False` specialises the kernels to
    the shapes of the first call: another shape fails a guard and compiles a new graph.
    """
    return torch.compile(
        naive_attention,
        fullgraph=True,
        dynamic=dynamic,
        options=KERNEL_PROFILE_OPTIONS,
    )


# --8<-- [end:compile]
