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

# A small shape keeps this quick on a laptop CPU; the test suite sets ATTENTION_DOCS_TINY.
tiny = bool(os.environ.get("ATTENTION_DOCS_TINY"))
shape = {"seq_len": 200, "num_heads": 2, "head_dim": 16} if tiny else {"seq_len": 2048}


def here(m):
    return Sourced(m, "measured in this notebook", "-", base="")


# %% [markdown]
# ## The mods under study

# %%
for mod in (flex.causal, flex.sliding_window, flex.alibi, flex.document):
    print(inspect.getsource(mod))

# %% [markdown]
# ## Four masks: compiled, unfused fallback, SDPA with a dense mask

# %%
m = run_experiment("flex_masks", {**shape, "window": 64 if tiny else 512})
print(render.flex.mask_table(here(m)))
print(render.flex.block_table(here(m)))
print(render.flex.mask_claims(m))
print(render.flex.fallback_warning(m))

# %% [markdown]
# ## Time against block sparsity (one compiled kernel, the window is a tensor)

# %%
m = run_experiment("flex_sparsity_sweep", {**shape, "min_window": 32 if tiny else 64})
print(render.records_table(here(m), "sweep"))
print(render.flex.sparsity_claim(m))

# %% [markdown]
# ## What a BlockMask costs to build

# %%
m = run_experiment("flex_block_mask_cost", {"max_seq_len": 512 if tiny else 8192})
print(render.flex.block_mask_cost_table(here(m)))
print(render.flex.block_mask_cost_claim(m))
