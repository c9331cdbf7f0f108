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
shape = (
    {"num_heads": 4, "head_dim": 16, "working_set_mb": 1}
    if TINY
    else {"num_heads": 16, "head_dim": 64, "working_set_mb": 64}
)


def here(m):
    return Sourced(m, "measured in this notebook", "-", base="")


# This machine's copy bandwidth and matmul rate: the roofline the decode steps sit under.
ceilings = run_experiment("machine_ceilings", {"matmul_size": 256, "copy_mb": 16} if TINY else {})


# %% [markdown]
# ## The code under study
#
# One query row per head against the cache; the query heads that share a k/v head are folded
# into rows, so each k/v head is read once.

# %%
print(inspect.getsource(grouped_attention))

# %% [markdown]
# ## Multi-head, grouped-query and multi-query attention
#
# Time per decode step (per layer), the bytes it must read, and where it sits against this
# machine's measured copy bandwidth and matmul rate.

# %%
variants = run_experiment(
    "decode_mha_gqa_mqa", {**shape, "gqa_kv_heads": 2, "cache_len": 64 if TINY else 4096}
)
print(render.tables.records_table(here(variants), "variants"))
print(render.decode.decode_variants_claim(variants))
print(render.decode.decode_bandwidth_claim(variants, ceilings))
print(render.decode.sdpa_ops_note(variants))

# %% [markdown]
# ## As the cache grows

# %%
sweep = run_experiment(
    "decode_cache_sweep",
    {**shape, "gqa_kv_heads": 2, "min_cache_len": 16, "max_cache_len": 64 if TINY else 32768},
)
print(render.tables.records_table(here(sweep), "cache_sweep"))
print(render.decode.cache_slope_claim(sweep, ceilings))

# %% [markdown]
# ## Batching

# %%
batch = run_experiment(
    "decode_batch_sweep",
    {
        **shape,
        "num_kv_heads": 2,
        "cache_len": 64 if TINY else 2048,
        "max_batch_size": 4 if TINY else 32,
    },
)
print(render.tables.records_table(here(batch), "batch_sweep"))
print(render.decode.batch_claim(batch, ceilings))

# %% [markdown]
# ## Prefill against decode, and one decode step in the profiler

# %%
pvd = run_experiment(
    "decode_prefill_vs_decode",
    {
        "num_heads": shape["num_heads"],
        "head_dim": shape["head_dim"],
        "num_kv_heads": 2,
        "prompt_len": 32 if TINY else 1024,
    },
)
print(render.tables.records_table(here(pvd), "prefill_vs_decode"))
print(render.decode.prefill_vs_decode_claim(pvd, ceilings))
print(render.tables.step_table(here(pvd)))

# %% [markdown]
# ## Try next
#
# Raise `cache_len` until every variant is bound by memory, switch `dtype` to `"bfloat16"`,
# or set `working_set_mb` to 1 and watch small caches get faster than memory allows: they are
# being read from the last-level cache.
