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
# Run the chapter's experiments in your own Python session, on your own hardware. Install the
# package first (`pip install -e .` in a clone of the repository); on a machine with a CUDA
# GPU the experiments use it automatically.
#
# Every experiment is fetched with `measure`, exactly as the chapter does: from the site's
# store (`docs/measurements` in your clone) when it holds an entry for this machine, and
# otherwise measured here, in a fresh worker process, and added to it — so the numbers below
# are your hardware's. Chapter-sized shapes take minutes on a laptop CPU the first time and
# seconds afterwards. `ATTENTION_DOCS_MODE=frozen` never measures: it shows the site's own
# entries, each captioned with the device that measured it (the test suite runs it so).

# %%
from attention_docs import book, measure, measure_each_device, render
from attention_docs.analytic.memory import max_seq_len, naive_peak

book.for_notebook()
timeline, peak = measure("memory_timeline"), measure("memory_peak")
print(render.memory.finding(timeline.measurement))

# %% [markdown]
# ## The allocation timeline of one forward

# %%
print(render.memory.memory_step_table(timeline))
print(render.memory.allocation_claim(timeline.measurement))
print(render.memory.peak_claim(timeline.measurement))

# %% [markdown]
# In Jupyter, display the timeline with
# `IPython.display.HTML(render.memory.memory_timeline_figure(timeline))`.
#
# ## Tensors and scratch
#
# The timeline is also profiled in the other dtype; allocations an op frees before it returns
# are scratch (oneDNN's bfloat16 matmul on CPUs with AVX-512 bf16 or AMX). Set
# `ONEDNN_MAX_CPU_ISA=AVX2` before starting Python and measure again
# (`ATTENTION_DOCS_MODE=refresh`) to see the scratch disappear.

# %%
print(render.memory.dtype_table(timeline))
print(render.memory.scratch_claim(timeline.measurement))

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
print(render.memory.peak_table(peak))
print(render.memory.oom_claim(peak.measurement))

# %% [markdown]
# ## On a GPU

# %%
print(render.memory.forecast(measure_each_device("memory_timeline")))

# %% [markdown]
# ## Try next
#
# Push `memory_peak` toward the wall with
# `run_experiment("memory_peak", {"max_measured": 8192})` (in this process; it stores
# nothing), as far as your free RAM allows; `python -m attention_docs list` prints every
# experiment's parameters.
