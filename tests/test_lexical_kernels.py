"""``kernels.lexical``' term-share kernels (``residual_terms``, ``held_terms``) against their
slow NumPy twins, the per-term loops they replaced: the same floats, bit for bit."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.kernels.lexical import held_terms, residual_terms


def residual_twin(posts, w, c, n_src):
    """``BM25.residual_cover`` / ``chain_links``' residual_cover2 loop before the kernel."""
    out, tot = np.zeros(c.size - n_src), 0.0
    for p, x in zip(posts, w.tolist()):
        tot += x
        has = p[np.minimum(np.searchsorted(p, c), p.size - 1)] == c if p.size else np.zeros(c.size, bool)
        if not has[c.size - n_src:].any():
            out += x * has[:c.size - n_src]
    return out, tot


def held_twin(posts, w, ids):
    """``engine.term_cover``'s loop before the kernel."""
    tot = held = 0.0
    for p, x in zip(posts, w.tolist()):
        tot += x
        if p.size and ids.size and (p[np.minimum(np.searchsorted(p, ids), p.size - 1)] == ids).any():
            held += x
    return held, tot


def _case(seed: int):
    """A CSC of sorted postings over a few documents, some columns empty, a random subset
    of its columns (ascending) as the question's terms, and idf-like weights."""
    rng = np.random.default_rng(seed)
    n_docs, n_cols = int(rng.integers(1, 12)), int(rng.integers(1, 8))
    cols = [np.sort(rng.choice(n_docs, int(rng.integers(0, n_docs + 1)), replace=False)).astype(np.int64)
            for _ in range(n_cols)]
    ptr = np.r_[0, np.cumsum([x.size for x in cols])].astype(np.int64)
    idx = np.concatenate(cols + [np.empty(0, np.int64)]).astype(np.int64)
    terms = np.sort(rng.choice(n_cols, int(rng.integers(0, n_cols + 1)), replace=False)).astype(np.int64)
    w = np.log1p(n_docs / np.maximum(rng.integers(0, n_docs + 1, terms.size), 1)) * rng.random(terms.size)
    return rng, n_docs, ptr, idx, terms, [cols[t] for t in terms.tolist()], w


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(0, 2))
def test_residual_terms_equal_the_twin(seed, n_src):
    rng, n_docs, ptr, idx, terms, posts, w = _case(seed)
    c = rng.integers(-1, n_docs + 2, int(rng.integers(n_src, 10))).astype(np.int64)  # repeats, ids outside
    want, want_tot = residual_twin(posts, w, c, n_src)
    out = np.zeros(c.size - n_src)
    tot = residual_terms(ptr, idx, terms, w, c, n_src, out)
    assert tot == want_tot
    assert np.array_equal(out, want)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_held_terms_equal_the_twin(seed):
    rng, n_docs, ptr, idx, terms, posts, w = _case(seed)
    ids = rng.integers(-1, n_docs + 2, int(rng.integers(0, 4))).astype(np.int64)
    assert held_terms(ptr, idx, terms, w, ids) == held_twin(posts, w, ids)
