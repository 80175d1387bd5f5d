"""``kernels.lexical``' term-share kernels (``residual_terms``, ``held_terms``) and ``kernels.links``'
steps (``member_of``, ``group_best``) against their slow NumPy twins, the code they replaced:
the same values, bit for bit."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.kernels.lexical import held_terms, residual_terms
from hyperrag_fast.kernels.links import group_best, member_of, title_hits


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


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-3, 12), max_size=30), st.lists(st.integers(-3, 12), max_size=6))
def test_member_of_is_isin(a, b):
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    assert np.array_equal(member_of(a, b), np.isin(a, b))


def group_best_twin(ptr, nodes, node_group, chunks, groups, weights):
    """``engine.chunk_group_best`` before the kernel: one scatter-max over every node."""
    top = np.zeros(chunks.shape[0])
    if groups.size and chunks.size:
        row = np.repeat(np.arange(chunks.size), ptr[chunks + 1] - ptr[chunks])
        grp = node_group[np.concatenate([nodes[ptr[c]:ptr[c + 1]] for c in chunks.tolist()])]
        j = np.minimum(np.searchsorted(groups, grp), groups.size - 1)
        np.maximum.at(top, row, np.where(groups[j] == grp, weights[j], 0.0))
    return top


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_group_best_equals_the_twin(seed):
    rng = np.random.default_rng(seed)
    n_chunks, n_groups = int(rng.integers(1, 9)), int(rng.integers(1, 7))
    sizes = rng.integers(0, 5, n_chunks)
    ptr = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    nodes = rng.permutation(int(ptr[-1])).astype(np.int64)
    node_group = rng.integers(0, n_groups, int(ptr[-1])).astype(np.int32)
    chunks = rng.integers(0, n_chunks, int(rng.integers(0, 8))).astype(np.int64)  # repeats allowed
    groups = np.sort(rng.choice(n_groups, int(rng.integers(0, n_groups + 1)), replace=False)).astype(np.int64)
    weights = rng.normal(size=groups.size)  # negative ones never beat the start value 0
    want = group_best_twin(ptr, nodes, node_group, chunks, groups, weights)
    assert np.array_equal(group_best(ptr, nodes, node_group, chunks, groups, weights), want)


def title_hits_twin(gid, gram_groups, owner, up, tg, name_pages, page_t, w, best_e, best_w):
    """``GroupLookup.bridge_titles``' loop body before the kernel (new best_e, best_w)."""
    e = np.isin(gid, tg)
    hit = np.zeros(up.shape[0], bool)
    hit[owner[np.isin(gram_groups, tg)]] = True
    wd = e | hit | np.isin(up, name_pages)
    other = up != page_t
    return np.maximum(best_e, w * (e & other)), np.maximum(best_w, w * (wd & other))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_title_hits_equal_the_twin(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 8))
    up = np.sort(rng.choice(20, n, replace=False)).astype(np.int64)
    gid = rng.integers(-1, 6, n).astype(np.int64)  # -1: a page with no title group
    owner = np.sort(rng.integers(0, max(n, 1), int(rng.integers(0, 12)) if n else 0)).astype(np.int64)
    gram_groups = rng.integers(0, 6, owner.size).astype(np.int64)
    tg = rng.integers(0, 6, int(rng.integers(1, 4))).astype(np.int64)
    name_pages = rng.integers(0, 20, int(rng.integers(0, 4))).astype(np.int64)
    page_t = int(rng.choice(up)) if n and rng.random() < 0.5 else 99
    best_e, best_w = rng.random(n) * rng.integers(0, 2, n), rng.random(n) * rng.integers(0, 2, n)
    w = float(1.0 / (1.0 + rng.integers(0, 3)))
    want = title_hits_twin(gid, gram_groups, owner, up, tg, name_pages, page_t, w, best_e, best_w)
    title_hits(gid, gram_groups, owner, up, tg, name_pages, page_t, w, best_e, best_w)
    assert np.array_equal(best_e, want[0]) and np.array_equal(best_w, want[1])
