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
# CUDA GPU the experiments use it automatically.
#
# Every experiment is fetched with `measure`, exactly as the chapter does: from the site's
# store (`docs/measurements` in your clone) when it holds an entry for this machine, and
# otherwise measured here, in a fresh worker process, and added to it — so the numbers below
# are your hardware's. Chapter-sized shapes take minutes on a laptop CPU the first time and
# seconds afterwards. `ATTENTION_DOCS_MODE=frozen` never measures: it shows the site's own
# entries, each captioned with the device that measured it (the test suite runs it so).

# %%
from attention_docs import book, make_qkv, measure, measure_each_device, render, why_backend

book.for_notebook()
backends, times = measure("sdpa_backends"), measure("forward_times")
why_everywhere = measure_each_device("sdpa_why")
why = why_everywhere[0]
print(render.sdpa.finding(backends.measurement, times, why.measurement))

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
print(render.sdpa.backend_table(backends))
print(render.sdpa.backend_times(times, backends))
print(render.sdpa.priority_claim(backends.measurement))

# %% [markdown]
# ## Why this backend? Over a set of input variants

# %%
print(render.sdpa.why_matrix(why))
print(render.sdpa.why_reasons(why))

# %% [markdown]
# ## On a GPU: which backend torch's rules pick (a forecast)

# %%
print(render.sdpa.rules_table())
print(render.sdpa.dispatch_forecast(why_everywhere))

# %% [markdown]
# ## Masks: is_causal, boolean, float, and the wrong polarity

# %%
masks = measure("sdpa_masks")
print(render.sdpa.mask_table(masks))
print(render.sdpa.mask_claims(masks.measurement))
print(render.sdpa.empty_row_claim(masks.measurement))

# %% [markdown]
# ## Try next
#
# On a GPU, make `q, k, v` above in bfloat16 (`make_qkv(1, 2, 64, 64, dtype="bfloat16",
# device="cuda")`) and compare the backend SDPA picks with the forecast; give `why_backend`
# an explicit `attn_mask` and see which backends refuse it.
