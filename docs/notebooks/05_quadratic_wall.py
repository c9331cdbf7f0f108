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
# # The quadratic wall — companion notebook
#
# Sweep naive attention over seq_len, over how tokens are split into sequences and heads,
# and over head_dim, on your own hardware. Install the package first (`pip install -e .`
# in a clone of the repository); with a CUDA GPU the experiments use it.

# %%
import os

from attention_docs import render, run_experiment
from attention_docs.measurements import Sourced

tiny = bool(os.environ.get("ATTENTION_DOCS_TINY"))


def here(m):
    return Sourced(m, "measured in this notebook", "-", base="")


# %% [markdown]
# ## Four sweeps, one experiment
#
# Every distinct shape of the four sweeps is measured once and timed in interleaved rounds.

# %%
small = {"max_seq_len": 64, "tokens": 64, "model_dim": 32, "seq_len": 32, "max_head_dim": 64}
wall = here(run_experiment("wall", small if tiny else {}))

# %% [markdown]
# ## Doubling seq_len

# %%
print(render.wall.sweep_table(wall, "seq_len"))
print(render.wall.seq_len_claim(wall))
print(render.wall.step_shares_claim(wall, "seq_len"))

# %% [markdown]
# ## The same tokens, split differently

# %%
print(render.wall.tokens_claim(wall))
print(render.wall.heads_claim(wall))

# %% [markdown]
# ## head_dim at a fixed seq_len

# %%
print(render.wall.head_dim_claim(wall))

# %% [markdown]
# ## The wall on a GPU (a forecast from the data sheet)

# %%
print(render.wall.forecast())
