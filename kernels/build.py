"""Symbolic index arrays from flat incidence lists (docs/architecture.md §3): linear time plus the
per-group sort, which is skipped when states arrive in preprocessing order."""
from __future__ import annotations

import numpy as np

from ._config import jit
from .csr import count_distinct_per_row, csr_from_pairs, csr_sort_rows_by_key, rows_sorted_by_key


@jit
def build_arrays(n_chunks, n_groups, node_chunk, node_group, nc_node, nc_chunk, edge_chunk, inc_edge, inc_node):
    """Every CSR of the hypergraph from flat lists.

    node_chunk[v] = t_v; node_group[v] = phi(v); (nc_node, nc_chunk) the chunks each
    node occurs in (one per node unless fully merged); (inc_edge, inc_node) the
    incidences. Returns (edge_ptr, edge_nodes, node_ptr, node_edges, group_ptr,
    group_nodes, chunk_ptr, chunk_nodes, nc_ptr, nc_chunks, group_chunks).
    """
    n_nodes = node_chunk.shape[0]
    n_edges = edge_chunk.shape[0]
    edge_ptr, edge_nodes = csr_from_pairs(inc_edge, inc_node, n_edges)
    node_ptr, node_edges = csr_from_pairs(inc_node, inc_edge, n_nodes)
    group_ptr, group_nodes = csr_from_pairs(node_group, np.arange(n_nodes).astype(np.int32), n_groups)
    if not rows_sorted_by_key(group_ptr, group_nodes, node_chunk):
        csr_sort_rows_by_key(group_ptr, group_nodes, node_chunk)
    chunk_ptr, chunk_nodes = csr_from_pairs(nc_chunk, nc_node, n_chunks)
    nc_ptr, nc_chunks = csr_from_pairs(nc_node, nc_chunk, n_nodes)
    pair_group = np.empty(nc_node.shape[0], dtype=np.int32)
    for i in range(nc_node.shape[0]):
        pair_group[i] = node_group[nc_node[i]]
    gp, gc = csr_from_pairs(pair_group, nc_chunk, n_groups)
    group_chunks = count_distinct_per_row(gp, gc, np.arange(n_chunks).astype(np.int32), n_chunks)
    return (edge_ptr, edge_nodes, node_ptr, node_edges, group_ptr, group_nodes,
            chunk_ptr, chunk_nodes, nc_ptr, nc_chunks, group_chunks)
