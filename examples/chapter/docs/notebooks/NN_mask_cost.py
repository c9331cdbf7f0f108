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
# # Preparing a mask — companion notebook
#
# Time how long preparing a causal mask takes on your device. Install the package first
# (`pip install -e .` in a clone of the repository); with a CUDA GPU the experiment uses it.
# `measure` reads this machine's entry from the site's store, or measures it here and adds it.

# %%
from attention_docs import book, measure, render

book.for_notebook()
prep = measure("mask_cost")
print(render.sweep.sweep_table(prep))
print(render.sweep.sweep_claim(prep))
