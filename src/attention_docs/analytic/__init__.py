"""What the arithmetic predicts before anything runs: FLOPs and bytes per step (`cost`), the
roofline's time for them (`roofline`), FlashAttention's tiled traffic (`tiling`), the naive
forward's peak memory (`memory`) and a KV-cache decode step's cost (`decode`).

Pure Python, no torch: experiments put these predictions beside what they measure, and
renderers compare the two. Nothing here measures or renders.
"""
