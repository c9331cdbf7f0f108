# Attention implementations only: no profiling, no I/O. Each module is one way to compute
# softmax(q·kᵀ/√d)·v; experiments profile them and tests check them against float64.
from attention_docs.attention.naive import STEPS, causal_mask, naive_attention
from attention_docs.attention.sdpa import BACKENDS, BackendVerdict, sdpa_attention, why_backend

__all__ = ["STEPS", "causal_mask", "naive_attention"]
__all__ += ["BACKENDS", "BackendVerdict", "sdpa_attention", "why_backend"]
