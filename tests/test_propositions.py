"""The STITCH-RAG propositions checked numerically on the compiled kernels (§3, App. D)."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.engine import StitchEngine
from hyperrag_fast.indexing.hypergraph import build_hypergraph
from hyperrag_fast.kernels.ppr import ppr_power, ppr_push
from hyperrag_fast.kernels.stibp import decay
from hyperrag_fast.config import StitchOptions
from hyperrag_fast.records import Extraction, Segment

from test_kernels_twins import _random_graph
from twins import transition

DIM = 8


def _vec(s: float, axis: int) -> np.ndarray:
    """A unit vector with cosine ``s`` to e_0 (the query), the rest along e_axis."""
    v = np.zeros(DIM)
    v[0] = s
    v[axis] = math.sqrt(max(0.0, 1.0 - s * s))
    return v


Q = _vec(1.0, 1)


def _by_name(g, res, field):
    out = {}
    vals = dict(zip(res.node_ids.tolist(), getattr(res, field).tolist()))
    for v in range(g.n_nodes):
        out.setdefault(g.node_name[v], []).append(vals.get(v, 0.0))
    return out


# ---------------------------------------------------------------- Proposition 1
@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.05, 0.95), min_size=5, max_size=5), st.floats(0.55, 1.0))
def test_prop1_same_projection_different_spatial_scores(topic_sims, a_sim):
    """Four triples of {a,b,c,d} vs the single edge {a,b,c,d}: identical pairwise
    projections, yet spatial scores differ (topic-selective vs not)."""
    triples = [("a", "b", "c"), ("a", "b", "d"), ("a", "c", "d"), ("b", "c", "d")]
    h1 = [Extraction(tuple(Segment(f"t{i}", tuple((n, n) for n in t)) for i, t in enumerate(triples)))]
    h2 = [Extraction((Segment("all", tuple((n, n) for n in "abcd")),))]
    # one node per entity in both (full merge): only the hyperedges differ
    g1, g2 = build_hypergraph(h1, merge="full"), build_hypergraph(h2, merge="full")

    def projection(g):
        pairs = set()
        for e in range(g.n_edges):
            mem = [g.node_name[v] for v in g.edge_nodes[g.edge_ptr[e]:g.edge_ptr[e + 1]]]
            pairs |= {frozenset((x, y)) for x in mem for y in mem if x != y}
        return pairs

    assert projection(g1) == projection(g2)
    nodes = {"a": _vec(a_sim, 1), "b": _vec(0.1, 2), "c": _vec(0.1, 3), "d": _vec(0.1, 4)}
    opts = StitchOptions.paper(temporal=False)
    res = []
    for g, sims in ((g1, topic_sims[:4]), (g2, topic_sims[4:])):
        nv = np.array([nodes[n] for n in g.node_name])
        ev = np.array([_vec(s, 5) for s in sims])
        r = StitchEngine(g, nv, ev, np.array([_vec(0.3, 6)])).query(Q, np.arange(g.n_nodes), [0], opts, detail=True)
        res.append(_by_name(g, r, "node_space"))
    A = a_sim
    s = topic_sims
    expected1 = {"b": A * max(s[0], s[1]), "c": A * max(s[0], s[2]), "d": A * max(s[1], s[2])}
    for n in "bcd":
        assert abs(res[0][n][0] - expected1[n]) < 1e-12
        assert abs(res[1][n][0] - A * s[4]) < 1e-12
    # H2 cannot tell b, c, d apart; H1 can whenever the topic scores differ
    assert len({round(res[1][n][0], 12) for n in "bcd"}) == 1
    if len({round(v, 12) for v in expected1.values()}) > 1:
        assert len({round(res[0][n][0], 12) for n in "bcd"}) > 1


# ---------------------------------------------------------------- Proposition 2
@settings(max_examples=100, deadline=None)
@given(st.floats(0.55, 1.0), st.floats(0.05, 1.0), st.floats(0.05, 1.0), st.integers(1, 5))
def test_prop2_only_semi_merge_recovers_the_evidence_state(a_sim, s_edge, s_chunk, gap):
    """Source u (activated) and evidence r share a name, r not reachable through any
    activated topic: a(r) = 0 under no-merge, full-merge cannot tell r's chunk from
    another member's, semi-merge gives a_time(r) > 0."""
    chunks = [Extraction((Segment("src", (("X", "u"),)),))]
    chunks += [Extraction((Segment("filler", (("Y", "y"),)),)) for _ in range(gap - 1)]
    chunks += [Extraction((Segment("other", (("X", "o"),)),)),
               Extraction((Segment("evidence", (("X", "r"),)),))]
    desc_vec = {"u": _vec(a_sim, 1), "r": _vec(0.0, 2), "o": _vec(0.0, 3), "y": _vec(0.0, 4)}
    topic_vec = {"src": _vec(0.2, 5), "filler": _vec(0.0, 6), "other": _vec(0.0, 7), "evidence": _vec(s_edge, 5)}
    out = {}
    for merge in ("none", "full", "semi"):
        g = build_hypergraph(chunks, merge=merge)
        nv = np.array([desc_vec[d.split()[0]] if merge != "full" else _vec(a_sim * 0.9, 1) for d in g.node_desc])
        ev = np.array([topic_vec[t] for t in g.edge_text])
        cv = np.array([_vec(s_chunk if c == len(chunks) - 1 else 0.1, 6) for c in range(g.n_chunks)])
        opts = StitchOptions.paper(ppr="none")
        out[merge] = (g, StitchEngine(g, nv, ev, cv).query(Q, np.arange(g.n_nodes), [], opts, detail=True))
    r_chunk, o_chunk = len(chunks) - 1, len(chunks) - 2
    g, res = out["none"]
    a = dict(zip(res.node_ids.tolist(), res.node_a.tolist()))
    r = next(v for v in range(g.n_nodes) if g.node_desc[v] == "r")
    assert a.get(r, 0.0) == 0.0
    assert r_chunk not in res.cq.tolist()
    g, res = out["full"]
    assert g.n_nodes == (2 if gap > 1 else 1)  # X (and Y)
    score = dict(zip(res.cq.tolist(), res.cq_score.tolist()))
    assert score.get(r_chunk, 0.0) == score.get(o_chunk, 0.0)  # undifferentiated (or both 0)
    g, res = out["semi"]
    time = dict(zip(res.node_ids.tolist(), res.node_time.tolist()))
    r = next(v for v in range(g.n_nodes) if g.node_desc[v] == "r")
    n_bar = (3 + (gap - 1)) / 2 if gap > 1 else 3.0  # groups X (3 states) and Y (gap-1)
    alpha, dt = 3 / n_bar, gap + 1
    expected = a_sim * s_edge * math.exp(-math.tanh(alpha * dt)) * s_chunk
    assert time[r] > 0.0
    assert abs(time[r] - expected) < 1e-12


