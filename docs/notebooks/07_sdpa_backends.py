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
# # scaled_dot_product_attention and its backends — companion notebook
#
# Run the chapter's experiments in your own Python session, on your own hardware. Install
# the package first (`pip install -e .` in a clone of the repository); on a machine with a
# CUDA GPU the experiments use it, and the "why" tables fill with the GPU's rules.
#
# Unlike the site, this notebook does not read the committed store: every number below is
# measured when you run it.

# %%
import os

from attention_docs import make_qkv, render, run_experiment, why_backend
from attention_docs.measurements import Sourced

# A small shape keeps this quick on a laptop CPU; the test suite sets ATTENTION_DOCS_TINY.
tiny = bool(os.environ.get("ATTENTION_DOCS_TINY"))
shape = {"seq_len": 32, "num_heads": 2, "head_dim": 16} if tiny else {"seq_len": 1024}
# The pinned backends run at a shape of the forward-time grid, whose times they are compared by.
grid_shape = {"seq_len": 128} if tiny else {"seq_len": 1024}

# %% [markdown]
# ## Ask SDPA why, on your own inputs
#
# `why_backend` pins each backend in turn and keeps PyTorch's own explanation of every
# refusal; it never raises for a backend this device lacks.

# %%
q, k, v = make_qkv(1, 2, 64, 64)
for verdict in why_backend(q, k, v, dropout_p=0.1):
    print(f"{verdict.backend:>9}  {verdict.status:<13} {verdict.reason}")

# %% [markdown]
# ## Each backend, pinned
#
# How long each backend takes comes from `forward_times`, the site's one table of forward
# times: every implementation at a grid of shapes, in interleaved rounds. The full grid
# takes minutes on a CPU (it compiles and runs every implementation); `tiny` times one length.

# %%
m = run_experiment("sdpa_backends", grid_shape)
here = Sourced(m, "measured in this notebook", "-", base="")
times = run_experiment("forward_times", {"tiny": True} if tiny else {})
times_here = Sourced(times, "measured in this notebook", "-", base="")
print(render.sdpa.backend_table(here))
print(render.sdpa.backend_times(times_here, here))
print(render.sdpa.priority_claim(m))

# %% [markdown]
# ## Why this backend? Over a set of input variants

# %%
why = Sourced(
    run_experiment("sdpa_why", {"seq_len": 16, "big_head_dim": 64} if tiny else {}),
    "measured in this notebook",
    "-",
    base="",
)
print(render.sdpa.finding(m, times_here, why.measurement))
print(render.sdpa.why_matrix(why))
print(render.sdpa.why_reasons(why))

# %% [markdown]
# ## On a GPU: which backend torch's rules pick (a forecast)

# %%
print(render.sdpa.rules_table())
print(render.sdpa.dispatch_forecast([why]))

# %% [markdown]
# ## Masks: is_causal, boolean, float, and the wrong polarity

# %%
masks = run_experiment("sdpa_masks", shape)
print(render.sdpa.mask_table(Sourced(masks, "measured in this notebook", "-", base="")))
print(render.sdpa.mask_claims(masks))
print(render.sdpa.empty_row_claim(masks))

# %% [markdown]
# ## Try next
#
# Pass `{"dtype": "bfloat16"}` on a GPU and compare the backend SDPA picks with the forecast
# above; give `why_backend` an explicit mask and see which backends refuse it.
