"""The array bundles both sides share: the index arrays a STITCH query reads, the per-thread
scratch, and what one query returns. NamedTuples of arrays (Numba types them as
heterogeneous tuples; fields are read by name on both sides, never by position).
Meaning of every array: docs/architecture.md §3."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class IndexArrays(NamedTuple):
    """The hypergraph CSR arrays, the three embedding matrices and the per-group weights
    (``hyperrag_fast.engine.StitchEngine.index_arrays``)."""

    node_chunk: np.ndarray   # int32 (n_nodes,) chunk t_v of each entity state
    node_group: np.ndarray   # int32 (n_nodes,) name group phi(v)
    nc_ptr: np.ndarray       # CSR node -> chunks (one each unless merge "full")
    nc_chunks: np.ndarray
    edge_ptr: np.ndarray     # CSR hyperedge -> nodes
    edge_nodes: np.ndarray
    node_ptr: np.ndarray     # CSR node -> hyperedges
    node_edges: np.ndarray
    group_ptr: np.ndarray    # CSR group -> nodes, ordered by chunk
    group_nodes: np.ndarray
    chunk_ptr: np.ndarray    # CSR chunk -> nodes
    chunk_nodes: np.ndarray
    group_chunks: np.ndarray  # int32 (n_groups,) distinct chunks of each group
    node_vec: np.ndarray     # (n_nodes, d) state description vectors
    edge_vec: np.ndarray     # (n_edges, d) hyperedge (topic sentence) vectors
    chunk_vec: np.ndarray    # (n_chunks, d) chunk vectors
    group_weight: np.ndarray  # float64 (n_groups,) projection weight w(g)
    group_alpha: np.ndarray  # float64 (n_groups,) decay rate alpha(g)


class Scratch(NamedTuple):
    """Per-thread query buffers, corpus-sized, allocated once (``kernels.scratch``); a query
    records what it dirties and ``reset_scratch`` undoes exactly that."""

    A: np.ndarray             # float64 (n_nodes,) activation A(v)
    a_space: np.ndarray       # float64 (n_nodes,) spatial bridge a_space(v)
    a_time: np.ndarray        # float64 (n_nodes,) temporal bridge a_time(v)
    g_cache: np.ndarray       # float64 (n_nodes,) g_v cache, NaN = not computed
    node_flag: np.ndarray     # uint8 (n_nodes,) 1 = in touched_nodes
    touched_nodes: np.ndarray  # int32 (n_nodes,) nodes with any non-zero channel
    edge_S: np.ndarray        # float64 (n_edges,) S(e) cache, NaN = not computed
    touched_edges: np.ndarray  # int32 (n_edges,) edges with S(e) computed
    chunk_sim: np.ndarray     # float64 (n_chunks,) sim(q, c) cache, NaN = not computed
    touched_sims: np.ndarray  # int32 (n_chunks,) chunks with sim computed
    chunk_local: np.ndarray   # int32 (n_chunks,) position in C_q, -1 = not in C_q
    group_count: np.ndarray   # int64 (n_groups,) per-group counter of the chunk graph
    touched_groups: np.ndarray  # int32 (n_groups,) groups seen by the chunk graph
    counters: np.ndarray      # int64 (8,) see N_TOUCHED_NODES .. N_CQ
    cq_buf: np.ndarray        # int32 (n_chunks,) C_q being assembled
    group_last: np.ndarray    # int64 (n_groups,) last chunk that counted each group, -1


# slots of Scratch.counters
N_TOUCHED_NODES = 0  # entries of touched_nodes
N_TOUCHED_EDGES = 1  # entries of touched_edges
N_TOUCHED_SIMS = 2   # entries of touched_sims
N_CQ = 4             # |C_q|


class QueryOut(NamedTuple):
    """What ``kernels.query.stitch_query`` returns."""

    top_ids: np.ndarray      # int64 (k,) best chunk ids, best first
    top_scores: np.ndarray   # float64 (k,) their PPR scores pi
    cq: np.ndarray           # int32 (|C_q|,) the query chunk set C_q
    chunk_detail: np.ndarray  # float64 (4, |C_q|) rows: sim(q, c), Score, prior, pi
    node_ids: np.ndarray     # int32 touched nodes (detail only, else empty)
    node_detail: np.ndarray  # float64 (4, n) rows: A, a_space, a_time, a
    edge_ids: np.ndarray     # int32 read hyperedges (detail only)
    edge_S: np.ndarray       # float64 S(e) of those
    stats: np.ndarray        # int64 (4,) |C_q|, graph size, PPR work, touched nodes
