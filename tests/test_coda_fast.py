"""CODA's fast query path (docs/architecture.md §7, "CODA query cost"): the compiled
functional top-k against its twin, the lazy similarities (moments, exact top-k, fills)
against the dense ones, and whole retrievals with ``sims="lazy"`` / ``ppr_solver="local"``
against the published full scans."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperrag_fast.coda.fast import QuerySims, graph_sims, moments
from hyperrag_fast.coda.retrieve import CodaOptions, CodaRetriever
from hyperrag_fast.coda.system import build_coda
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.kernels.coda_assoc import functional_topk
from hyperrag_fast.kernels.dense import code_topk, quantize_rows
from hyperrag_fast.methods import CodaSetup
from hyperrag_fast.prebuilt import build_prebuilt
from hyperrag_fast.retriever import QueryOptions, Retriever

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EMB = HashingEmbedder(dim=64)


def functional_twin(frp, entries, k, rows):
    """Obviously correct: every candidate's max dot product, positive ones, best k."""
    out = []
    for i in rows:
        if i in set(entries.tolist()):
            continue
        s = max(float(np.dot(frp[e].astype(np.float64), frp[i])) for e in entries)
        if s > 0:
            out.append((-s, int(i)))
    return [i for _, i in sorted(out)[:k]], sorted(out)[:k]


@SETTINGS
@given(st.integers(1, 60), st.integers(1, 12), st.integers(1, 5), st.integers(0, 12),
       st.integers(0, 2**32 - 1), st.booleans())