# ---------------------------------------------------------------- Theorem 1
@st.composite
def theorem1_cases(draw):
    n_r = draw(st.integers(1, 4))
    n_n = draw(st.integers(1, 6))
    beta = draw(st.floats(0.2, 0.9))
    eps = draw(st.floats(0.01, 0.2))
    # g = S(e) * sim(q, c); relevant g >= beta, noisy 0 < g <= eps
    rel = [draw(st.floats(math.sqrt(beta), 1.0)) for _ in range(n_r)]
    noisy = [draw(st.floats(0.05, math.sqrt(eps))) for _ in range(n_n)]
    tau = draw(st.integers(1, 5))
    rel_dt = [draw(st.integers(1, 12)) for _ in range(n_r)]
    noisy_dt = [draw(st.integers(tau, 12)) for _ in range(n_n)]
    return beta, eps, tau, rel, noisy, rel_dt, noisy_dt, draw(st.floats(0.55, 1.0))


@settings(max_examples=150, deadline=None)
@given(theorem1_cases(), st.sampled_from([0.05, 0.3, 1.0, 3.0]))
def test_theorem1_ratio_bound_and_monotone_in_alpha(case, alpha):
    beta, eps, tau, rel, noisy, rel_dt, noisy_dt, a = case
    targets = [(r, dt) for r, dt in zip(rel, rel_dt)] + [(n, dt) for n, dt in zip(noisy, noisy_dt)]
    n_chunks = 1 + max(dt for _, dt in targets) + 1
    at = {}
    for i, (s, dt) in enumerate(targets):
        at.setdefault(dt, []).append((i, s))
    # one chunk per index; targets at the same distance go to separate chunks after it
    extractions, where = [Extraction((Segment("src", (("X", "u"),)),))], {}
    layout = sorted(((dt, i, s) for i, (s, dt) in enumerate(targets)))
    for dt, i, s in layout:
        while len(extractions) < dt:
            extractions.append(Extraction(()))
        where[i] = len(extractions)
        extractions.append(Extraction((Segment(f"t{i}", (("X", f"v{i}"),)),)))
    g = build_hypergraph(extractions)
    nv = np.array([_vec(a if d == "u" else 0.0, 1 + (v % 6)) for v, d in enumerate(g.node_desc)])
    ev = np.array([_vec(0.0, 7) if t == "src" else _vec(targets[int(t[1:])][0], 2) for t in g.edge_text])
    cv = np.zeros((g.n_chunks, DIM))
    for c in range(g.n_chunks):
        cv[c] = _vec(0.0, 3)
    for i, c in where.items():
        cv[c] = _vec(targets[i][0], 3)
    opts = StitchOptions.paper(alpha="fixed", alpha_value=alpha, spatial=False, ppr="none")
    res = StitchEngine(g, nv, ev, cv).query(Q, [0], [], opts, detail=True)
    time = dict(zip(res.node_ids.tolist(), res.node_time.tolist()))
    node_of = {int(d[1:]): v for v, d in enumerate(g.node_desc) if d != "u"}
    real_dt = {i: where[i] for i in where}
    for i, (s, _) in enumerate(targets):  # each value is the literal formula
        assert abs(time[node_of[i]] - a * s * s * math.exp(-math.tanh(alpha * real_dt[i]))) < 1e-12
    R = range(len(rel))
    N = range(len(rel), len(targets))
    tau_real = min(real_dt[i] for i in N)
    beta_real = min(targets[i][0] ** 2 for i in R)
    eps_real = max(targets[i][0] ** 2 for i in N)
    ratio = max(time[node_of[i]] for i in R) / sum(time[node_of[i]] for i in N)

    def bound(al):
        return beta_real / (len(N) * eps_real) * math.exp(math.tanh(al * tau_real) - 1.0)

    assert ratio >= bound(alpha) * (1 - 1e-12)
    alphas = [0.01, 0.1, alpha, 2 * alpha, 10.0]
    bs = [bound(x) for x in sorted(alphas)]
    assert all(x <= y + 1e-15 for x, y in zip(bs, bs[1:]))


