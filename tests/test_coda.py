"""CODA offline path: graph building, merging/unmerge, kernels vs twins, pathways,
ablation switches, alignment ranking, registered methods (CodaRAG §3)."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hyperrag_fast.coda.consolidate import (KEEP, MERGE, MergeRow, MergeTable, candidate_pairs,
                                            consolidated_group_of, merge_entities, offline_rule)
from hyperrag_fast.coda.graph import consolidate
from hyperrag_fast.coda.kg_vectors import raw_vectors
from hyperrag_fast.coda.raw_kg import ChunkKG, RawKG, chunk_kgs_from_extractions
from hyperrag_fast.coda.system import build_coda, load_coda
from hyperrag_fast.methods import CodaSetup, MissingPrebuilt
from hyperrag_fast.prebuilt import build_prebuilt
from hyperrag_fast.coda.retrieve import CodaOptions, CodaRetriever
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.indexing.hypergraph import build_hypergraph
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.kernels.coda_assoc import (align_chunks, induced_relations, semantic_expand,
                                             weighted_chunks)
from hyperrag_fast.records import Extraction, Segment
from hyperrag_fast.retriever import METHODS, QueryOptions, Retriever

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EMB = HashingEmbedder(dim=64)


# ------------------------------------------------------------------ twins
def semantic_twin(ptr, nbr, rel, ent_sim, rel_sim, entries, alpha, beta, tau):
    be, br = {}, {}
    for u in entries:
        for k in range(ptr[u], ptr[u + 1]):
            s = alpha * rel_sim[rel[k]] + beta * ent_sim[nbr[k]]
            if s >= tau:
                be[int(nbr[k])] = max(be.get(int(nbr[k]), -np.inf), s)
                br[int(rel[k])] = max(br.get(int(rel[k]), -np.inf), s)
    return be, br


def align_twin(ent_chunks, rel_chunks, ents, es, rels, rs):
    count, best = {}, {}
    for items, chunks, sc in ((ents, ent_chunks, es), (rels, rel_chunks, rs)):
        for i, s in zip(items, sc):
            for c in chunks[i]:
                count[c] = count.get(c, 0) + 1
                best[c] = max(best.get(c, -np.inf), s)
    return sorted(count, key=lambda c: (-count[c], -best[c], c)), count, best


@st.composite
def kgs(draw):
    n = draw(st.integers(1, 9))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=20))
    pairs = sorted({(min(a, b), max(a, b)) for a, b in pairs if a != b})
    chunks = [[c for c in range(6) if draw(st.booleans())] for _ in range(n + len(pairs))]
    sims = [draw(st.floats(-1, 1)) for _ in range(n + len(pairs))]
    return n, pairs, chunks, np.array(sims)


def _graph_from(n, pairs, chunks, sims):
    kg = RawKG(6, [f"e{i}" for i in range(n)], [f"E{i}" for i in range(n)], ["entity"] * n,
               [[f"d{i}"] for i in range(n)], chunks[:n], [a for a, _ in pairs],
               [b for _, b in pairs], [[f"r{j}"] for j in range(len(pairs))],
               [[] for _ in pairs], [1.0 + j for j in range(len(pairs))], chunks[n:])
    ev = np.eye(n, 4, dtype=np.float32) + 0.1
    rv = np.ones((len(pairs), 4), np.float32)
    return kg, consolidate(kg, ev, rv)


@SETTINGS
@given(kgs(), st.floats(0, 1), st.floats(0, 1), st.floats(-0.5, 1))
def test_semantic_expand_matches_twin(data, alpha, beta, tau):
    n, pairs, chunks, sims = data
    _, g = _graph_from(n, pairs, chunks, sims)
    es, rs = sims[:n], sims[n:]
    entries = np.arange(0, n, 2, dtype=np.int64)
    e, esc, r, rsc = semantic_expand(g.adj_ptr, g.adj_nbr, g.adj_rel, es, rs, entries,
                                     alpha, beta, tau)
    be, br = semantic_twin(g.adj_ptr, g.adj_nbr, g.adj_rel, es, rs, entries, alpha, beta, tau)
    assert dict(zip(e.tolist(), esc.tolist())) == pytest.approx(be, abs=1e-12)
    assert dict(zip(r.tolist(), rsc.tolist())) == pytest.approx(br, abs=1e-12)
    assert len(set(e.tolist())) == e.size


@SETTINGS
@given(kgs(), st.data())
def test_induced_relations_and_alignment_match_twins(data, d):
    n, pairs, chunks, sims = data
    kg, g = _graph_from(n, pairs, chunks, sims)
    sel = np.array(sorted(d.draw(st.sets(st.integers(0, n - 1)))), np.int64)
    got = induced_relations(g.adj_ptr, g.adj_nbr, g.adj_rel, sel)
    want = [j for j in range(g.n_relations) if g.rel_src[j] in sel and g.rel_tgt[j] in sel]
    assert got.tolist() == want
    rels = np.array(sorted(d.draw(st.sets(st.integers(0, max(g.n_relations - 1, 0)))))
                    if g.n_relations else [], np.int64)
    es, rs = sims[:n][sel], np.linspace(-1, 1, rels.size)
    ids, cnt, best = align_chunks(g.ent_chunk_ptr, g.ent_chunks, g.rel_chunk_ptr, g.rel_chunks,
                                  sel, es, rels, rs, g.n_chunks)
    ec = [g.ent_chunks[g.ent_chunk_ptr[e]:g.ent_chunk_ptr[e + 1]].tolist() for e in range(n)]
    rc = [g.rel_chunks[g.rel_chunk_ptr[r]:g.rel_chunk_ptr[r + 1]].tolist()
          for r in range(g.n_relations)]
    order, count, bst = align_twin(ec, rc, sel, es, rels, rs)
    assert ids.tolist() == order
    assert cnt.tolist() == [count[c] for c in order]
    np.testing.assert_allclose(best, [bst[c] for c in order])
    wid, wsum = weighted_chunks(g.ent_chunk_ptr, g.ent_chunks, g.rel_chunk_ptr, g.rel_chunks,
                                sel, es, rels, rs)
    tot: dict[int, float] = {}
    for items, lists, w in ((sel, ec, es), (rels, rc, rs)):
        for x, wx in zip(items, w):
            for c in lists[x]:
                tot[c] = tot.get(c, 0.0) + wx
    assert wid.tolist() == sorted(tot)
    np.testing.assert_allclose(wsum, [tot[c] for c in sorted(tot)], atol=1e-12)


# ------------------------------------------------------- offline graph building
EXTRACTIONS = [
    Extraction((Segment("Google was founded by Larry Page.", (("Google", "x"), ("Larry Page", "y"))),
                Segment("Google is in Mountain View with Larry Page.",
                        (("Google", "z"), ("Mountain View", "w"), ("Larry Page", "v"))))),
    Extraction((), error="boom"),
    Extraction((Segment("Google Inc. hired Larry Page.", (("Google Inc.", "a"), ("Larry Page", "b"))),)),
]


def test_offline_chunk_kgs_and_raw_graph():
    types = {"google": "ORG", "larry page": "PERSON"}
    ck = chunk_kgs_from_extractions(EXTRACTIONS, types.get)
    assert ck[1] == ChunkKG(error="boom")
    assert ("Google", "ORG", "x") in ck[0].entities
    assert ("Mountain View", "entity", "w") in ck[0].entities
    kg = RawKG.from_chunk_kgs(ck)
    assert kg.errors == [(1, "boom")]
    i = {k: n for n, k in enumerate(kg.ent_key)}
    assert kg.ent_type[i["google"]] == "ORG" and kg.ent_chunks[i["larry page"]] == [0, 2]
    j = [r for r in range(kg.n_relations)
         if {kg.rel_src[r], kg.rel_tgt[r]} == {i["google"], i["larry page"]}][0]
    assert kg.rel_strength[j] == 2.0  # co-occurs in two sentences
    assert kg.rel_desc[j] == ["Google was founded by Larry Page.",
                              "Google is in Mountain View with Larry Page."]
    assert kg.n_relations == 4  # g-lp, g-mv, lp-mv, ginc-lp


def _raw():
    kg = RawKG.from_chunk_kgs(chunk_kgs_from_extractions(EXTRACTIONS))
    ev, rv = raw_vectors(kg, EMB, {}, EMB.dim)
    return kg, ev, rv


def test_merge_dedupes_relations_and_unmerge_restores(tmp_path):
    kg, ev, rv = _raw()
    table = MergeTable([MergeRow("google", "google inc", MERGE, "test", 0.9, "rule")],
                       {"google": 2.0, "google inc": 1.0})
    g0 = consolidate(kg, ev, rv)
    g1 = consolidate(kg, ev, rv, table.group_of())
    assert g1.n_entities == g0.n_entities - 1
    assert g1.n_relations == g0.n_relations - 1  # google-lp and ginc-lp became one edge
    e = g1.ent_key.index("google")
    lp = g1.ent_key.index("larry page")
    r = [k for k in range(g1.n_relations) if {g1.rel_src[k], g1.rel_tgt[k]} == {e, lp}][0]
    assert g1.rel_strength[r] == 3.0
    assert g1.rel_chunks[g1.rel_chunk_ptr[r]:g1.rel_chunk_ptr[r + 1]].tolist() == [0, 2]
    assert "Google Inc. hired Larry Page." in g1.rel_desc[r]
    assert g1.raw_to_ent[kg.ent_key.index("google inc")] == e
    assert table.unmerge("Google Inc.") == 1
    assert table.decision("google", "google inc").decision == KEEP
    assert consolidate(kg, ev, rv, table.group_of()).n_entities == g0.n_entities
    table.override("Google", "Google Inc", MERGE)
    table.save(tmp_path / "t.json")
    again = MergeTable.load(tmp_path / "t.json")
    assert again.groups() == [["google", "google inc"]]
    assert consolidated_group_of(again)("google inc") == "google"
    assert consolidated_group_of(again)("other") == "other"


def test_offline_rule_and_candidates():
    kg, ev, _ = _raw()
    i, j = kg.ent_key.index("google"), kg.ent_key.index("google inc")
    assert offline_rule(kg, i, j, 0.5)[0] == MERGE
    assert offline_rule(kg, i, kg.ent_key.index("mountain view"), 0.5)[0] == KEEP
    assert offline_rule(kg, i, kg.ent_key.index("mountain view"), 0.99)[0] == MERGE
    kg.ent_type[i], kg.ent_type[j] = "ORG", "PERSON"
    assert offline_rule(kg, i, j, 0.99)[0] == KEEP
    v = np.array([[1, 0], [0.99, 0.141], [0, 1]], np.float32)
    a, b, s = candidate_pairs(v, 0.9, k=2)
    assert a.tolist() == [0] and b.tolist() == [1] and s[0] > 0.9
    table = merge_entities(kg, ev, None, gate=-1.0)
    assert all(r.source == "rule" for r in table.rows) and len(table.rows) > 0


def candidates_twin(v, gate, k):
    """All pairs: each row's top k + 1 other rows (full sort), those with cosine >= gate."""
    sims = v @ v.T
    n = v.shape[0]
    out = {}
    for i in range(n):
        order = sorted((j for j in range(n) if j != i), key=lambda j: (-sims[i, j], j))[:k + 1]
        for j in order:
            if sims[i, j] >= gate:
                out[(min(i, j), max(i, j))] = sims[min(i, j), max(i, j)]
    return out


