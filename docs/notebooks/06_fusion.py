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
# Every experiment compiles in this process (seconds to tens of seconds each); the
# compile-cost experiment empties its own cache folders for the cold compile. Every number
# below is measured when you run it.

# %%
import inspect
import os

from attention_docs import render, run_experiment
from attention_docs.attention.compiled import compiled_attention
from attention_docs.measurements import Sourced

# The test suite sets ATTENTION_DOCS_TINY: the forward-time table then times only the
# smallest shapes of its grid (seq_len 128 on a CPU), and the experiments run at that size.
tiny = bool(os.environ.get("ATTENTION_DOCS_TINY"))
shape = {"seq_len": 128} if tiny else {}


def here(m):
    return Sourced(m, "measured in this notebook", "-", base="")


# %% [markdown]
# ## The code under study

# %%
print(inspect.getsource(compiled_attention))

# %% [markdown]
# ## The forward-time table
#
# Every forward time below comes from one experiment that times every implementation at
# every shape of the device's grid, in interleaved rounds (minutes; seconds when tiny).

# %%
times = here(run_experiment("forward_times", {"tiny": tiny}))

# %% [markdown]
# ## What Inductor fused, and what the compile costs cold and warm
#
# SDPA's peak memory, for the comparison, is the SDPA chapter's experiment at the same shape.

# %%
m = run_experiment("fusion_kernels", shape)
backends = here(run_experiment("sdpa_backends", shape))
print(render.fusion.finding(m, times, backends.measurement))
print(render.fusion.work_table(here(m), "compiled"))
print(render.fusion.ranges_note(m))
print(render.fusion.compile_table(here(m), times))
print(render.fusion.speed_memory_table(here(m), times, backends))

# %% [markdown]
# ## A new shape: guards and a recompile

# %%
m = run_experiment("fusion_recompile", shape)
print(render.fusion.recompile_table(here(m)))
print(render.fusion.recompile_claim(m))

# %% [markdown]
# ## On a GPU: what fusion saves (a forecast from the data sheet)

# %%
print(render.fusion.fusion_forecast([times]))
