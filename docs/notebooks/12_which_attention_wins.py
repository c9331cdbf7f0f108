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
# # Which attention wins where — companion notebook
#
# Time every implementation the site teaches on your own hardware, over a grid of shapes you
# choose. On a machine with a CUDA GPU the map includes SDPA's fused GPU backends and this
# site's Triton kernel.

# %%
import os

from attention_docs import render, run_experiment
from attention_docs.measurements import Sourced

# The test suite sets ATTENTION_DOCS_TINY: a one-cell grid then keeps the run short.
tiny = bool(os.environ.get("ATTENTION_DOCS_TINY"))
grid = {"seq_lens": "64", "head_dims": "16"} if tiny else {"seq_lens": "256,1024,4096"}

# %%
m = run_experiment("winners_map", grid)
here = Sourced(m, "measured in this notebook", "-", base="")
print(render.winners_claim(m))
print(render.times_table(here))

# %% [markdown]
# ## What each trick removed

# %%
summary = run_experiment("winners_summary", {"seq_len": 64, "head_dim": 16} if tiny else {})
print(render.summary_table(Sourced(summary, "measured in this notebook", "-", base="")))