@SETTINGS
@given(st.integers(2, 40), st.integers(1, 5), st.floats(-0.5, 0.9), st.integers(1, 7),
       st.integers(0, 2 ** 31 - 1))
def test_candidate_pairs_match_the_all_pairs_twin(n, k, gate, batch, seed):
    """Blocked upper-triangle candidates with the gate applied first = every row's
    top k + 1 over all rows, then the gate (continuous random vectors: no ties)."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, 6)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    sims = np.sort((v.astype(np.float64) @ v.T.astype(np.float64)), axis=1)
    assume(np.all(np.abs(sims - gate) > 1e-6) and np.all(np.diff(sims, axis=1) > 1e-6))
    a, b, s = candidate_pairs(v, gate, k, batch=batch)
    want = candidates_twin(v.astype(np.float64), gate, k)
    assert sorted(zip(a.tolist(), b.tolist())) == sorted(want)
    np.testing.assert_allclose(s, [want[(x, y)] for x, y in zip(a, b)], atol=1e-5)
    assert np.all(np.diff(s) <= 0) and np.all(a < b)


def test_candidate_pairs_threaded_equal_one_thread(monkeypatch):
    """The blocks on one thread per core give the pairs and scores of one thread."""
    from hyperrag_fast.coda import consolidate as cons
    rng = np.random.default_rng(3)
    v = rng.normal(size=(700, 16)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    got = {}
    for cores in ({0}, {0, 1}):
        monkeypatch.setattr(cons.os, "sched_getaffinity", lambda _, c=cores: c,
                            raising=False)
        got[len(cores)] = candidate_pairs(v, 0.3, 5, batch=64)
    assert got[1][0].size > 0
    assert all(np.array_equal(x, y) for x, y in zip(got[1], got[2]))


def test_relation_rows_stored_once_give_the_dense_values():
    """Relation vectors stored once per distinct description tuple (RowTable) and merged
    once per distinct member tuple equal, bit for bit, the dense per-relation values."""
    from hyperrag_fast.coda.raw_kg import MAX_PIECES, RowTable, l2_rows, segment_sum
    kg, ev, rv = _raw()
    assert isinstance(rv, RowTable) and rv.rep.shape[0] < rv.shape[0]  # sentences repeat
    dense = []
    for d in kg.rel_desc:
        p = np.asarray(EMB.embed(d[:MAX_PIECES]), np.float32)
        dense.append(l2_rows(segment_sum(np.array([0, len(p)]), np.arange(len(p)), p))[0])
    np.testing.assert_array_equal(np.asarray(rv), np.array(dense))
    table = MergeTable([MergeRow("google", "google inc", MERGE, "test", 0.9, "rule")],
                       {"google": 2.0, "google inc": 1.0})
    g = consolidate(kg, ev, rv, table.group_of())
    gd = consolidate(kg, ev, RowTable.dense_rows(np.asarray(rv)), table.group_of())
    np.testing.assert_array_equal(np.asarray(g.rel_vec), np.asarray(gd.rel_vec))
    q = EMB.embed(["Larry Page founded Google"])[0]
    np.testing.assert_array_equal(g.rel_vec @ q, np.asarray(g.rel_vec) @ q)


def test_saved_graph_opens_as_built_and_damage_is_refused(tmp_path):
    from hyperrag_fast.coda.graph import load_graph, save_graph
    from hyperrag_fast.errors import IndexCorruptedError
    kg, ev, rv = _raw()
    g = consolidate(kg, ev, rv)
    save_graph(tmp_path / "g", g)
    h = load_graph(tmp_path / "g", kg.n_chunks, EMB.dim)
    for k, a in g.arrays().items():
        np.testing.assert_array_equal(a, h.arrays()[k])
    assert list(h.ent_name) == g.ent_name and h.relation_text(0) == g.relation_text(0)
    nbr = np.load(tmp_path / "g" / "adj_nbr.npy")
    nbr[0] = g.n_entities
    np.save(tmp_path / "g" / "adj_nbr.npy", nbr)
    with pytest.raises(IndexCorruptedError, match="adj_nbr"):
        load_graph(tmp_path / "g", kg.n_chunks, EMB.dim)


def test_stitch_group_of_merges_name_groups():
    kg, ev, _ = _raw()
    table = MergeTable([MergeRow("google", "google inc", MERGE, "t", 0.9, "rule")], {"google": 2})
    h0 = build_hypergraph(EXTRACTIONS)
    h1 = build_hypergraph(EXTRACTIONS, group_of=consolidated_group_of(table))
    assert h1.n_groups == h0.n_groups - 1 and "google inc" not in h1.group_key
    assert h1.n_nodes == h0.n_nodes  # different chunks: semi-merge keeps the states


# ---------------------------------------------------------------- pathways
def _tiny():
    """A-B-C chain plus a star D-{E,F}; A is the query's entity."""
    ex = [
        Extraction((Segment("alpha beta link", (("Alpha", "alpha thing"), ("Beta", "beta thing"))),)),
        Extraction((Segment("beta gamma link", (("Beta", "beta thing"), ("Gamma", "gamma thing"))),)),
        Extraction((Segment("delta epsilon", (("Delta", "delta"), ("Epsilon", "eps"))),
                    Segment("delta zeta", (("Delta", "delta"), ("Zeta", "zeta"))),)),
        Extraction((Segment("alpha eta", (("Alpha", "alpha thing"), ("Eta", "eta"))),)),
    ]
    kg = RawKG.from_chunk_kgs(chunk_kgs_from_extractions(ex))
    ev, rv = raw_vectors(kg, EMB, {}, EMB.dim)
    return consolidate(kg, ev, rv)


