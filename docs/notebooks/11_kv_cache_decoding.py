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
# Run the chapter's experiments in your own Python session, on your own hardware. Install the
# package first (`pip install -e .` in a clone of the repository); on a machine with a CUDA
# GPU the experiments use it automatically.
#
# Unlike the site, this notebook does not read the committed store: every number below is
# measured when you run it.

# %%
import inspect
import os

from attention_docs import render, run_experiment
from attention_docs.attention.decode import grouped_attention
from attention_docs.measurements import Sourced

# Small shapes keep this quick on a laptop CPU; the test suite sets ATTENTION_DOCS_TINY.
TINY = bool(os.environ.get("ATTENTION_DOCS_TINY"))
steps_params = (
    {"num_heads": 4, "head_dim": 16, "gqa_kv_heads": 2, "working_set_mb": 1, "cache_len": 64,
     "min_cache_len": 16, "max_cache_len": 64, "max_batch_size": 2}
    if TINY
    else {}
)  # fmt: skip


def here(m):
    return Sourced(m, "measured in this notebook", "-", base="")


# This machine's copy bandwidth and matmul rate: the roofline the decode steps sit under.
ceilings = here(
    run_experiment("machine_ceilings", {"matmul_size": 256, "copy_mb": 16} if TINY else {})
)


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
steps = here(run_experiment("decode_steps", steps_params))
print(render.decode.steps_table(steps, ceilings))
print(render.decode.bandwidth_claim(steps, ceilings))
print(render.decode.sdpa_ops_note(steps))
print(render.decode.cache_claim(steps, ceilings))
print(render.decode.batch_table(steps, ceilings))
print(render.decode.batch_claim(steps))

# %% [markdown]
# ## Prefill against decode, and one decode step in the profiler

# %%
pvd = here(
    run_experiment(
        "decode_prefill_vs_decode",
        {"num_heads": 4, "head_dim": 16, "num_kv_heads": 2, "prompt_len": 32} if TINY else {},
    )
)
print(render.decode.prefill_table(pvd))
print(render.decode.prefill_claim(pvd, ceilings))
print(render.decode.step_share_table(pvd))

# %% [markdown]
# ## On a GPU
#
# The H200's decode-step floors from its data sheet; on your own GPU, `steps` above holds its
# measurements.

# %%
print(render.decode.gpu_forecast([steps], pvd))

# %% [markdown]
# ## Try next
#
# Raise `max_cache_len` until every variant is bound by memory, switch `dtype` to
# `"bfloat16"`, or set `working_set_mb` to 1 and watch small caches get faster than memory
# allows: they are being read from the last-level cache.
