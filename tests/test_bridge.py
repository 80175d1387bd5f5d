"""The first hop's bridge names (HybridOptions.hop_bridge), the second round's IDF weight
(hop_idf) and the per-page cap (title_max) against literal twins; off = unchanged."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.config import TUNED, HybridOptions
from hyperrag_fast.lexical import TitleLookup
from hyperrag_fast.methods.stitch import bridge_chunks, bridge_groups, hop_seeds, page_capped

from test_hop_seeds import NAMES, _engine, chunk_st


def _bridge_twin(eng, q, t, named, max_group):
    """Every chunk other than t holding a name of t that is not named, weighted as the
    docstring says (a weight of 0 adds no candidate), one loop per definition."""
    g = eng.graph
    n = g.n_chunks
    t_nodes = [v for v in range(g.n_nodes) if g.node_chunk[v] == t]
    if not t_nodes:
        return {}
    sims = {v: max(float(eng.node_vec[v].astype(np.float64) @ q), 0.0) for v in t_nodes}
    top = max(sims.values())
    w = {}
    for v in t_nodes:
        grp = int(g.node_group[v])
        if grp in set(named):
            continue
        x = (sims[v] / top if top > 0 else 1.0) * math.log1p(n / g.group_chunks[grp]) / math.log1p(n)
        w[grp] = max(w.get(grp, 0.0), x)
    out = {}
    for grp, x in w.items():
        if g.group_chunks[grp] > max_group:
            continue
        cs = sorted({int(g.node_chunk[v]) for v in range(g.n_nodes) if g.node_group[v] == grp} - {t})
        if not cs:
            continue
        s = {c: max(float(eng.chunk_vec[c].astype(np.float64) @ q), 0.0) for c in cs}
        for c in cs:
            v = x * s[c]
            if v > 0:  # a zero prior term adds nothing: not a candidate
                out[c] = max(out.get(c, 0.0), v)
    return out


@settings(max_examples=150, deadline=None)
@given(chunk_st, st.integers(0, 4), st.lists(st.integers(0, 4), max_size=3), st.sampled_from([1, 2, 20]))
def test_bridge_chunks_match_twin(chunks, t, named, max_group):
    eng, q = _engine(chunks)
    t = t % eng.graph.n_chunks
    named = np.asarray(sorted({x % max(eng.graph.n_groups, 1) for x in named}), np.int64)
    ids, vals = bridge_chunks(eng, q.astype(np.float64), t, named, max_group)
    got = dict(zip(ids.tolist(), vals.tolist()))
    want = _bridge_twin(eng, q.astype(np.float64), t, named.tolist(), max_group)
    assert got.keys() == want.keys()
    for c in want:
        assert abs(got[c] - want[c]) < 1e-9


def test_bridge_on_an_index_reaches_the_second_hop():
    """"Who is the spouse of the director of Film 2?": the first hop is Film 2's passage,
    which names its director; with hop_bridge the director's own passage (the question
    never names him) joins C_q through that name; off, the ranking is unchanged."""
    from hyperrag_fast.chunking import Document
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.extract.offline import RegexExtractor
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import Retriever
    docs = [Document("f", "Film Nine", "Film Nine is a drama directed by Ivo Stark."),
            Document("p", "Ivo Stark", "Ivo Stark married Lena Dahl in Town Three."),
            Document("x", "Town Three", "Town Three is a town with a market.")]
    docs += [Document(f"d{i}", f"Other {i}", f"Other {i} is a spouse story about a film.")
             for i in range(6)]
    ix = HyperIndex.build(docs, RegexExtractor(), HashingEmbedder(), progress=False)
    r = Retriever(ix, HashingEmbedder())
    base = replace(TUNED, k_chunks=1, k_nodes=1, stitch=TUNED.stitch.replace(top_k=1),
                   hybrid=replace(TUNED.hybrid, rank_weights=(), bm25_weight=0.0, hop_chunks=0,
                                  hop_bridge=0.0))
    on = replace(base, hybrid=replace(base.hybrid, hop_bridge=1.0))
    qs = "Who is the spouse of the director of Film Nine?"
    a, b = r.retrieve(qs, base, detail=True), r.retrieve(qs, on, detail=True)
    row = {c.title: i for i, c in enumerate(ix.chunks)}
    assert row["Ivo Stark"] in set(np.asarray(b.detail["cq"]).tolist())
    assert row["Ivo Stark"] in set(np.asarray(b.detail["cand_chunks"]).tolist())
    assert row["Ivo Stark"] not in set(np.asarray(a.detail["cand_chunks"]).tolist())
    assert HybridOptions.paper().hop_bridge == 0.0


def test_later_rounds_follow_the_chain():
    """"Who is the spouse of the director of Film Nine?" over a chain of pages each naming
    the next (Film Nine -> Ivo Stark -> Lena Dahl -> Mara Quist). The first bridge round
    adds Ivo Stark's passage (a name of the top chunk, Film Nine); hop_rounds 2 bridges
    once more from the best chunk not yet a source (Ivo Stark's) and adds exactly his new
    name's passage (Lena Dahl's), never Film Nine's names again; 1 = unchanged."""
    from hyperrag_fast.chunking import Document
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.extract.offline import RegexExtractor
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import Retriever
    docs = [Document("f", "Film Nine", "Film Nine is a drama directed by Ivo Stark."),
            Document("p", "Ivo Stark", "Ivo Stark married Lena Dahl in Town Three."),
            Document("s", "Lena Dahl", "Lena Dahl was the pupil of Mara Quist."),
            Document("x", "Mara Quist", "Mara Quist is a painter.")]
    docs += [Document(f"d{i}", f"Other {i}", f"Other {i} is a tale about a film.") for i in range(6)]
    ix = HyperIndex.build(docs, RegexExtractor(), HashingEmbedder(), progress=False)
    r = Retriever(ix, HashingEmbedder())
    one = replace(TUNED, k_chunks=2, k_nodes=1, stitch=TUNED.stitch.replace(top_k=2),
                  hybrid=replace(TUNED.hybrid, rank_weights=(), bm25_weight=0.0, hop_chunks=0,
                                 hop_bridge=1.0))
    qs = "Who is the spouse of the director of Film Nine?"
    a = r.retrieve(qs, one, detail=True)
    b = r.retrieve(qs, replace(one, hybrid=replace(one.hybrid, hop_rounds=2)), detail=True)
    row = {c.title: i for i, c in enumerate(ix.chunks)}
    cand_a = np.asarray(a.detail["cand_chunks"]).tolist()
    cand_b = np.asarray(b.detail["cand_chunks"]).tolist()
    assert a.chunks[0].title == "Film Nine" and cand_a[-1] == row["Ivo Stark"]
    assert cand_b[:len(cand_a)] == cand_a and cand_b[len(cand_a):] == [row["Lena Dahl"]]
    same = r.retrieve(qs, replace(one, hybrid=replace(one.hybrid, hop_rounds=1)), detail=True)
    assert np.asarray(same.detail["cand_chunks"]).tolist() == cand_a
    assert [c.title for c in same.chunks] == [c.title for c in a.chunks]
    assert HybridOptions().hop_rounds == 1 and HybridOptions.paper().hop_rounds == 1


