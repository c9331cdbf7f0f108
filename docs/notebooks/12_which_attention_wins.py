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
# # Which attention wins where — companion notebook
#
# Every implementation the site teaches, timed on your own hardware over the grid of shapes
# the site uses for your kind of device. On a machine with a CUDA GPU the map includes SDPA's
# fused GPU backends and this site's Triton kernel.
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
from attention_docs import book, measure, measure_each_device, render, show

book.for_notebook()
times = measure("forward_times")
train = measure("train_times")
steps = measure("decode_steps")
show(render.winners.finding(times))
show(render.winners.model_claim(times, train, steps))

# %% [markdown]
# ## The forward-time table and its maps
#
# Every implementation at every shape of your device's grid, timed without the profiler in
# interleaved rounds, and a training step at the map's shapes.

# %%
show(render.winners.map_figure(times))
show(render.winners.trend_claim(times))
show(render.winners.times_tabs(times, train))
show(render.winners.not_run(times, train))

# %% [markdown]
# ## On a GPU

# %%
everywhere = measure_each_device("forward_times")
show(render.winners.gpu_forecast(everywhere))
show(render.winners.devices_claim(everywhere))

# %% [markdown]
# ## What each trick removed

# %%
summary = measure("winners_summary")
show(render.winners.summary_table(summary, times))

# %% [markdown]
# ## Try next
#
# Time your own shapes with `run_experiment("forward_times", {"tiny": True})` (in this
# process; it stores nothing; the smallest shapes of your device's grid), or run
# `python -m attention_docs list` for every experiment's parameters.
