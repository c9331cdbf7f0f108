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
# # Memory: the N×N matrix — companion notebook
#
# Record every allocation of one naive forward, compare its peak with the memory model, and
# find the sequence length at which your device runs out. Install the package first
# (`pip install -e .` in a clone of the repository); with a CUDA GPU the experiments use it.
#
# Every number below is measured when you run it. On a CPU, `max_measured` caps the
# lengths that are really run: the model's prediction covers the rest. Raise it only as far
# as your free RAM allows.

# %%
import os

from attention_docs import render, run_experiment
from attention_docs.analytic.memory import max_seq_len, naive_peak
from attention_docs.measurements import Sourced

tiny = bool(os.environ.get("ATTENTION_DOCS_TINY"))
seq_len = 64 if tiny else 1024


def here(m):
    return Sourced(m, "measured in this notebook", "-", base="")


# %% [markdown]
# ## The allocation timeline of one forward

# %%
timeline = run_experiment("memory_timeline", {"seq_len": seq_len})
print(render.memory.memory_step_table(here(timeline)))
print(render.memory.allocation_claim(timeline))
print(render.memory.peak_claim(timeline))

# %% [markdown]
# ## Tensors and scratch
#
# The timeline is also profiled in the other dtype; allocations an op frees before it returns
# are scratch (oneDNN's bfloat16 matmul on CPUs with AVX-512 bf16 or AMX). Try
# `ONEDNN_MAX_CPU_ISA=AVX2` before starting Python to see the scratch disappear.

# %%
print(render.memory.dtype_table(here(timeline)))
print(render.memory.scratch_claim(timeline))

# %% [markdown]
# ## The memory model
#
# `naive_peak` gives the bytes live at the peak; `max_seq_len` the longest sequence that
# fits in a given amount of memory.

# %%
model = naive_peak(1, 4, seq_len, 64, "float32", causal=True)
print(model, model.peak_bytes)
print("longest seq_len in 16 GB:", max_seq_len(16 * 10**9, 1, 4, 64, "float32", causal=True))

# %% [markdown]
# ## Peak memory against seq_len

# %%
peak = run_experiment("memory_peak", {"start": 32, "max_measured": 128} if tiny else {})
print(render.memory.peak_table(here(peak)))
print(render.memory.oom_claim(peak))
