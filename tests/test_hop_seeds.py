"""The second round (HybridOptions.hop_chunks) against a literal twin; off = unchanged."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.config import TUNED, HybridOptions
from hyperrag_fast.engine import StitchEngine
from hyperrag_fast.indexing.hypergraph import build_hypergraph
from hyperrag_fast.methods.stitch import hop_seeds
from hyperrag_fast.records import Extraction, Segment

NAMES = ["Ann", "Bob", "Cy", "Dee", "Eve"]


def _engine(chunks, dim=8, seed=0):
    ex = [Extraction(tuple(Segment(f"s{c}{j}", tuple((n, f"{n} in {c}") for n in seg))
                           for j, seg in enumerate(ch))) for c, ch in enumerate(chunks)]
    g = build_hypergraph(ex)
    rng = np.random.default_rng(seed)
    unit = lambda n: (lambda m: m / np.linalg.norm(m, axis=1, keepdims=True))(  # noqa: E731
        rng.normal(size=(max(n, 1), dim)).astype(np.float32))[:n]
    return StitchEngine(g, unit(g.n_nodes), unit(g.n_edges), unit(g.n_chunks)), unit(1)[0]


def _twin(eng, q, top, seeds, h):
    g = eng.graph
    best = {}
    for c in top:
        for v in range(g.n_nodes):
            if g.node_chunk[v] != c:
                continue
            grp = g.node_group[v]
            if h.hop_weight == "sim":
                sims = [max(float(eng.node_vec[u] @ q), 0.0) for u in range(g.n_nodes)
                        if g.node_chunk[u] in set(top)]
                w = max(float(eng.node_vec[v] @ q), 0.0) / max(sims) if max(sims) > 0 else 0.0
            else:
                w = 1.0
            if g.group_chunks[grp] <= h.hop_max_group:
                best[grp] = max(best.get(grp, 0.0), w)
    out = {}
    for grp, w in best.items():
        if w <= 0:
            continue
        for v in range(g.n_nodes):
            if g.node_group[v] == grp and v not in set(seeds):
                out[v] = h.hop_value * w
    return out


chunk_st = st.lists(st.lists(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True),
                             min_size=1, max_size=2), min_size=2, max_size=5)


@settings(max_examples=150, deadline=None)
@given(chunk_st, st.integers(0, 3), st.sampled_from(["sim", "uniform"]), st.integers(1, 4),
       st.floats(0.1, 2.0), st.integers(0, 99))
def test_hop_seeds_match_twin(chunks, n_top, weight, max_group, value, seed):
    eng, q = _engine(chunks, seed=seed)
    top = np.arange(min(n_top, eng.graph.n_chunks))
    seeds = np.array([0], np.int64)
    h = HybridOptions(hop_chunks=max(n_top, 1), hop_value=value, hop_max_group=max_group,
                      hop_weight=weight)
    nodes, vals = hop_seeds(eng, q, top, seeds, h)
    got = dict(zip(nodes.tolist(), vals.tolist()))
    want = _twin(eng, q, top.tolist(), [0], h)
    assert got.keys() == want.keys()
    for v in got:
        assert abs(got[v] - want[v]) <= 1e-6 * max(1.0, abs(want[v]))


def test_hop_off_is_the_first_round_and_on_changes_seeds():
    eng, q = _engine([[["Ann", "Bob"]], [["Bob", "Cy"]], [["Cy", "Dee"]], [["Eve"]]])
    o = replace(TUNED.stitch, top_k=4)
    v0, c0 = np.arange(eng.graph.n_nodes), np.arange(1)
    a = eng.query(q, v0, c0, o)
    nodes, _ = hop_seeds(eng, q, a.chunk_ids[:1], np.empty(0, np.int64),
                         HybridOptions(hop_chunks=1, hop_weight="uniform"))
    g = eng.graph
    assert set(g.node_chunk[nodes].tolist()) >= {int(a.chunk_ids[0])}
    assert hop_seeds(eng, q, a.chunk_ids[:0], np.empty(0, np.int64), HybridOptions())[0].size == 0


@given(st.lists(st.integers(-3, 40), max_size=60), st.sampled_from([np.int32, np.int64]))
def test_the_unique_of_the_second_round_is_numpys(xs, dtype):
    """engine.unique (np.unique without importing numpy.ma), which the second round uses,
    gives np.unique's sorted distinct values and dtype."""
    from hyperrag_fast.engine import unique
    a = np.asarray(xs, dtype=dtype)
    got, want = unique(a), np.unique(a)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()
