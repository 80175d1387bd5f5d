"""Chunk graphs for the PPR benchmark, built by the production kernel
(``kernels.chunk_graph.chunk_graph``) over every chunk of a synthetic corpus."""
from __future__ import annotations

import numpy as np

from hyperrag_fast.indexing.hypergraph import hypergraph_from_flat
from hyperrag_fast.kernels.chunk_graph import chunk_groups, dedup_arcs
from hyperrag_fast.kernels.layout import IndexArrays
from hyperrag_fast.kernels.scratch import new_scratch
from hyperrag_fast.engine import group_alphas, group_weights

try:
    from . import synthetic
except ImportError:  # run as a script
    import synthetic


def kernel_tuple(g, node_vec=None, edge_vec=None, chunk_vec=None, weight="log1p"):
    """The :class:`~hyperrag_fast.kernels.layout.IndexArrays` of ``StitchEngine.index_arrays``
    (dummy 1-row vectors if none)."""
    dummy = np.zeros((1, 8), dtype=np.float32)
    sizes = g.group_sizes()
    return IndexArrays(g.node_chunk, g.node_group, g.nc_ptr, g.nc_chunks, g.edge_ptr, g.edge_nodes,
            g.node_ptr, g.node_edges, g.group_ptr, g.group_nodes, g.chunk_ptr, g.chunk_nodes,
            g.group_chunks,
            dummy if node_vec is None else node_vec, dummy if edge_vec is None else edge_vec,
            dummy if chunk_vec is None else chunk_vec,
            group_weights(weight, sizes, g.group_chunks, g.n_chunks),
            group_alphas("ratio", 1.0, sizes))


def chunk_graph_of_size(n_chunks: int, max_group: float = 32, seed: int = 0, weight_kind: int = 0,
                        factored: bool = False):
    """(ptr, nbr, w, wsum) of the chunk graph over all chunks of a synthetic corpus with
    ~n_chunks chunks (the chunk-group bipartite model: Zipf-Mandelbrot name groups);
    groups spanning more than ``max_group`` chunks make no edges (a full clique on a
    1 %-of-corpus hub would be O(n^2) arcs). ``weight_kind`` as in the kernel: 0 uniform
    (paper), 1 inverse_size. With ``factored`` also the chunk-group incidences
    (cg_ptr, cg, gptr, members, gn) the CSR was deduplicated from."""
    c = synthetic.generate(int(n_chunks * 7.0), seed=seed)
    g = hypergraph_from_flat(*c.flat_args())
    ix = kernel_tuple(g)
    sc = new_scratch(g.n_nodes, g.n_edges, g.n_chunks, max(g.n_groups, 1))
    cq = np.arange(g.n_chunks, dtype=np.int32)
    f = chunk_groups(ix, sc, cq, float(max_group))
    csr = dedup_arcs(*f, int(weight_kind))
    return (csr, f) if factored else csr
