"""The embedder interface: texts in, L2-normalised float32 rows out."""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """``name`` identifies model and settings (manifest + cache key); ``dim`` the width."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array (len(texts), dim), each row L2-normalised (a zero row for
        an empty text is allowed)."""
        ...


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation to float32; zero rows stay zero."""
    x = np.asarray(x, dtype=np.float32)
    n = np.sqrt(np.add.reduce(x * x, axis=1, keepdims=True))  # np.linalg.norm's own sum
    n[n == 0] = 1.0
    return np.ascontiguousarray(x / n, dtype=np.float32)
