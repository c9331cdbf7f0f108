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
# # FlexAttention — companion notebook
#
# Run the chapter's experiments in your own Python session, on your own hardware. Install
# the package first (`pip install -e .` in a clone of the repository); on a machine with a
# CUDA GPU the experiments use it automatically. Each distinct mask or score modification
# compiles its own kernel the first time it runs (seconds each).
#
# Every experiment is fetched with `measure`, exactly as the chapter does: from the site's
# store (`docs/measurements` in your clone) when it holds an entry for this machine, and
# otherwise measured here, in a fresh worker process, and added to it — so the numbers below
# are your hardware's. Chapter-sized shapes take minutes on a laptop CPU the first time and
# seconds afterwards. `ATTENTION_DOCS_MODE=frozen` never measures: it shows the site's own
# entries, each captioned with the device that measured it (the test suite runs it so).

# %%
import inspect

from attention_docs import book, measure, render
from attention_docs.attention import flex

book.for_notebook()
fm = measure("flex_masks")
times = measure("forward_times")
print(render.flex.finding(fm, times))

# %% [markdown]
# ## The mods under study

# %%
for mod in (flex.causal, flex.sliding_window, flex.alibi, flex.document):
    print(inspect.getsource(mod))

# %% [markdown]
# ## What ran, and causal FlexAttention against SDPA

# %%
print(render.flex.ran(fm))
print(render.flex.versus_sdpa_table(times))

# %% [markdown]
# ## Four masks, compiled and not; the tiles a BlockMask skips; time against sparsity

# %%
print(render.flex.mask_table(fm, times))
print(render.flex.fallback_warning(fm.measurement))
print(render.flex.block_table(fm))
print(render.flex.sparsity_table(fm))

# %% [markdown]
# ## What a BlockMask costs to build

# %%
fc = measure("flex_block_mask_cost")
print(render.flex.cost_table(fc))

# %% [markdown]
# ## Try next
#
# Write your own `mask_mod` (a dilated or a prefix-LM mask) beside the four in
# `attention_docs.attention.flex` and time it compiled; keep `seq_len` a multiple of 128:
# compiled `flex_attention` on a CPU (torch 2.13) can be wrong otherwise (see the
# chapter's warning).
