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
# # The backward pass — companion notebook
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
from attention_docs import book, make_qkv, measure, measure_each_device, render, show
from attention_docs.attention.backward import implementation
from attention_docs.profiling.saved import saved_tensors

book.for_notebook()
compare = measure("backward_compare")
show(render.backward.finding(compare))

# %% [markdown]
# ## Forward and backward, counted and measured
#
# The backward runs four matmuls of the forward's size where the forward runs two;
# FlashAttention's recomputes a fifth. The tables set that count beside the clock.

# %%
show(render.backward.count_table(compare))
show(render.backward.time_table(compare))

# %% [markdown]
# ## What autograd keeps for the backward
#
# `saved_tensors` wraps a forward in `torch.autograd.graph.saved_tensors_hooks` and lists
# every storage saved for the backward, once each: try it on your own shapes.

# %%
q, k, v = (t.requires_grad_() for t in make_qkv(1, 2, 128, 64))
for name in ("naive", "sdpa-flash"):
    attend = implementation(name, causal=True)
    for s in saved_tensors(lambda a=attend: a(q, k, v), (q, k, v)):
        print(f"{name:>10}  {s.role:<19} {s.dtype:<8} {s.bytes:>9} B  {s.shape}")

# %%
saved = measure("backward_saved_tensors")
show(render.backward.saved_detail_table(saved))
show(render.backward.saved_claim(saved))

# %% [markdown]
# ## The autograd nodes in the profile

# %%
show(render.backward.nodes_table(compare))

# %% [markdown]
# ## On a GPU: the training step's floors, from the data sheet

# %%
show(render.backward.training_forecast(measure_each_device("backward_compare")))

# %% [markdown]
# ## Try next
#
# Raise `seq_len` with `run_experiment("backward_compare", {"seq_len": 2048})` (in this
# process; it stores nothing) until naive attention's forward-plus-backward no longer fits,
# and compare with `sdpa-flash` at the same length.
