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
from attention_docs import book, measure, measure_each_device, render, show
from attention_docs.analytic.memory import max_seq_len, naive_peak

book.for_notebook()
timeline, peak = measure("memory_timeline"), measure("memory_peak")
show(render.memory.finding(timeline))

# %% [markdown]
# ## The allocation timeline of one forward

# %%
show(render.memory.memory_step_table(timeline))
show(render.memory.allocation_claim(timeline.measurement))
show(render.memory.peak_claim(timeline.measurement))
show(render.memory.memory_timeline_figure(timeline))

# %% [markdown]
# ## Tensors and scratch
#
# The timeline is also profiled in the other dtype; allocations an op frees before it returns
# are scratch (oneDNN's bfloat16 matmul on CPUs with AVX-512 bf16 or AMX). Set
# `ONEDNN_MAX_CPU_ISA=AVX2` before starting Python and measure again
# (`ATTENTION_DOCS_MODE=refresh`) to see the scratch disappear.

# %%
show(render.memory.dtype_table(timeline))
show(render.memory.scratch_claim(timeline.measurement))

# %% [markdown]
# ## The memory model
#
# `naive_peak` gives the bytes live at the peak; `max_seq_len` the longest sequence that
# fits in a given amount of memory. Both are arithmetic: try other shapes.

# %%
model = naive_peak(1, 4, 1024, 64, "float32", causal=True)
print(model, model.peak_bytes)
print("longest seq_len in 16 GB:", max_seq_len(16 * 10**9, 1, 4, 64, "float32", causal=True))

# %% [markdown]
# ## Peak memory against seq_len

# %%
show(render.memory.peak_table(peak))
show(render.memory.oom_claim(peak.measurement))

# %% [markdown]
# ## On a GPU

# %%
show(render.memory.forecast(measure_each_device("memory_timeline")))

# %% [markdown]
# ## Try next
#
# Push `memory_peak` toward the wall with
# `run_experiment("memory_peak", {"max_measured": 8192})` (in this process; it stores
# nothing), as far as your free RAM allows; `python -m attention_docs list` prints every
# experiment's parameters.
