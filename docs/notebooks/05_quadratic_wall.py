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
# and over head_dim, on your own hardware; with a CUDA GPU the experiments use it.
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
wall, times = measure("wall"), measure("forward_times")
show(render.wall.finding(wall, times))

# %% [markdown]
# ## Doubling seq_len
#
# Every distinct shape of the four sweeps is measured once and timed in interleaved rounds;
# a shape the forward-time table holds is read from it, so no shape has two times.

# %%
show(render.wall.sweep_table(wall, "seq_len", times))
show(render.wall.seq_len_claim(wall, times))
show(render.wall.step_shares_table(wall, "seq_len"))
show(
    render.wall.sweep_figure(
        wall, "seq_len", y="time", what="Forward time against seq_len.", times=times
    )
)

# %% [markdown]
# ## The same tokens, split differently

# %%
show(render.wall.sweep_table(wall, "tokens"))
show(render.wall.tokens_claim(wall))
show(render.wall.sweep_table(wall, "heads"))
show(render.wall.heads_claim(wall))

# %% [markdown]
# ## head_dim at a fixed seq_len

# %%
show(render.wall.head_dim_claim(wall))

# %% [markdown]
# ## The wall on a GPU

# %%
show(render.wall.forecast(measure_each_device("forward_times")))

# %% [markdown]
# ## Try next
#
# Sweep your own range with `run_experiment("wall", {"max_seq_len": 8192})` (in this
# process; it stores nothing) as far as your memory allows, and read the slope off the last
# doublings; `python -m attention_docs list` prints every experiment's parameters.
