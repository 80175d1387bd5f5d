"""``HybridOptions.hop_round_cover`` and the ``settings.CHAIN_LINKS`` columns (issue 21,
session 18; docs/architecture.md §5, "A further hop round"): ``engine.term_cover``,
``engine.later_rounds``' gate and ``engine.chain_links`` against literal twins."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.config import LINK_FEATURES, PRESETS, HybridOptions
from hyperrag_fast.engine import chain_links, later_rounds, term_cover
from hyperrag_fast.settings import CHAIN_LINKS
from test_top_links import _case as _top_case


def _case(seed: int):
    """test_top_links' engine, BM25 postings, q, C_q and bridge, plus PPR scores with ties
    (the stable order decides t1) and at least two C_q chunks."""
    eng, bm25, posts, q, cq, t0, bridge = _top_case(seed)
    rng = np.random.default_rng(seed + 1)
    if cq.size < 2:
        cq = np.unique(np.append(cq, (cq[0] + 1) % len(eng.chunk_vec))).astype(np.int64)
    return eng, bm25, posts, q, SimpleNamespace(cq=cq, cq_pi=rng.integers(0, 4, cq.size).astype(np.float64)), t0, bridge


def _idf(eng, posts):
    return [math.log(1 + len(eng.chunk_vec) / len(p)) for p in posts]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(0, 3))
def test_term_cover_equals_the_twin(seed, k):
    eng, bm25, posts, _, r, _, _ = _case(seed)
    ids = [int(c) for c in r.cq[:k]]
    idf = _idf(eng, posts)
    want = sum(w for p, w in zip(posts, idf) if any(c in p for c in ids)) / sum(idf) if posts else 1.0
    assert term_cover(bm25, "q", ids) == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert term_cover(None, "q", ids) == 1.0


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_chain_links_equal_the_twin(seed):
    eng, bm25, posts, q, r, t0, bridge = _case(seed)
    got = chain_links(eng, bm25, "q", q, r, t0, CHAIN_LINKS, lambda t, s: bridge)
    order = [int(r.cq[i]) for i in sorted(range(r.cq.size), key=lambda i: (-r.cq_pi[i], i))]
    t1 = next(c for c in order if c != t0)
    hv = q + eng.chunk_vec[t0].astype(np.float64) + eng.chunk_vec[t1].astype(np.float64)
    hv = hv / np.linalg.norm(hv)
    cq = r.cq.tolist()
    hs = {c: float(eng.chunk_vec[c].astype(np.float64) @ hv) for c in cq}
    rest = [c for c in cq if c not in (t0, t1)]
    idf, g = _idf(eng, posts), eng.graph
    for i, c in enumerate(cq):
        if c in (t0, t1):
            assert got["hop2_rank"][i] == got["residual_cover2"][i] == got["chain_bridge"][i] == 0.0
            continue
        above = [d for d in rest if hs[d] > hs[c] or (hs[d] == hs[c] and cq.index(d) < cq.index(c))]
        assert got["hop2_rank"][i] == pytest.approx(1.0 / (1 + len(above)))
        res = sum(w for p, w in zip(posts, idf) if c in p and t0 not in p and t1 not in p)
        assert got["residual_cover2"][i] == pytest.approx(res / sum(idf) if posts else 0.0, abs=1e-12)
        mine = set(g.node_group[g.chunk_ptr[c]:g.chunk_ptr[c + 1]].tolist())
        assert got["chain_bridge"][i] == pytest.approx(max([w for grp, w in zip(*bridge) if int(grp) in mine], default=0.0))


@pytest.mark.parametrize("gate, rounds", [(1.0, 1), (0.0, 0), (0.5, None)])
def test_later_rounds_stop_when_the_top_two_hold_the_question(gate, rounds):
    """A further round runs only while cover(top two) <= hop_round_cover (1: always)."""
    calls = []
    eng = SimpleNamespace(query=lambda *a, **k: calls.append(1) or SimpleNamespace(chunk_ids=np.array([7, 8])))
    r = SimpleNamespace(chunk_ids=np.array([1, 2, 3]))
    hy = HybridOptions(hop_rounds=2, hop_round_cover=gate)
    cover = lambda ids: 0.5  # noqa: E731
    later_rounds(eng, None, None, (np.array([1]), np.array([0.0])), (np.empty(0, np.int64), np.empty(0)), r,
                 None, hy, False, set(), lambda t: (np.array([t + 10]), np.array([1.0])),
                 lambda t, s: (np.empty(0, np.int64), np.empty(0)), cover)
    assert len(calls) == (1 if rounds is None else rounds)


def test_the_presets_take_what_their_session_19_grids_chose():
    """``all_options_{minilm,bge}.json`` (docs/architecture.md §6): MiniLM residual_cover2 in one
    round; bge-small a second round gated at cover .4 and no chain column."""
    assert HybridOptions().hop_round_cover == 1.0 and HybridOptions().hop_rounds == 1
    assert set(CHAIN_LINKS) <= set(LINK_FEATURES)
    mini, bge = PRESETS["minilm"].hybrid, PRESETS["bge-small"].hybrid
    assert mini.rank_links[3:] == ("residual_cover2",) and (mini.hop_rounds, mini.hop_round_cover) == (1, 1.0)
    assert not set(CHAIN_LINKS) & set(bge.rank_links) and (bge.hop_rounds, bge.hop_round_cover) == (2, 0.4)
