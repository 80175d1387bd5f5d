"""Embeddings from any OpenAI-compatible ``/embeddings`` endpoint.

Batches of ``batch_size`` texts, each retried by the chat client's policy
(:func:`hyperrag_fast.llm.client.call_with_retry`); rows come back in input order
(by the API's ``index``), as L2-normalised float32. Blank texts are not sent:
they get zero rows (allowed by the Embedder protocol).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..config import EMBED_TIMEOUT_S
from ..llm.client import (LLMError, RetryPolicy, call_with_retry, make_openai,
                          resolve_settings)
from .base import l2_normalize

__all__ = ["OpenAIEmbedder"]


class OpenAIEmbedder:
    """Embedder over the OpenAI embeddings API.

    ``dim``: the expected width. When given it is also sent as ``dimensions``
    (models that support shortening honour it) and every vector is checked
    against it; when None it is learnt from the first response.
    """

    def __init__(self, base_url: str | None = None, model: str | None = None,
                 api_key: str | None = None, dim: int | None = None, batch_size: int = 64,
                 timeout: float = EMBED_TIMEOUT_S, retry: RetryPolicy | None = None,
                 send_dimensions: bool = True) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if dim is not None and dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.base_url, api_key, self.model = resolve_settings(base_url, api_key, model)
        self._dim = dim
        self._send_dim = send_dimensions and dim is not None
        self.batch_size = batch_size
        self.retry = retry or RetryPolicy()
        self.name = f"openai:{self.model}" + (f":{dim}" if dim else "")
        self._client = make_openai(self.base_url, api_key, timeout)

    @property
    def dim(self) -> int:
        """The vector width (known after the first call when not given)."""
        if self._dim is None:
            raise RuntimeError("dim is unknown until the first embed() call; pass dim=")
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts), dim), rows L2-normalised, in input order."""
        texts = list(texts)
        if any(not isinstance(t, str) for t in texts):
            raise TypeError("texts must be strings")
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        live = [i for i, t in enumerate(texts) if t.strip()]  # blank texts: zero rows
        vecs: list[Any] = []
        for i in range(0, len(live), self.batch_size):
            vecs.extend(self._batch([texts[j] for j in live[i : i + self.batch_size]]))
        if self._dim is None:
            raise ValueError("cannot size zero rows for empty texts before dim is known; pass dim=")
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        if live:
            out[live] = np.asarray(vecs, dtype=np.float32)
        return l2_normalize(out)

    def _batch(self, batch: list[str]) -> list[list[float]]:
        kw: dict[str, Any] = {"dimensions": self._dim} if self._send_dim else {}
        resp = call_with_retry(
            lambda: self._client.embeddings.create(model=self.model, input=batch, **kw),
            self.retry, what=f"embeddings ({self.model})")
        data = getattr(resp, "data", None)
        if not isinstance(data, list) or len(data) != len(batch):
            got = len(data) if isinstance(data, list) else type(resp).__name__
            raise LLMError(f"embeddings response has {got} items for {len(batch)} inputs",
                           attempts=1)
        out: list[Any] = [None] * len(batch)
        for item in data:
            idx = item.index
            if not (0 <= idx < len(batch)) or out[idx] is not None:
                raise LLMError(f"embeddings response has a bad or repeated index {idx}",
                               attempts=1)
            out[idx] = item.embedding
        widths = {len(v) for v in out}
        if len(widths) != 1:
            raise LLMError(f"embeddings response mixes vector widths {sorted(widths)}",
                           attempts=1)
        width = widths.pop()
        if self._dim is None:
            self._dim = width
        elif width != self._dim:
            raise LLMError(f"embedding width {width} differs from the expected dim {self._dim}",
                           attempts=1)
        return out
