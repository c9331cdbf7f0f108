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
# # Naive attention, step by step — companion notebook
#
# Run the chapter's experiment in your own Python session, on your own hardware. Install the
# package first (`pip install -e .` in a clone of the repository); on a machine with a CUDA
# GPU the experiment uses it automatically.
#
# Unlike the site, this notebook does not read the committed store: every number below is
# measured when you run it.

# %%
import inspect
import os
from pathlib import Path

import torch

from attention_docs import book, measure, naive_attention, render, run_experiment
from attention_docs.measurements import Sourced
from attention_docs.measurements.forward import GRIDS

# A small shape keeps this quick on a laptop CPU; the test suite sets ATTENTION_DOCS_TINY.
# Either is one of the forward-time grid's shapes, so that unprofiled times exist for it.
TINY = bool(os.environ.get("ATTENTION_DOCS_TINY"))
kind = "cuda" if torch.cuda.is_available() else "cpu"
seq_len = GRIDS[kind].teaching.seq_lens[0] if TINY else 1024

# Unprofiled forward times come from one experiment, `forward_times`, as on the site: it
# runs once, in a worker process, and is kept in ./notebook-measurements for the other
# notebooks (delete the folder to measure again).
book.configure(book.Settings(store=Path("notebook-measurements"), prefer=("local",)))
times = measure("forward_times", tiny=TINY)

# %% [markdown]
# ## The code under study
#
# `naive_attention` runs the five steps, each inside a `record_function` range.

# %%
print(inspect.getsource(naive_attention))

# %% [markdown]
# ## Measure it
#
# `run_experiment` profiles the forward pass with a wait/warmup/active schedule and returns a
# `Measurement`: plain data you can inspect, save as JSON or render.

# %%
m = run_experiment("naive_steps", {"seq_len": seq_len})
here = Sourced(m, "measured in this notebook", "-", base="")
print(render.tables.step_table(here, times=times))

# %%
print(render.claims.dominant_step(m))
print(render.claims.profiled_vs_unprofiled(m, times))
print(render.claims.mask_step_claim(m, times))

# %% [markdown]
# ## On a GPU
#
# The data sheet's forecast for each step (in Jupyter, wrap it in `IPython.display.Markdown`).

# %%
print(render.claims.gpu_forecast([times]))

# %% [markdown]
# ## Try next
#
# Change `seq_len`, pass `{"causal": False}` or `{"dtype": "bfloat16"}`, and watch which step
# dominates.

# %% [markdown]
# ## Four ways to apply the mask
#
# The same causal attention, with the mask rebuilt each call, built once and applied with
# `masked_fill`, applied in place with `masked_fill_`, or added as a float bias.

# %%
variants = run_experiment("naive_mask_variants", {"seq_len": seq_len})
print(render.variants.mask_variants(Sourced(variants, "measured in this notebook", "-", base="")))

# %% [markdown]
# ## float32 or bfloat16

# %%
dtypes = run_experiment("naive_dtypes", {"seq_len": seq_len})
print(render.variants.dtypes(Sourced(dtypes, "measured in this notebook", "-", base="")))

# %% [markdown]
# ## Which step dominates at which shape

# %%
# The step shares of `m` (naive_steps) are its own shape's point of the sweep.
shapes = "32x16,64x64" if TINY else "64x64,256x64,1024x16,1024x256"
shares = run_experiment("naive_step_shares", {"shapes": shapes})
print(render.variants.step_shares_claim(shares, m))
