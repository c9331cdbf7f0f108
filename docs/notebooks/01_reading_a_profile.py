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
# # Reading a profile — companion notebook
#
# Run the chapter's experiments in your own Python session, on your own hardware. Install the
# package first (`pip install -e .` in a clone of the repository); on a machine with a CUDA
# GPU the experiments use it automatically.
#
# Unlike the site, this notebook does not read the committed store: every number below is
# measured when you run it. One difference from the site matters here: the site measures
# each experiment in a fresh process, while this notebook runs them one after another in
# yours — so the "cold" calls of `profile_first_calls` are only cold if it runs first.

# %%
import os
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from attention_docs import book, make_qkv, measure, naive_attention, render, run_experiment
from attention_docs.measurements import Sourced
from attention_docs.measurements.forward import GRIDS

# Small shapes keep this quick on a laptop CPU; the test suite sets ATTENTION_DOCS_TINY.
TINY = bool(os.environ.get("ATTENTION_DOCS_TINY"))
kind = "cuda" if torch.cuda.is_available() else "cpu"
# The shape must be one of the forward-time grid's (below): its first seq_len when tiny.
shape = {"seq_len": GRIDS[kind].teaching.seq_lens[0], "head_dim": 64} if TINY else {}

# Unprofiled forward times come from one experiment, `forward_times`, as on the site: it
# runs once, in a worker process, and is kept in ./notebook-measurements for the other
# notebooks (delete the folder to measure again).
book.configure(book.Settings(store=Path("notebook-measurements"), prefer=("local",)))
times = measure("forward_times", tiny=TINY)


def here(m):
    """Wrap a fresh Measurement so the renderers can caption it."""
    return Sourced(m, "measured in this notebook", "-", base="")


# %% [markdown]
# ## Why the first step lies
#
# Calls 1..N of the forward, every one profiled, then again with the forward warm.

# %%
first = run_experiment("profile_first_calls", {**shape, "calls": 4 if TINY else 8})
print(render.primer.first_calls(here(first), times))
print(render.primer.first_call_ops_table(here(first)))
print(render.primer.faults(here(first), times))

# %% [markdown]
# ## Self time, total time and the dispatch chain
#
# The settled forward's profile is `naive_steps`', as on the site.

# %%
naive = run_experiment("naive_steps", shape)
print(render.primer.dispatch_tree(here(naive), "attention.scores"))
print(render.primer.self_vs_total_claim(naive, "attention.scores"))
print(render.tables.op_table(here(naive), subject="naive (eager)"))

# %% [markdown]
# ## The same table, straight from torch
#
# `key_averages()` aggregates the recorded events by op name. This is the raw profiler API
# the chapter describes; the experiments wrap the same calls.

# %%
device = "cuda" if torch.cuda.is_available() else "cpu"
q, k, v = make_qkv(**({"seq_len": 32, "head_dim": 16} if TINY else {}), device=device)
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
for _ in range(3):  # warm up outside the profiler
    naive_attention(q, k, v, causal=True)
with profile(activities=activities, record_shapes=True) as prof:
    naive_attention(q, k, v, causal=True)
    if device == "cuda":
        torch.cuda.synchronize()
sort_key = "self_cuda_time_total" if device == "cuda" else "self_cpu_time_total"
print(prof.key_averages().table(sort_by=sort_key, row_limit=12))

# %% [markdown]
# ## Overhead-bound or work-bound?

# %%
sweep = run_experiment("op_size_sweep", {"max_log2": 10} if TINY else {})
print(render.primer.size_sweep_table(here(sweep)))
print(render.primer.size_sweep_claim(sweep))

# %% [markdown]
# ## What the profiler costs

# %%
overhead = run_experiment("profile_overhead", {**shape, "iterations": 3} if TINY else {})
print(render.primer.overhead(here(overhead), times))

# %% [markdown]
# ## Try next
#
# Run `profile_first_calls` first thing in a fresh kernel, then again: the second time, the
# forward is no longer cold. Raise `max_log2` of the size sweep until the tensors no longer
# fit in your CPU's last-level cache, and watch the achieved bandwidth fall.
