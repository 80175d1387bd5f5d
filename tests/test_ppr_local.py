"""Twins and bounds of the local push (kernels/ppr_local.py, hyperrag_fast/ppr.py;
docs/architecture.md §4, "Local push").

The kernel must be its plain-Python twin push for push, in FIFO rounds and in node-order
passes; every node's exact score must lie in [x, x + b] with the returned lower bound x
and width b; a certified top-k must be the exact solve's in order; the approximate mode
must hold its stated bound d eps wsum(v) (symmetric graphs) and d R (any graph); and the
scratch must come back clean."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperrag_fast.kernels.ppr_local import REFINE_BUDGET, arc_scale, local_push_dense, local_push_topk, pass_threshold
from hyperrag_fast.ppr import LocalPush, is_symmetric

from strategies import ppr_prior_and_damping
from twins import csr_of, local_push_twin, ppr_exact, transition

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def cases(draw, symmetric=None):
    """Random weighted graphs (symmetric or directed, some dangling or isolated nodes, some
    unit weights: exact ties), sparse or dense priors, dampings in [0, 0.95]."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    m = draw(st.integers(1, 50))
    density = draw(st.sampled_from([0.0, 0.03, 0.1, 0.4]))
    W = (rng.random((m, m)) < density) * (rng.random((m, m)) if draw(st.booleans()) else 1.0)
    np.fill_diagonal(W, 0.0)
    sym = draw(st.booleans()) if symmetric is None else symmetric
    if sym:
        W = np.triu(W, 1)
        W = W + W.T
    p, d = ppr_prior_and_damping(draw, rng, m)
    return W, p, d


def _call(W, p, d, eps_min, k, sym, shrink=2.0, pass_min=None, jump=8.0, refine=REFINE_BUDGET):
    ptr, nbr, w, wsum = csr_of(W)
    n = wsum.shape[0]
    pass_min = pass_threshold(n) if pass_min is None else pass_min
    seeds = np.flatnonzero(p)
    scratch = (np.zeros(n), np.zeros(n), np.zeros(n, np.uint8), np.empty(n + 1, np.int32), np.empty(n, np.int32))
    out = local_push_topk(ptr, nbr, arc_scale(ptr, nbr, w, wsum), wsum, float(wsum.max(initial=0.0)), sym,
                          seeds, p[seeds], d, 0.0, eps_min, shrink, jump, k, pass_min, refine, *scratch)
    x, s, flag = scratch[:3]
    assert not x.any() and not s.any() and not flag.any(), "scratch left dirty"
    return (ptr, nbr, w, wsum), out


def _dense(ids, xs, n, fill=0.0):
    out = np.full(n, fill)
    out[ids] = xs
    return out


#: refinement budgets: never, the kernel's, always the deepest
REFINES = st.sampled_from([0.0, REFINE_BUDGET, 1e9])


@SETTINGS
@given(cases(), st.integers(0, 10), st.sampled_from([1e-3, 1e-6, 1e-10]), st.sampled_from([1.2, 2.0, 4.0]),
       st.sampled_from(["fifo", "passes", "default", "switch"]), st.sampled_from([1.0, 2.0, 8.0]), REFINES)
def test_local_push_is_its_twin(case, k, eps_min, shrink, mode, jump, refine):
    W, p, d = case
    sym = bool(np.allclose(W, W.T))
    n = len(p)
    pass_min = {"fifo": n + 1, "passes": 0, "default": pass_threshold(n),
                "switch": int(np.count_nonzero(p)) + 2}[mode]
    jump = jump * shrink
    (ptr, nbr, w, wsum), out = _call(W, p, d, eps_min, k, sym, shrink, pass_min, jump, refine)
    ids, xs, bs, b_rest, top, cert, eps, pushes, R, rho = out
    seeds = np.flatnonzero(p)
    x, r, eps2, pushes2, order, lo, top2, b2 = local_push_twin(ptr, nbr, w, wsum, seeds, p[seeds], d, eps_min, shrink,
                                                               k, sym, pass_min, jump, refine)
    assert pushes == pushes2 and eps == eps2
    np.testing.assert_array_equal(ids, order)
    np.testing.assert_allclose(_dense(ids, xs, n), lo, rtol=0, atol=1e-15)
    assert abs(R - r.sum()) <= 1e-12
    assert list(top) == list(top2) == sorted(range(n), key=lambda i: (-lo[i], i))[:k]
    # the returned widths are the stated ones (touched nodes: their own wsum; refined
    # contenders: d^L wsum rho)
    np.testing.assert_allclose(bs, b2[ids], rtol=1e-9, atol=1e-15)


