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
# fused GPU backends and this site's Triton kernel. Install the package first
# (`pip install -e .` in a clone of the repository).
#
# Every experiment is fetched with `measure`, exactly as the chapter does: from the site's
# store (`docs/measurements` in your clone) when it holds an entry for this machine, and
# otherwise measured here, in a fresh worker process, and added to it — so the numbers below
# are your hardware's. Chapter-sized shapes take minutes on a laptop CPU the first time and
# seconds afterwards. `ATTENTION_DOCS_MODE=frozen` never measures: it shows the site's own
# entries, each captioned with the device that measured it (the test suite runs it so).

# %%
from attention_docs import book, measure, measure_each_device, render

book.for_notebook()
times = measure("forward_times")
train = measure("train_times")
steps = measure("decode_steps")
print(render.winners.finding(times, train, steps))

# %% [markdown]
# ## The forward-time table and its maps
#
# Every implementation at every shape of your device's grid, timed without the profiler in
# interleaved rounds, and a training step at the map's shapes. In Jupyter, display the map
# with `IPython.display.HTML(render.winners.map_figure(times))`.

# %%
print(render.winners.trend_claim(times))
print(render.winners.times_tabs(times, train))
print(render.winners.not_run(times, train))

# %% [markdown]
# ## On a GPU

# %%
everywhere = measure_each_device("forward_times")
print(render.winners.gpu_forecast(everywhere))
print(render.winners.devices_claim(everywhere))

# %% [markdown]
# ## What each trick removed

# %%
summary = measure("winners_summary")
print(render.winners.summary_table(summary, times))

# %% [markdown]
# ## Try next
#
# Time your own shapes with `run_experiment("forward_times", {"tiny": True})` (in this
# process; it stores nothing; the smallest shapes of your device's grid), or run
# `python -m attention_docs list` for every experiment's parameters.