def test_functional_topk_matches_twin(n, d, m, k, seed, subset):
    rng = np.random.default_rng(seed)
    frp = rng.integers(-3, 4, size=(n, d)).astype(np.float32)  # small integers: exact sums
    entries = rng.choice(n, size=min(m, n), replace=False).astype(np.int64)
    rows = (np.sort(rng.choice(n, size=max(1, n // 2), replace=False)) if subset
            else np.arange(n)).astype(np.int64)
    ids, s = functional_topk(frp, entries, k, rows)
    want, pairs = functional_twin(frp, entries, k, rows)
    assert ids.tolist() == want
    np.testing.assert_array_equal(s, [-p for p, _ in pairs])


@SETTINGS
@given(st.integers(1, 80), st.integers(1, 24), st.integers(1, 10), st.integers(0, 2**32 - 1),
       st.booleans())
def test_code_topk_is_the_exact_top_k(n, d, k, seed, dup):
    """The int8 bound never drops a row of the exact top-k (twin: float64 scores,
    descending, ties by id); ``dup`` repeats rows (exact ties)."""
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((n, d)).astype(np.float32)
    if dup and n > 2:
        V[n // 2:] = V[: n - n // 2]
    V /= np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-12)
    V[rng.random(n) < 0.1] = 0.0  # zero rows: scale 1, code 0
    q = rng.standard_normal(d).astype(np.float32)
    q /= np.linalg.norm(q)
    C, sc = np.empty(V.shape, np.int8), np.empty(n, np.float32)
    quantize_rows(V, C, sc)
    assert np.all(np.abs(V - C * sc[:, None]) <= sc[:, None] / 2 + 1e-7)
    k = min(k, n)
    ids, s = np.empty(k, np.int64), np.empty(k, np.float32)
    rescored = code_topk(C, sc, V, q, k, ids, s)
    exact = V.astype(np.float64) @ q.astype(np.float64)
    want = np.lexsort((np.arange(n), -np.round(exact, 5)))[:k]
    assert k <= rescored <= n
    np.testing.assert_allclose(s, exact[ids], atol=1e-5)
    np.testing.assert_allclose(np.sort(exact[ids]), np.sort(exact[want]), atol=1e-5)


def test_moments_give_the_mean_and_std_of_all_similarities():
    rng = np.random.default_rng(0)
    rep = rng.standard_normal((50, 8)).astype(np.float32)
    of = rng.integers(0, 50, size=300)
    counts = np.bincount(of, minlength=50)
    q = rng.standard_normal(8).astype(np.float32)
    mu, M = moments(rep, counts)
    sims = (rep[of].astype(np.float64) @ q.astype(np.float64))
    m = mu @ q.astype(np.float64)
    assert m == pytest.approx(sims.mean(), abs=1e-12)
    assert np.sqrt(q.astype(np.float64) @ M @ q.astype(np.float64) - m * m) == pytest.approx(sims.std(), abs=1e-12)
    mu1, _ = moments(rep)
    np.testing.assert_allclose(mu1, rep.astype(np.float64).mean(0), atol=1e-12)


DOCS = [
    {"doc_id": "a", "title": "Google", "text": "Google was founded by Larry Page. Google Inc. is based in Mountain View."},
    {"doc_id": "b", "title": "Larry Page", "text": "Larry Page was born in East Lansing. Larry Page studied at Stanford University."},
    {"doc_id": "c", "title": "Stanford University", "text": "Stanford University is in California. Stanford was founded by Leland Stanford."},
    {"doc_id": "d", "title": "Apple", "text": "Apple was founded by Steve Jobs in Cupertino. Steve Jobs was born in San Francisco."},
    {"doc_id": "e", "title": "Microsoft", "text": "Microsoft was founded by Bill Gates and Paul Allen in Albuquerque."},
]
QUESTIONS = ("Where was the founder of Google born?", "Who founded Apple in Cupertino?",
             "Which university did Larry Page attend?", "Where is Stanford University?",
             "Who founded Microsoft?")


@pytest.fixture(scope="module")
def system():
    index = HyperIndex.build(DOCS, RegexExtractor(), EMB, progress=False)
    return index, build_coda(index, gate=0.3)


def test_lazy_similarities_equal_the_dense_ones(system):
    index, sys_ = system
    ret = CodaRetriever(sys_.graph)
    g = ret.g
    for text in QUESTIONS:
        q = EMB.embed([text])[0]
        S = QuerySims(graph_sims(ret), q)
        es, rs = g.ent_vec @ q, g.rel_vec @ q
        e0 = S.top_entities(3)
        r0 = S.top_relations(4)
        assert e0.tolist() == np.lexsort((np.arange(es.size), -es))[:3].tolist()
        assert r0.tolist() == np.lexsort((np.arange(rs.size), -rs))[:4].tolist()
        E, R = np.arange(g.n_entities), np.arange(g.n_relations)
        ez, rz = S.z(E, R)
        np.testing.assert_allclose(S.ent, es, atol=1e-6)
        np.testing.assert_allclose(ez, (es - es.mean()) / es.std(), atol=1e-5)
        np.testing.assert_allclose(rz, (rs - rs.mean()) / rs.std(), atol=1e-5)
        S2 = QuerySims(graph_sims(ret), q)  # only what is asked for is computed
        S2.fill(np.array([0]), None)
        assert np.isfinite(S2.ent).sum() == 1 and not np.isfinite(S2.rel).any()


@pytest.mark.parametrize("fast", [dict(sims="lazy"), dict(ppr_solver="local", ppr_eps=1e-9),
                                  dict(sims="lazy", ppr_solver="local", ppr_eps=1e-9),
                                  dict(sims="lazy", ppr_solver="local", ppr_eps=1e-9,
                                       functional_scope="touched")])
def test_fast_paths_rank_as_the_full_scans(system, fast):
    """Same ordered chunks and scores as the published full scans on the small corpus
    (every entity is reached by the push, so the touched scope is the whole graph)."""
    index, sys_ = system
    pre = build_prebuilt(index, ["coda"], coda=sys_)
    base = CodaOptions(sims="full", ppr_solver="power", k_entry=3, k_entry_relations=3,
                       k_context=4, k_functional=3, tau=-1.0, ppr_tol=1e-12)
    rs = {}
    for name, o in (("full", base), ("fast", replace(base, **fast))):
        r = Retriever(index, EMB, prebuilt=pre, coda=CodaSetup(o))
        rs[name] = [r.retrieve(t, QueryOptions(method="coda").with_top_k(4), detail=True)
                    for t in QUESTIONS]
    for a, b in zip(rs["full"], rs["fast"]):
        assert [c.chunk_id for c in a.chunks] == [c.chunk_id for c in b.chunks]
        np.testing.assert_allclose([c.score for c in a.chunks], [c.score for c in b.chunks], atol=1e-5)
        assert a.detail["entities"].tolist() == b.detail["entities"].tolist()


def test_fast_options_are_validated():
    for bad in (dict(sims="x"), dict(ppr_solver="x"), dict(ppr_eps=0.0), dict(functional_scope="x")):
        with pytest.raises(ValueError):
            CodaOptions(**bad)


def test_json_written_in_parts_is_the_one_shot_document(tmp_path, monkeypatch):
    """save_raw / save_graph write their JSON a list part at a time: the same bytes."""
    import json

    from hyperrag_fast.coda import raw_kg
    monkeypatch.setattr(raw_kg, "JSON_PART", 3)
    doc = {"a": [1, 2.5, "x\u00e9\U0001F600", None], "b": [], "c": 7, "d": list(range(10)),
           "e": [[1, 2], {"k": "v"}], "f": "s\n\"q\""}
    for ea in (True, False):
        raw_kg.write_json_object(tmp_path / "x.json", doc.items(), ensure_ascii=ea)
        assert (tmp_path / "x.json").read_bytes() == json.dumps(doc, ensure_ascii=ea).encode("utf-8")
