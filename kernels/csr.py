"""Compressed sparse rows built by a stable counting sort: O(n + n_rows)."""
from __future__ import annotations

import numpy as np

from ._config import jit


@jit
def csr_from_pairs(rows, cols, n_rows):
    """CSR (ptr int64[n_rows+1], idx int32[n]) of the pairs (rows[i], cols[i]).

    Stable: within a row, columns keep their input order. Linear time, so a
    member list whose input is in preprocessing order comes out sorted by it.
    """
    n = rows.shape[0]
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    for i in range(n):
        ptr[rows[i] + 1] += 1
    for r in range(n_rows):
        ptr[r + 1] += ptr[r]
    fill = ptr[:-1].copy()
    idx = np.empty(n, dtype=np.int32)
    for i in range(n):
        r = rows[i]
        idx[fill[r]] = cols[i]
        fill[r] += 1
    return ptr, idx


@jit
def csr_sort_rows_by_key(ptr, idx, key):
    """Sort each row of a CSR in place by ``key[idx]`` (stable). O(sum n_r log n_r)."""
    for r in range(ptr.shape[0] - 1):
        a, b = ptr[r], ptr[r + 1]
        if b - a < 2:
            continue
        seg = idx[a:b].copy()
        order = np.argsort(key[seg], kind="mergesort")
        for j in range(b - a):
            idx[a + j] = seg[order[j]]


@jit
def rows_sorted_by_key(ptr, idx, key):
    """True when every row of the CSR is non-decreasing in ``key[idx]``."""
    for r in range(ptr.shape[0] - 1):
        for j in range(ptr[r] + 1, ptr[r + 1]):
            if key[idx[j]] < key[idx[j - 1]]:
                return False
    return True


@jit
def count_distinct_per_row(ptr, idx, val, n_val):
    """For each CSR row, how many distinct ``val[idx]`` it holds (scratch of n_val)."""
    n_rows = ptr.shape[0] - 1
    out = np.zeros(n_rows, dtype=np.int32)
    mark = np.full(n_val, -1, dtype=np.int64)
    for r in range(n_rows):
        c = 0
        for j in range(ptr[r], ptr[r + 1]):
            x = val[idx[j]]
            if mark[x] != r:
                mark[x] = r
                c += 1
        out[r] = c
    return out
