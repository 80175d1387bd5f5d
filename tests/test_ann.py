"""Candidate search: exact back end is exact; usearch agrees; save/load; recall on dev data.
Building a graph is the write side (``indexing.hnsw``); ``VectorIndex`` only opens and searches."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from hyperrag_fast.ann import AnnParams, VectorIndex
from hyperrag_fast.indexing.distinct import distinct_rows
from hyperrag_fast.indexing.hnsw import (build_vector_index, extend_vector_index, save_vector_index,
                                         spill)
from hyperrag_fast.embed.base import l2_normalize

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "2wikimultihopqa"


def _clustered(n=3000, d=32, centers=30, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centers, d))
    return l2_normalize(c[rng.integers(0, centers, n)] + 0.3 * rng.normal(size=(n, d)))


def test_exact_matches_brute_force():
    X = _clustered()
    ix = VectorIndex(X, AnnParams(backend="exact"))
    q = X[5] + 0.01
    ids, sims = ix.search(q, 10)
    s = X @ q.astype(np.float32)
    want = np.lexsort((np.arange(s.size), -s))[:10]
    assert ids.dtype == np.int64 and sims.dtype == np.float32
    assert ids.tolist() == want.tolist()
    np.testing.assert_allclose(sims, s[want], rtol=1e-6)


def test_shapes_batch_and_edge_cases():
    X = _clustered(50)
    ix = VectorIndex(X)
    assert ix.backend == "exact"
    ids, sims = ix.search(X[:3], 7)
    assert ids.shape == sims.shape == (3, 7)
    for i in range(3):
        one = ix.search(X[i], 7)
        assert ids[i].tolist() == one[0].tolist()
    assert ix.search(X[0], 500)[0].shape == (50,)  # k > n
    assert ix.search(X[0], 0)[0].shape == (0,)
    tie = VectorIndex(np.ones((4, 2), np.float32) / np.sqrt(2))
    assert tie.search(np.array([1, 0], np.float32), 4)[0].tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="dimension"):
        ix.search(np.zeros(3), 2)
    with pytest.raises(ValueError, match="k must be"):
        ix.search(X[0], -1)
    with pytest.raises(ValueError, match="NaN"):
        ix.search(np.full(X.shape[1], np.nan), 2)
    with pytest.raises(ValueError, match="backend"):
        AnnParams(backend="faiss")


def test_usearch_agrees_and_round_trips(tmp_path):
    X = _clustered()
    p = AnnParams(backend="usearch")
    a = build_vector_index(X, p)
    e = VectorIndex(X, AnnParams(backend="exact"))
    assert a.backend == "usearch"
    ia, sa = a.search(X[:20], 10)
    ie, _ = e.search(X[:20], 10)
    assert np.mean([len(set(x) & set(y)) / 10 for x, y in zip(ia, ie)]) >= 0.95
    want = np.einsum("qkd,qd->qk", X[ia], X[:20])  # sims are exact rescored cosines
    np.testing.assert_allclose(sa, want, rtol=1e-5)
    assert save_vector_index(a, tmp_path / "x.usearch") and not save_vector_index(e, tmp_path / "y.usearch")
    for view in (True, False):
        b = VectorIndex.load(X, tmp_path / "x.usearch", p, view=view, distinct=a.distinct())
        assert b.backend == "usearch"
        assert b.search(X[:20], 10)[0].tolist() == ia.tolist()
    assert VectorIndex.load(X, None, p).backend == "exact"


@pytest.mark.parametrize("storage", ["f16", "f32"])
def test_storage_steers_only_the_walk(storage, tmp_path):
    """Either storage finds the exact neighbours nearly always and returns exact float32
    cosines; half precision saves the graph in fewer bytes (its vectors in half); the saved
    file keeps its storage."""
    X = _clustered()
    a = build_vector_index(X, AnnParams(backend="usearch", storage=storage))
    ia, sa = a.search(X[:50], 10)
    ie, _ = VectorIndex(X, AnnParams(backend="exact")).search(X[:50], 10)
    assert np.mean([len(set(x) & set(y)) / 10 for x, y in zip(ia, ie)]) >= 0.95
    np.testing.assert_allclose(sa, np.einsum("qkd,qd->qk", X[ia], X[:50]), rtol=1e-6)
    save_vector_index(a, tmp_path / "x.usearch")
    save_vector_index(build_vector_index(X, AnnParams(backend="usearch", storage="f32")),
                      tmp_path / "full.usearch")
    ratio = (tmp_path / "x.usearch").stat().st_size / (tmp_path / "full.usearch").stat().st_size
    assert (ratio < 0.8) if storage == "f16" else ratio == 1.0
    b = VectorIndex.load(X, tmp_path / "x.usearch", AnnParams(backend="usearch"), view=True,
                         distinct=distinct_rows(X))
    assert str(b.hnsw.dtype).lower().endswith(storage)  # e.g. "ScalarKind.F16"
    with pytest.raises(ValueError, match="storage"):
        AnnParams(storage="i4")


@pytest.mark.parametrize("spilled", [True, False])
def test_extended_inserts_only_new_rows(spilled, tmp_path):
    """``add``: the old graph (read from its file when it is a view of one, else copied)
    gets only the new distinct rows; old ids keep their places; the old index is untouched."""
    X = _clustered(3000)
    p = AnnParams(backend="usearch")
    old = build_vector_index(X[:2000], p)
    if spilled:
        old = spill(old, tmp_path / "old.usearch")
        assert old.file is not None
    new = extend_vector_index(old, X, p)
    assert new.backend == "usearch" and len(new.hnsw) == 3000 and len(old.hnsw) == 2000
    ia, _ = new.search(X[1990:2050], 10)
    ie, _ = VectorIndex(X, AnnParams(backend="exact")).search(X[1990:2050], 10)
    assert np.mean([len(set(x) & set(y)) / 10 for x, y in zip(ia, ie)]) >= 0.95
    assert old.search(X[:5], 1)[0].ravel().tolist() == [0, 1, 2, 3, 4]


def test_auto_threshold():
    X = _clustered(300)
    assert build_vector_index(X, AnnParams(exact_threshold=100)).backend == "usearch"
    assert build_vector_index(X, AnnParams(exact_threshold=1000)).backend == "exact"
    with pytest.raises(ValueError, match="build_vector_index"):  # the read side builds nothing
        VectorIndex(X, AnnParams(exact_threshold=100))
    g = build_vector_index(X, AnnParams(exact_threshold=100))
    with pytest.raises(ValueError, match="distinct rows"):
        VectorIndex(X, g.params, hnsw=g.hnsw)


@pytest.mark.slow
def test_usearch_recall_on_dev_data():
    """recall@50 of usearch vs exact >= 0.98: 200 dev questions vs 6,000 corpus sentences
    (the offline extractor's entity descriptions are sentences), MiniLM ONNX (~1 min)."""
    if not DATA.is_dir():
        pytest.skip(f"no evaluation data at {DATA}")
    from hyperrag_fast.embed.onnx_minilm import OnnxMiniLM
    corpus = json.loads((DATA / "corpus.json").read_text())
    questions = json.loads((DATA / "questions.json").read_text())[:200]  # dev split
    sents: list[str] = []
    for p in corpus:
        sents += [s.strip() for s in re.split(r"(?<=[.!?])\s+", p["text"]) if s.strip()]
        if len(sents) >= 6000:
            break
    emb = OnnxMiniLM()
    X, Q = emb.embed(sents), emb.embed([q["question"] for q in questions])
    exact = VectorIndex(X, AnnParams(backend="exact"))
    approx = build_vector_index(X, AnnParams(backend="usearch"))
    k = 50
    ie, _ = exact.search(Q, k)
    ia, _ = approx.search(Q, k)
    recall = np.mean([len(set(a) & set(e)) / k for a, e in zip(ia, ie)])
    assert recall >= 0.98, recall


def test_duplicated_rows_keep_recall_and_tie_order():
    """Entity states share descriptions, so their vectors repeat: the HNSW graph is built
    over distinct rows and hits expand to every equal row (ties by id)."""
    rng = np.random.default_rng(3)
    centers = rng.normal(size=(40, 24))
    base = (centers[rng.integers(0, 40, 2000)] + 0.3 * rng.normal(size=(2000, 24))).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    v = base[rng.integers(0, 2000, 12000)]  # ~6 copies of each row
    vi = build_vector_index(v, AnnParams(backend="usearch"))
    q = v[rng.integers(0, 12000, 40)] + 0.05 * rng.normal(size=(40, 24)).astype(np.float32)
    a_ids, a_s = vi.search(q, 50)
    e_ids, e_s = vi.search(q, 50, exact=True)
    recall = np.mean([len(set(a) & set(e)) / 50 for a, e in zip(a_ids, e_ids)])
    assert recall >= 0.98
    for ids, sims in zip(e_ids, e_s):  # exact: ordered by sim, equal sims by id
        keys = list(zip(-sims.astype(np.float64), ids))
        assert keys == sorted(keys)


def test_top_k_desc_selects_the_k_best_in_order():
    from hyperrag_fast.ann import top_k_desc
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(0, 40))
        s = np.round(rng.normal(size=n), 1)
        ex = rng.choice(n, size=int(rng.integers(0, n + 1)), replace=False) if n else np.zeros(0, np.int64)
        k = int(rng.integers(0, 12))
        x = s.copy()
        x[ex] = -np.inf
        got = top_k_desc(s, k, ex)
        fin = np.flatnonzero(np.isfinite(x))
        assert len(got) == min(k, fin.size) and not set(got) & set(ex.tolist())
        assert all((x[a], -a) > (x[b], -b) for a, b in zip(got, got[1:]))  # best first, ties by id
        rest = np.setdiff1d(fin, got)
        assert not got.size or not rest.size or x[rest].max() <= x[got].min()


