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
# ## Four masks: compiled, unfused fallback, SDPA with a dense mask; time against sparsity;
# ## one profiled step

# %%
fm = here(run_experiment("flex_masks", {**shape, "window": 64, "min_window": 32} if tiny else {}))
print(render.flex.finding(fm, here(times)))
print(render.flex.ran(fm))
print(render.flex.versus_sdpa_table(here(times)))
print(render.flex.mask_table(fm, here(times)))
print(render.flex.block_table(fm))
print(render.flex.sparsity_table(fm))
print(render.flex.fallback_warning(fm.measurement))

# %% [markdown]
# ## What a BlockMask costs to build

# %%
fc = here(run_experiment("flex_block_mask_cost", {"max_seq_len": 512} if tiny else {}))
print(render.flex.cost_table(fc))
