"""Twins of the exact candidate-search kernels (kernels/dense.py).

The float32 dot products may reassociate their sums (``_config.DOT_OPTIONS``), so they are
compared with float64 NumPy within the bound d * 2**-24 * sum_j |v_j q_j| (plus one ulp of
the result); the top-k must be exactly the twin's order of the kernel's own scores
(similarity descending, ties by id ascending)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.kernels.dense import (dot_gather, dot_rows, exact_topk, expand_rescore_topk, rescore_topk,
                                          topk_ordered)

SETTINGS = settings(max_examples=200, deadline=None)


def _topk_twin(scores, ids, k):
    o = np.lexsort((ids, -scores.astype(np.float64)))[:k]
    return ids[o], scores[o]


@st.composite
def matrices(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 80))
    d = draw(st.sampled_from([1, 3, 16, 37, 384]))
    V = rng.standard_normal((n, d)).astype(np.float32)
    if draw(st.booleans()):  # duplicated rows: exact ties
        V[rng.integers(0, n, n // 2)] = V[0]
    if draw(st.booleans()):
        V /= np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-30)
    Q = rng.standard_normal((draw(st.integers(1, 3)), d)).astype(np.float32)
    return V, Q, draw(st.integers(1, n)), rng


@SETTINGS
@given(matrices())
def test_dot_products_within_the_reassociation_bound(case):
    V, Q, _, rng = case
    out = np.empty(V.shape[0], np.float32)
    for q in Q:
        dot_rows(V, q, out)
        exact = V.astype(np.float64) @ q.astype(np.float64)
        bound = V.shape[1] * 2.0**-24 * (np.abs(V.astype(np.float64)) @ np.abs(q.astype(np.float64)))
        assert np.all(np.abs(out - exact) <= bound + np.spacing(np.abs(out)) + 1e-30)
        rows = rng.integers(0, V.shape[0], 7)
        g = np.empty(7, np.float32)
        dot_gather(V, rows, q, g)
        np.testing.assert_array_equal(g, out[rows])


@SETTINGS
@given(matrices())
def test_exact_topk_matches_the_twin_order(case):
    V, Q, k, _ = case
    ids = np.empty((Q.shape[0], k), np.int64)
    sims = np.empty((Q.shape[0], k), np.float32)
    exact_topk(V, Q, k, ids, sims)
    out = np.empty(V.shape[0], np.float32)
    for r, q in enumerate(Q):
        dot_rows(V, q, out)
        want_i, want_s = _topk_twin(out, np.arange(V.shape[0]), k)
        np.testing.assert_array_equal(ids[r], want_i)
        np.testing.assert_array_equal(sims[r], want_s)


@SETTINGS
@given(matrices())
def test_rescore_topk_orders_any_row_subset(case):
    V, Q, k, rng = case
    rows = rng.permutation(V.shape[0])[: max(k, rng.integers(k, V.shape[0] + 1))].astype(np.int64)
    ids = np.empty(k, np.int64)
    sims = np.empty(k, np.float32)
    rescore_topk(V, rows, Q[0], k, ids, sims)
    s = np.empty(rows.shape[0], np.float32)
    dot_gather(V, rows, Q[0], s)
    want_i, want_s = _topk_twin(s, rows, k)
    np.testing.assert_array_equal(ids, want_i)
    np.testing.assert_array_equal(sims, want_s)


@SETTINGS
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=40), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_topk_ordered_ties_go_by_id_value(values, k, seed):
    s = np.array(values, np.float32)
    ids = np.random.default_rng(seed).permutation(s.shape[0]).astype(np.int64) * 3
    k = min(k, s.shape[0])
    oi, os_ = np.empty(k, np.int64), np.empty(k, np.float32)
    topk_ordered(s, ids, k, oi, os_)
    want_i, want_s = _topk_twin(s, ids, k)
    np.testing.assert_array_equal(oi, want_i)
    np.testing.assert_array_equal(os_, want_s)
    topk_ordered(s, ids, 0, oi[:0], os_[:0])  # k = 0: nothing written, nothing read out of bounds


@SETTINGS
@given(matrices(), st.integers(0, 2**32 - 1))
def test_expand_rescore_topk_is_the_exact_order_of_the_hits_rows(case, seed):
    from hyperrag_fast.indexing.distinct import distinct_rows as _distinct_rows
    V, Q, _, _ = case
    rng = np.random.default_rng(seed)
    rep, ptr, ids = _distinct_rows(V)
    nd = rep.shape[0]
    keys = rng.integers(-1, nd + 2, rng.integers(1, 12))  # misses (-1, >= nd) and repeats
    valid = np.unique(keys[(keys >= 0) & (keys < nd)])
    kd = int(rng.integers(1, 6))
    rows = np.concatenate([ids[ptr[u]:ptr[u + 1]] for u in valid]) if valid.size else np.empty(0, np.int64)
    k = int(min(rng.integers(1, 10), rows.shape[0])) if rows.size else 1
    oi, os_ = np.full(k, -7, np.int64), np.zeros(k, np.float32)
    nh = expand_rescore_topk(keys, nd, kd, ptr, ids, V, Q[0], k, oi, os_)
    assert nh == valid.size
    if nh < kd:
        assert np.all(oi == -7)  # nothing written: the caller answers exactly
        return
    s = np.empty(rows.shape[0], np.float32)
    dot_gather(V, rows, Q[0], s)
    want_i, want_s = _topk_twin(s, rows, k)
    np.testing.assert_array_equal(oi, want_i)
    np.testing.assert_array_equal(os_, want_s)


@SETTINGS
@given(matrices(), st.integers(0, 2**32 - 1))
def test_blocked_distinct_rows_equal_the_exact_unique(case, seed):
    from hyperrag_fast.indexing import distinct as D
    V = case[0]
    rng = np.random.default_rng(seed)
    V = np.ascontiguousarray(V[rng.integers(0, V.shape[0], 3 * V.shape[0])]) if V.shape[0] else V
    old, D.BLOCK = D.BLOCK, int(rng.integers(1, 9))
    try:
        got, want = D.distinct_rows(V), D.distinct_rows_exact(V)
    finally:
        D.BLOCK = old
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@SETTINGS
@given(matrices())
def test_code_topk_equals_the_float32_scan_bit_for_bit(case):
    """What ``VectorIndex`` relies on to scan int8 codes (ann.py): on unit rows and a unit
    query with d 2^-22 <= CODE_SLACK, code_topk returns exact_topk's ids and float32
    similarities exactly (the bound only picks which rows get the same float32 rescore)."""
    from hyperrag_fast.kernels.dense import code_topk, quantize_rows
    V, Q, k, _ = case
    V = V / np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-30).astype(np.float32)
    V = np.ascontiguousarray(V, dtype=np.float32)
    C, sc = np.empty(V.shape, np.int8), np.empty(V.shape[0], np.float32)
    quantize_rows(V, C, sc)
    for q in Q:
        q = (q / np.linalg.norm(q)).astype(np.float32)
        want_i, want_s = np.empty((1, k), np.int64), np.empty((1, k), np.float32)
        exact_topk(V, q[None], k, want_i, want_s)
        ids, sims = np.empty(k, np.int64), np.empty(k, np.float32)
        code_topk(C, sc, V, q, k, ids, sims)
        np.testing.assert_array_equal(ids, want_i[0])
        np.testing.assert_array_equal(sims, want_s[0])
