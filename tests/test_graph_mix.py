"""HybridOptions.graph_mix (issue 21 item 2) and the "title_best" link column (item 3):
the column forms against literal twins written from the raw prior / PPR vectors, the
g = 0 floor (the ranker's score on the prior alone) and validation."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.config import GRAPH_MIXES, HybridOptions
from hyperrag_fast.methods.offpreset import title_best
from hyperrag_fast.methods.stitch import graph_mixed, mix_weight, rank_features

pos = st.floats(0.0, 10.0, allow_nan=False)


def _twin_g(prior, pi, mode):
    """g from the raw vectors, one definition per mode (config.HybridOptions.graph_mix)."""
    if mode == "prior_only":
        return 0.0
    if mode == "prior_flat":
        return 1.0 - max(prior) / sum(prior) if sum(prior) > 0 else 1.0
    if sum(prior) <= 0 or sum(pi) <= 0:
        return 1.0
    return min(1.0, (max(pi) / sum(pi)) / (max(prior) / sum(prior)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(pos, pos), min_size=1, max_size=12), st.sampled_from(GRAPH_MIXES))
def test_graph_mixed_matches_twin(rows, mode):
    prior = np.asarray([a for a, _ in rows])
    pi = np.asarray([b for _, b in rows])
    n = prior.shape[0]
    X = rank_features(np.arange(n, dtype=np.int64), np.zeros(n), np.zeros(n), prior, pi,
                      np.arange(n, dtype=np.int64), (np.empty(0, np.int64), np.empty(0)),
                      (np.empty(0, np.int64), np.empty(0)))
    M = graph_mixed(X, mode)
    if mode == "off":
        assert M is X
        return
    g = _twin_g(prior.tolist(), pi.tolist(), mode)
    assert 0.0 <= g <= 1.0
    assert mix_weight(X[:, 0], X[:, 1], mode) == pytest.approx(g, abs=1e-9)
    for j in range(n):
        assert M[j, 1] == pytest.approx(g * X[j, 1] + (1 - g) * X[j, 0], abs=1e-9)
        assert M[j, 2] == pytest.approx(g * X[j, 2] + (1 - g) * X[j, 3], abs=1e-9)
    np.testing.assert_array_equal(np.delete(M, [1, 2], axis=1), np.delete(X, [1, 2], axis=1))


def test_prior_only_floor_ranks_as_without_graph():
    """g = 0: the graph columns equal the prior's, so any weights rank C_q as they rank it
    when PPR is off (pi = I, the no_ppr ablation's features)."""
    rng = np.random.default_rng(0)
    n = 9
    prior, pi = rng.random(n), rng.random(n)
    args = (np.arange(n, dtype=np.int64), rng.random(n), rng.random(n))
    rest = (np.arange(n, dtype=np.int64), (np.empty(0, np.int64), np.empty(0)), (np.empty(0, np.int64), np.empty(0)))
    with_graph = graph_mixed(rank_features(*args, prior, pi, *rest), "prior_only")
    no_graph = rank_features(*args, prior, prior.copy(), *rest)
    np.testing.assert_allclose(with_graph, no_graph)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), pos), min_size=0, max_size=10),
       st.lists(st.integers(0, 11), max_size=8))
def test_title_best_matches_twin(named_rows, cq):
    pages = np.asarray([c // 3 for c in range(12)], np.int64)  # pages of three chunks
    named = np.asarray(sorted({p * 3 + i % 3 for i, (p, _) in enumerate(named_rows)}), np.int64)
    share = np.asarray([x for _, x in named_rows][:named.shape[0]] + [0.0] * max(0, named.shape[0] - len(named_rows)))
    cq = np.asarray(list(dict.fromkeys(cq)), np.int64)
    got = title_best(cq, named, share, pages)
    want = []
    for c in cq.tolist():
        if c not in named.tolist():
            want.append(0.0)
            continue
        mine = share[named.tolist().index(c)]
        best = max(s for n, s in zip(named.tolist(), share.tolist()) if pages[n] == pages[c])
        want.append(mine / best if best > 0 else 1.0)
    assert got.tolist() == pytest.approx(want)


def test_title_best_literal_and_validation():
    pages = np.asarray([0, 0, 0, 3, -1], np.int64)
    got = title_best(np.asarray([0, 1, 2, 3, 4]), np.asarray([0, 1, 2, 3]),
                     np.asarray([0.2, 0.5, 0.3, 1.0]), pages)
    assert got.tolist() == pytest.approx([0.4, 1.0, 0.6, 1.0, 0.0])
    with pytest.raises(ValueError, match="graph_mix"):
        HybridOptions(graph_mix="nope")
    assert HybridOptions.paper().graph_mix == "off"
