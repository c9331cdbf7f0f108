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
# # Fusion with torch.compile — companion notebook
#
# Run the chapter's experiments in your own Python session, on your own hardware. Install
# the package first (`pip install -e .` in a clone of the repository); on a machine with a
# CUDA GPU the experiments use it automatically.
#
# Every experiment compiles in this process, so the first one pays the cold compile (seconds
# to tens of seconds); the others find Inductor's caches warm. Every number below is measured
# when you run it.

# %%
import inspect
import os

from attention_docs import render, run_experiment
from attention_docs.attention.compiled import compiled_attention
from attention_docs.measurements import Sourced

# A small shape keeps this quick on a laptop CPU; the test suite sets ATTENTION_DOCS_TINY.
tiny = bool(os.environ.get("ATTENTION_DOCS_TINY"))
shape = {"seq_len": 32, "num_heads": 2, "head_dim": 16} if tiny else {"seq_len": 1024}

# %% [markdown]
# ## The code under study

# %%
print(inspect.getsource(compiled_attention))

# %% [markdown]
# ## What Inductor fused

# %%
m = run_experiment("fusion_kernels", shape)
here = Sourced(m, "measured in this notebook", "-", base="")
print(render.fusion.compiled_work_table(here))
print(render.fusion.fusion_summary(m))
print(render.fusion.ranges_note(m))
print(render.fusion.compile_cost(m))

# %% [markdown]
# ## A new shape: guards and a recompile

# %%
m = run_experiment("fusion_recompile", shape)
print(render.fusion.recompile_table(Sourced(m, "measured in this notebook", "-", base="")))
print(render.fusion.recompile_claim(m))

# %% [markdown]
# ## Speed and memory against eager and SDPA

# %%
m = run_experiment("fusion_speed_memory", shape)
print(render.fusion.speed_memory_table(Sourced(m, "measured in this notebook", "-", base="")))
print(render.fusion.speed_claim(m))
print(render.fusion.speed_memory_claim(m))
