"""CODA query bookkeeping of session 19 (docs/architecture.md §7, "CODA query cost")
against slow twins: ``first_seen`` / ``first_paths`` (a dict's ``setdefault`` over the
pathways), ``top_k_untied`` (``top_k_desc`` unless the k-th score ties),
``max_chunks_marked`` (``max_chunks``), ``positions_in`` / ``not_in_sorted`` (``np.isin``
and a sorted lookup), ``prior_at`` (the dense prior's floats) and the
per-thread rows left zeroed."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperrag_fast.ann import top_k_desc
from hyperrag_fast.coda.fast import first_paths, not_in_sorted, positions_in, prior_at
from hyperrag_fast.kernels.coda_assoc import max_chunks
from hyperrag_fast.kernels.coda_query import first_seen, max_chunks_marked, top_k_untied

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.integers(1, 50), st.lists(st.integers(0, 30), max_size=5), st.integers(0, 2**32 - 1))
def test_first_paths_is_setdefault_over_the_parts(n, sizes, seed):
    rng = np.random.default_rng(seed)
    parts = [(rng.integers(0, n, m), c % 4) for c, m in enumerate(sizes)] or [(np.zeros(0, int), 0)]
    want: dict[int, int] = {}
    for ids, c in parts:
        for i in ids:
            want.setdefault(int(i), c)
    mark = np.zeros(n, np.uint8)
    E, code = first_paths(parts, mark)
    assert E.dtype == np.int64 and E.tolist() == list(want)
    assert code.tolist() == list(want.values())
    assert not mark.any()
    vals = np.concatenate([p for p, _ in parts]).astype(np.int64)
    assert vals[first_seen(vals, mark)].tolist() == list(want) and not mark.any()


@SETTINGS
@given(st.integers(0, 60), st.integers(0, 15), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_top_k_untied_is_top_k_desc_or_says_tied(n, k, levels, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, levels, n) / levels + (rng.random(n) < 0.5) * rng.random(n)
    sel, tied = top_k_untied(x, k)
    s = np.sort(x)[::-1]
    kk = min(k, n)
    if kk and kk < n and s[kk - 1] == s[kk]:
        assert tied and sel.size == 0
    else:
        assert not tied and sel.tolist() == top_k_desc(x, k).tolist()


def _csr(rng, n_items, n_chunks, max_len):
    lens = rng.integers(0, max_len + 1, n_items)
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    return ptr, rng.integers(0, n_chunks, ptr[-1]).astype(np.int64)  # repeats allowed


@SETTINGS
@given(st.integers(1, 40), st.integers(0, 12), st.integers(0, 12), st.integers(0, 5),
       st.integers(0, 2**32 - 1))
def test_max_chunks_marked_is_max_chunks(n_chunks, n_e, n_r, max_len, seed):
    rng = np.random.default_rng(seed)
    ep, ec = _csr(rng, 15, n_chunks, max_len)
    rp, rc = _csr(rng, 15, n_chunks, max_len)
    ents, rels = rng.integers(0, 15, n_e), rng.integers(0, 15, n_r)  # repeats allowed
    we, wr = rng.normal(size=n_e), np.round(rng.normal(size=n_r), 1)  # ties, negatives
    mark, best = np.zeros(n_chunks, np.uint8), np.zeros(n_chunks)
    got = max_chunks_marked(ep, ec, rp, rc, ents, we, rels, wr, mark, best)
    want = max_chunks(ep, ec, rp, rc, ents, we, rels, wr)
    assert got[0].tolist() == want[0].tolist()
    assert got[1].tobytes() == want[1].tobytes()
    assert not mark.any() and not best.any()


@SETTINGS
@given(st.integers(0, 40), st.integers(0, 8), st.integers(0, 20), st.integers(0, 2**32 - 1))
def test_positions_in_and_not_in_sorted(n0, n_tail, m, seed):
    rng = np.random.default_rng(seed)
    pool = rng.permutation(100)
    ids = np.concatenate([np.sort(pool[:n0]), pool[n0:n0 + n_tail]]).astype(np.int64)
    x = rng.choice(100, m, replace=False).astype(np.int64)
    where = {int(v): i for i, v in enumerate(ids)}
    assert positions_in(x, ids, n0).tolist() == [where.get(int(v), -1) for v in x]
    assert not_in_sorted(x, ids[:n0]).tolist() == (~np.isin(x, ids[:n0])).tolist()


@SETTINGS
@given(st.integers(1, 300), st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_prior_at_gives_the_dense_priors_floats(n, k, seed):
    rng = np.random.default_rng(seed)
    ids = rng.choice(n, min(k, n), replace=False)
    vals = np.maximum(rng.normal(size=ids.size), 0.0) + 1e-12
    p = np.zeros(n)
    p[ids] = vals
    p /= p.sum()
    row = np.zeros(n)
    assert prior_at(row, ids, vals).tobytes() == p[ids].tobytes()
    assert not row.any()
