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
# Every experiment is fetched with `measure`, exactly as the chapter does: from the site's
# store (`docs/measurements` in your clone) when it holds an entry for this machine, and
# otherwise measured here, in a fresh worker process, and added to it — so the numbers below
# are your hardware's. Chapter-sized shapes take minutes on a laptop CPU the first time and
# seconds afterwards. `ATTENTION_DOCS_MODE=frozen` never measures: it shows the site's own
# entries, each captioned with the device that measured it (the test suite runs it so).

# %%
import inspect

from attention_docs import book, measure, measure_each_device, render
from attention_docs.attention.compiled import compiled_attention

book.for_notebook()
fk, backends = measure("fusion_kernels"), measure("sdpa_backends")
times_everywhere = measure_each_device("forward_times")
times = times_everywhere[0]  # this machine's (or, frozen, the store's first) forward times
print(render.fusion.finding(fk.measurement, times, backends.measurement))

# %% [markdown]
# ## The code under study

# %%
print(inspect.getsource(compiled_attention))

# %% [markdown]
# ## What Inductor made of the five steps

# %%
print(render.fusion.work_table(fk, "eager"))
print(render.fusion.work_table(fk, "compiled"))
print(render.fusion.ranges_note(fk.measurement))

# %% [markdown]
# ## What compiling costs, cold and warm

# %%
print(render.fusion.compile_table(fk, times))

# %% [markdown]
# ## A new shape: guards and a recompile

# %%
rc = measure("fusion_recompile")
print(render.fusion.recompile_table(rc))
print(render.fusion.recompile_claim(rc.measurement))

# %% [markdown]
# ## Speed and memory: eager, compiled, SDPA

# %%
print(render.fusion.speed_memory_table(fk, times, backends))

# %% [markdown]
# ## On a GPU: what fusion saves (a forecast from the data sheet)

# %%
print(render.fusion.fusion_forecast(times_everywhere))

# %% [markdown]
# ## Try next
#
# Compile at another shape with `run_experiment("fusion_kernels", {"seq_len": 256})` (in
# this process; it stores nothing) and read the generated kernels' names in the table; set
# `TORCH_LOGS=output_code` before starting Python to see Inductor's source.
