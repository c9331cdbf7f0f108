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
# # The quadratic wall — companion notebook
#
# Sweep naive attention over seq_len, over how tokens are split into sequences and heads,
# and over head_dim, on your own hardware. Install the package first (`pip install -e .`
# in a clone of the repository); with a CUDA GPU the experiments use it.
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
wall, times = measure("wall"), measure("forward_times")
print(render.wall.finding(wall, times))

# %% [markdown]
# ## Doubling seq_len
#
# Every distinct shape of the four sweeps is measured once and timed in interleaved rounds;
# a shape the forward-time table holds is read from it, so no shape has two times.

# %%
print(render.wall.sweep_table(wall, "seq_len", times))
print(render.wall.seq_len_claim(wall, times))
print(render.wall.step_shares_claim(wall, "seq_len"))

# %% [markdown]
# In Jupyter, display the log-log figure with `IPython.display.HTML(render.wall.sweep_figure(
# wall, "seq_len", y="time", what="Forward time against seq_len.", times=times))`.
#
# ## The same tokens, split differently

# %%
print(render.wall.sweep_table(wall, "tokens"))
print(render.wall.tokens_claim(wall))
print(render.wall.sweep_table(wall, "heads"))
print(render.wall.heads_claim(wall))

# %% [markdown]
# ## head_dim at a fixed seq_len

# %%
print(render.wall.head_dim_claim(wall))

# %% [markdown]
# ## The wall on a GPU

# %%
print(render.wall.forecast(measure_each_device("forward_times")))

# %% [markdown]
# ## Try next
#
# Sweep your own range with `run_experiment("wall", {"max_seq_len": 8192})` (in this
# process; it stores nothing) as far as your memory allows, and read the slope off the last
# doublings; `python -m attention_docs list` prints every experiment's parameters.
