"""Issue 21's further hop options, off in both presets (HybridOptions.hop_dense,
hop_query, hop_bridge_titles, mmr; hop_rounds is in test_bridge.py) against literal twins."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.config import TUNED, HybridOptions
from hyperrag_fast.lexical import TitleLookup
from hyperrag_fast.methods.offpreset import _best_per_title, hop_dense, hop_query
from hyperrag_fast.methods.stitch import mmr_top

from test_hop_seeds import _engine, chunk_st


def _mmr_twin(V, scores, mu, k):
    """Greedy maximal marginal relevance, one loop per definition (first index on ties)."""
    s = [float(x) for x in scores]
    lo, hi = min(s), max(s)
    rel = [(x - lo) / (hi - lo) if hi > lo else 1.0 for x in s]
    chosen = []
    for _ in range(min(k, len(s))):
        best, arg = -np.inf, None
        for i in range(len(s)):
            if i in chosen:
                continue
            red = max([float(V[i] @ V[j]) for j in chosen], default=0.0)
            m = rel[i] - mu * max(red, 0.0)
            if m > best:
                best, arg = m, i
        chosen.append(arg)
    return chosen


@settings(max_examples=150, deadline=None)
@given(chunk_st, st.sampled_from([0.0, 0.3, 1.0, 5.0]), st.integers(1, 6), st.integers(0, 99))
def test_mmr_top_matches_twin(chunks, mu, k, seed):
    eng, _ = _engine(chunks)
    n = eng.graph.n_chunks
    rng = np.random.default_rng(seed)
    ranked = rng.permutation(n).astype(np.int64)
    scores = np.sort(rng.normal(size=n))[::-1]
    ids, s = mmr_top(eng, ranked, scores, mu, k)
    want = _mmr_twin(eng.chunk_vec[ranked].astype(np.float64), scores, mu, k)
    assert ids.tolist() == ranked[want].tolist()
    assert np.allclose(s, scores[want])
    if mu == 0.0:  # no redundancy term: the given order
        assert ids.tolist() == ranked[:k].tolist()


def test_hop_dense_is_the_nearest_to_the_moved_question():
    from hyperrag_fast.chunking import Document
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.extract.offline import RegexExtractor
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import Retriever
    docs = [Document(f"d{i}", f"Page {i}", f"Page {i} tells of {w} and Town {i % 3}.")
            for i, w in enumerate(["rivers", "kings", "films", "songs", "ships", "birds", "wars"])]
    ix = HyperIndex.build(docs, RegexExtractor(), HashingEmbedder(), progress=False)
    r = Retriever(ix, HashingEmbedder())
    state = r.state
    eng = state.engine
    q = HashingEmbedder().embed(["Which king sailed ships?"])[0].astype(np.float64)
    for t in range(len(docs)):
        for k in (1, 3, 10):
            ids, sims = hop_dense(state, eng, q, t, k)
            v = q + eng.chunk_vec[t].astype(np.float64)
            v = v / np.linalg.norm(v)
            full = eng.chunk_vec.astype(np.float64) @ v
            order = [int(c) for c in np.argsort(-full, kind="stable") if c != t][:k]
            assert sorted(ids.tolist()) == sorted(order)
            assert t not in ids.tolist()
            assert np.allclose(np.sort(sims), np.sort(np.maximum(full[order], 0.0)), atol=1e-5)
    h = replace(TUNED.hybrid, rank_weights=())
    off = r.retrieve("Which king sailed ships?", replace(TUNED, hybrid=h), detail=True)
    on = r.retrieve("Which king sailed ships?", replace(
        TUNED, hybrid=replace(h, hop_dense=3, hop_dense_weight=1.0)), detail=True)
    assert len(on.detail["cand_chunks"]) >= len(off.detail["cand_chunks"])


def test_hop_query_searches_the_question_with_the_bridge_name():
    from hyperrag_fast.chunking import Document
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.extract.offline import RegexExtractor
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.methods.stitch import _named_groups, bridge_groups
    from hyperrag_fast.retriever import Retriever
    docs = [Document(f"d{i}", f"Page {i}", f"Page {i} tells of {w} and Town {i % 3} near {p}.")
            for i, (w, p) in enumerate([("Rivers", "Alba"), ("Kings", "Borr"), ("Films", "Alba"),
                                        ("Songs", "Cyr"), ("Ships", "Borr"), ("Birds", "Dunn")])]
    ix = HyperIndex.build(docs, RegexExtractor(), HashingEmbedder(), progress=False)
    r = Retriever(ix, HashingEmbedder())
    state, eng, lk = r.state, r.state.engine, next(iter(r.state.lookups.values()))
    text = "Which king sailed ships?"
    q = HashingEmbedder().embed([text])[0]
    g = eng.graph
    seen = 0
    for t in range(len(docs)):
        bridges = lambda c: bridge_groups(eng, q, c, _named_groups(lk, text, c))  # noqa: E731
        grp, w = bridges(t)
        for k in (1, 3):
            ids, s = hop_query(state, eng, text, t, k, False, bridges)
            ids_b, s_b = hop_query(state, eng, text, t, k, True, bridges)
            if not grp.size:
                assert ids.size == 0 and ids_b.size == 0
                continue
            seen += 1
            nodes = g.chunk_nodes[g.chunk_ptr[t]:g.chunk_ptr[t + 1]]
            best = int(grp[np.argmax(w)])
            name = [g.node_name[v] for v in nodes.tolist() if g.node_group[v] == best][0]
            u = HashingEmbedder().embed([f"{text} {name}"])[0].astype(np.float64)
            full = eng.chunk_vec.astype(np.float64) @ u
            order = [int(c) for c in np.argsort(-full, kind="stable") if c != t][:k]
            assert sorted(ids.tolist()) == sorted(order) and t not in ids.tolist()
            assert np.allclose(np.sort(s), np.sort(np.maximum(full[order], 0.0)), atol=1e-5)
            b_ids, b_s = state.bm25.top_k(f"{text} {name}", k + 1)
            keep = b_ids != t
            assert ids_b.tolist() == b_ids[keep][:k].tolist()
            assert np.allclose(s_b, (b_s / b_s.max())[keep][:k])
    assert seen  # some top chunk has a bridge name
    h = replace(TUNED.hybrid, rank_weights=())
    off = r.retrieve(text, replace(TUNED, hybrid=h), detail=True)
    on = r.retrieve(text, replace(TUNED, hybrid=replace(h, hop_query=3, hop_query_bm25=3,
                                                        hop_query_weight=1.0)), detail=True)
    assert len(on.detail["cand_chunks"]) > len(off.detail["cand_chunks"])


def test_best_per_title_literal():
    lk = type("L", (), {"titles": TitleLookup(lambda: ["A", "B", "A", "C", "A", "B"])})()
    named = np.array([0, 2, 4, 1, 5], np.int64)
    share = np.array([0.2, 0.5, 0.3, 0.6, 0.4])
    assert sorted(_best_per_title(lk, named, share)) == [1, 2]  # A's best is 2, B's is 1
    assert _best_per_title(lk, np.array([3], np.int64), np.array([1.0])) == [3]


def test_options_off_by_default_and_validated():
    h = HybridOptions()
    assert (h.hop_dense, h.hop_dense_weight, h.mmr, h.hop_bridge_titles, h.hop_rounds) == (
        0, 0.0, 0.0, False, 1)
    p = HybridOptions.paper()
    assert (p.hop_dense, p.mmr, p.hop_bridge_titles, p.hop_rounds) == (0, 0.0, False, 1)
    assert (h.hop_query, h.hop_query_bm25, h.hop_query_weight) == (0, 0, 0.0)
    assert (p.hop_query, p.hop_query_bm25, p.hop_query_weight) == (0, 0, 0.0)
    for bad in ({"hop_dense": -1}, {"hop_dense_weight": -0.5}, {"mmr": -0.1}, {"hop_rounds": 0},
                {"hop_query": -1}, {"hop_query_bm25": -2}, {"hop_query_weight": -0.1}):
        with pytest.raises(ValueError):
            HybridOptions(**bad)
