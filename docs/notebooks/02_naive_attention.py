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
# # Naive attention, step by step — companion notebook
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
import inspect

from attention_docs import book, measure, measure_each_device, naive_attention, render

book.for_notebook()
naive = measure("naive_steps")
times = measure("forward_times")  # unprofiled forward and step times, this machine
every_device = measure_each_device("forward_times")  # a GPU's entry, when the store has one
print(render.claims.finding(naive, every_device))

# %% [markdown]
# ## The code under study
#
# `naive_attention` runs the five steps, each inside a `record_function` range.

# %%
print(inspect.getsource(naive_attention))

# %% [markdown]
# ## Profile it
#
# `naive_steps` profiles the forward pass with a wait/warmup/active schedule; its
# `Measurement` is plain data you can inspect (`naive.measurement`), save as JSON or render.

# %%
print(render.tables.step_table(naive, times=times))
m = naive.measurement
print(render.claims.dominant_step(m))
print(render.claims.profiled_vs_unprofiled(m, times))

# %% [markdown]
# ## On a GPU
#
# The data sheet's forecast for each step (in Jupyter, wrap it in `IPython.display.Markdown`).

# %%
print(render.claims.gpu_forecast(every_device))

# %% [markdown]
# ## Four ways to apply the mask
#
# The same causal attention, with the mask rebuilt each call, built once and applied with
# `masked_fill`, applied in place with `masked_fill_`, or added as a float bias.

# %%
print(render.claims.mask_step_claim(m, times))
variants = measure("naive_mask_variants")
print(render.variants.mask_variants(variants))

# %% [markdown]
# ## float32 or bfloat16

# %%
dtypes = measure("naive_dtypes")
print(render.variants.dtypes(dtypes))

# %% [markdown]
# ## Which step dominates at which shape

# %%
shares = measure("naive_step_shares")
print(render.variants.step_shares_claim(shares.measurement, naive.measurement))

# %% [markdown]
# In Jupyter, show the figure with
# `IPython.display.HTML(render.variants.step_shares_figure(shares, naive))`.
#
# ## Try next
#
# Measure your own shapes with `run_experiment` (in this process; it stores nothing):
# `run_experiment("naive_steps", {"seq_len": 256, "causal": False})`, or
# `{"dtype": "bfloat16"}`, and watch which step dominates. `python -m attention_docs list`
# prints every experiment's parameters.
