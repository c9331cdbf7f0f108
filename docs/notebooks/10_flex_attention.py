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
# CUDA GPU the experiments use it automatically.
#
# Each distinct mask or score modification compiles its own kernel the first time it runs
# (seconds each). Every number below is measured when you run it.

# %%
import inspect
import os

from attention_docs import render, run_experiment
from attention_docs.attention import flex
from attention_docs.measurements import Sourced

# The test suite sets ATTENTION_DOCS_TINY: the forward-time table then times only the
# smallest shapes of its grid (seq_len 128 on a CPU), and the masks run at that size. Keep
# seq_len a multiple of 128: compiled flex_attention on a CPU (torch 2.13) can be wrong
# otherwise (see the chapter's warning).
tiny = bool(os.environ.get("ATTENTION_DOCS_TINY"))
shape = {"seq_len": 128} if tiny else {}


def here(m):
    return Sourced(m, "measured in this notebook", "-", base="")


# %% [markdown]
# ## The mods under study

# %%
for mod in (flex.causal, flex.sliding_window, flex.alibi, flex.document):
    print(inspect.getsource(mod))

# %% [markdown]
# ## The forward-time table (compiled FlexAttention with the causal mask is one of its rows)

# %%
times = run_experiment("forward_times", {"tiny": tiny})

# %% [markdown]
# ## Four masks: compiled, unfused fallback, SDPA with a dense mask

# %%
m = run_experiment("flex_masks", {**shape, "window": 64} if tiny else {})
print(render.flex.mask_table(here(m), times))
print(render.flex.block_table(here(m)))
print(render.flex.mask_claims(m, times))
print(render.flex.fallback_warning(m))

# %% [markdown]
# ## Time against block sparsity (one compiled kernel, the window is a tensor)

# %%
m = run_experiment("flex_sparsity_sweep", {**shape, "min_window": 32} if tiny else {})
print(render.tables.records_table(here(m), "sweep"))
print(render.flex.sparsity_claim(m))

# %% [markdown]
# ## What a BlockMask costs to build

# %%
m = run_experiment("flex_block_mask_cost", {"max_seq_len": 512} if tiny else {})
print(render.flex.block_mask_cost_table(here(m)))
print(render.flex.block_mask_cost_claim(m))
