"""Per-thread query scratch: corpus-sized buffers allocated once, reset by what a query dirtied."""
from __future__ import annotations

import numpy as np

from ._config import jit
from .layout import N_TOUCHED_EDGES, N_TOUCHED_NODES, N_TOUCHED_SIMS, Scratch


def new_scratch(n_nodes, n_edges, n_chunks, n_groups):
    """A fresh :class:`~.layout.Scratch` for an index of the given sizes (one per thread)."""
    return Scratch(
        A=np.zeros(n_nodes, dtype=np.float64),
        a_space=np.zeros(n_nodes, dtype=np.float64),
        a_time=np.zeros(n_nodes, dtype=np.float64),
        g_cache=np.full(n_nodes, np.nan, dtype=np.float64),
        node_flag=np.zeros(n_nodes, dtype=np.uint8),
        touched_nodes=np.empty(n_nodes, dtype=np.int32),
        edge_S=np.full(n_edges, np.nan, dtype=np.float64),
        touched_edges=np.empty(n_edges, dtype=np.int32),
        chunk_sim=np.full(n_chunks, np.nan, dtype=np.float64),
        touched_sims=np.empty(n_chunks, dtype=np.int32),
        chunk_local=np.full(n_chunks, -1, dtype=np.int32),
        group_count=np.zeros(n_groups, dtype=np.int64),
        touched_groups=np.empty(n_groups, dtype=np.int32),
        counters=np.zeros(8, dtype=np.int64),
        cq_buf=np.empty(n_chunks, dtype=np.int32),
        group_last=np.full(n_groups, -1, dtype=np.int64),
    )


@jit
def reset_scratch(sc, cq):
    """Undo every entry the last query dirtied: O(touched), not O(corpus)."""
    cnt = sc.counters
    for i in range(cnt[N_TOUCHED_NODES]):
        v = sc.touched_nodes[i]
        sc.A[v] = 0.0
        sc.a_space[v] = 0.0
        sc.a_time[v] = 0.0
        sc.g_cache[v] = np.nan
        sc.node_flag[v] = 0
    for i in range(cnt[N_TOUCHED_EDGES]):
        sc.edge_S[sc.touched_edges[i]] = np.nan
    for i in range(cnt[N_TOUCHED_SIMS]):
        sc.chunk_sim[sc.touched_sims[i]] = np.nan
    for i in range(cq.shape[0]):
        sc.chunk_local[cq[i]] = -1
    for i in range(8):
        cnt[i] = 0


@jit
def scratch_is_clean(sc):
    """True when no entry is dirty (used by tests; O(corpus))."""
    ok = True
    ok &= np.all(sc.A == 0.0) and np.all(sc.a_space == 0.0) and np.all(sc.a_time == 0.0)
    ok &= np.all(np.isnan(sc.g_cache)) and np.all(sc.node_flag == 0)
    ok &= np.all(np.isnan(sc.edge_S)) and np.all(np.isnan(sc.chunk_sim)) and np.all(sc.chunk_local == -1)
    ok &= np.all(sc.group_count == 0) and np.all(sc.group_last == -1) and np.all(sc.counters == 0)
    return ok
