"""An on-disk embedding cache around any Embedder (docs/architecture.md §2), built on :mod:`..kvcache`."""
from __future__ import annotations

import os
from typing import Callable, Sequence

import numpy as np

from ..kvcache import KVCache, cache_key
from .base import Embedder

#: progress callback: called with the number of texts just embedded.
Progress = Callable[[int], None]


class CachedEmbedder:
    """Wraps ``embedder``; vectors live in a KVCache under ``cache_key(name, text)``.

    Only cache misses reach the wrapped embedder (deduplicated, in batches of
    ``batch_size``), and each batch is stored as soon as it is done, so an
    interrupted run keeps its work. Rows of the wrong width raise ValueError.
    """

    def __init__(self, embedder: Embedder, path: str | os.PathLike,
                 batch_size: int = 256) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        self.embedder = embedder
        self.name = embedder.name
        self.dim = int(embedder.dim)
        self.batch_size = batch_size
        self.cache = KVCache(path, namespace="embeddings")

    def _decode(self, blob: bytes) -> np.ndarray:
        if len(blob) != 4 * self.dim:
            raise ValueError(
                f"cached vector for embedder {self.name!r} has {len(blob) // 4} dims, expected "
                f"{self.dim}: the cache at {self.cache.path} was written by a different model "
                f"under the same name; use another cache file")
        return np.frombuffer(blob, dtype=np.float32)

    def embed(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """float32 (len(texts), dim); cached rows are returned bit-identical."""
        keys = [cache_key(self.name, t) for t in texts]
        found = self.cache.get_many(set(keys))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, str] = {}
        for i, (k, t) in enumerate(zip(keys, texts)):
            if k in found:
                out[i] = self._decode(found[k])
            else:
                missing.setdefault(k, t)
        miss_keys = list(missing)
        new: dict[str, np.ndarray] = {}
        for b in range(0, len(miss_keys), self.batch_size):
            part = miss_keys[b:b + self.batch_size]
            vecs = np.asarray(self.embedder.embed([missing[k] for k in part]), dtype=np.float32)
            if vecs.shape != (len(part), self.dim):
                raise ValueError(f"embedder {self.name!r} returned shape {vecs.shape}, "
                                 f"expected ({len(part)}, {self.dim})")
            self.cache.put_many((k, v.tobytes()) for k, v in zip(part, vecs))
            new.update(zip(part, vecs))
            if progress is not None:
                progress(len(part))
        for i, k in enumerate(keys):
            if k in new:
                out[i] = new[k]
        return out

    def close(self) -> None:
        self.cache.close()
