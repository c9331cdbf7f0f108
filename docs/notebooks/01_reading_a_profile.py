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
# Run the chapter's experiments in your own Python session, on your own hardware: on a
# machine with a CUDA GPU they use it. The first cell of the notebook you download from the
# site installs the package where it is missing (from the wheel linked on the notebook's
# page, put beside the notebook); in a clone, `pip install -e .` does it.
#
# Every experiment is fetched with `measure`, exactly as the chapter does, and measured on
# this machine into `measurements/` beside the notebook, a store of its own (a clone's
# committed store is never written): chapter-sized shapes take minutes on a laptop CPU the
# first time and seconds afterwards. A busy machine is handled as the site's build handles
# it: a measurement taken while other work competed is taken again once the machine calms,
# and kept, flagged in its caption, if it is busy again. `ATTENTION_DOCS_STORE` names another
# store (a clone's `docs/measurements`), and `ATTENTION_DOCS_MODE=frozen` only reads it: the
# site's own entries, each captioned with the device that measured it.

# %%
import os

import torch
from torch.profiler import ProfilerActivity, profile

from attention_docs import book, make_qkv, measure, naive_attention, render, show

book.for_notebook()
first = measure("profile_first_calls")
overhead = measure("profile_overhead")
sweep = measure("op_size_sweep")
naive = measure("naive_steps")
times = measure("forward_times")  # the site's one source of unprofiled forward times
show(render.primer.finding(first))

# %% [markdown]
# ## Why the first step lies
#
# Calls 1..N of the forward, every one profiled, then again with the forward warm.

# %%
show(render.primer.first_calls(first))
show(render.primer.first_call_ops_table(first))
show(render.primer.faults(first, times))

# %% [markdown]
# ## Self time, total time and the dispatch chain
#
# The settled forward's profile is `naive_steps`', as on the site.

# %%
show(render.primer.dispatch_tree(naive, "attention.scores"))
show(render.primer.self_vs_total_claim(naive.measurement, "attention.scores"))
show(render.steps.op_table(naive, subject="naive (eager)"))

# %% [markdown]
# ## The same table, straight from torch
#
# `key_averages()` aggregates the recorded events by op name. This is the raw profiler API
# the chapter describes; the experiments wrap the same calls.

# %%
device = "cuda" if torch.cuda.is_available() else "cpu"
# Small shapes keep this quick; the test suite sets ATTENTION_DOCS_TINY.
tiny = bool(os.environ.get("ATTENTION_DOCS_TINY"))
q, k, v = make_qkv(**({"seq_len": 32, "head_dim": 16} if tiny else {}), device=device)
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
show(render.primer.size_sweep_table(sweep))
show(render.primer.size_sweep_claim(sweep.measurement))

# %% [markdown]
# ## What the profiler costs

# %%
show(render.primer.overhead(overhead, times))

# %% [markdown]
# ## Try next
#
# Run your own sizes with `run_experiment` (it measures in this process and stores nothing):
# `run_experiment("op_size_sweep", {"max_log2": 28})` goes past your CPU's last-level cache,
# and the achieved bandwidth falls to main memory's. `run_experiment("profile_first_calls")`
# first thing in a fresh kernel, then again: the second time the forward is no longer cold.
# `python -m attention_docs list` prints every experiment's parameters.
