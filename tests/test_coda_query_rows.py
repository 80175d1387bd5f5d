"""CODA query bookkeeping of session 19 (docs/architecture.md §7, "CODA query cost")
against slow twins: ``first_seen`` / ``first_paths`` (a dict's ``setdefault`` over the
pathways), ``top_k_untied`` (``top_k_desc`` unless the k-th score ties),
``max_chunks_marked`` (``max_chunks``), ``positions_in`` / ``not_in_sorted`` (``np.isin``
and a sorted lookup), ``prior_at`` (the dense prior's floats), the per-thread rows left
zeroed, and the helper thread of ``config.CODA_SIDE_SCANS`` (the same results)."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperrag_fast import config
from hyperrag_fast.ann import top_k_desc
from hyperrag_fast.coda.fast import (SIDE, GraphSims, QuerySims, Side, first_paths,
                                     not_in_sorted, positions_in, prior_at)
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


def _sims(rng, n_rep=30, d=16):
    from types import SimpleNamespace
    ent = rng.standard_normal((40, d)).astype(np.float32)
    rel_vec = SimpleNamespace(rep=rng.standard_normal((n_rep, d)).astype(np.float32),
                              of=rng.integers(0, n_rep, 70))
    return GraphSims(SimpleNamespace(ent_vec=ent, rel_vec=rel_vec))


@pytest.mark.parametrize("busy", [False, True])
def test_side_scans_give_the_same_relations_and_call(monkeypatch, busy):
    rng = np.random.default_rng(3)
    gs = _sims(rng)
    q = rng.standard_normal(16).astype(np.float32)
    want = QuerySims(gs, q).top_relations(7)
    E, R = np.arange(0, 40, 3), np.arange(0, 70, 4)
    want_z = QuerySims(gs, q).z(E, R)
    monkeypatch.setattr(config, "CODA_SIDE_SCANS", True)
    side = Side()
    monkeypatch.setattr("hyperrag_fast.coda.fast.SIDE", side)
    if busy:  # another query holds the helper: the calls run on this thread
        side._busy.acquire()
    S = QuerySims(gs, q)
    fut = S.start(7, (lambda a: (a, threading.get_ident()), (5,)))
    assert S.top_relations(7).tolist() == want.tolist()
    assert all(a.tobytes() == b.tobytes() for a, b in zip(S.z(E, R), want_z))  # moments beside
    assert fut.result()[0] == 5
    assert (fut.result()[1] == threading.get_ident()) == busy
    S2 = QuerySims(gs, q)  # a raising call comes back through its future
    if busy:
        side._busy.release()
    bad = S2.start(3, (lambda: 1 / 0, ()))
    with pytest.raises(ZeroDivisionError):
        bad.result()
    assert S2.top_relations(7).tolist() == want.tolist()  # another k: scanned here
    monkeypatch.setattr(config, "CODA_SIDE_SCANS", False)
    assert QuerySims(gs, q).start(7, (abs, (-1,))) is None
    assert SIDE is not side


def test_side_in_a_forked_child_makes_its_own_thread():
    import multiprocessing as mp
    global _FORKED
    _FORKED = Side()
    assert _FORKED.run((abs, (-2,)))[0].result() == 2  # the parent's thread exists
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child_run, args=(out,))
    child.start()
    assert out.get(timeout=30) == 3
    child.join(30)


_FORKED = None


def _child_run(out):
    out.put(_FORKED.run((abs, (-3,)))[0].result(timeout=10))


@SETTINGS
@given(st.integers(2, 60), st.integers(1, 5), st.integers(0, 12), st.integers(0, 120),
       st.integers(0, 2**32 - 1), st.booleans())
def test_functional_halves_is_functional_topk(n, m, k, n_rows, seed, ties):
    import hyperrag_fast.coda.fast as F
    from hyperrag_fast.kernels.coda_assoc import functional_topk
    rng = np.random.default_rng(seed)
    frp = rng.standard_normal((n, 6)).astype(np.float32)
    if ties:
        frp = np.round(frp)  # equal scores
    entries = rng.choice(n, min(m, n), replace=False).astype(np.int64)
    rows = rng.integers(0, n, n_rows).astype(np.int64)  # repeats, entries included
    want = functional_topk(frp, entries, k, rows)
    old, flag0 = F.SPLIT_ROWS, config.CODA_SIDE_SCANS
    try:
        F.SPLIT_ROWS = 1
        for flag in (True, False):
            config.CODA_SIDE_SCANS = flag
            got = F.functional_halves(frp, entries, k, rows)
            assert got[0].tolist() == want[0].tolist() and got[1].tobytes() == want[1].tobytes()
    finally:
        F.SPLIT_ROWS, config.CODA_SIDE_SCANS = old, flag0
