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
# # Cost model first — companion notebook
#
# Measure your machine's ceilings, put naive attention's five steps on its roofline, and see
# which bound each step hits. Install the package first (`pip install -e .` in a clone of the
# repository); on a machine with a CUDA GPU the experiments use it automatically. Every
# number below is measured when you run it.

# %%
import os
from pathlib import Path

import torch

from attention_docs import book, measure, render, run_experiment, step_costs
from attention_docs.measurements import Sourced
from attention_docs.measurements.forward import GRIDS

# Small sizes keep this quick on a laptop CPU; the test suite sets ATTENTION_DOCS_TINY.
TINY = bool(os.environ.get("ATTENTION_DOCS_TINY"))
kind = "cuda" if torch.cuda.is_available() else "cpu"
ceiling_sizes = {"matmul_size": 128, "copy_mb": 4} if TINY else {}
# The steps' shape must be one of the forward-time grid's: its first seq_len when tiny.
shape = {"seq_len": GRIDS[kind].teaching.seq_lens[0]} if TINY else {}

# Unprofiled step times come from one experiment, `forward_times`, as on the site: it runs
# once, in a worker process, and is kept in ./notebook-measurements for the other notebooks
# (delete the folder to measure again).
book.configure(book.Settings(store=Path("notebook-measurements"), prefer=("local",)))
times = measure("forward_times", tiny=TINY)


def here(m):
    """Wrap a fresh Measurement so the renderers can caption it."""
    return Sourced(m, "measured in this notebook", "-", base="")


# %% [markdown]
# ## The cost model, without measuring anything
#
# `step_costs` is plain arithmetic: try other shapes and dtypes.

# %%
for cost in step_costs(1, 4, 1024, 64, "bfloat16", causal=True):
    print(
        f"{cost.label:24} {cost.flops:>14,.0f} FLOPs {cost.bytes:>14,.0f} B {cost.intensity:8.3f} FLOP/B"
    )

# %% [markdown]
# ## This machine's ceilings, and its per-call floor

# %%
ceilings = run_experiment("machine_ceilings", ceiling_sizes)
print(render.roofline.ceilings_table(here(ceilings)))
sweep = run_experiment("op_size_sweep", {"max_log2": 10} if TINY else {})

# %% [markdown]
# ## The five steps on the roofline
#
# Their structure from `naive_steps`' profile, their times from `forward_times`.

# %%
naive = run_experiment("naive_steps", shape)
print(render.roofline.costs(here(naive)))
print(render.roofline.ceilings_claim(naive, ceilings, times))
print(render.roofline.bound_rules(naive, ceilings, times, sweep))
print(render.roofline.verdicts(here(naive), ceilings, times, sweep))
print(render.roofline.finding(here(naive), ceilings, times, sweep, [times]))

# %% [markdown]
# In Jupyter, display the figure with
# `IPython.display.HTML(render.roofline.roofline_figure(here(naive), ceilings, times, sweep))`.
#
# ## On a GPU
#
# The same steps on an H200's roofline, from its data sheet.

# %%
print(render.roofline.gpu_forecast([times]))

# %% [markdown]
# ## Try next
#
# Raise `seq_len` until the matmuls cross the ridge (or find that they never can), and switch
# `dtype` to `"bfloat16"` to halve every step's bytes.