@SETTINGS
@given(cases(), st.integers(0, 10), st.sampled_from([1e-3, 1e-6, 1e-12]), REFINES, st.sampled_from([1.2, 2.0]))
def test_every_score_within_its_bound_and_certified_order_is_exact(case, k, eps_min, refine, shrink):
    """Also with the refined bounds of the contenders (``refine``: docs/architecture.md §4,
    "Refined bounds"), which replace their plain ones in xs / bs."""
    W, p, d = case
    sym = bool(np.allclose(W, W.T))
    _g, (ids, xs, bs, b_rest, top, cert, eps, _pushes, R, rho) = _call(W, p, d, eps_min, k, sym, shrink,
                                                                       refine=refine)
    n = len(p)
    exact = ppr_exact(transition(W), p, d)
    x = _dense(ids, xs, n)
    b = _dense(ids, bs, n, fill=b_rest)
    err = exact - x
    assert np.all(err >= -1e-12), "push over-estimates"
    assert np.all(err <= b + 1e-12), "error over the stated bound"
    assert np.all(err <= d * R + 1e-12)
    if cert:
        assert k > 0
        assert list(top) == sorted(range(n), key=lambda i: (-exact[i], i))[:k], "certified a wrong order"
    elif k > 0:
        assert eps == eps_min, "gave up before eps_min"


@SETTINGS
@given(cases(symmetric=True), st.sampled_from([1e-2, 1e-4, 1e-6]))
def test_approximate_mode_holds_its_stated_bound(case, eps):
    """Symmetric graph, k = 0: every node within d eps wsum(v) of the exact score."""
    W, p, d = case
    lp = LocalPush(*csr_of(W)[:3])
    assert lp.symmetric
    res = lp.approx(p, d, eps)
    exact = ppr_exact(transition(W), p, d)
    err = exact - res.dense(len(p))
    wsum = W.sum(axis=1)
    assert np.all(err >= -1e-12)
    assert np.all(err <= d * eps * wsum + 1e-12), "approximate mode over d eps wsum"
    assert np.all(err <= d * res.residual + 1e-12)
    assert res.eps == eps and not res.certified


@SETTINGS
@given(cases(), st.integers(1, 8))
def test_wrapper_and_dense_form_agree(case, k):
    W, p, d = case
    ptr, nbr, w, wsum = csr_of(W)
    lp = LocalPush(ptr, nbr, w)
    assert lp.symmetric == bool(np.allclose(W, W.T))
    res = lp.topk(p, d, k, eps_min=1e-9)
    res2 = lp.topk(p, d, k, eps_min=1e-9)  # reused scratch: same answer
    np.testing.assert_array_equal(res.top, res2.top)
    np.testing.assert_array_equal(res.x, res2.x)
    x, cert, pushes, bmax = local_push_dense(ptr, nbr, w, lp.wsum, p, d, 1e-9, k, lp.symmetric)
    np.testing.assert_array_equal(x, res.dense(len(p)))
    assert cert == res.certified and pushes == res.pushes
    assert bmax >= np.max(res.b, initial=0.0)


