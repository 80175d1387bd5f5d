"""A tiny deterministic embedder for tests (no model, no dependency beyond NumPy)."""
from __future__ import annotations

import hashlib
import re
from typing import Sequence

import numpy as np

from .base import l2_normalize

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Signed feature hashing of lowercase word unigrams and bigrams, L2-normalised.

    Satisfies the Embedder protocol (docs/architecture.md §2: one model for all three kinds);
    equal texts give equal vectors in every process (blake2b, not ``hash``).
    An empty text gives a zero row.
    """

    def __init__(self, dim: int = 64, seed: int = 0) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be an integer >= 1, got {dim!r}")
        self.dim = dim
        self.seed = int(seed)
        self.name = f"hashing-v1:dim={dim}:seed={self.seed}"
        self._key = self.seed.to_bytes(8, "little", signed=True)

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        return words + [f"{a} {b}" for a, b in zip(words, words[1:])]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for f in self._features(text):
                h = int.from_bytes(
                    hashlib.blake2b(f.encode("utf-8", "surrogatepass"), digest_size=8,
                                    key=self._key).digest(), "little")
                out[i, (h >> 1) % self.dim] += 1.0 if h & 1 else -1.0
        return l2_normalize(out)
