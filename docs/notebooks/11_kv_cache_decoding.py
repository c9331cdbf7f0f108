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
# # Decoding with a KV cache — companion notebook
#
# Run the chapter's experiments in your own Python session, on your own hardware: on a
# machine with a CUDA GPU they use it.
#
# The first cell of the notebook you download from the site installs the package where it
# is missing (from the wheel linked on the notebook's page, put beside the notebook); in a
# clone, `pip install -e .` does it.
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
import inspect

from attention_docs import book, measure, measure_each_device, render, show
from attention_docs.attention.decode import grouped_attention

book.for_notebook()
steps = measure("decode_steps")
pvd = measure("decode_prefill_vs_decode")
# This machine's copy bandwidth and matmul rate: the roofline the decode steps sit under.
ceilings = measure("machine_ceilings")
show(render.decode.finding(steps, ceilings))

# %% [markdown]
# ## The code under study
#
# One query row per head against the cache; the query heads that share a k/v head are folded
# into rows, so each k/v head is read once.

# %%
print(inspect.getsource(grouped_attention))

# %% [markdown]
# ## Every decode step, timed once
#
# Multi-head, grouped-query and multi-query attention on every path at one base point, the
# cache growing at batch 1, the batch growing for grouped-query attention: one experiment,
# every point timed in the same interleaved rounds.

# %%
show(render.decode.steps_table(steps, ceilings))
show(render.decode.bandwidth_claim(steps, ceilings))
show(render.decode.repeat_kv_claim(steps))
show(render.decode.sdpa_ops_note(steps))
show(render.decode.cache_claim(steps, ceilings))
show(render.decode.batch_table(steps, ceilings))
show(render.decode.batch_claim(steps))

# %% [markdown]
# ## Prefill against decode, and one decode step in the profiler

# %%
show(render.decode.prefill_table(pvd))
show(render.decode.prefill_claim(pvd, ceilings))
show(render.decode.step_share_table(pvd))

# %% [markdown]
# ## On a GPU
#
# The H200's decode-step floors from its data sheet; on your own GPU, `steps` above holds its
# measurements.

# %%
show(render.decode.gpu_forecast(measure_each_device("decode_steps"), pvd))

# %% [markdown]
# ## Try next
#
# With `run_experiment("decode_steps", {...})` (in this process; it stores nothing) raise
# `max_cache_len` until every variant is bound by memory, switch `dtype` to `"bfloat16"`, or
# set `working_set_mb` to 1 and watch small caches get faster than memory allows: they are
# being read from the last-level cache.