def _ret(g, q_text, o, top_k=4):
    q = EMB.embed([q_text])[0]
    return CodaRetriever(g).retrieve(q, q_text, top_k, o, detail=True)


def test_each_pathway_and_switch():
    g = _tiny()
    base = CodaOptions(align="count", elim_calibration="raw", k_entry=1, k_entry_relations=0,
                       elimination=False, tau=-10.0,
                       k_context=3, k_functional=2)
    r = _ret(g, "alpha thing", base)
    name = lambda ids: {g.ent_key[int(i)] for i in ids}  # noqa: E731
    path = dict(zip((g.ent_key[int(e)] for e in r.detail["entities"]), r.detail["entity_path"]))
    assert name(r.detail["entry_entities"]) == {"alpha"}
    assert path["beta"] == "semantic" and path["eta"] == "semantic"
    assert set(r.detail["entity_path"]) >= {"entry", "semantic"}
    off = _ret(g, "alpha thing", CodaOptions(**{**base.__dict__, "semantic": False}))
    assert "semantic" not in off.detail["entity_path"]
    pc = dict(zip((g.ent_key[int(e)] for e in off.detail["entities"]), off.detail["entity_path"]))
    assert pc == {"alpha": "entry", "beta": "contextual", "eta": "contextual", "gamma": "functional"}
    noc = _ret(g, "alpha thing", CodaOptions(**{**base.__dict__, "semantic": False,
                                                "contextual": False}))
    pn = dict(zip((g.ent_key[int(e)] for e in noc.detail["entities"]), noc.detail["entity_path"]))
    assert pn == {"alpha": "entry", "gamma": "functional", "eta": "functional"}
    none = _ret(g, "alpha thing", CodaOptions(**{**base.__dict__, "semantic": False,
                                                 "contextual": False, "functional": False}))
    assert none.detail["entity_path"] == ["entry"]
    # tau prunes: with the paper's tau nothing weak survives
    strict = _ret(g, "alpha thing", CodaOptions(**{**base.__dict__, "tau": 5.0, "contextual": False,
                                                   "functional": False}))
    assert strict.detail["entity_path"] == ["entry"]