def test_certificate_fails_honestly_on_an_exact_tie():
    """Two symmetric seeds on a path: their exact scores tie, so no order is certified."""
    W = np.zeros((3, 3))
    W[0, 1] = W[1, 0] = W[1, 2] = W[2, 1] = 1.0
    p = np.array([0.5, 0.0, 0.5])
    res = LocalPush(*csr_of(W)[:3]).topk(p, 0.85, 2, eps_min=1e-10)
    assert not res.certified and res.eps == 1e-10
    p = np.array([0.6, 0.0, 0.4])
    exact = ppr_exact(transition(W), p, 0.85)
    res = LocalPush(*csr_of(W)[:3]).topk(p, 0.85, 3)
    assert res.certified and list(res.top) == list(np.argsort(-exact, kind="stable"))


def test_locality_work_does_not_grow_with_the_graph():
    """Fixed threshold, one seed, a ring of growing size: the same pushes (the push never
    reaches past the radius its threshold allows)."""
    counts = []
    for n in (1_000, 10_000, 100_000):
        src = np.arange(n)
        W_ptr = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
        nbr = np.stack([(src - 1) % n, (src + 1) % n], axis=1).reshape(-1).astype(np.int32)
        lp = LocalPush(W_ptr, nbr, np.ones(2 * n))
        p = np.zeros(n)
        p[0] = 1.0
        res = lp.approx(p, 0.85, 1e-4)
        counts.append((res.pushes, res.ids.shape[0]))
    assert counts[0] == counts[1] == counts[2]


def test_inputs_are_validated():
    ptr, nbr, w, _ = csr_of(np.array([[0.0, 1.0], [1.0, 0.0]]))
    with pytest.raises(ValueError):
        LocalPush(ptr, nbr, -w)
    with pytest.raises(ValueError):
        LocalPush(ptr, np.array([0, 5], dtype=np.int32), w)
    lp = LocalPush(ptr, nbr, w)
    for bad in ([1.0, -1.0], [np.nan, 0.0], [np.inf, 1.0]):
        with pytest.raises(ValueError):
            lp.topk(np.array(bad), 0.5, 1)
        with pytest.raises(ValueError):
            lp.approx(np.array(bad), 0.5, 1e-3)
    with pytest.raises(ValueError):
        lp.topk(np.array([1.0, 0.0]), 1.0, 1)
    with pytest.raises(ValueError):
        lp.topk(np.array([1.0]), 0.5, 1)
    assert is_symmetric(ptr, nbr, w)
    assert not is_symmetric(ptr, nbr, np.array([1.0, 2.0]))


@pytest.mark.parametrize("d", [0.85, 0.5, 0.2])
def test_refined_bounds_certify_sooner_and_exactly(d):
    """A random symmetric graph (300 nodes, mean degree ~8), 20 seeds, k = 8: with the
    refinement always on, the certificate holds after fewer pushes than with the plain
    bounds alone, both orders are the exact solve's, and the kernel is its twin in both."""
    rng = np.random.default_rng(3)
    m = 300
    W = np.triu((rng.random((m, m)) < 8 / m) * rng.random((m, m)), 1)
    W = W + W.T
    p = np.zeros(m)
    p[rng.choice(m, 20, replace=False)] = rng.exponential(1.0, 20)
    p /= p.sum()
    exact = ppr_exact(transition(W), p, d)
    want = sorted(range(m), key=lambda i: (-exact[i], i))[:8]
    pushes = {}
    for refine in (0.0, 1e9):
        (ptr, nbr, w, wsum), out = _call(W, p, d, 1e-12, 8, True, 1.2, refine=refine)
        ids, xs, bs, b_rest, top, cert, eps, pushes[refine], R, rho = out
        assert cert and list(top) == want
        seeds = np.flatnonzero(p)
        twin = local_push_twin(ptr, nbr, w, wsum, seeds, p[seeds], d, 1e-12, 1.2, 8, True, refine=refine)
        assert twin[3] == pushes[refine] and list(twin[6]) == want
        err = exact[ids] - xs
        assert np.all(err >= -1e-12) and np.all(err <= bs + 1e-12)
    assert pushes[1e9] < pushes[0.0]
