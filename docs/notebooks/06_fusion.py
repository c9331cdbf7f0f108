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
from attention_docs.attention.compiled import compiled_attention

book.for_notebook()
fk, backends = measure("fusion_kernels"), measure("sdpa_backends")
times_everywhere = measure_each_device("forward_times")
times = times_everywhere[0]  # this machine's (or, frozen, the store's first) forward times
show(render.fusion.finding(fk, times, backends.measurement))

# %% [markdown]
# ## The code under study

# %%
print(inspect.getsource(compiled_attention))

# %% [markdown]
# ## What Inductor made of the five steps

# %%
show(render.fusion.work_table(fk, "eager"))
show(render.fusion.work_table(fk, "compiled"))
show(render.fusion.ranges_note(fk.measurement))

# %% [markdown]
# ## What compiling costs, cold and warm

# %%
show(render.fusion.compile_table(fk, times))

# %% [markdown]
# ## A new shape: guards and a recompile

# %%
rc = measure("fusion_recompile")
show(render.fusion.recompile_table(rc))
show(render.fusion.recompile_claim(rc.measurement))

# %% [markdown]
# ## Speed and memory: eager, compiled, SDPA

# %%
show(render.fusion.speed_memory_table(fk, times, backends))

# %% [markdown]
# ## On a GPU: what fusion saves (a forecast from the data sheet)

# %%
show(render.fusion.fusion_forecast(times_everywhere))

# %% [markdown]
# ## Try next
#
# Compile at another shape with `run_experiment("fusion_kernels", {"seq_len": 256})` (in
# this process; it stores nothing) and read the generated kernels' names in the table; set
# `TORCH_LOGS=output_code` before starting Python to see Inductor's source.
