# The GPU and the shape every chapter forecasts for (analytic/gpu.py prices them). They live
# here, not in analytic/, because experiments read the shape for their GPU defaults: what an
# experiment imports from analytic/ is part of its entries' fingerprint, so a change to the
# forecast model would otherwise make measurements stale that never ran it.
from __future__ import annotations

from attention_docs.records.shape import Shape

# The one the site is published from when a GPU is lent (so that a stored measurement can
# check the forecast), at a realistic training shape.
FORECAST_GPU = "h200"
FORECAST_SHAPE = Shape(
    batch_size=4, num_heads=16, seq_len=4096, head_dim=128, dtype="bfloat16", causal=True
)