def test_elimination_and_alignment_ranking():
    g = _tiny()
    o = CodaOptions(align="count", elim_calibration="raw", k_entry=1, k_entry_relations=0,
                    tau=-10.0, k_context=6, k_functional=3,
                    elim_keep_frac=0.0)
    r = _ret(g, "alpha thing", o)
    path = dict(zip((g.ent_key[int(e)] for e in r.detail["entities"]), r.detail["entity_path"]))
    assert path == {"alpha": "entry", "beta": "semantic", "eta": "semantic",
                    "gamma": "contextual"}  # pathways added three items ...
    assert r.detail["kept_entities"].tolist() == r.detail["entry_entities"].tolist()  # ... all cut
    keep_all = _ret(g, "alpha thing", CodaOptions(**{**o.__dict__, "elimination": False}))
    assert ({g.ent_key[int(e)] for e in keep_all.detail["kept_entities"]}
            == {"alpha", "beta", "eta", "gamma"})
    # alpha occurs in chunks 0 and 3; beta (semantic) in 0 and 1: chunk 0 holds two items
    o2 = CodaOptions(align="count", k_entry=1, k_entry_relations=0, tau=-10.0, contextual=False,
                     functional=False, elimination=False, fill_dense=False)
    r2 = _ret(g, "alpha thing", o2)
    assert r2.chunk_ids[0] == 0 and r2.scores[0] == max(r2.scores)
    assert list(r2.scores) == sorted(r2.scores, reverse=True)


# --------------------------------------------------------- index + methods
DOCS = [
    {"doc_id": "a", "title": "Google", "text": "Google was founded by Larry Page. Google Inc. is based in Mountain View."},
    {"doc_id": "b", "title": "Larry Page", "text": "Larry Page was born in East Lansing. Larry Page studied at Stanford University."},
    {"doc_id": "c", "title": "Stanford University", "text": "Stanford University is in California."},
    {"doc_id": "d", "title": "Apple", "text": "Apple was founded by Steve Jobs in Cupertino."},
]


@pytest.fixture(scope="module")
def index():
    return HyperIndex.build(DOCS, RegexExtractor(), EMB, progress=False)