def test_exact_search_scans_codes_from_its_second_call_with_the_same_results():
    """ann.py: a matrix of >= EXACT_CODES_MIN_ROWS rows is scanned as int8 codes from its
    second exact search on, only where the bound is exact for the query (unit rows and
    query, small d); ids and similarities equal the float32 scan's."""
    from hyperrag_fast.config import EXACT_CODES_MIN_ROWS
    from hyperrag_fast.kernels.dense import exact_topk
    for d, covered in ((384, True), (1024, False)):
        X = _clustered(EXACT_CODES_MIN_ROWS + 37, d, seed=d)
        ix = VectorIndex(X, AnnParams(backend="exact"))
        Q = X[:6] + 0.05 * np.random.default_rng(1).normal(size=(6, d)).astype(np.float32)
        Q /= np.linalg.norm(Q, axis=1, keepdims=True)
        want_i, want_s = np.empty((6, 50), np.int64), np.empty((6, 50), np.float32)
        exact_topk(ix.vectors, Q, 50, want_i, want_s)
        first = ix.search(Q[0], 50)
        assert ix.codes() is not None  # the second call makes them
        assert ix.codes_cover(Q[0]) is covered
        assert not ix.codes_cover(3.0 * Q[0])  # a long query: the float32 scan
        got = [first] + [ix.search(q, 50) for q in Q[1:]]
        batch = ix.search(Q, 50)
        for i, (ids, sims) in enumerate(got):
            np.testing.assert_array_equal(ids, want_i[i])
            np.testing.assert_array_equal(sims, want_s[i])
        np.testing.assert_array_equal(batch[0], want_i)
        np.testing.assert_array_equal(batch[1], want_s)
    small = VectorIndex(_clustered(EXACT_CODES_MIN_ROWS - 1), AnnParams(backend="exact"))
    small.search(small.vectors[0], 5)
    assert small.codes() is None