@settings(max_examples=100, deadline=None)
@given(chunk_st, st.integers(0, 3), st.sampled_from([0.0, 1.0, 3.0]))
def test_hop_idf_scales_the_second_round(chunks, t, p):
    eng, q = _engine(chunks)
    g = eng.graph
    h = replace(TUNED.hybrid, hop_max_group=math.inf, hop_weight="uniform", hop_idf=p)
    top = np.asarray([t % g.n_chunks], np.int64)
    ids, vals = hop_seeds(eng, q, top, np.empty(0, np.int64), h)
    n = g.n_chunks
    for v, x in zip(ids.tolist(), vals.tolist()):
        size = g.group_chunks[g.node_group[v]]
        assert abs(x - h.hop_value * (math.log1p(n / size) / math.log1p(n)) ** p) < 1e-9


def test_page_capped_literal():
    ranked = np.array([5, 6, 7, 8, 9, 4])
    scores = np.array([6.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    pages = np.array([-1, -1, -1, -1, -1, 5, 5, 7, 5, -1])  # chunks 5, 6, 8 are one page
    ids, s = page_capped(ranked, scores, pages, 1, 4)
    assert ids.tolist() == [5, 7, 9, 4] and s.tolist() == [6.0, 4.0, 2.0, 1.0]
    ids, _ = page_capped(ranked, scores, pages, 2, 6)
    assert ids.tolist() == [5, 6, 7, 9, 4, 8]
    ids, _ = page_capped(ranked, scores, pages, 3, 6)
    assert ids.tolist() == ranked.tolist()  # no page has more than the cap: unchanged


def test_title_lookup_pages():
    t = TitleLookup(lambda: ["A", "B", "a", "", "B (x)", "b"])
    assert t.pages().tolist() == [0, 1, 0, -1, 4, 1]
    assert t.page_key(2) == "a" and t.page_key(3) == "" and t.page_key(4) == "b x"


def test_options_validated():
    import pytest
    for bad in ({"hop_bridge": -1.0}, {"hop_bridge_max": 0.5}, {"hop_idf": -1.0}, {"title_max": -1},
                {"hop_rounds": 0}):
        with pytest.raises(ValueError):
            HybridOptions(**bad)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c d", "e"]), min_size=1, max_size=8),
       st.lists(st.sampled_from(["a", "b", "c d", "e", "x", ""]), max_size=10))
def test_groups_of_keys_literal(group_keys, keys):
    """GroupLookup.groups_of_keys = the ascending distinct ids of every group whose key is
    one of ``keys`` (a key naming several groups gives all of them), with and without
    repeated keys in the graph."""
    from types import SimpleNamespace

    from hyperrag_fast.lexical import GroupLookup
    lk = GroupLookup(SimpleNamespace(group_key=group_keys))
    want = sorted({g for g, k in enumerate(group_keys) if k in set(keys)})
    assert lk.groups_of_keys(keys) == want


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=8), st.lists(st.integers(0, 7), max_size=6))
def test_csr_rows_and_run_starts_match_loops(lengths, rows):
    """``engine.csr_rows`` (the bridge candidates' one gather) = the rows' slices
    concatenated, each entry tagged with its row's position; ``run_starts`` = where the
    value changes in a sorted array."""
    from hyperrag_fast.engine import csr_rows, run_starts
    ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = np.arange(100, 100 + int(ptr[-1]), dtype=np.int32)
    rows = np.asarray([r % len(lengths) for r in rows], np.int64)
    got, owner = csr_rows(ptr, values, rows)
    want = [(int(v), j) for j, r in enumerate(rows.tolist()) for v in values[ptr[r]:ptr[r + 1]]]
    assert list(zip(got.tolist(), owner.tolist())) == want
    s = np.sort(np.asarray(lengths))
    assert run_starts(s).tolist() == [i for i in range(s.size) if i == 0 or s[i] != s[i - 1]]


