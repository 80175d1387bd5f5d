"""``lexical.top_links`` (issue 21, session 17; docs/architecture.md §5): the
three ``rank_links`` columns read off the first round's top chunk, against a literal twin."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.config import LINK_FEATURES, PRESETS, TOP_LINKS
from hyperrag_fast.lexical import BM25, top_links


def _case(seed: int):
    rng = np.random.default_rng(seed)
    n_chunks, n_groups, n_terms = int(rng.integers(2, 9)), int(rng.integers(1, 6)), int(rng.integers(0, 5))
    nodes = [rng.integers(0, n_groups, int(rng.integers(0, 4))) for _ in range(n_chunks)]
    ptr = np.r_[0, np.cumsum([x.size for x in nodes])].astype(np.int64)
    node_group = np.concatenate(nodes + [np.empty(0, np.int64)]).astype(np.int64)
    graph = SimpleNamespace(chunk_ptr=ptr, chunk_nodes=np.arange(ptr[-1], dtype=np.int64), node_group=node_group)
    vec = rng.normal(size=(n_chunks, 4)).astype(np.float32)
    eng = SimpleNamespace(graph=graph, chunk_vec=vec)
    posts = [np.sort(rng.choice(n_chunks, int(rng.integers(1, n_chunks + 1)), replace=False)) for _ in range(n_terms)]
    csc = (np.r_[0, np.cumsum([p.size for p in posts])].astype(np.int64),
           np.concatenate(posts + [np.empty(0, np.int64)]).astype(np.int64), np.arange(len(posts), dtype=np.int64))
    bm25 = SimpleNamespace(n_docs=n_chunks, postings=lambda text: posts, term_postings=lambda text: csc)
    bm25.residual_cover = lambda text, cq, t0: BM25.residual_cover(bm25, text, cq, t0)
    cq = rng.choice(n_chunks, int(rng.integers(1, n_chunks + 1)), replace=False).astype(np.int64)
    t0 = int(rng.choice(cq))
    bg = np.unique(rng.integers(0, n_groups, int(rng.integers(0, n_groups + 1)))).astype(np.int64)
    bw = rng.random(bg.size)
    return eng, bm25, posts, rng.normal(size=4), cq, t0, (bg, bw)


def _twin(eng, posts, q, cq, t0, bridge):
    """The columns one chunk at a time, from their definitions."""
    idf = [math.log(1 + len(eng.chunk_vec) / len(p)) for p in posts]
    res, hop, top = [], [], []
    hv = q + eng.chunk_vec[t0].astype(np.float64)
    hv = hv / np.linalg.norm(hv)
    hs = {int(c): float(eng.chunk_vec[c].astype(np.float64) @ hv) for c in cq}
    others = [int(c) for c in cq if c != t0]
    g = eng.graph
    for c in cq.tolist():
        if c == t0:
            res.append(0.0), hop.append(0.0), top.append(0.0)
            continue
        res.append(sum(w for p, w in zip(posts, idf) if c in p and t0 not in p) / sum(idf) if posts else 0.0)
        before = [d for d in others if hs[d] > hs[c] or (hs[d] == hs[c] and others.index(d) < others.index(c))]
        hop.append(1.0 / (1 + len(before)))
        mine = set(g.node_group[g.chunk_ptr[c]:g.chunk_ptr[c + 1]].tolist())
        top.append(max([w for grp, w in zip(*bridge) if int(grp) in mine], default=0.0))
    return {"residual_cover": res, "hop_rank": hop, "top_bridge": top}


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_top_link_features_equal_the_twin(seed):
    eng, bm25, posts, q, cq, t0, bridge = _case(seed)
    got = top_links(eng, bm25, "q", q, cq, t0, TOP_LINKS, lambda: bridge)
    want = _twin(eng, posts, q, cq, t0, bridge)
    assert set(got) == set(TOP_LINKS)
    for n in TOP_LINKS:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-9, atol=1e-12, err_msg=n)


def test_top_links_are_named_link_features_in_the_presets():
    """Each preset ships the columns its grid chose (session 17 ``ranker_top_links_*.json``, kept by
    session 19's ``all_options_*.json``)."""
    assert set(TOP_LINKS) <= set(LINK_FEATURES)
    assert PRESETS["minilm"].hybrid.rank_links[2:3] == ("residual_cover",)
    assert PRESETS["bge-small"].hybrid.rank_links[2:] == TOP_LINKS
