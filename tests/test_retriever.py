"""Retriever: stitch and dense methods, batch == single, threads == serial, registry."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.config import StitchOptions
from hyperrag_fast.retriever import (METHODS, MethodOutput, QueryOptions, Retriever,
                                     register_method)
from hyperrag_fast.store import IndexMismatchError

WORDS = ("Ada Lovelace", "Lord Byron", "Charles Babbage", "Missolonghi", "Greece", "London",
         "Analytical Engine", "Jacquard Loom", "Lyon", "Marie Curie", "Warsaw", "Vistula")


def _docs(n=40, seed=0):
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        a, b, c = rng.choice(len(WORDS), 3, replace=False)
        docs.append({"id": f"d{i}", "title": WORDS[a],
                     "text": f"{WORDS[a]} met {WORDS[b]} in {WORDS[c]}. "
                             f"Later {WORDS[b]} wrote about {WORDS[c]} number {i}."})
    return docs


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    path = tmp_path_factory.mktemp("r") / "ix"
    HyperIndex.build(_docs(), RegexExtractor(), HashingEmbedder(), progress=False).save(path)
    r = Retriever(HyperIndex.load(path, HashingEmbedder()))  # mmap-loaded, read-only arrays
    r.warmup()
    return r


QUERIES = [f"Where did {a} meet {b}?" for a in WORDS[:6] for b in WORDS[6:]]


def _key(res):
    return [(c.chunk_id, c.score) for c in res.chunks]


def test_result_fields(retriever):
    res = retriever.retrieve(QUERIES[0], detail=True)
    assert len(res.chunks) == 8
    assert set(res.timings) == {"embed_ms", "candidates_ms", "graph_ms"}
    c = res.chunks[0]
    chunk = retriever.index.chunks[retriever.index.chunk_index(c.chunk_id)]
    assert (c.doc_id, c.text, c.start, c.end) == (chunk.doc_id, chunk.text, chunk.start, chunk.end)
    scores = [c.score for c in res.chunks]
    assert scores == sorted(scores, reverse=True)
    assert {"cq", "node_A", "cand_nodes", "cand_chunks", "seed_nodes"} <= set(res.detail)


def test_dense_is_exact_cosine(retriever):
    o = QueryOptions(method="dense").with_top_k(5)
    res = retriever.retrieve(QUERIES[3], o)
    q = HashingEmbedder().embed([QUERIES[3]])[0]
    sims = retriever.index.chunk_vec @ q
    want = np.lexsort((np.arange(sims.size), -sims))[:5]
    assert [retriever.index.chunk_index(c.chunk_id) for c in res.chunks] == want.tolist()
    np.testing.assert_allclose([c.score for c in res.chunks], sims[want], rtol=1e-6)


@pytest.mark.parametrize("opts", [QueryOptions(), QueryOptions(stitch=StitchOptions(ppr="push")),
                                  QueryOptions(method="dense")])
def test_batch_equals_single(retriever, opts):
    batch = retriever.retrieve_batch(QUERIES, opts)
    assert [_key(r) for r in batch] == [_key(retriever.retrieve(q, opts)) for q in QUERIES]


def test_threads_equal_serial(retriever):
    serial = [_key(retriever.retrieve(q)) for q in QUERIES * 3]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(lambda q: _key(retriever.retrieve(q)), QUERIES * 3))
    assert threaded == serial


def test_budgets_and_validation(retriever):
    with pytest.raises(ValueError, match="unknown method"):
        retriever.retrieve(QUERIES[0], QueryOptions(method="nope"))
    with pytest.raises(ValueError, match="k_nodes"):
        QueryOptions(k_nodes=-1)
    res = retriever.retrieve(QUERIES[0], QueryOptions(k_nodes=0, k_chunks=3).with_top_k(3))
    assert 1 <= len(res.chunks) <= 3
    with pytest.raises(ValueError, match="top_k=8 > k_chunks=3"):  # would be capped silently
        retriever.retrieve(QUERIES[0], QueryOptions(k_nodes=0, k_chunks=3))
    assert retriever.retrieve_batch([]) == []
    with pytest.raises(TypeError):
        retriever.retrieve_batch("a string")
    with pytest.raises(IndexMismatchError):
        Retriever(retriever.index, HashingEmbedder(dim=16))


def test_register_method(retriever):
    def first_chunks(state, q, text, o, detail):
        k = min(o.top_k, state.index.n_chunks)
        return MethodOutput(np.arange(k), np.zeros(k))

    register_method("first", first_chunks)
    try:
        res = retriever.retrieve("anything", QueryOptions(method="first").with_top_k(2))
        assert [c.chunk_id for c in res.chunks] == [c.chunk_id for c in retriever.index.chunks[:2]]
    finally:
        del METHODS["first"]


def test_engine_reads_plain_views_of_the_mapped_graph(retriever):
    """The query's Python steps slice the engine's graph arrays hundreds of times a query:
    they are plain ndarray views of the index's memory maps (no np.memmap per slice, no copy)."""
    g, eng = retriever.index.graph, retriever.state.engine
    assert isinstance(g.chunk_nodes, np.memmap)  # the fixture's index is mmap-loaded
    for name in ("chunk_ptr", "chunk_nodes", "node_group", "group_ptr", "group_nodes",
                 "nc_ptr", "nc_chunks", "group_chunks"):
        a, b = getattr(eng.graph, name), getattr(g, name)
        assert type(a) is np.ndarray, name
        assert np.shares_memory(a, b) and np.array_equal(a, b), name
    assert eng.graph.group_key is g.group_key and eng.graph.n_chunks == g.n_chunks
