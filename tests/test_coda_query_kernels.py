"""The CODA query kernels of session 15 (docs/architecture.md §7, "CODA query cost")
against slow twins: ``icode_topk`` (int8 codes of the rows and of the query, the exact
top-k), ``code_l1``, ``max_chunks`` (``align_pool="max"``), ``functional_topk`` with
repeated rows, and the query-side pieces built on them (``QuerySims.release``,
``CodaRetriever._dense_pool``, ``select_lazy_facts``), ``_held`` (the question terms each
candidate holds) and ``cover_greedy`` (``cover_weight``, session 17), ``best_sentences``
(``fact_weight``) and ``dot_gather_ahead`` (session 18), ``sentence_bounds`` (the int8 bound
of ``best_sentences`` that ``select_lazy_facts`` asks) and ``functional_topk_coded``
(session 20)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperrag_fast.ann import top_k_desc
from hyperrag_fast.coda.fast import GraphSims, QuerySims, best_sentence_sims, chunk_sims, codes
from hyperrag_fast.engine import csr_positions
from hyperrag_fast.coda.retrieve import CodaOptions, CodaRetriever
from hyperrag_fast.coda.select import _cover, _held, select, select_lazy_facts
from hyperrag_fast.kernels.coda_assoc import functional_topk, functional_topk_coded, max_chunks
from hyperrag_fast.kernels.coda_facts import dot_gather_ahead, sentence_bounds
from hyperrag_fast.kernels.dense import (CODE_SLACK, code_l1, code_topk, dot_gather, icode_topk,
                                         quantize_rows)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _rows(rng, n, d, dup):
    V = rng.standard_normal((n, d)).astype(np.float32)
    if dup and n > 2:
        V[n // 2:] = V[: n - n // 2]  # exact ties
    V /= np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-12)
    V[rng.random(n) < 0.1] = 0.0  # zero rows: scale 1, code 0
    return V


@SETTINGS
@given(st.integers(1, 80), st.integers(1, 40), st.integers(1, 12), st.integers(0, 2**32 - 1),
       st.booleans(), st.sampled_from(["unit", "zero", "spiky"]))
def test_icode_topk_is_code_topk(n, d, k, seed, dup, qkind):
    """Same ids and bit-identical float32 scores as ``code_topk`` (itself the float32
    scan's, tests/test_dense_kernels.py), and the exact top-k of the float64 twin."""
    rng = np.random.default_rng(seed)
    V = _rows(rng, n, d, dup)
    q = rng.standard_normal(d).astype(np.float32)
    if qkind == "zero":
        q[:] = 0.0
    elif qkind == "spiky":  # one large coordinate: a coarse query step
        q *= 0.01
        q[rng.integers(d)] = 1.0
    q /= max(float(np.linalg.norm(q)), 1e-12)
    q = q.astype(np.float32)
    C, sc, l1 = codes(V)
    k = min(k, n)
    a_ids, a_s = np.empty(k, np.int64), np.empty(k, np.float32)
    b_ids, b_s = np.empty(k, np.int64), np.empty(k, np.float32)
    code_topk(C, sc, V, q, k, a_ids, a_s)
    rescored = icode_topk(C, sc, l1, V, q, k, b_ids, b_s)
    assert k <= rescored <= n
    assert b_ids.tolist() == a_ids.tolist()
    np.testing.assert_array_equal(b_s, a_s)
    exact = V.astype(np.float64) @ q.astype(np.float64)
    np.testing.assert_allclose(np.sort(exact[b_ids]), np.sort(np.sort(exact)[::-1][:k]), atol=1e-5)


@SETTINGS
@given(st.integers(1, 30), st.integers(1, 50), st.integers(0, 2**32 - 1))
def test_code_l1_is_the_codes_l1_norm(n, d, seed):
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((n, d)).astype(np.float32)
    C, sc = np.empty(V.shape, np.int8), np.empty(n, np.float32)
    quantize_rows(V, C, sc)
    out = np.empty(n, np.int64)
    code_l1(C, out)
    np.testing.assert_array_equal(out, np.abs(C.astype(np.int64)).sum(axis=1))


def max_chunks_twin(ent_ptr, ent_chunks, rel_ptr, rel_chunks, KE, we, KR, wr):
    """The NumPy ``align_pool="max"`` of coda/select.py before the kernel (session 14)."""
    parts_c, parts_w = [], []
    for ptr, cs, items, w in ((ent_ptr, ent_chunks, KE, we), (rel_ptr, rel_chunks, KR, wr)):
        if items.size:
            lens = ptr[items + 1] - ptr[items]
            parts_c.append(np.concatenate([cs[ptr[i]:ptr[i + 1]] for i in items]).astype(np.int64))
            parts_w.append(np.repeat(w, lens))
    if not parts_c:
        return np.zeros(0, np.int64), np.zeros(0)
    c, w = np.concatenate(parts_c), np.concatenate(parts_w)
    ids, inv = np.unique(c, return_inverse=True)
    best = np.zeros(ids.size)
    np.maximum.at(best, inv, w)
    return ids, best


def _csr(rng, n_items, n_chunks):
    lens = rng.integers(0, 5, size=n_items)
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    return ptr, rng.integers(0, n_chunks, size=int(ptr[-1])).astype(np.int64)


@SETTINGS
@given(st.integers(1, 20), st.integers(1, 20), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_max_chunks_matches_twin(ne, nr, n_chunks, seed):
    rng = np.random.default_rng(seed)
    ep, ec = _csr(rng, ne, n_chunks)
    rp, rc = _csr(rng, nr, n_chunks)
    KE = rng.choice(ne, size=rng.integers(0, ne + 1), replace=False).astype(np.int64)
    KR = rng.choice(nr, size=rng.integers(0, nr + 1), replace=False).astype(np.int64)
    we = np.maximum(rng.standard_normal(KE.size), 0.0)  # weights as retrieve.py makes them
    wr = np.maximum(rng.standard_normal(KR.size), 0.0)
    ids, best = max_chunks(ep, ec, rp, rc, KE, we, KR, wr)
    want_ids, want_best = max_chunks_twin(ep, ec, rp, rc, KE, we, KR, wr)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(best, want_best)


@SETTINGS
@given(st.integers(2, 40), st.integers(1, 8), st.integers(1, 4), st.integers(0, 10),
       st.integers(0, 2**32 - 1))
def test_functional_topk_ignores_row_order_and_repeats(n, d, m, k, seed):
    """Rows are visited in id order, so the push's order and repeats change nothing."""
    rng = np.random.default_rng(seed)
    frp = rng.integers(-3, 4, size=(n, d)).astype(np.float32)
    entries = rng.choice(n, size=min(m, n), replace=False).astype(np.int64)
    rows = rng.choice(n, size=n // 2 + 1, replace=False).astype(np.int64)
    a = functional_topk(frp, entries, k, np.sort(rows))
    b = functional_topk(frp, entries, k, np.concatenate([rows[::-1], rows]))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


@SETTINGS
@given(st.integers(2, 60), st.integers(1, 24), st.integers(0, 5), st.integers(0, 12),
       st.integers(0, 2**32 - 1), st.sampled_from(["unit", "ints", "dup"]))
def test_functional_topk_coded_is_functional_topk(n, d, m, k, seed, kind):
    """``functional_topk_coded`` (int8 bounds first, float32 rescoring) = ``functional_topk``:
    the same ids and floats, for unit rows (with zero rows), small-integer rows (ties)
    and repeated rows, repeated and unordered ``rows``, no entries."""
    rng = np.random.default_rng(seed)
    frp = (rng.integers(-3, 4, size=(n, d)).astype(np.float32) if kind == "ints"
           else _rows(rng, n, d, dup=kind == "dup"))
    entries = rng.choice(n, size=min(m, n), replace=False).astype(np.int64)
    rows = rng.integers(0, n, size=rng.integers(0, 2 * n)).astype(np.int64)
    C, sc, l1 = codes(frp)
    a = functional_topk(frp, entries, k, rows)
    b = functional_topk_coded(frp, C, sc, l1, entries, k, rows)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


class _Holder:
    """What ``CodaRetriever._dense_pool`` reads of its retriever."""

    _chunk_codes, _dense_pool = CodaRetriever._chunk_codes, CodaRetriever._dense_pool

    def __init__(self, chunk_vec):
        self.chunk_vec, self._ccodes = chunk_vec, None


@SETTINGS
@given(st.integers(1, 60), st.integers(2, 24), st.integers(1, 25), st.integers(0, 2**32 - 1),
       st.booleans())
def test_dense_pool_is_top_k_desc_or_declines_a_tie(n, d, k, seed, dup):
    rng = np.random.default_rng(seed)
    V = _rows(rng, n, d, dup)
    q = rng.standard_normal(d).astype(np.float32)
    q /= np.linalg.norm(q)
    pool = _Holder(V)._dense_pool(q, k)
    cs = chunk_sims(V, q)
    s = np.sort(cs)[::-1]
    if n <= k or s[k - 1] == s[k]:
        assert pool is None
    else:
        assert pool.tolist() == top_k_desc(cs, k).tolist()


def test_query_sims_release_resets_and_reuses_the_arrays():
    rng = np.random.default_rng(0)
    rel_vec = SimpleNamespace(rep=rng.standard_normal((5, 8)).astype(np.float32),
                              of=rng.integers(0, 5, size=12))
    g = SimpleNamespace(ent_vec=rng.standard_normal((30, 8)).astype(np.float32), rel_vec=rel_vec,
                        frp=np.zeros((30, 4), np.float32))  # GraphSims codes it
    gs = GraphSims(g)
    q = rng.standard_normal(8).astype(np.float32)
    S = QuerySims(gs, q)
    S.fill(np.array([1, 2, 2]), np.array([3]))
    ent, rel = S.ent, S.rel
    assert np.isfinite(ent).sum() == 2 and np.isfinite(rel).sum() == 1
    S.release()
    S2 = QuerySims(gs, q)
    assert S2.ent is ent and S2.rel is rel  # this thread's spare pair
    assert np.isnan(ent).all() and np.isnan(rel).all()
    S3 = QuerySims(gs, q)  # the pair is taken: a new one
    assert S3.ent is not ent and np.isnan(S3.ent).all()
    S2.fill(np.array([4]), None)
    np.testing.assert_array_equal(S2.ent[4], np.float32(g.ent_vec[4] @ q))


@SETTINGS
@given(st.integers(1, 120), st.integers(0, 10), st.integers(0, 2**32 - 1),
       st.sampled_from(["plain", "dedup", "cover", "mmr"]), st.booleans(),
       st.sampled_from([None, 0.0, 0.05, 1.0]))
def test_lazy_facts_select_as_over_all_candidates(n, top_k, seed, mode, ties, slack):
    """``select_lazy_facts`` = ``select`` over ``score + fact_weight * best`` of every
    candidate: the same chunks, order and scores (``ties``: equal scores and facts), with
    or without a tighter bound ``bound_of`` (``slack``: its largest excess over ``best``,
    0: exact); ``best_of`` and ``bound_of`` are asked at most once per candidate."""
    rng = np.random.default_rng(seed)
    n_chunks = 3 * n
    ids = rng.choice(n_chunks, size=n, replace=False).astype(np.int64)
    chunk_vec = _rows(rng, n_chunks, 6, dup=True)
    score = rng.random(n) * 2
    best = rng.uniform(-1, 1, n)
    if ties:
        score, best = np.round(score, 1), np.round(best, 1)
    upper = np.minimum(1.0, best + rng.random(n) * 0.5)  # any bound >= best
    o = CodaOptions(fact_weight=0.2, dedup_sim=0.9 if mode != "plain" else 0.0,
                    cover_weight=0.5 if mode == "cover" else 0.0,
                    diversity=0.3 if mode == "mmr" else 0.0)
    post = ([rng.choice(n_chunks, size=rng.integers(1, n_chunks), replace=False)
             for _ in range(rng.integers(0, 4))] if mode == "cover" else None)
    tight = np.minimum(upper, best + rng.random(n) * (slack or 0.0))  # best <= tight <= upper
    asked: list[int] = []
    def best_of(c):
        asked.extend(c)
        return np.array([best[int(np.flatnonzero(ids == x)[0])] for x in c])
    bounded: list[int] = []
    def bound_of(c):
        bounded.extend(c)
        return np.array([tight[int(np.flatnonzero(ids == x)[0])] for x in c])
    pos, sc = select_lazy_facts(chunk_vec, ids, score, top_k, o, post, n_chunks, best_of, upper,
                                None if slack is None else bound_of)
    assert len(asked) == len(set(asked)) and len(bounded) == len(set(bounded))
    full = score + o.fact_weight * best
    want = select(chunk_vec, ids, full, top_k, o, post, n_chunks)
    assert ids[pos].tolist() == ids[want].tolist()
    np.testing.assert_array_equal(sc, full[want])


@SETTINGS
@given(st.integers(0, 60), st.integers(0, 6), st.integers(1, 80), st.integers(0, 2**32 - 1))
def test_held_is_isin_per_term(n, terms, n_docs, seed):
    """``_held`` (one scratch row marked per term) = the ``np.isin`` stack it replaced,
    for candidate ids and postings anywhere in ``[0, n_docs)`` and beyond it, and the
    same idf shares."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(n_docs + 5, size=min(n, n_docs + 5), replace=False).astype(np.int64)
    post = [np.unique(rng.integers(0, n_docs + 3, rng.integers(0, 12))) for _ in range(terms)]
    held, w = _held(ids, post, n_docs)
    want = (np.stack([np.isin(ids, p) for p in post], axis=1) if post
            else np.zeros((ids.size, 0), bool))
    assert held.dtype == bool and held.shape == want.shape and (held == want).all()
    df = np.array([p.size for p in post], np.float64)
    w0 = np.log1p((n_docs - df + 0.5) / (df + 0.5))
    assert np.array_equal(w, w0 / w0.sum() if w0.sum() > 0 else w0)


def cover_twin(chunk_vec, ids, score, top_k, lam, limit, held, w):
    """The NumPy greedy of coda/select.py ``_cover`` before the kernel (session 15)."""
    n = ids.size
    covered = np.zeros(held.shape[1], bool)
    free = np.ones(n, bool)
    chosen: list[int] = []
    while len(chosen) < min(top_k, n) and free.any():
        val = score + lam * (held[:, ~covered] @ w[~covered])
        cand = np.flatnonzero(free)
        for j in cand[np.lexsort((ids[cand], -val[cand]))]:
            free[j] = False
            v = chunk_vec[ids[j]]
            if limit <= 0 or all(float(v @ chunk_vec[ids[c]]) <= limit for c in chosen):
                chosen.append(int(j))
                covered |= held[j]
                break
    return np.asarray(chosen, np.int64)


@SETTINGS
@given(st.integers(1, 60), st.integers(0, 6), st.integers(0, 12), st.integers(0, 2**32 - 1),
       st.sampled_from([0.0, 2.5, 6.0]), st.booleans())
def test_cover_greedy_is_the_numpy_greedy(n, terms, top_k, seed, limit, ties):
    """kernels/coda_select.py ``cover_greedy`` (via ``_cover``) = the NumPy greedy it
    replaced: the same positions in the same order, near-duplicates skipped (small-integer
    rows: exact cosines), ties by chunk id."""
    rng = np.random.default_rng(seed)
    n_chunks = 2 * n
    ids = rng.choice(n_chunks, size=n, replace=False).astype(np.int64)
    chunk_vec = rng.integers(-1, 2, size=(n_chunks, 5)).astype(np.float32)
    score = rng.random(n)
    if ties:
        score = np.round(score, 1)
    post = [rng.choice(n_chunks, size=rng.integers(1, n_chunks + 1), replace=False)
            for _ in range(terms)]  # unsorted postings
    held, w = _held(ids, post, n_chunks)
    got = _cover(chunk_vec, ids, score, top_k, 0.5, limit, post, n_chunks)
    want = (cover_twin(chunk_vec, ids, score, top_k, 0.5, limit, held, w) if post
            else _cover(chunk_vec, ids, score, top_k, 0.5, limit, post, n_chunks))
    assert got.tolist() == want.tolist()
    assert _cover(chunk_vec, ids, score, top_k, 0.5, limit, post, n_chunks,
                  (held, w)).tolist() == got.tolist()


@SETTINGS
@given(st.integers(0, 40), st.integers(0, 60), st.integers(1, 40), st.integers(0, 30),
       st.integers(0, 2**32 - 1))
def test_best_sentences_is_gather_and_maximum_at(n_chunks, n_sent, d, n_ids, seed):
    """``best_sentence_sims`` (kernels/coda_facts.py ``best_sentences``) = the NumPy path
    it replaced: kernels/dense.py ``dot_gather`` over the chunks' sentences, then ``np.maximum.at`` from -1; bit-identical, for chunks without sentences,
    repeated and unsorted ids."""
    rng = np.random.default_rng(seed)
    n_chunks = max(n_chunks, 1)
    sent_chunk = rng.integers(0, n_chunks, n_sent)
    order = np.argsort(sent_chunk, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(sent_chunk, minlength=n_chunks))]).astype(np.int64)
    V = _rows(rng, n_sent, d, dup=True)
    q = rng.standard_normal(d).astype(np.float32)
    ids = rng.integers(0, n_chunks, n_ids).astype(np.int64)
    pos, owner = csr_positions(ptr, ids)
    sims = np.empty(pos.size, np.float32)
    dot_gather(V, order[pos], q, sims)  # gather_sims's floats before this session
    want = np.full(ids.size, -1.0)
    np.maximum.at(want, owner, sims.astype(np.float64))
    got = best_sentence_sims(V, ptr, order, ids, q)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)


@SETTINGS
@given(st.integers(1, 50), st.integers(1, 70), st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_dot_gather_ahead_is_dot_gather(n, d, m, seed):
    """``dot_gather_ahead`` (rows fetched ahead) = kernels/dense.py ``dot_gather``, bit for
    bit, for repeated rows, and within float32 rounding of the float64 products."""
    rng = np.random.default_rng(seed)
    V = _rows(rng, n, d, dup=True)
    q = rng.standard_normal(d).astype(np.float32)
    rows = rng.integers(0, n, m).astype(np.int64)
    want, got = np.empty(m, np.float32), np.empty(m, np.float32)
    dot_gather(V, rows, q, want)
    dot_gather_ahead(V, rows, q, got)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, V[rows].astype(np.float64) @ q, atol=1e-5)


@SETTINGS
@given(st.integers(0, 40), st.integers(0, 60), st.integers(1, 40), st.integers(0, 30),
       st.integers(0, 2**32 - 1), st.sampled_from(["unit", "zero", "spiky"]))
def test_sentence_bounds_bound_best_sentences(n_chunks, n_sent, d, n_ids, seed, qkind):
    """``sentence_bounds`` = its NumPy twin (int8 codes of the rows and of the query,
    ``icode_topk``'s error bound, the largest per chunk, -1 when none) and is >=
    ``best_sentence_sims`` (the float32 dots) for every chunk, repeated and unsorted ids."""
    rng = np.random.default_rng(seed)
    n_chunks = max(n_chunks, 1)
    sent_chunk = rng.integers(0, n_chunks, n_sent)
    order = np.argsort(sent_chunk, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(sent_chunk, minlength=n_chunks))]).astype(np.int64)
    V = _rows(rng, n_sent, d, dup=True) * np.float32(rng.uniform(0.5, 2.0))
    q = rng.standard_normal(d).astype(np.float32)
    q = np.zeros(d, np.float32) if qkind == "zero" else q
    if qkind == "spiky":
        q[0] *= 100
    ids = rng.integers(0, n_chunks, n_ids).astype(np.int64)
    C, sc, l1 = codes(V)
    got = np.empty(ids.size)
    sentence_bounds(C, sc, l1, ptr, order, ids, q, got)
    q64 = q.astype(np.float64)
    qmax = float(np.abs(q64).max())
    sq = qmax / 127 if qmax > 0 else 1.0
    qc = np.clip(np.rint(q64 / sq), -127, 127).astype(np.int64)
    sc64 = sc.astype(np.float64)
    u = sc64 * sq * (C.astype(np.int64) @ qc) + sc64 * 0.5 * (np.abs(q64).sum() + sq * l1) + CODE_SLACK
    want = np.array([max([-1.0] + [u[order[p]] for p in range(ptr[c], ptr[c + 1])]) for c in ids])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert (got >= best_sentence_sims(V, ptr, order, ids, q)).all()
