"""OpenAIEmbedder against the loopback server: order, normalisation, widths, retries."""
from __future__ import annotations

import numpy as np
import pytest

from hyperrag_fast.embed.base import Embedder
from hyperrag_fast.embed.openai_embed import OpenAIEmbedder
from hyperrag_fast.llm.client import LLMError, RetryPolicy
from openai_server import Drop, Status, Vectors, hash_vector

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01)


def embedder(srv, **kw) -> OpenAIEmbedder:
    kw.setdefault("retry", FAST)
    return OpenAIEmbedder(srv.base_url, "emb", "k", **kw)


def test_vectors_in_order_normalised_float32(openai_server):
    openai_server.embeddings.shuffle = True  # the API's `index` decides the order
    texts = [f"text {i}" for i in range(10)]
    e = embedder(openai_server, batch_size=4)
    x = e.embed(texts)
    assert isinstance(e, Embedder) and e.dim == 16 and e.name == "openai:emb"
    assert x.dtype == np.float32 and x.shape == (10, 16)
    want = np.array([hash_vector(t, 16) for t in texts], dtype=np.float32)
    np.testing.assert_allclose(x, want, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-6)
    assert openai_server.embeddings.count == 3
    assert [len(b["input"]) for b in openai_server.embeddings.requests] == [4, 4, 2]


def test_unnormalised_vectors_are_normalised(openai_server):
    openai_server.embeddings.enqueue(Vectors([[3.0, 4.0], [0.0, 2.0]]))
    x = embedder(openai_server).embed(["a", "b"])
    np.testing.assert_allclose(x, [[0.6, 0.8], [0.0, 1.0]], atol=1e-6)


def test_dim_is_sent_and_checked(openai_server):
    x = embedder(openai_server, dim=8).embed(["a"])
    assert x.shape == (1, 8) and openai_server.embeddings.requests[0]["dimensions"] == 8
    openai_server.embeddings.enqueue(Vectors([[1.0] * 5]))
    with pytest.raises(LLMError, match="width 5 differs from the expected dim 8"):
        embedder(openai_server, dim=8).embed(["a"])


def test_mixed_widths_are_an_error(openai_server):
    openai_server.embeddings.enqueue(Vectors([[1.0, 0.0], [1.0, 0.0, 0.0]]))
    with pytest.raises(LLMError, match="mixes vector widths"):
        embedder(openai_server).embed(["a", "b"])


def test_width_change_between_batches_is_an_error(openai_server):
    openai_server.embeddings.enqueue(Vectors([[1.0, 0.0]]), Vectors([[1.0, 0.0, 0.0]]))
    with pytest.raises(LLMError, match="differs from the expected dim 2"):
        embedder(openai_server, batch_size=1).embed(["a", "b"])


def test_wrong_item_count_is_an_error(openai_server):
    openai_server.embeddings.enqueue(Vectors([[1.0, 0.0]]))
    with pytest.raises(LLMError, match="1 items for 2 inputs"):
        embedder(openai_server).embed(["a", "b"])


def test_retries_then_succeeds_and_gives_up(openai_server):
    openai_server.embeddings.enqueue(Status(429, retry_after=0), Status(502), Drop())
    with pytest.raises(LLMError, match="after 3 attempts"):
        embedder(openai_server).embed(["a"])
    openai_server.embeddings.enqueue(Status(429, retry_after=0), Status(500))
    assert embedder(openai_server).embed(["a"]).shape == (1, 16)
    assert openai_server.embeddings.count == 6


def test_blank_texts_get_zero_rows_without_a_request(openai_server):
    x = embedder(openai_server, dim=16).embed(["", "a", "  "])
    assert x.shape == (3, 16) and not x[0].any() and not x[2].any()
    assert openai_server.embeddings.requests[0]["input"] == ["a"]
    assert embedder(openai_server).embed([]).shape == (0, 0)


def test_float_encoding_also_supported(openai_server):
    # the openai client asks for base64 by default; a plain float list must work too
    e = embedder(openai_server)
    resp = e._client.embeddings.create(model="emb", input=["a"], encoding_format="float")
    np.testing.assert_allclose(resp.data[0].embedding, hash_vector("a", 16), atol=1e-6)
    assert openai_server.embeddings.requests[0]["encoding_format"] == "float"


def test_constructor_validation(openai_server, monkeypatch):
    with pytest.raises(ValueError):
        embedder(openai_server, batch_size=0)
    with pytest.raises(RuntimeError, match="dim is unknown"):
        embedder(openai_server).dim
    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(ValueError, match="no LLM endpoint configured"):
        OpenAIEmbedder(model="emb")
