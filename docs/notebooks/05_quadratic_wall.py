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
# ## Doubling seq_len

# %%
wall = run_experiment("wall_seq_len", {"max_seq_len": 64} if tiny else {})
print(render.wall.sweep_table(here(wall), "seq_len", ["seq_len", "time_us", "peak_bytes", "status"]))
print(render.wall.seq_len_claim(wall))
print(render.wall.step_shares_claim(wall, "seq_len", "seq_len"))

# %% [markdown]
# ## The same tokens, split differently

# %%
split = run_experiment(
    "wall_batch_heads", {"tokens": 64, "model_dim": 32, "seq_len": 32} if tiny else {}
)
print(render.wall.tokens_claim(split))
print(render.wall.heads_claim(split))

# %% [markdown]
# ## head_dim at a fixed seq_len

# %%
dims = run_experiment("wall_head_dim", {"seq_len": 32, "max_head_dim": 64} if tiny else {})
print(render.wall.head_dim_claim(dims))