# ---------------------------------------------------------------- Proposition 3
@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 30), st.sampled_from([0.3, 0.5, 0.85]))
def test_prop3_evidence_mass_is_linear_in_the_prior(seed, m, d):
    rng = np.random.default_rng(seed)
    W, ptr, nbr, w, wsum = _random_graph(rng, m, 0.3)
    P = transition(W)
    R = rng.random(m) < 0.3
    R[rng.integers(m)] = True
    p1, p2 = rng.random(m), rng.random(m) * (rng.random(m) < 0.5)
    p1 /= p1.sum()
    p2 = p2 / p2.sum() if p2.sum() > 0 else np.full(m, 1.0 / m)
    h = (1 - d) * np.linalg.solve(np.eye(m) - d * P.T, R.astype(float))
    pi1, _ = ppr_power(ptr, nbr, w, wsum, p1, d, 1e-13, 100_000)
    pi2, _ = ppr_power(ptr, nbr, w, wsum, p2, d, 1e-13, 100_000)
    assert abs((pi1[R].sum() - pi2[R].sum()) - h @ (p1 - p2)) < 1e-10
    # h_R(c) is a probability (geometrically stopped walk occupies R)
    assert np.all(h >= -1e-12) and np.all(h <= 1 + 1e-12)
    x1, res, _ = ppr_push(ptr, nbr, w, wsum, p1, d, 1e-9)
    assert abs(x1[R].sum() - h @ p1) <= res + 1e-12


