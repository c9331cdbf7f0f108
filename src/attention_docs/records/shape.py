# The one attention shape of the site. q is (batch_size, num_heads, seq_len, head_dim); k and
# v are (batch_size, num_kv_heads, kv_len, head_dim), which default to the query's heads and
# length. Decoding is seq_len=1 against kv_len cached tokens; grouped-query attention is
# num_kv_heads < num_heads. Every input factory, experiment parameter set, fact id and
# forecast names its problem with this type, so "the same shape" means one thing everywhere.
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

DTYPES = ("float32", "bfloat16", "float16")
_DIMS = ("batch_size", "num_heads", "seq_len", "head_dim")


@dataclass(frozen=True)
class Shape:
    """One attention problem: its dimensions, dtype and mask.

    `num_kv_heads` and `kv_len` are None when k/v have the query's heads and length.
    """

    batch_size: int
    num_heads: int
    seq_len: int
    head_dim: int
    dtype: str = "float32"
    causal: bool = False
    num_kv_heads: int | None = None
    kv_len: int | None = None

    def __post_init__(self) -> None:
        for name in (*_DIMS, "num_kv_heads", "kv_len"):
            value = getattr(self, name)
            if value is None and name in ("num_kv_heads", "kv_len"):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}; choose one of: {', '.join(DTYPES)}")
        if self.num_heads % self.kv_heads:
            raise ValueError(
                f"num_heads={self.num_heads} must be a multiple of num_kv_heads={self.kv_heads}"
            )
        # Spelled-out defaults are normalised away, so two spellings of one shape are equal.
        if self.num_kv_heads == self.num_heads:
            object.__setattr__(self, "num_kv_heads", None)
        if self.kv_len == self.seq_len:
            object.__setattr__(self, "kv_len", None)

    @property
    def kv_heads(self) -> int:
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    @property
    def keys(self) -> int:
        """Keys each query sees at most: the cache length when decoding, else seq_len."""
        return self.seq_len if self.kv_len is None else self.kv_len

    @property
    def dims(self) -> tuple[int, int, int, int]:
        """q's dimensions, (batch_size, num_heads, seq_len, head_dim)."""
        return (self.batch_size, self.num_heads, self.seq_len, self.head_dim)

    @classmethod
    def of(cls, params: Mapping[str, Any], **overrides: Any) -> Shape:
        """The shape an experiment ran at (or a table row describes), from its parameters.

        Parameters it lacks take the defaults: float32, no mask, k/v like q. `kv_seq_len` and
        `cache_len` are read as `kv_len`.
        """
        values = {**params, **overrides}
        for alias in ("kv_seq_len", "cache_len"):
            if alias in values and "kv_len" not in values:
                values["kv_len"] = values[alias]
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known and v is not None})

    def text(self) -> str:
        """`batch_size=1, num_heads=4, seq_len=512, head_dim=64, float32, causal`: for captions
        and messages."""
        parts = [f"batch_size={self.batch_size}", f"num_heads={self.num_heads}"]
        if self.num_kv_heads is not None:
            parts.append(f"num_kv_heads={self.num_kv_heads}")
        parts.append(f"seq_len={self.seq_len}")
        if self.kv_len is not None:
            parts.append(f"kv_len={self.kv_len}")
        parts += [f"head_dim={self.head_dim}", self.dtype, "causal" if self.causal else "no mask"]
        return ", ".join(parts)

    def key(self) -> str:
        """A compact, canonical name for fact ids: `b1 h4 n512 d64 float32 causal`."""
        parts = [f"b{self.batch_size}", f"h{self.num_heads}"]
        if self.num_kv_heads is not None:
            parts.append(f"kv{self.num_kv_heads}")
        parts.append(f"n{self.seq_len}")
        if self.kv_len is not None:
            parts.append(f"m{self.kv_len}")
        parts += [f"d{self.head_dim}", self.dtype, "causal" if self.causal else "full"]
        return " ".join(parts)
