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
import inspect

from attention_docs import book, measure, measure_each_device, naive_attention, render, show

book.for_notebook()
naive = measure("naive_steps")
times = measure("forward_times")  # unprofiled forward and step times, this machine
every_device = measure_each_device("forward_times")  # a GPU's entry, when the store has one
show(render.claims.finding(naive))

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
show(render.steps.step_table(naive, times=times))
m = naive.measurement
show(render.claims.dominant_step(m))
show(render.claims.profiled_vs_unprofiled(m, times))

# %% [markdown]
# ## On a GPU
#
# The data sheet's forecast for each step.

# %%
show(render.claims.gpu_forecast(every_device))

# %% [markdown]
# ## Four ways to apply the mask
#
# The same causal attention, with the mask rebuilt each call, built once and applied with
# `masked_fill`, applied in place with `masked_fill_`, or added as a float bias.

# %%
show(render.claims.mask_step_claim(m, times))
variants = measure("naive_mask_variants")
show(render.variants.mask_variants(variants))

# %% [markdown]
# ## float32 or bfloat16

# %%
dtypes = measure("naive_dtypes")
show(render.variants.dtypes(dtypes))

# %% [markdown]
# ## Which step dominates at which shape

# %%
shares = measure("naive_step_shares")
show(render.variants.step_shares_figure(shares, naive))
show(render.variants.step_shares_claim(shares.measurement, naive.measurement))

# %% [markdown]
# ## Try next
#
# Measure your own shapes with `run_experiment` (in this process; it stores nothing):
# `run_experiment("naive_steps", {"seq_len": 256, "causal": False})`, or
# `{"dtype": "bfloat16"}`, and watch which step dominates. `python -m attention_docs list`
# prints every experiment's parameters.
