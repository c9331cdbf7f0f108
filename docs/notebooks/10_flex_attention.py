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

from attention_docs import book, measure, render, show
from attention_docs.attention import flex

book.for_notebook()
fm = measure("flex_masks")
times = measure("forward_times")
show(render.flex.finding(fm, times))

# %% [markdown]
# ## The mods under study

# %%
for mod in (flex.causal, flex.sliding_window, flex.alibi, flex.document):
    print(inspect.getsource(mod))

# %% [markdown]
# ## What ran, and causal FlexAttention against SDPA

# %%
show(render.flex.ran(fm))
show(render.flex.versus_sdpa_table(times))

# %% [markdown]
# ## Four masks, compiled and not; the tiles a BlockMask skips; time against sparsity

# %%
show(render.flex.mask_table(fm, times))
show(render.flex.fallback_warning(fm.measurement))
show(render.flex.block_table(fm))
show(render.flex.sparsity_table(fm))
show(render.flex.sparsity_claim(fm))

# %% [markdown]
# ## What a BlockMask costs to build

# %%
fc = measure("flex_block_mask_cost")
show(render.flex.cost_table(fc))

# %% [markdown]
# ## Try next
#
# Write your own `mask_mod` (a dilated or a prefix-LM mask) beside the four in
# `attention_docs.attention.flex` and time it compiled; keep `seq_len` a multiple of 128:
# compiled `flex_attention` on a CPU (torch 2.13) can be wrong otherwise (see the
# chapter's warning).