# ---------------------------------------------------------------- decay, ties
@settings(max_examples=300, deadline=None)
@given(st.floats(0.0, 1e6, allow_nan=False))
def test_decay_ranges(x):
    f = decay(0, x)
    # exp(-tanh x) > 1/e exactly; in float64 tanh(x) rounds to 1 from x ~ 19 on
    assert (1.0 / math.e < f <= 1.0) if x < 15 else (1.0 / math.e <= f < 1.0 / math.e + 1e-12)
    assert 0.0 <= decay(1, x) <= 1.0 and 0.0 <= decay(2, x) <= 1.0
    assert decay(0, 0.0) == decay(1, 0.0) == decay(2, 0.0) == 1.0


def test_ties_broken_by_chunk_id_deterministically():
    ex = [Extraction((Segment(f"t{c}", (("Same", "d"),)),)) for c in range(12)]
    g = build_hypergraph(ex)
    nv = np.tile(_vec(0.9, 1), (g.n_nodes, 1))
    ev = np.tile(_vec(0.5, 2), (g.n_edges, 1))
    cv = np.tile(_vec(0.4, 3), (g.n_chunks, 1))
    eng = StitchEngine(g, nv, ev, cv)
    for ppr in ("power", "push", "none"):
        opts = StitchOptions.paper(ppr=ppr, alpha="fixed", alpha_value=0.0)
        orders = [np.arange(12), np.arange(12)[::-1], np.random.default_rng(1).permutation(12)]
        runs = [eng.query(Q, o, o, opts) for o in orders for _ in range(2)]
        assert all(np.array_equal(runs[0].chunk_ids, r.chunk_ids) for r in runs)
        assert all(np.array_equal(runs[0].scores, r.scores) for r in runs)
        if ppr == "none":  # exact ties in the prior: lowest chunk ids first
            np.testing.assert_array_equal(runs[0].chunk_ids, np.arange(8))


# ------------------------------------------------- two-hop temporal sources (ours)
@settings(max_examples=100, deadline=None)
@given(st.floats(0.55, 1.0), st.floats(0.05, 1.0), st.floats(0.05, 1.0), st.floats(0.1, 3.0))
def test_temporal_from_space_reaches_the_second_hop(a_sim, s_edge, s_chunk, beta):
    """Film chunk: the activated title u and a director name w in one topic; the
    director's own chunk holds w' (same name). The paper's temporal channel starts only
    at activated states, so w' stays at 0; with temporal_from_space = beta the bridged w
    is a source of strength beta * a_space(w) and w' gets exactly
    beta * A(u) S(e_uw) * S(e_w') f(alpha dt) sim(q, c_w')."""
    chunks = [Extraction((Segment("film", (("Film", "u"), ("Director", "w"))),)),
              Extraction((Segment("bio", (("Director", "w2"),)),))]
    g = build_hypergraph(chunks, merge="semi")
    nv = np.array([{"u": _vec(a_sim, 1), "w": _vec(0.0, 2), "w2": _vec(0.0, 3)}[d.split()[0]]
                   for d in g.node_desc])
    ev = np.array([{"film": _vec(0.3, 4), "bio": _vec(s_edge, 5)}[t] for t in g.edge_text])
    cv = np.array([_vec(0.1, 6), _vec(s_chunk, 6)])
    w2 = next(v for v in range(g.n_nodes) if g.node_desc[v] == "w2")
    times = {}
    for b in (0.0, beta):
        opts = StitchOptions.paper(ppr="none", temporal_from_space=b)
        res = StitchEngine(g, nv, ev, cv).query(Q, np.arange(g.n_nodes), [], opts, detail=True)
        times[b] = dict(zip(res.node_ids.tolist(), res.node_time.tolist())).get(w2, 0.0)
    assert times[0.0] == 0.0
    n_bar = 3 / 2  # groups: Film (1 state), Director (2 states)
    expected = beta * a_sim * 0.3 * s_edge * math.exp(-math.tanh(2 / n_bar * 1)) * s_chunk
    assert abs(times[beta] - expected) < 1e-12
