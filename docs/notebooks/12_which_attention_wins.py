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
# Time every implementation the site teaches on your own hardware, over the grid of shapes
# the site uses for your kind of device. On a machine with a CUDA GPU the map includes SDPA's
# fused GPU backends and this site's Triton kernel.

# %%
import os

from attention_docs import render, run_experiment
from attention_docs.measurements import Sourced

# The test suite sets ATTENTION_DOCS_TINY: the table then times only the smallest shapes of
# the device's grid (seq_len 128 and head_dim 64 on a CPU), which keeps the run short.
tiny = bool(os.environ.get("ATTENTION_DOCS_TINY"))


def here(m):
    return Sourced(m, "measured in this notebook", "-", base="")


# %% [markdown]
# ## The forward-time table and its maps
#
# Every implementation at every shape of your device's grid, timed without the profiler in
# interleaved rounds (minutes on a CPU), and a training step at the map's shapes.

# %%
times = here(run_experiment("forward_times", {"tiny": tiny}))
small = {"seq_lens": "32", "dtypes": "float32", "num_heads": 2, "head_dim": 16}
train = here(run_experiment("train_times", small if tiny else {}))
print(render.winners.trend_claim(times))
print(render.winners.times_tabs(times, train))
print(render.winners.not_run(times, train))
print(render.winners.gpu_forecast([times]))

# %% [markdown]
# ## What each trick removed

# %%
summary = run_experiment("winners_summary", {"seq_len": 128} if tiny else {})
print(render.winners.summary_table(here(summary), times))