@settings(max_examples=100, deadline=None)
@given(chunk_st, st.integers(0, 4), st.lists(st.integers(0, 4), max_size=3))
def test_bridge_chunks_order(chunks, t, named):
    """Candidates come ordered by the first bridge group (ascending) giving them a weight,
    then by id (the order C0 grows in, which the kernel's C_q order follows)."""
    eng, q = _engine(chunks)
    g = eng.graph
    t = t % g.n_chunks
    named = np.asarray(sorted({x % max(g.n_groups, 1) for x in named}), np.int64)
    ids, vals = bridge_chunks(eng, q.astype(np.float64), t, named, 20)
    grp, wg = bridge_groups(eng, q.astype(np.float64), t, named)
    first = {}
    for x, w in zip(grp.tolist(), wg.tolist()):
        cs = {int(g.nc_chunks[k]) for v in g.group_nodes[g.group_ptr[x]:g.group_ptr[x + 1]]
              for k in range(g.nc_ptr[v], g.nc_ptr[v + 1])} - {t}
        for c in cs:
            if w * max(float(eng.chunk_vec[c].astype(np.float64) @ q), 0.0) > 0:
                first.setdefault(c, x)
    assert ids.tolist() == sorted(first, key=lambda c: (first[c], c))
    assert ids.dtype == np.int64 and vals.dtype == np.float64
