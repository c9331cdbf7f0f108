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
# # Cost model first — companion notebook
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
from attention_docs import book, measure, measure_each_device, render, step_costs

book.for_notebook()
naive = measure("naive_steps")
ceilings = measure("machine_ceilings")
times = measure("forward_times")
sweep = measure("op_size_sweep")  # the per-call floor of Reading a profile
every_device = measure_each_device("forward_times")
print(render.roofline.finding(naive, ceilings, times, sweep, every_device))

# %% [markdown]
# ## The cost model, without measuring anything
#
# `step_costs` is plain arithmetic: try other shapes and dtypes.

# %%
for cost in step_costs(1, 4, 1024, 64, "bfloat16", causal=True):
    print(
        f"{cost.label:24} {cost.flops:>14,.0f} FLOPs {cost.bytes:>14,.0f} B {cost.intensity:8.3f} FLOP/B"
    )

# %% [markdown]
# ## FLOPs and bytes per step, and this machine's ceilings

# %%
print(render.roofline.costs(naive))
print(render.roofline.ceilings_table(ceilings))
print(render.roofline.ceilings_claim(naive, ceilings, times))

# %% [markdown]
# ## The five steps on the roofline: predicted against measured
#
# Their structure from `naive_steps`' profile, their times from `forward_times`.

# %%
print(render.roofline.bound_rules(naive, ceilings, times, sweep))
print(render.roofline.verdicts(naive, ceilings, times, sweep))

# %% [markdown]
# In Jupyter, display the figure with
# `IPython.display.HTML(render.roofline.roofline_figure(naive, ceilings, times, sweep))`.
#
# ## On a GPU
#
# The same steps on an H200's roofline, from its data sheet.

# %%
print(render.roofline.gpu_forecast(every_device))

# %% [markdown]
# ## Try next
#
# Change the shape and dtype of `step_costs` above: in bfloat16 the score matmuls' intensity
# is about head_dim/2 FLOP per byte whatever the length, far below a GPU's ridge. Measure
# another shape with `run_experiment("naive_steps", {"seq_len": 256})` (in this process; it
# stores nothing); `python -m attention_docs list` prints every experiment's parameters.