def test_methods_registered_and_run(index, tmp_path):
    names = ["coda", "coda_no_semantic", "coda_no_contextual", "coda_no_functional",
             "coda_no_elimination", "coda_no_cover", "coda_paper", "coda_paper_no_semantic",
             "coda_paper_no_contextual", "coda_paper_no_functional",
             "coda_paper_no_elimination", "coda_base", "coda_paper_base", "stitch_consolidated"]
    assert set(names) <= set(METHODS)
    sys_ = build_coda(index, gate=0.3)
    assert sys_.table.groups() == [["google", "google inc"]]  # the one merge, nothing else
    pre = build_prebuilt(index, ["coda", "consolidated"], coda=sys_)
    r = Retriever(index, EMB, prebuilt=pre, coda=CodaSetup(CodaOptions(fill_dense=False)))
    for m in names:
        res = r.retrieve("Where was the founder of Google born?",
                         QueryOptions(method=m).with_top_k(3), detail=True)
        assert len(res.chunks) == 3, m  # four passages, top 3
    # Base: entry finding only, on the raw KG (the merged pair stays two entities)
    b = r.state.coda
    assert b.raw_retriever().g.n_entities == b.retriever.g.n_entities + 1
    det = r.retrieve("Where was the founder of Google born?",
                     QueryOptions(method="coda_base").with_top_k(3), detail=True).detail
    assert set(det["entity_path"]) == {"entry"}
    # persistence: the table is applied at load, and an edited table changes the graph
    d = sys_.save(tmp_path / "coda")
    loaded = load_coda(d)
    assert loaded.graph.n_entities == sys_.graph.n_entities
    assert loaded.table.rows == sys_.table.rows
    loaded.table.unmerge("google inc")
    loaded.table.save(d / "merge_table.json")
    assert load_coda(d).graph.n_entities == sys_.graph.n_entities + 1


def test_coda_no_cover_is_coda_without_cover_weight(index):
    """``coda_no_cover`` (the ablation row of ``cover_weight``) runs ``coda``'s options with
    ``cover_weight`` 0, whatever the setup's weight; ``coda_paper`` never covers."""
    assert CodaOptions().cover_weight > 0  # the default covers (docs/architecture.md §7)
    pre = build_prebuilt(index, ["coda"], coda=build_coda(index, gate=0.3))
    q = "Who founded Apple and where is Stanford University?"

    def top(o, m):
        r = Retriever(index, EMB, prebuilt=pre, coda=CodaSetup(o))
        res = r.retrieve(q, QueryOptions(method=m).with_top_k(2))
        return [(c.chunk_id, c.score) for c in res.chunks]
    off = top(CodaOptions(cover_weight=0.0), "coda")
    assert top(CodaOptions(cover_weight=2.0), "coda") != off  # the weight moves this query
    assert top(CodaOptions(cover_weight=2.0), "coda_no_cover") == off
    assert top(CodaOptions(cover_weight=0.0), "coda_no_cover") == off
    assert top(CodaOptions(cover_weight=2.0), "coda_paper") == top(CodaOptions(), "coda_paper")


def test_stitch_consolidated_without_merges_equals_stitch(index):
    """Only the name groups differ between stitch and stitch_consolidated: with a merge
    table that merges nothing, both rank the same chunks with the same scores."""
    sys_ = build_coda(index, gate=2.0, high_gate=2.0)
    assert all(len(g) == 1 for g in sys_.table.groups())
    pre = build_prebuilt(index, ["coda", "consolidated"], coda=sys_)
    r = Retriever(index, EMB, prebuilt=pre, coda=CodaSetup(CodaOptions(fill_dense=False)))
    for question in ("Where was the founder of Google born?", "Who founded Apple in Cupertino?"):
        a = r.retrieve(question, QueryOptions(method="stitch").with_top_k(4))
        b = r.retrieve(question, QueryOptions(method="stitch_consolidated").with_top_k(4))
        assert [c.doc_id for c in a.chunks] == [c.doc_id for c in b.chunks]
        np.testing.assert_allclose([c.score for c in a.chunks], [c.score for c in b.chunks], rtol=0, atol=1e-12)


def test_isolated_trailing_entities_and_empty_graph():
    ck = [ChunkKG((("A", "entity", "a"), ("B", "entity", "b")), (("A", "B", "ab", "", 2.0),)),
          ChunkKG((("Lonely", "entity", "alone"),))]
    kg = RawKG.from_chunk_kgs(ck)
    ev, rv = raw_vectors(kg, EMB, {}, EMB.dim)
    g = consolidate(kg, ev, rv)
    r = CodaRetriever(g)
    assert r.wsum.tolist() == [2.0, 2.0, 0.0]
    assert np.all(g.frp[2] == 0)  # no neighbour: zero FastRP row
    res = r.retrieve(EMB.embed(["alone"])[0], "alone", 2,
                     CodaOptions(align="count", k_entry=1, k_entry_relations=0, fill_dense=False))
    assert res.chunk_ids.tolist()[0] == 1
    empty = consolidate(RawKG.from_chunk_kgs([ChunkKG(error="x")]), np.zeros((0, 64), np.float32),
                        np.zeros((0, 64), np.float32))
    assert CodaRetriever(empty).retrieve(EMB.embed(["q"])[0], "q", 2).chunk_ids.size == 0


