"""FastRP kernel (kernels/fastrp.py) against a dense NumPy twin with the same projection."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hyperrag_fast.coda.graph import fastrp_projection
from hyperrag_fast.kernels.csr import csr_from_pairs
from hyperrag_fast.kernels.fastrp import NORM_TOL, fastrp, fastrp_into

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def fastrp_twin(A: np.ndarray, R: np.ndarray, weights, normalize: bool) -> np.ndarray:
    """Chen et al. 2019 literally: S = D^-1 A (zero rows stay zero), N_i = S N_{i-1}."""
    deg = A.sum(1)
    S = np.divide(A, deg[:, None], out=np.zeros_like(A), where=deg[:, None] > 0)
    cur, out = R.astype(np.float64), np.zeros(R.shape)
    for a in weights:
        bound = S @ np.linalg.norm(cur, axis=1)  # the norm of S @ cur without cancellation
        cur = S @ cur
        if normalize:  # the kernel's near-zero rule (kernels/fastrp.py): such rows are zero
            n = np.linalg.norm(cur, axis=1)
            keep = (n > NORM_TOL * bound) & (n > 0)
            cur = np.divide(cur, n[:, None], out=np.zeros_like(cur), where=keep[:, None])
        out += a * cur
    return out


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 12))
    m = draw(st.integers(0, 30))
    rows = np.array([draw(st.integers(0, n - 1)) for _ in range(m)], np.int64)
    cols = np.array([draw(st.integers(0, n - 1)) for _ in range(m)], np.int64)
    w = np.array([draw(st.floats(0.0, 5.0)) for _ in range(m)], np.float64)
    return n, rows, cols, w


def _csr(n, rows, cols, w):
    ptr, order = csr_from_pairs(rows, np.arange(rows.size, dtype=np.int64), n)
    order = order.astype(np.int64)
    return ptr, cols[order].astype(np.int32), w[order]


# A weight of 1.4e-45 (the float32 subnormal hypothesis found) beside two weights of 1 whose
# terms cancel: the kernel's order of summation left 7e-46 * R[0] (normalised: -1.0), the
# twin's dense product 0.0. Under the near-zero rule both are 0.
SUBNORMAL = ((2, np.array([0, 0, 0]), np.array([0, 1, 0]), np.array([1.0, 1.0, 1.4e-45])),
             1, [1.0], True, 43)
# an exact cancellation without tiny weights (summation order again)
CANCEL = ((3, np.array([1, 2, 1, 1, 1]), np.array([1, 1, 2, 2, 0]),
           np.array([1.0, 2.0, 2.0, 1.0, 1.0])), 1, [1.0], True, 9)


@SETTINGS
@given(graphs(), st.integers(1, 8), st.lists(st.floats(0.0, 2.0), min_size=1, max_size=4),
       st.booleans(), st.integers(0, 2**16))
@example(*SUBNORMAL)
@example(*CANCEL)
def test_fastrp_matches_twin(g, dim, weights, normalize, seed):
    n, rows, cols, w = g
    ptr, nbr, ww = _csr(n, rows, cols, w)
    A = np.zeros((n, n))
    np.add.at(A, (rows, cols), w)  # parallel arcs add up, as in the CSR sum
    R = fastrp_projection(n, dim, seed)
    got = fastrp(ptr, nbr, ww, R, np.asarray(weights), normalize)
    np.testing.assert_allclose(got, fastrp_twin(A, R, weights, normalize), atol=1e-9, rtol=0)


def test_projection_is_very_sparse_and_scaled():
    R = fastrp_projection(10_000, 64, seed=1)
    s = np.sqrt(10_000)  # default sparsity s = sqrt(n); entries are +-sqrt(s)
    vals = set(np.unique(R).tolist())
    assert vals <= {0.0, np.sqrt(s), -np.sqrt(s)}
    nz = (R != 0).mean()
    assert abs(nz - 1 / s) < 0.002  # density 1/s
    assert abs((R > 0).mean() - (R < 0).mean()) < 0.002  # symmetric signs
    assert np.array_equal(R, fastrp_projection(10_000, 64, seed=1))  # deterministic


def test_structurally_equivalent_nodes_get_equal_rows():
    # star: leaves 1..4 around hub 0; leaves see only the hub, so N_i rows agree for i >= 1
    rows = np.array([0, 0, 0, 0, 1, 2, 3, 4])
    cols = np.array([1, 2, 3, 4, 0, 0, 0, 0])
    ptr, nbr, w = _csr(5, rows, cols, np.ones(8))
    R = fastrp_projection(5, 16, seed=3, s=1.0)
    out = fastrp(ptr, nbr, w, R, np.array([1.0, 1.0]), True)
    for leaf in range(2, 5):
        np.testing.assert_allclose(out[leaf], out[1], atol=1e-12)


def test_cancelled_rows_are_zero_under_the_rule():
    """The two explicit examples: the cancelled row is exactly zero in kernel and twin."""
    for (n, rows, cols, w), dim, weights, normalize, seed in (SUBNORMAL, CANCEL):
        ptr, nbr, ww = _csr(n, rows, cols, w)
        R = fastrp_projection(n, dim, seed)
        got = fastrp(ptr, nbr, ww, R, np.asarray(weights), normalize)
        A = np.zeros((n, n))
        np.add.at(A, (rows, cols), w)
        want = fastrp_twin(A, R, weights, normalize)
        assert np.array_equal(got == 0, want == 0) and (want == 0).any()
        np.testing.assert_allclose(got, want, atol=1e-9, rtol=0)


@SETTINGS
@given(graphs(), st.integers(1, 8), st.lists(st.floats(0.0, 2.0), min_size=1, max_size=4),
       st.booleans(), st.integers(0, 2**16))
def test_fastrp_into_is_fastrp_in_place(g, dim, weights, normalize, seed):
    """``fastrp_into`` (the build's call: the projection is its working matrix) gives
    ``fastrp``'s values bit for bit."""
    n, rows, cols, w = g
    ptr, nbr, ww = _csr(n, rows, cols, w)
    R = fastrp_projection(n, dim, seed)
    want = fastrp(ptr, nbr, ww, R, np.asarray(weights), normalize)
    got = fastrp_into(ptr, nbr, ww, R.copy(), np.asarray(weights), normalize)
    assert np.array_equal(got, want)


def test_projection_blocks_draw_as_one_call(monkeypatch):
    """``fastrp_projection`` draws in row blocks: the same matrix as one draw."""
    import hyperrag_fast.coda.graph as G
    whole = fastrp_projection(1000, 16, seed=5)
    monkeypatch.setattr(G, "PROJECTION_ROWS", 16 * 7)  # blocks of 7 rows
    assert np.array_equal(fastrp_projection(1000, 16, seed=5), whole)
    rng = np.random.default_rng(5)
    u = rng.random((1000, 16))
    s = np.sqrt(1000)
    assert np.array_equal(whole != 0, (u < 1 / (2 * s)) | (u > 1 - 1 / (2 * s)))
