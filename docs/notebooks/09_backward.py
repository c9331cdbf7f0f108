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
# Run the chapter's experiments in your own Python session, on your own hardware. Install
# the package first (`pip install -e .` in a clone of the repository); on a machine with a
# CUDA GPU the experiments use it automatically.
#
# Unlike the site, this notebook does not read the committed store: every number below is
# measured when you run it.

# %%
import os

from attention_docs import make_qkv, render, run_experiment
from attention_docs.attention.backward import implementation
from attention_docs.measurements import Sourced
from attention_docs.profiling.saved import saved_tensors

# A small shape keeps this quick on a laptop CPU; the test suite sets ATTENTION_DOCS_TINY.
tiny = bool(os.environ.get("ATTENTION_DOCS_TINY"))
shape = {"seq_len": 32, "num_heads": 2, "head_dim": 16} if tiny else {"seq_len": 1024}

# %% [markdown]
# ## What autograd keeps for the backward
#
# `saved_tensors` wraps a forward in `torch.autograd.graph.saved_tensors_hooks` and lists
# every storage saved for the backward, once each.

# %%
q, k, v = (t.requires_grad_() for t in make_qkv(1, 2, 128, 64))
for name in ("naive", "sdpa-flash"):
    attend = implementation(name, causal=True)
    for s in saved_tensors(lambda a=attend: a(q, k, v), (q, k, v)):
        print(f"{name:>10}  {s.role:<19} {s.dtype:<8} {s.bytes:>9} B  {s.shape}")

# %%
saved = run_experiment("backward_saved_tensors", {"max_seq_len": 256 if tiny else 2048})
print(render.backward.saved_claim(Sourced(saved, "measured in this notebook", "-", base="")))

# %% [markdown]
# ## Forward and backward, counted and measured
#
# The backward runs four matmuls of the forward's size where the forward runs two;
# FlashAttention's recomputes a fifth. The tables set that count beside the clock.

# %%
m = run_experiment("backward_compare", shape)
here = Sourced(m, "measured in this notebook", "-", base="")
print(render.backward.finding(here))
print(render.backward.count_table(here))
print(render.backward.time_table(here))
print(render.backward.nodes_table(here))

# %% [markdown]
# ## On a GPU: the training step's floors, from the data sheet

# %%
print(render.backward.training_forecast([here]))

# %% [markdown]
# ## Try next
#
# Raise `seq_len` until naive attention's forward-plus-backward no longer fits, and compare
# with `sdpa-flash` at the same length.
