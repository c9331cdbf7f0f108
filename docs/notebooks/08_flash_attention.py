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
# Run the chapter's experiments in your own Python session, on your own hardware: on a
# machine with a CUDA GPU they use it.
#
# The first cell of the notebook you download from the site installs the package where it
# is missing (from the wheel linked on the notebook's page, put beside the notebook); in a
# clone, `pip install -e .` does it.
#
# Every experiment is fetched with `measure`, exactly as the chapter does, and measured on
# this machine into `measurements/` beside the notebook, a store of its own (a clone's
# committed store is never written): chapter-sized shapes take minutes on a laptop CPU the
# first time and seconds afterwards. A busy machine is handled as the site's build handles
# it: a measurement taken while other work competed is taken again once the machine calms,
# and kept, flagged in its caption, if it is busy again. `ATTENTION_DOCS_STORE` names another
# store (a clone's `docs/measurements`), and `ATTENTION_DOCS_MODE=frozen` only reads it: the
# site's own entries, each captioned with the device that measured it.

# %%
import inspect

from attention_docs import (
    book,
    make_qkv,
    measure,
    measure_each_device,
    naive_attention,
    render,
    show,
    tiled_attention,
)

book.for_notebook()
flash = measure("flash_tiled_vs_naive")
times = measure("forward_times")
show(render.flash.finding(flash, times))

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
# ## The online softmax, and which tiles are computed
#
# Draw the tile grid for any shape: change `seq_len`, the blocks, or `causal`.

# %%
show(render.flash.online_softmax_table(flash))
show(render.flash.tile_summary(flash.measurement))
show(render.flash.tile_grid_svg(300, 64, 32, causal=True, highlight_row=2))

# %% [markdown]
# ## Tiled vs naive vs SDPA: memory, bytes and time
#
# Forward times come from `forward_times`, which times every implementation at a grid of
# shapes in interleaved rounds. The flash experiment adds peak memory, what is live at the
# peak, the profile of the loop's phases and the bytes each approach moves.

# %%
show(render.flash.implementations_table(flash, times))
show(render.flash.memory_claim(flash.measurement))
show(render.flash.phase_table(flash))
show(render.flash.traffic_table(flash, times))
show(render.flash.memory_figure(flash))

# %% [markdown]
# ## The block size

# %%
blocks = measure("flash_block_sweep")
show(render.flash.block_table(blocks))
show(render.flash.block_claim(blocks.measurement))

# %% [markdown]
# ## FlashAttention 2 and 3 on a GPU, counted
#
# Programs per launch, output-rescaling FLOPs and the tiles that fit in one block's shared
# memory, for the GPU this site forecasts for (an NVIDIA H200), from its data sheet.

# %%
show(render.flash.generations_table())
show(render.flash.causal_claim())
show(render.flash.tiles_table())
show(render.flash.gpu_forecast_box(measure_each_device("forward_times")))

# %% [markdown]
# ## The Triton kernel
#
# On a CUDA GPU with `triton` installed this compares the kernel with SDPA's fused backends
# under this machine's measured matmul ceiling; on a CPU it runs the kernel under Triton's
# interpreter and compares it with SDPA and float64.

# %%
tri = measure("flash_triton_vs_sdpa")
ceilings = measure("machine_ceilings")
show(render.flash.triton_section(tri, ceilings))

# %% [markdown]
# ## Try next
#
# Run the experiment at your own settings with `run_experiment("flash_tiled_vs_naive",
# {"causal": False})` (in this process; it stores nothing) to see nothing skipped,
# `{"dtype": "bfloat16"}` for half the bytes, or a longer `seq_len` to watch naive
# attention's peak memory grow with its square.
