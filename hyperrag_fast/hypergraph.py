"""The semi-merged topic hypergraph as arrays (docs/architecture.md §3, STITCH-RAG §3.2).

:class:`Hypergraph` holds the CSR arrays the kernels read and the texts beside them; it
is what a query opens. Building one from extractions (``build_hypergraph``, with the
merge strategies ``semi`` / ``full`` / ``none`` of STITCH-RAG Definitions 2-3) is the
write side: :mod:`hyperrag_fast.indexing.hypergraph`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .config import MERGES  # noqa: F401  (the merge strategies, beside the arrays)


#: array fields, in the order they are saved and checked.
ARRAY_FIELDS = (
    "node_chunk", "node_group", "edge_chunk", "edge_ptr", "edge_nodes", "node_ptr",
    "node_edges", "group_ptr", "group_nodes", "chunk_ptr", "chunk_nodes", "nc_ptr",
    "nc_chunks", "group_chunks",
)


@dataclass(eq=False)
class Hypergraph:
    """Symbolic index: int arrays (see docs/architecture.md §3) plus the texts beside them.

    ``nc_ptr/nc_chunks`` list the chunks of each node (one each unless ``full``);
    ``group_chunks[g]`` counts the distinct chunks of group g.
    """

    merge: str
    n_chunks: int
    node_chunk: np.ndarray
    node_group: np.ndarray
    edge_chunk: np.ndarray
    edge_ptr: np.ndarray
    edge_nodes: np.ndarray
    node_ptr: np.ndarray
    node_edges: np.ndarray
    group_ptr: np.ndarray
    group_nodes: np.ndarray
    chunk_ptr: np.ndarray
    chunk_nodes: np.ndarray
    nc_ptr: np.ndarray
    nc_chunks: np.ndarray
    group_chunks: np.ndarray
    node_name: list[str] = field(default_factory=list)
    node_desc: list[str] = field(default_factory=list)
    edge_text: list[str] = field(default_factory=list)
    group_key: list[str] = field(default_factory=list)

    @property
    def n_nodes(self) -> int:
        return int(self.node_chunk.shape[0])

    @property
    def n_edges(self) -> int:
        return int(self.edge_chunk.shape[0])

    @property
    def n_groups(self) -> int:
        return int(self.group_ptr.shape[0] - 1)

    @property
    def n_incidences(self) -> int:
        return int(self.edge_nodes.shape[0])

    def group_sizes(self) -> np.ndarray:
        """N_v per group: the number of states in it."""
        return np.diff(self.group_ptr).astype(np.int64)

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in ARRAY_FIELDS}

    def array_bytes(self) -> int:
        return sum(a.nbytes for a in self.arrays().values())
