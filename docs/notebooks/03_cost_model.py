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
from attention_docs import book, measure, measure_each_device, render, show, step_costs

book.for_notebook()
naive = measure("naive_steps")
ceilings = measure("machine_ceilings")
times = measure("forward_times")
sweep = measure("op_size_sweep")  # the per-call floor of Reading a profile
every_device = measure_each_device("forward_times")
show(render.roofline.finding(naive, ceilings, times, sweep))

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
show(render.roofline.costs(naive))
show(render.roofline.ceilings_table(ceilings))
show(render.roofline.ceilings_claim(naive, ceilings, times))

# %% [markdown]
# ## The five steps on the roofline: predicted against measured
#
# Their structure from `naive_steps`' profile, their times from `forward_times`.

# %%
show(render.roofline.bound_rules(naive, ceilings, times, sweep))
show(render.roofline.verdicts(naive, ceilings, times, sweep))
show(render.roofline.roofline_figure(naive, ceilings, times, sweep))

# %% [markdown]
# ## On a GPU
#
# The same steps on an H200's roofline, from its data sheet.

# %%
show(render.roofline.gpu_forecast(every_device))

# %% [markdown]
# ## Try next
#
# Change the shape and dtype of `step_costs` above: in bfloat16 the score matmuls' intensity
# is about head_dim/2 FLOP per byte whatever the length, far below a GPU's ridge. Measure
# another shape with `run_experiment("naive_steps", {"seq_len": 256})` (in this process; it
# stores nothing); `python -m attention_docs list` prints every experiment's parameters.
