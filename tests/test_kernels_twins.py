"""Every STITCH kernel against its plain NumPy/SciPy twin on random hypergraphs."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperrag_fast.engine import StitchEngine
from hyperrag_fast.kernels.chunk_graph import chunk_graph
from hyperrag_fast.kernels.ppr import ppr_power, ppr_push, ppr_push_topk
from hyperrag_fast.kernels.scratch import scratch_is_clean
from hyperrag_fast.config import StitchOptions

from strategies import instances, stitch_options
from twins import (chunk_graph_twin, csr_of, power_topk_bound, ppr_exact, ppr_power_twin, prior_twin, ranked,
                   stibp_twin, transition)

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOL = 1e-9


def _engine(inst):
    g, nv, ev, cv, *_ = inst
    return StitchEngine(g, nv, ev, cv)


def _full_detail(res, n_nodes):
    out = np.zeros((4, n_nodes))
    for row, vals in enumerate((res.node_A, res.node_space, res.node_time, res.node_a)):
        out[row, res.node_ids] = vals
    return out


@SETTINGS
@given(instances(), stitch_options())
def test_stibp_channels_match_twin(inst, opts):
    g, nv, ev, cv, q, cn, cc = inst
    eng = _engine(inst)
    res = eng.query(q, cn, cc, opts, detail=True)
    A, space, time = stibp_twin(g, nv, ev, cv, q, cn, opts)
    got = _full_detail(res, g.n_nodes)
    np.testing.assert_allclose(got[0], A, atol=TOL, rtol=0)
    np.testing.assert_allclose(got[1], space, atol=TOL, rtol=0)
    np.testing.assert_allclose(got[2], time, atol=TOL, rtol=0)
    np.testing.assert_allclose(got[3], (A + space + time) / 3.0, atol=TOL, rtol=0)
    # every read hyperedge score is the plain cosine
    np.testing.assert_allclose(res.edge_S, ev[res.edge_ids].astype(np.float64) @ q, atol=TOL)
    assert scratch_is_clean(eng._scratch())


@SETTINGS
@given(instances(), stitch_options(), st.booleans())
def test_projection_and_prior_match_twin(inst, opts, with_bonus):
    g, nv, ev, cv, q, cn, cc = inst
    bonus = np.linspace(0.0, 0.2, len(cc)) if with_bonus else None
    res = _engine(inst).query(q, cn, cc, opts, chunk_bonus=bonus, detail=True)
    A, space, time = stibp_twin(g, nv, ev, cv, q, cn, opts)
    a = (A + space + time) / 3.0  # the mean of the three channels
    cq, score, p, sims = prior_twin(g, cv, q, a, cc, opts, bonus)
    np.testing.assert_array_equal(res.cq, cq)
    np.testing.assert_allclose(res.cq_score, score, atol=TOL, rtol=0)
    np.testing.assert_allclose(res.cq_prior, p, atol=TOL, rtol=0)
    np.testing.assert_allclose(res.cq_sim, sims, atol=TOL, rtol=0)
    if len(cq):
        assert abs(res.cq_prior.sum() - 1.0) < 1e-12


@SETTINGS
@given(instances(), stitch_options())
def test_chunk_graph_matches_twin(inst, opts):
    g, nv, ev, cv, q, cn, cc = inst
    eng = _engine(inst)
    cq = np.arange(g.n_chunks, dtype=np.int32)[:: max(1, g.n_chunks // 5)] if g.n_chunks else cc
    sc = eng._scratch()
    ptr, nbr, w, wsum = chunk_graph(eng.index_arrays(opts), sc, np.ascontiguousarray(cq, np.int32),
                                    opts.graph_max_group, 0 if opts.graph_weight == "uniform" else 1)
    W = np.zeros((len(cq), len(cq)))
    for i in range(len(cq)):
        row = nbr[ptr[i]:ptr[i + 1]]
        assert len(set(row.tolist())) == len(row), "duplicate neighbour"
        assert i not in row.tolist(), "self edge"
        W[i, row] = w[ptr[i]:ptr[i + 1]]
    np.testing.assert_allclose(W, chunk_graph_twin(g, cq, opts), atol=TOL, rtol=0)
    np.testing.assert_allclose(wsum, W.sum(axis=1), atol=TOL)
    assert scratch_is_clean(sc)


def _random_graph(rng, m, density):
    W = (rng.random((m, m)) < density).astype(np.float64) * rng.random((m, m))
    W = np.triu(W, 1)
    W = W + W.T
    return (W, *csr_of(W))


@st.composite
def ppr_cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    m = draw(st.integers(1, 40))
    W, ptr, nbr, w, wsum = _random_graph(rng, m, draw(st.sampled_from([0.0, 0.05, 0.2, 0.6])))
    p = rng.random(m) * (rng.random(m) < 0.5)
    if p.sum() == 0:
        p[:] = 1.0
    p /= p.sum()
    return W, ptr, nbr, w, wsum, p, draw(st.sampled_from([0.0, 0.3, 0.5, 0.85, 0.95]))


@SETTINGS
@given(ppr_cases())
def test_power_iteration_matches_twin(case):
    W, ptr, nbr, w, wsum, p, d = case
    P = transition(W)
    x, its = ppr_power(ptr, nbr, w, wsum, p, d, 0.0, 60)  # fixed 60 steps on both sides
    y, _ = ppr_power_twin(P, p, d, 0.0, 60)
    np.testing.assert_allclose(x, y, atol=TOL, rtol=0)
    assert its == 60
    assert np.all(x >= 0) and abs(x.sum() - 1.0) < 1e-9
    # the paper's stopping rule lands close to the exact solution
    x2, _ = ppr_power(ptr, nbr, w, wsum, p, d, 1e-10, 100_000)
    np.testing.assert_allclose(x2, ppr_exact(P, p, d), atol=1e-8)


@SETTINGS
@given(ppr_cases(), st.sampled_from([1e-2, 1e-4, 1e-6]))
def test_push_within_stated_bound(case, tol):
    W, ptr, nbr, w, wsum, p, d = case
    exact = ppr_exact(transition(W), p, d)
    x, res, _ = ppr_push(ptr, nbr, w, wsum, p, d, tol)
    assert res <= tol + 1e-15
    err = exact - x
    assert np.all(err >= -1e-12), "push over-estimates"
    assert err.sum() <= res + 1e-12
    assert np.all(x >= 0)
    # same top-8 as the exact solve whenever the 8th/9th gap exceeds the bound
    k = min(8, len(p) - 1)
    if k >= 1:
        srt = np.sort(exact)[::-1]
        if srt[k - 1] - srt[k] > res + 1e-12:
            assert set(np.argsort(-exact)[:k]) == set(np.argsort(-x)[:k])


@SETTINGS
@given(ppr_cases(), st.integers(1, 10))
def test_push_topk_early_stop_is_certified(case, k):
    W, ptr, nbr, w, wsum, p, d = case
    exact = ppr_exact(transition(W), p, d)
    x, res, _ = ppr_push_topk(ptr, nbr, w, wsum, p, d, 1e-9, k)
    err = exact - x
    assert np.all(err >= -1e-12) and err.sum() <= res + 1e-12
    order_x = sorted(range(len(p)), key=lambda i: (-x[i], i))[:k]
    order_pi = sorted(range(len(p)), key=lambda i: (-exact[i], i))[:k]
    if res > 1e-9:  # it stopped early: the order must be the exact one
        assert order_x == order_pi


@SETTINGS
@given(instances(), stitch_options())
def test_full_query_matches_twin(inst, opts):
    g, nv, ev, cv, q, cn, cc = inst
    res = _engine(inst).query(q, cn, cc, opts, detail=True)
    A, space, time = stibp_twin(g, nv, ev, cv, q, cn, opts)
    cq, score, p, _ = prior_twin(g, cv, q, (A + space + time) / 3.0, cc, opts)
    if opts.ppr == "none":
        pi = p
    else:
        pi = ppr_exact(transition(chunk_graph_twin(g, cq, opts)), p, opts.damping)
    if opts.ppr == "push":
        # local push (kernels.ppr_local): never over-estimates; its top-k is the exact one
        # (certified), or it went down to the threshold tol and every score is within
        # tol * wsum(v) (the chunk graph is symmetric)
        err = pi - res.cq_pi
        assert np.all(err >= -1e-12)
        if not np.array_equal(res.chunk_ids, ranked(pi, cq, opts.top_k)):
            wsum = chunk_graph_twin(g, cq, opts).sum(axis=1)
            assert np.all(err <= opts.tol * wsum + 1e-12)
    elif opts.ppr in ("power", "factored", "auto"):  # auto: power below PUSH_MIN_CHUNKS
        # the power iteration (on the arcs or on the factored chunk graph) stops on the
        # paper's rule or once its top-k order is certified: pi is the twin's iterate
        # after as many sweeps, within the stated bound
        P, p0 = transition(chunk_graph_twin(g, cq, opts)), p
        its = int(res.stats[2])
        x, _ = ppr_power_twin(P, p0, opts.damping, 0.0, its)
        prev, _ = ppr_power_twin(P, p0, opts.damping, 0.0, max(its - 1, 0))
        np.testing.assert_allclose(res.cq_pi, x, atol=1e-12)
        b = power_topk_bound(x, prev, p0, opts.damping)
        assert np.all(np.abs(res.cq_pi - pi) <= b + 1e-12)
        if np.max(np.abs(x - prev), initial=0.0) >= opts.tol:  # stopped on the certificate
            np.testing.assert_array_equal(res.chunk_ids, ranked(pi, cq, opts.top_k))
    else:
        np.testing.assert_allclose(res.cq_pi, pi, atol=1e-12)
    if len(cq):
        assert np.all(res.cq_pi >= 0)
        if opts.ppr != "push":
            assert abs(res.cq_pi.sum() - 1) < 1e-9
    # the returned ranking is exactly the tie-broken order of the kernel's own scores
    np.testing.assert_array_equal(res.chunk_ids, ranked(res.cq_pi, res.cq, opts.top_k))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(), stitch_options())
def test_auto_ppr_runs_the_solver_of_the_rule(inst, opts):
    """ppr="auto" is the power iteration or the local push as config.ppr_solver says (here
    with the rule's size threshold moved so that both branches run on small graphs)."""
    import hyperrag_fast.engine as E
    if opts.ppr in ("none", "factored"):
        return
    eng = _engine(inst)
    q, cn, cc = inst[4:]
    auto = opts.replace(ppr="auto")
    for min_chunks, frac, solver in ((0, 1.0, "push"), (10**9, 1.0, "power"), (0, -1.0, "power")):
        old = E.PUSH_MIN_CHUNKS, E.PUSH_MAX_FRACTION
        E.PUSH_MIN_CHUNKS, E.PUSH_MAX_FRACTION = min_chunks, ((1.0, frac),)
        try:
            a = eng.query(q, cn, cc, auto, detail=True)
        finally:
            E.PUSH_MIN_CHUNKS, E.PUSH_MAX_FRACTION = old
        b = eng.query(q, cn, cc, opts.replace(ppr=solver), detail=True)
        np.testing.assert_array_equal(a.chunk_ids, b.chunk_ids)
        np.testing.assert_array_equal(a.cq_pi, b.cq_pi)
        np.testing.assert_array_equal(a.stats, b.stats)


def test_auto_rule_reads_the_measured_table():
    from hyperrag_fast.config import PUSH_MIN_CHUNKS, StitchOptions, ppr_solver, push_max_fraction
    from hyperrag_fast.engine import kernel_params
    from hyperrag_fast.kernels import params as P
    for d in (0.0, 0.2, 0.5, 0.85, 0.99):  # the kernel's copy of the rule is config's
        prm = kernel_params(StitchOptions(damping=d, ppr="auto"))
        assert prm[P.PUSH_MIN_CHUNKS] == PUSH_MIN_CHUNKS and prm[P.PUSH_MAX_FRACTION] == push_max_fraction(d)
    assert ppr_solver(0.85, 50, 50) == "power"  # a query's C_q: prior on every chunk
    assert ppr_solver(0.2, PUSH_MIN_CHUNKS - 1, 1) == "power"
    for d in (0.2, 0.5, 0.85):
        n = 10 * PUSH_MIN_CHUNKS
        assert ppr_solver(d, n, int(push_max_fraction(d) * n)) == "push"
        assert ppr_solver(d, n, n) == "power"


@SETTINGS
@given(instances(), stitch_options())
def test_factored_ppr_ranks_as_the_power_iteration(inst, opts):
    if opts.graph_weight != "inverse_size" or opts.ppr == "none":
        opts = opts.replace(graph_weight="inverse_size", ppr="power")
    eng = _engine(inst)
    g, nv, ev, cv, q, cn, cc = inst
    a = eng.query(q, cn, cc, opts.replace(ppr="power"), detail=True)
    b = eng.query(q, cn, cc, opts.replace(ppr="factored"), detail=True)
    # the same iteration summed in another order: the stop test (max change < tol) may
    # fall one iteration apart by rounding; the extra step then moves pi by at most
    # d * (L1 change of the step before) <= d * |C_q| * tol (L1 contraction of PPR)
    assert abs(int(a.stats[2]) - int(b.stats[2])) <= 1
    atol = 1e-13 if a.stats[2] == b.stats[2] else opts.damping * len(a.cq) * opts.tol + 1e-13
    np.testing.assert_allclose(a.cq_pi, b.cq_pi, atol=atol, rtol=0)
    # same ranking up to ties within that bound, which rounding may break either way
    pi_a = dict(zip(a.cq.tolist(), a.cq_pi.tolist()))
    np.testing.assert_allclose([pi_a[c] for c in b.chunk_ids.tolist()], a.scores, atol=atol, rtol=0)
    with pytest.raises(ValueError, match="inverse_size"):
        opts.replace(graph_weight="uniform", ppr="factored")


@settings(max_examples=50, deadline=None)
@given(instances(dtype=np.float32), stitch_options())
def test_float32_inputs_close_to_float64(inst, opts):
    g, nv, ev, cv, q, cn, cc = inst
    r32 = _engine(inst).query(q, cn, cc, opts, detail=True)
    r64 = StitchEngine(g, nv.astype(np.float64), ev.astype(np.float64), cv.astype(np.float64)).query(
        q.astype(np.float64), cn, cc, opts, detail=True)
    # products are formed in float64, so float32 storage is the only difference
    np.testing.assert_allclose(r32.node_a, r64.node_a, atol=1e-12)
    np.testing.assert_array_equal(r32.cq, r64.cq)
    np.testing.assert_allclose(r32.cq_pi, r64.cq_pi, atol=1e-12)


def test_all_zero_activation_gives_uniform_prior():
    from hyperrag_fast.indexing.hypergraph import build_hypergraph
    from hyperrag_fast.records import Extraction, Segment

    g = build_hypergraph([Extraction((Segment("t", (("A", "a"),)),)), Extraction(())])
    one = np.ones((1, 2)) / np.sqrt(2)
    eng = StitchEngine(g, one, one, np.vstack([one, one]))
    opts = StitchOptions.paper(delta=0.99, lam=0.0)  # nothing activates, lambda 0: all I(c) = 0
    res = eng.query(-one[0], [0], [0, 1], opts, detail=True)
    np.testing.assert_allclose(res.cq_prior, [0.5, 0.5])
    np.testing.assert_allclose(res.cq_pi, [0.5, 0.5])
    # ties broken by chunk id
    np.testing.assert_array_equal(res.chunk_ids, [0, 1])


def test_input_validation():
    from hyperrag_fast.indexing.hypergraph import build_hypergraph
    from hyperrag_fast.records import Extraction, Segment

    g = build_hypergraph([Extraction((Segment("t", (("A", "a"),)),))])
    v = np.ones((1, 3)) / np.sqrt(3)
    eng = StitchEngine(g, v, v, v)
    with pytest.raises(ValueError, match="dimension"):
        eng.query(np.ones(4), [0], [0], StitchOptions())
    with pytest.raises(ValueError, match="outside"):
        eng.query(v[0], [5], [0], StitchOptions())
    with pytest.raises(ValueError, match="NaN"):
        eng.query(np.full(3, np.nan), [0], [0], StitchOptions())
    with pytest.raises(ValueError, match="shape"):
        StitchEngine(g, v, v, np.ones((2, 3)))
    with pytest.raises(ValueError, match="ppr"):
        StitchOptions.paper(ppr="magic")


@SETTINGS
@given(instances(), stitch_options(), st.booleans())
def test_stage_replay_returns_the_kernels_top_k(inst, opts, with_bonus):
    """engine_stages.query_stages (what bench_profile.py times) composes the kernel's
    stages as kernels.query.stitch_query does: the same top-k, ids and scores."""
    from hyperrag_fast.engine_stages import STAGES, query_stages
    g, nv, ev, cv, q, cn, cc = inst
    bonus = np.linspace(0.0, 0.2, len(cc)) if with_bonus else None
    eng = _engine(inst)
    res = eng.query(q, cn, cc, opts, chunk_bonus=bonus)
    st_ = query_stages(eng, q, cn, cc, opts, chunk_bonus=bonus)
    np.testing.assert_array_equal(st_.chunk_ids, res.chunk_ids)
    np.testing.assert_array_equal(st_.scores, res.scores)
    assert st_.seconds.shape == (len(STAGES),) and (st_.seconds >= 0).all()
    assert st_.info["cq"] == res.stats[0] and scratch_is_clean(eng._scratch())