def test_save_over_a_loaded_system(index, tmp_path):
    sys_ = build_coda(index, gate=0.3)
    d = sys_.save(tmp_path / "coda")
    loaded = load_coda(d)  # memory-maps the vectors
    loaded.save(d)  # must not truncate the mapped files
    assert load_coda(d).graph.n_entities == sys_.graph.n_entities


def test_coda_methods_without_the_build_step_say_how_to_build(index):
    r = Retriever(index, EMB)
    for m in ("coda", "stitch_consolidated", "merge_full", "merge_none"):
        with pytest.raises(MissingPrebuilt, match="hyperrag build-methods"):
            r.retrieve("Where was the founder of Google born?", QueryOptions(method=m))


def test_prebuilt_saved_and_loaded_give_the_same_ranking(index, tmp_path):
    from hyperrag_fast.prebuilt import ensure_prebuilt, load_prebuilt
    names = ["merge_full", "merge_none", "coda", "coda_base", "stitch_consolidated"]
    index.save(tmp_path / "ix")  # structures are published with the saved index they come from
    saved = HyperIndex.load(tmp_path / "ix", EMB)
    ensure_prebuilt(tmp_path / "ix", saved, ["merge_full", "merge_none", "coda"])
    ensure_prebuilt(tmp_path / "ix", saved, ["consolidated"])  # from the saved merge table
    a = Retriever(index, EMB, prebuilt=build_prebuilt(index, ["merge_full", "merge_none", "coda", "consolidated"]))
    b = Retriever(saved, EMB, prebuilt=load_prebuilt(tmp_path / "ix"))
    for m in names:
        o = QueryOptions(method=m).with_top_k(4)
        x = a.retrieve("Where was the founder of Google born?", o)
        y = b.retrieve("Where was the founder of Google born?", o)
        assert [c.chunk_id for c in x.chunks] == [c.chunk_id for c in y.chunks], m
        assert [c.score for c in x.chunks] == [c.score for c in y.chunks], m


# ------------------------------------------------- ours: z-score elimination, relevance alignment
def test_zscore_elimination_and_relevance_alignment():
    g = _tiny()
    q_text = "alpha thing"
    q = EMB.embed([q_text])[0]
    ent_sim = g.ent_vec @ q
    z = (ent_sim - ent_sim.mean()) / ent_sim.std()
    o = CodaOptions(k_entry=1, k_entry_relations=0, tau=-10.0, k_context=6, k_functional=3,
                    elim_min_z=0.5, dense_pool=0, align_items="all", align_pool="sum",
                    graph_weight=0.1, lexical_weight=0.0)
    r = _ret(g, q_text, o)
    kept = set(r.detail["kept_entities"].tolist())
    for e, p in zip(r.detail["entities"].tolist(), r.detail["entity_path"]):
        assert (e in kept) == (p == "entry" or z[e] >= 0.5), (g.ent_key[e], p, z[e])
    # relevance scores: graph_weight * sum over kept items of max(0, z) / (1 + ln |chunks|)
    rz_all = g.rel_vec @ q
    rz = (rz_all - rz_all.mean()) / rz_all.std() if g.n_relations > 1 else np.zeros(g.n_relations)
    want: dict[int, float] = {}
    for e in kept:
        ch = g.ent_chunks[g.ent_chunk_ptr[e]:g.ent_chunk_ptr[e + 1]].tolist()
        for c in ch:
            want[c] = want.get(c, 0.0) + o.graph_weight * max(0.0, z[e]) / (1 + np.log(len(ch)))
    for rr in r.detail["kept_relations"].tolist():
        ch = g.rel_chunks[g.rel_chunk_ptr[rr]:g.rel_chunk_ptr[rr + 1]].tolist()
        for c in ch:
            want[c] = want.get(c, 0.0) + o.graph_weight * max(0.0, rz[rr]) / (1 + np.log(len(ch)))
    order = sorted(want, key=lambda c: (-want[c], c))[:4]
    assert r.chunk_ids.tolist() == order
    np.testing.assert_allclose(r.scores, [want[c] for c in order], atol=1e-9)
    # dense prior: with chunk vectors the nearest chunks join and their similarity is added
    cv = EMB.embed(["alpha beta link", "beta gamma link", "delta epsilon. delta zeta", "alpha eta"])
    cv = np.asarray(cv, np.float32)
    rd = CodaRetriever(g, chunk_vec=cv).retrieve(q, q_text, 4, replace(o, dense_pool=4))
    cs = cv @ q
    full = {c: want.get(c, 0.0) + float(cs[c]) for c in range(4)}
    assert rd.chunk_ids.tolist() == sorted(full, key=lambda c: (-full[c], c))
    # max pooling over relations only: a chunk's graph term is its best kept relation
    rm = _ret(g, q_text, replace(o, align_items="relations", align_pool="max"))
    best: dict[int, float] = {}
    for rr in r.detail["kept_relations"].tolist():
        ch = g.rel_chunks[g.rel_chunk_ptr[rr]:g.rel_chunk_ptr[rr + 1]].tolist()
        for c in ch:
            best[c] = max(best.get(c, 0.0), o.graph_weight * max(0.0, rz[rr]) / (1 + np.log(len(ch))))
    assert rm.chunk_ids.tolist() == sorted(best, key=lambda c: (-best[c], c))[:4]
    with pytest.raises(ValueError):
        CodaOptions(align="nope")
    with pytest.raises(ValueError):
        CodaOptions(elim_calibration="nope")


