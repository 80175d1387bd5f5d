"""Per-thread query scratch: corpus-sized buffers allocated once, reset by what a query dirtied."""
from __future__ import annotations

import numpy as np

from ._config import jit

# slots: 0 A, 1 a_space, 2 a_time, 3 g_v cache, 4 node flag, 5 touched nodes,
# 6 S(e) cache, 7 touched edges, 8 sim(q,c) cache, 9 chunks with sim, 10 chunk_local,
# 11 group count, 12 (free, empty), 13 touched groups, 14 counters, 15 C_q buffer,
# 16 group last-seen marker. counters: 0 nodes, 1 edges, 2 sims, 3 (free), 4 |C_q|.


@jit
def new_scratch(n_nodes, n_edges, n_chunks, n_groups):
    """A fresh scratch tuple for an index of the given sizes (one per thread)."""
    return (
        np.zeros(n_nodes, dtype=np.float64),
        np.zeros(n_nodes, dtype=np.float64),
        np.zeros(n_nodes, dtype=np.float64),
        np.full(n_nodes, np.nan, dtype=np.float64),
        np.zeros(n_nodes, dtype=np.uint8),
        np.empty(n_nodes, dtype=np.int32),
        np.full(n_edges, np.nan, dtype=np.float64),
        np.empty(n_edges, dtype=np.int32),
        np.full(n_chunks, np.nan, dtype=np.float64),
        np.empty(n_chunks, dtype=np.int32),
        np.full(n_chunks, -1, dtype=np.int32),
        np.zeros(n_groups, dtype=np.int64),
        np.zeros(0, dtype=np.int64),
        np.empty(n_groups, dtype=np.int32),
        np.zeros(8, dtype=np.int64),
        np.empty(n_chunks, dtype=np.int32),
        np.full(n_groups, -1, dtype=np.int64),
    )


@jit
def reset_scratch(sc, cq):
    """Undo every entry the last query dirtied: O(touched), not O(corpus)."""
    cnt = sc[14]
    for i in range(cnt[0]):
        v = sc[5][i]
        sc[0][v] = 0.0
        sc[1][v] = 0.0
        sc[2][v] = 0.0
        sc[3][v] = np.nan
        sc[4][v] = 0
    for i in range(cnt[1]):
        sc[6][sc[7][i]] = np.nan
    for i in range(cnt[2]):
        sc[8][sc[9][i]] = np.nan
    for i in range(cq.shape[0]):
        sc[10][cq[i]] = -1
    for i in range(8):
        cnt[i] = 0


@jit
def scratch_is_clean(sc):
    """True when no entry is dirty (used by tests; O(corpus))."""
    ok = True
    ok &= np.all(sc[0] == 0.0) and np.all(sc[1] == 0.0) and np.all(sc[2] == 0.0)
    ok &= np.all(np.isnan(sc[3])) and np.all(sc[4] == 0)
    ok &= np.all(np.isnan(sc[6])) and np.all(np.isnan(sc[8])) and np.all(sc[10] == -1)
    ok &= np.all(sc[11] == 0) and np.all(sc[16] == -1) and np.all(sc[14] == 0)
    return ok
