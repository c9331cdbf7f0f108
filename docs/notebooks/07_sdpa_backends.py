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
from attention_docs import book, make_qkv, measure, measure_each_device, render, show, why_backend

book.for_notebook()
backends, times = measure("sdpa_backends"), measure("forward_times")
why_everywhere = measure_each_device("sdpa_why")
why = why_everywhere[0]
show(render.sdpa.finding(backends, times, why.measurement))

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
# times: every implementation at a grid of shapes, in interleaved rounds.

# %%
show(render.sdpa.backend_table(backends))
show(render.sdpa.backend_times(times, backends))
show(render.sdpa.priority_claim(backends.measurement))

# %% [markdown]
# ## Why this backend? Over a set of input variants

# %%
show(render.sdpa.why_matrix(why))
show(render.sdpa.why_reasons(why))

# %% [markdown]
# ## On a GPU: which backend torch's rules pick (a forecast)

# %%
show(render.sdpa.rules_table())
show(render.sdpa.dispatch_forecast(why_everywhere))

# %% [markdown]
# ## Masks: is_causal, boolean, float, and the wrong polarity

# %%
masks = measure("sdpa_masks")
show(render.sdpa.mask_table(masks))
show(render.sdpa.mask_claims(masks.measurement))
show(render.sdpa.empty_row_claim(masks.measurement))

# %% [markdown]
# ## Try next
#
# On a GPU, make `q, k, v` above in bfloat16 (`make_qkv(1, 2, 64, 64, dtype="bfloat16",
# device="cuda")`) and compare the backend SDPA picks with the forecast; give `why_backend`
# an explicit `attn_mask` and see which backends refuse it.