def test_fact_weight_adds_the_best_sentence_and_dedup_skips_repeats():
    g = _tiny()
    q_text = "alpha thing"
    q = EMB.embed([q_text])[0]
    cv = np.asarray(EMB.embed(["alpha beta link", "beta gamma link", "delta epsilon. delta zeta",
                               "alpha eta"]), np.float32)
    sents = ["alpha beta link", "beta gamma link", "delta epsilon", "alpha thing indeed", "alpha eta"]
    sv = np.asarray(EMB.embed(sents), np.float32)
    sc = np.array([0, 1, 2, 2, 3], np.int64)  # sentence -> chunk
    o = CodaOptions(k_entry=1, k_entry_relations=0, dense_pool=4, graph_weight=0.0,
                    lexical_weight=0.0, fact_weight=0.7)
    r = CodaRetriever(g, chunk_vec=cv, sent_vec=sv, sent_chunk=sc).retrieve(q, q_text, 4, o)
    ss = sv @ q
    best = [max(float(ss[i]) for i in range(5) if sc[i] == c) for c in range(4)]
    want = {c: float(cv[c] @ q) + 0.7 * best[c] for c in range(4)}
    assert r.chunk_ids.tolist() == sorted(want, key=lambda c: (-want[c], c))
    np.testing.assert_allclose(r.scores, [want[c] for c in r.chunk_ids.tolist()], atol=1e-6)
    # without sentence vectors the option cannot act: plain dense order
    r0 = CodaRetriever(g, chunk_vec=cv).retrieve(q, q_text, 4, o)
    assert r0.chunk_ids.tolist() == sorted(range(4), key=lambda c: (-float(cv[c] @ q), c))
    # dedup: a chunk repeating a chosen one's text (cosine 1) is skipped
    cv2 = np.concatenate([cv, cv[:1]])  # chunk 4 = chunk 0
    r2 = CodaRetriever(g, chunk_vec=cv2).retrieve(q, q_text, 5, replace(o, dense_pool=5,
                                                                        fact_weight=0.0,
                                                                        dedup_sim=0.99))
    ids = r2.chunk_ids.tolist()
    assert not ({0, 4} <= set(ids)) and len(ids) == 4
    with pytest.raises(ValueError):
        CodaOptions(fact_weight=-1.0)


def test_diversity_is_greedy_marginal_relevance():
    """``diversity``: each pick maximises score - lam * max(0, cosine with the chosen),
    checked against a brute-force walk over every candidate."""
    g = _tiny()
    q_text = "alpha thing"
    q = EMB.embed([q_text])[0]
    texts = ["alpha beta link", "alpha beta link again", "beta gamma link", "delta epsilon",
             "alpha eta"]
    cv = np.asarray(EMB.embed(texts), np.float32)
    o = CodaOptions(k_entry=1, k_entry_relations=0, dense_pool=5, graph_weight=0.0,
                    lexical_weight=0.0, fact_weight=0.0, dedup_sim=0.0, diversity=0.8)
    r = CodaRetriever(g, chunk_vec=cv).retrieve(q, q_text, 4, o)
    rel = {c: float(cv[c] @ q) for c in range(5)}
    chosen: list[int] = []
    while len(chosen) < 4:
        def val(c):
            near = max([float(cv[c] @ cv[d]) for d in chosen], default=0.0)
            return rel[c] - 0.8 * max(near, 0.0)
        chosen.append(min((c for c in range(5) if c not in chosen), key=lambda c: (-val(c), c)))
    assert r.chunk_ids.tolist() == chosen
    np.testing.assert_allclose(r.scores, [rel[c] for c in chosen], atol=1e-6)
    plain = CodaRetriever(g, chunk_vec=cv).retrieve(q, q_text, 4, replace(o, diversity=0.0))
    assert plain.chunk_ids.tolist() == sorted(rel, key=lambda c: (-rel[c], c))[:4]
    assert chosen != plain.chunk_ids.tolist()  # the near-repeat gave way
    with pytest.raises(ValueError):
        CodaOptions(diversity=-0.1)


def test_alias_discovery_merges_abbreviations():
    from hyperrag_fast.coda.consolidate import alias_pairs, alias_rows
    got = alias_pairs(["Basal cell carcinoma (BCC) is the most common. BCC grows slowly.",
                       "It is Erica Vagans, also known as Cornish Heath, here.",
                       "A note (UK) and a mismatch Big Red Dog (XYZ)."])
    assert set(got) == {("basal cell carcinoma", "bcc"), ("erica vagans", "cornish heath")}
    ck = [ChunkKG((("Basal cell carcinoma", "entity", "a"), ("BCC", "entity", "b")), ()),
          ChunkKG((("BCC", "entity", "c"),))]
    kg = RawKG.from_chunk_kgs(ck)
    ev, _ = raw_vectors(kg, EMB, {}, EMB.dim)
    t = merge_entities(kg, ev, gate=2.0, aliases=got)  # no cosine candidate: aliases only
    assert [(r.a, r.b, r.source) for r in t.rows] == [("basal cell carcinoma", "bcc", "alias")]
    assert t.groups() == [["bcc", "basal cell carcinoma"]]  # heaviest member (2 chunks) heads
    assert alias_rows(kg, {("x", "y"): 1}) == []


