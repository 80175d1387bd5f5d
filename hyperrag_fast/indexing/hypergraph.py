"""Building the semi-merged topic hypergraph (docs/architecture.md §3, STITCH-RAG §3.2, Alg. 2).

``build_hypergraph`` turns per-chunk extractions (in preprocessing order) into the CSR
arrays the kernels read, with the merge strategy of STITCH-RAG Definitions 2-3:

* ``semi`` (default): every entity entry of a segment is an entity state with its own
  description (docs/architecture.md §2); states with the same normalised name form one group (phi),
  ordered by chunk index t_v.
* ``full``: one node per name, present in every chunk that names it; its description
  joins all of them.
* ``none``: states as in ``semi``, but no cross-chunk groups: a group is one name within
  one chunk.

The streaming build (:mod:`.pipeline`) assembles the same flat lists partition by partition
and calls :func:`hypergraph_from_flat`.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..config import DEFAULT_MERGE, MERGES
from ..hypergraph import Hypergraph
from ..kernels.build import build_arrays
from ..records import Extraction
from .flat import segment_states


def hypergraph_from_flat(
    merge: str, n_chunks: int, n_groups: int, node_chunk, node_group, nc_node, nc_chunk,
    edge_chunk, inc_edge, inc_node, **texts,
) -> Hypergraph:
    """All CSR arrays from flat int lists (see ``kernels.build.build_arrays``)."""
    i32 = lambda a: np.ascontiguousarray(a, dtype=np.int32)  # noqa: E731
    node_chunk, node_group, edge_chunk = i32(node_chunk), i32(node_group), i32(edge_chunk)
    nc_node, nc_chunk, inc_edge, inc_node = i32(nc_node), i32(nc_chunk), i32(inc_edge), i32(inc_node)
    _check_range("node_chunk", node_chunk, n_chunks)
    _check_range("edge_chunk", edge_chunk, n_chunks)
    _check_range("nc_chunk", nc_chunk, n_chunks)
    _check_range("node_group", node_group, n_groups)
    _check_range("inc_node", inc_node, node_chunk.shape[0])
    _check_range("nc_node", nc_node, node_chunk.shape[0])
    _check_range("inc_edge", inc_edge, edge_chunk.shape[0])
    arrs = build_arrays(n_chunks, n_groups, node_chunk, node_group, nc_node, nc_chunk,
                        edge_chunk, inc_edge, inc_node)
    names = ("edge_ptr", "edge_nodes", "node_ptr", "node_edges", "group_ptr", "group_nodes",
             "chunk_ptr", "chunk_nodes", "nc_ptr", "nc_chunks", "group_chunks")
    return Hypergraph(merge=merge, n_chunks=n_chunks, node_chunk=node_chunk,
                      node_group=node_group, edge_chunk=edge_chunk,
                      **dict(zip(names, arrs)), **texts)


def _check_range(name: str, a: np.ndarray, n: int) -> None:
    if a.size and (a.min() < 0 or a.max() >= n):
        raise ValueError(f"{name} holds ids outside [0, {n})")


def build_hypergraph(
    extractions: Sequence[Extraction],
    merge: str = DEFAULT_MERGE,
    group_of: Callable[[str], str] | None = None,
) -> Hypergraph:
    """Hypergraph of chunks ``0..len(extractions)-1`` in preprocessing order.

    Entity names are keyed by :func:`normalize_name` (phi); ``group_of`` maps a key to
    its group key (e.g. a consolidation merge table), identity by default. Names that
    normalise to "" are dropped. A chunk whose extraction failed has no states.
    """
    if merge not in MERGES:
        raise ValueError(f"merge must be one of {MERGES}, got {merge!r}")
    group_ids: dict[object, int] = {}  # group identity -> group id
    group_key: list[str] = []
    node_chunk: list[int] = []
    node_group: list[int] = []
    node_name: list[str] = []
    node_descs: list[list[str]] = []
    node_last: list[int] = []  # last chunk each node was seen in
    nc_node: list[int] = []
    nc_chunk: list[int] = []
    edge_chunk: list[int] = []
    edge_text: list[str] = []
    inc_edge: list[int] = []
    inc_node: list[int] = []
    full_nodes: dict[str, int] = {}  # group key -> its one node (full merge)

    def new_node(c: int, ident: object, gkey: str, name: str) -> int:
        g = group_ids.get(ident)
        if g is None:
            g = group_ids[ident] = len(group_key)
            group_key.append(gkey)
        v = len(node_chunk)
        node_chunk.append(c)
        node_group.append(g)
        node_name.append(name.strip())
        node_descs.append([])
        node_last.append(c)
        nc_node.append(v)
        nc_chunk.append(c)
        return v

    for c, ex in enumerate(extractions):
        for topic, states in segment_states(ex, group_of):
            e = len(edge_chunk)
            edge_chunk.append(c)
            edge_text.append(topic)
            for gkey, name, descs in states:
                if merge == "full":
                    v = full_nodes.get(gkey)
                    if v is None:
                        v = full_nodes[gkey] = new_node(c, gkey, gkey, name)
                    elif node_last[v] != c:
                        nc_node.append(v)
                        nc_chunk.append(c)
                        node_last[v] = c
                else:
                    v = new_node(c, (c, gkey) if merge == "none" else gkey, gkey, name)
                inc_edge.append(e)
                inc_node.append(v)
                node_descs[v].extend(d for d in descs if d not in node_descs[v])
    return hypergraph_from_flat(
        merge, len(extractions), len(group_key), node_chunk, node_group, nc_node, nc_chunk,
        edge_chunk, inc_edge, inc_node,
        node_name=node_name, node_desc=[" ".join(d) for d in node_descs],
        edge_text=edge_text, group_key=group_key,
    )
