"""Twins of the certified-top-k power iteration and the top-k selection (kernels/ppr.py).

``ppr_power_topk`` must equal the plain power iteration (SciPy/NumPy twin) sweep for
sweep, and whenever it stops on its certificate its top-k must be the exact solve's
top-k in order (STITCH-RAG §3.3 step 10; docs/architecture.md §4)."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperrag_fast.kernels.ppr import ppr_power_topk, topk_desc

from strategies import ppr_prior_and_damping
from twins import check_power_topk, csr_of, transition

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def cases(draw):
    """Random weighted graphs (directed or symmetric, some dangling nodes), priors that are
    sparse (the sparse-sweep path) or dense, with or without near-ties."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    m = draw(st.integers(1, 60))
    density = draw(st.sampled_from([0.0, 0.03, 0.1, 0.4]))
    W = (rng.random((m, m)) < density) * rng.random((m, m))
    np.fill_diagonal(W, 0.0)
    if draw(st.booleans()):
        W = W + W.T
    p, d = ppr_prior_and_damping(draw, rng, m)
    return W, p, d


@SETTINGS
@given(cases(), st.integers(0, 10), st.sampled_from([1e-6, 1e-9]))
def test_power_topk_is_the_power_iteration_with_a_certified_stop(case, k, tol):
    W, p, d = case
    ptr, nbr, w, wsum = csr_of(W)
    P = transition(W)
    out = ppr_power_topk(ptr, nbr, w, wsum, p, d, tol, 10_000, k)
    # sweep for sweep the plain power iteration (sparse and dense sweeps alike)
    order_x = check_power_topk(out, P, p, d, tol, k)
    assert list(topk_desc(out[0], k)) == order_x
    assert topk_desc(out[0], 0).shape == (0,)


@SETTINGS
@given(cases())
def test_power_topk_without_k_is_ppr_power(case):
    from hyperrag_fast.kernels.ppr import ppr_power
    W, p, d = case
    ptr, nbr, w, wsum = csr_of(W)
    x, its, _b, cert = ppr_power_topk(ptr, nbr, w, wsum, p, d, 1e-8, 10_000, 0)
    x2, its2 = ppr_power(ptr, nbr, w, wsum, p, d, 1e-8, 10_000)
    assert not cert and its == its2
    np.testing.assert_allclose(x, x2, atol=1e-13, rtol=0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0, -1.0]) | st.floats(-1, 1), max_size=40),
       st.integers(1, 12))
def test_topk_desc_is_a_stable_sort(vals, k):
    s = np.array(vals, dtype=np.float64)
    np.testing.assert_array_equal(topk_desc(s, k), np.argsort(-s, kind="mergesort")[:k])
