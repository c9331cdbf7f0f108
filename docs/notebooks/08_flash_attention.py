# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # FlashAttention from scratch — companion notebook
#
# Run the chapter's experiments in your own Python session, on your own hardware. Install the
# package first (`pip install -e .` in a clone of the repository); on a machine with a CUDA
# GPU the experiments use it automatically, and the Triton comparison runs if `triton` is
# installed.
#
# Unlike the site, this notebook does not read the committed store: every number below is
# measured when you run it.

# %%
import inspect
import os

import torch
from IPython.display import HTML, display

from attention_docs import make_qkv, naive_attention, render, run_experiment, tiled_attention
from attention_docs.measurements import Sourced

# Small shapes keep this quick on a laptop CPU; the test suite sets ATTENTION_DOCS_TINY.
# The tiny shape is the smallest of forward_times' grid, so that its forward times apply.
tiny = bool(os.environ.get("ATTENTION_DOCS_TINY"))
shape = {"seq_len": 128} if tiny else {}
tiles = {"block_q": 32, "block_k": 32} if tiny else {}
ceiling_sizes = {"matmul_size": 256, "copy_mb": 16} if tiny else {}

# %% [markdown]
# ## The code under study
#
# `tiled_attention` computes attention one tile at a time with an online softmax.

# %%
print(inspect.getsource(tiled_attention))

# %% [markdown]
# It gives the same answer as naive attention, for any block sizes and any length:

# %%
q, k, v = make_qkv(1, 2, 100, 32)
for block in (16, 37, 64):
    diff = tiled_attention(q, k, v, causal=True, block_q=block, block_k=block) - naive_attention(
        q, k, v, causal=True
    )
    print(f"block {block}: largest difference {diff.abs().max().item():.1e}")

# %% [markdown]
# ## Which tiles are computed
#
# Draw the tile grid for any shape: change `seq_len`, the blocks, or `causal`.

# %%
display(HTML(render.flash.tile_grid_svg(300, 64, 32, causal=True, highlight_row=2)))

# %% [markdown]
# ## Tiled vs naive vs SDPA
#
# Forward times come from `forward_times`, which times every implementation at a grid of
# shapes in interleaved rounds (the full grid takes several minutes on a laptop CPU; the
# tiny run, two shapes). The flash experiment adds peak memory, what is live at the peak,
# the profile of the loop's phases and the bytes each approach moves.

# %%
times = run_experiment("forward_times", {"tiny": tiny})
m = run_experiment("flash_tiled_vs_naive", {**shape, **tiles})
here = Sourced(m, "measured in this notebook", "-", base="")
here_times = Sourced(times, "measured in this notebook", "-", base="")
print(render.flash.finding(here, here_times, [here_times]))
print(render.flash.implementations_table(here, times))
print(render.flash.memory_claim(m))

# %%
print(render.flash.phase_table(here))
print(render.flash.traffic_table(here, times))
display(HTML(render.flash.memory_figure(here)))

# %% [markdown]
# ## The block size

# %%
blocks = run_experiment("flash_block_sweep", {**shape, "blocks": "16,32,64"} if tiny else {})
here_blocks = Sourced(blocks, "measured in this notebook", "-", base="")
print(render.flash.block_table(here_blocks))
print(render.flash.block_claim(blocks))

# %% [markdown]
# ## FlashAttention 2 on a GPU, counted
#
# Programs per launch, output-rescaling FLOPs and the tiles that fit in one block's shared
# memory, for the GPU this site forecasts for (an NVIDIA H200), from its data sheet.

# %%
print(render.flash.generations_table())
print(render.flash.tiles_table())

# %% [markdown]
# ## The Triton kernel
#
# On a CUDA GPU with `triton` installed this compares the kernel with SDPA's fused backends
# under this machine's measured matmul ceiling; on a CPU it runs the kernel under Triton's
# interpreter and compares it with SDPA and float64.

# %%
tri = run_experiment("flash_triton_vs_sdpa")
ceilings = run_experiment("machine_ceilings", ceiling_sizes) if torch.cuda.is_available() else None
print(
    render.flash.triton_section(Sourced(tri, "measured in this notebook", "-", base=""), ceilings)
)

# %% [markdown]
# ## Try next
#
# Pass `{"causal": False}` to see nothing skipped, `{"dtype": "bfloat16"}` for half the bytes,
# or a longer `seq_len` to watch naive attention's peak memory grow with its square.