@SETTINGS
@given(st.integers(1, 12), st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_best_sentence_reads_only_the_candidates_sentences(n_chunks, n_sent, seed):
    """The fact_weight term from a chunk -> sentences CSR over the candidates only equals
    the earlier full pass: max(-1, max sim(q, s) over the chunk's sentences s)."""
    rng = np.random.default_rng(seed)
    g = _tiny()
    g.n_chunks = n_chunks
    sv = rng.standard_normal((n_sent, 8)).astype(np.float32)
    sc = rng.integers(0, n_chunks, n_sent).astype(np.int64)  # unsorted, some chunks empty
    q = rng.standard_normal(8).astype(np.float32)
    ids = rng.permutation(n_chunks)[:rng.integers(1, n_chunks + 1)].astype(np.int64)
    r = CodaRetriever(g, sent_vec=sv, sent_chunk=sc)
    want = [max([-1.0] + [float(sv[i] @ q) for i in range(n_sent) if sc[i] == c])
            for c in ids]
    np.testing.assert_allclose(r._best_sentence(q, ids), want, rtol=0, atol=1e-5)


class _CountingEmbedder:
    """HashingEmbedder with ``with_threads`` (the ONNX encoders' hook): records calls."""

    def __init__(self, calls):
        self.calls, self.dim = calls, EMB.dim

    def with_threads(self, n):
        self.calls.append(("threads", n))
        return self

    def embed(self, texts):
        self.calls.append(("embed", len(texts)))
        return EMB.embed(texts)


def test_names_embedded_from_one_thread_per_core_get_the_same_vectors(monkeypatch):
    from hyperrag_fast.coda import kg_vectors as raw_kg
    texts = [f"name {i} of {i % 7}" for i in range(1500)]
    monkeypatch.setattr(raw_kg.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    calls = []
    got, found = raw_kg.embed_known(texts, _CountingEmbedder(calls), {}, EMB.dim)
    assert found.all() and ("threads", 1) in calls
    assert sum(n for k, n in calls if k == "embed") == len(texts)
    assert len([c for c in calls if c[0] == "embed"]) > 1  # split across the workers
    np.testing.assert_array_equal(got, np.asarray(EMB.embed(texts), np.float32))


def test_save_releasing_the_graph_writes_the_same_files(index, tmp_path):
    """``save(release=True)`` (the build step: the consolidated graph let go before the
    unmerged one is assembled) writes byte for byte what a plain save writes."""
    s = build_coda(index)
    s.save(tmp_path / "a")
    s.save(tmp_path / "b", release=True)
    assert s.graph is None
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*")
                           if p.is_file()) and len(files) > 10
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_lazy_build_saved_releasing_writes_the_eager_files(index, tmp_path):
    """``build_coda(assemble=False)`` + ``save(release=True)`` (``hyperrag build-methods``:
    graphs written as assembled, raw vectors mapped back from their files) writes what an
    assembled system's plain save writes; meta.json differs only in its timings."""
    a = build_coda(index)
    assert a.graph is not None
    a.save(tmp_path / "a")
    b = build_coda(index, assemble=False)
    assert b.graph is None
    b.save(tmp_path / "b", release=True)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*")
                           if p.is_file()) and len(files) > 30
    for f in files:
        if f.name != "meta.json":
            assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    ma, mb = (json.loads((tmp_path / x / "meta.json").read_text()) for x in "ab")
    for m in (ma, mb):
        m.pop("build_s"), m.pop("stages")
    assert ma == mb


def test_merge_table_file_is_asdicts_json(tmp_path):
    """The saved table is ``json.dumps`` of the rows' ``dataclasses.asdict`` (the bytes
    saved before the rows were written without asdict's deep copy)."""
    from dataclasses import asdict
    t = MergeTable([MergeRow("a", "b", MERGE, "why", 0.91, "rule"),
                    MergeRow("c", "d é", KEEP, "alias seen 2x", float("nan"), "alias")],
                   {"a": 2.0, "b": 1.0})
    t.save(tmp_path / "t.json")
    want = json.dumps({"rows": [asdict(r) for r in t.rows], "weights": t.weights}, indent=0)
    assert (tmp_path / "t.json").read_text(encoding="utf-8") == want


def test_save_hands_each_written_folder_to_the_syncer(index, tmp_path, monkeypatch):
    """``save(written=...)`` names the raw files' folder, then each graph's, once written;
    :class:`SyncBehind` fsyncs the files there behind and raises a failed sync at ``wait``."""
    import hyperrag_fast.publish_linked as pl
    seen, synced = [], []
    real = pl._fsync_path
    monkeypatch.setattr(pl, "_fsync_path", lambda p: (synced.append(p), real(p)))
    sync = pl.SyncBehind()

    def written(d):
        seen.append((d.relative_to(tmp_path).as_posix(), sorted(p.name for p in d.iterdir())))
        sync.folder(d)

    d = build_coda(index, assemble=False).save(tmp_path / "c", release=True, written=written)
    sync.wait()
    assert [s[0] for s in seen] == ["c", "c/graph", "c/base_graph"]
    assert "raw.json" in seen[0][1] and "merge_table.json" in seen[0][1]
    assert "graph" not in seen[0][1] and "texts.json" in seen[1][1]
    assert sorted(synced) == sorted(p for p in d.rglob("*") if p.is_file())

    def fail(p):
        raise OSError(5, "I/O error", str(p))
    monkeypatch.setattr(pl, "_fsync_path", fail)
    bad = pl.SyncBehind()
    bad.folder(d / "graph")
    with pytest.raises(OSError, match="I/O error"):
        bad.wait()
