"""Records -> flat arrays, one partition at a time (STITCH-RAG §3.2, Algorithm 2).

:class:`FlatAssembler` is the streaming form of the semi-/no-merge hypergraph build:
extractions arrive in preprocessing order, partition by partition, and each one appends
entity states, topic hyperedges and incidences to flat int arrays; only the group
dictionary (name key -> group id) spans partitions. :func:`partition_texts` gives the
texts a partition needs embedded without any cross-partition state, so a worker can
embed them (``indexing.distributed``) and the client assemble the same arrays.
See docs/architecture.md §10.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from ..config import DEFAULT_MERGE
from ..chunking import chunk_passage
from ..lexical import normalize_name
from ..records import Chunk, Extraction

GroupOf = Callable[[str], str]


class _Ints:
    """A growable int32 array (amortised doubling), no Python object per element."""

    def __init__(self, n: int = 1024) -> None:
        self.a = np.empty(n, np.int32)
        self.n = 0

    def extend(self, values: Sequence[int] | np.ndarray) -> None:
        v = np.asarray(values, dtype=np.int32)
        need = self.n + v.shape[0]
        if need > self.a.shape[0]:
            grown = np.empty(max(need, 2 * self.a.shape[0]), np.int32)
            grown[:self.n] = self.a[:self.n]
            self.a = grown
        self.a[self.n:need] = v
        self.n = need

    def view(self) -> np.ndarray:
        return self.a[:self.n]


@dataclass
class PartitionRecords:
    """What one partition added: the texts of its new states, hyperedges and chunks (in id
    order) and their names / group keys (new groups only), for the store and the embedder."""

    node_name: list[str]
    node_desc: list[str]
    edge_text: list[str]
    passages: list[str]
    new_group_keys: list[str]


def segment_states(ex: Extraction, group_of: GroupOf | None) -> Iterable[tuple[str, list[tuple[str, str, list[str]]]]]:
    """Per segment: (topic, [(group key, first name, distinct descriptions)]) in entity
    order, names that normalise to "" dropped (the paper's per-chunk entity states)."""
    for seg in ex.segments:
        local: dict[str, int] = {}
        states: list[tuple[str, str, list[str]]] = []
        for name, desc in seg.entities:
            key = normalize_name(name)
            if not key:
                continue
            gkey = group_of(key) if group_of is not None else key
            i = local.get(gkey)
            if i is None:
                i = local[gkey] = len(states)
                states.append((gkey, name.strip(), []))
            descs = states[i][2]
            if desc and desc not in descs:
                descs.append(desc)
        yield seg.topic, states


def partition_texts(chunks: Sequence[Chunk], extractions: Sequence[Extraction],
                    group_of: GroupOf | None = None, passages: bool = True) -> list[str]:
    """The distinct texts a partition needs embedded (state descriptions, topic sentences,
    passages unless ``passages`` is false), in order of first use; identical to what
    :class:`FlatAssembler` asks for."""
    seen: dict[str, None] = {}
    for ex in extractions:
        for topic, states in segment_states(ex, group_of):
            for _, _, descs in states:
                seen.setdefault(" ".join(descs))
            seen.setdefault(topic)
    for c in chunks if passages else ():
        seen.setdefault(chunk_passage(c))
    return list(seen)


class FlatAssembler:
    """Streaming semi/none-merge build; ``finish()`` returns the flat lists that
    :func:`hyperrag_fast.hypergraph.hypergraph_from_flat` turns into CSR arrays.

    Node and edge ids grow with the chunk index, so a partition's states, hyperedges and
    chunks are contiguous id ranges (their vectors can be written block by block).
    ``groups`` may be seeded with an existing index's keys (``add``).
    """

    def __init__(self, merge: str = DEFAULT_MERGE, group_of: GroupOf | None = None,
                 groups: Sequence[str] = ()) -> None:
        if merge not in ("semi", "none"):
            raise ValueError(f"the streaming build handles merge 'semi' and 'none', not {merge!r}")
        self.merge, self.group_of = merge, group_of
        self.group_key: list[str] = list(groups)
        self._gid: dict[object, int] = {}
        if merge == "semi":
            self._gid = {k: g for g, k in enumerate(self.group_key)}
        self.n_chunks = 0
        self.node_chunk, self.node_group = _Ints(), _Ints()
        self.edge_chunk, self.inc_edge, self.inc_node = _Ints(), _Ints(), _Ints()

    def seed(self, node_chunk, node_group, edge_chunk, inc_edge, inc_node, n_chunks: int) -> None:
        """Start from an existing index's flat lists (``add``)."""
        for buf, a in ((self.node_chunk, node_chunk), (self.node_group, node_group),
                       (self.edge_chunk, edge_chunk), (self.inc_edge, inc_edge),
                       (self.inc_node, inc_node)):
            buf.extend(a)
        self.n_chunks = int(n_chunks)
        if self.merge == "none":  # group identity is (chunk, key): rebuild it
            keys = self.group_key
            self._gid = {(int(c), keys[int(g)]): int(g) for c, g in
                         zip(np.asarray(node_chunk), np.asarray(node_group))}

    @property
    def n_nodes(self) -> int:
        return self.node_chunk.n

    @property
    def n_edges(self) -> int:
        return self.edge_chunk.n

    def add(self, chunks: Sequence[Chunk], extractions: Sequence[Extraction]) -> PartitionRecords:
        """Append one partition (chunks in order, one extraction each)."""
        if len(chunks) != len(extractions):
            raise ValueError(f"{len(chunks)} chunks but {len(extractions)} extractions")
        rec = PartitionRecords([], [], [], [chunk_passage(c) for c in chunks], [])
        node_chunk, node_group, edge_chunk, inc_edge, inc_node = [], [], [], [], []
        v0, e0 = self.n_nodes, self.n_edges
        for i, ex in enumerate(extractions):
            c = self.n_chunks + i
            for topic, states in segment_states(ex, self.group_of):
                e = e0 + len(edge_chunk)
                edge_chunk.append(c)
                rec.edge_text.append(topic)
                for gkey, name, descs in states:
                    ident = (c, gkey) if self.merge == "none" else gkey
                    g = self._gid.get(ident)
                    if g is None:
                        g = self._gid[ident] = len(self.group_key)
                        self.group_key.append(gkey)
                        rec.new_group_keys.append(gkey)
                    v = v0 + len(node_chunk)
                    node_chunk.append(c)
                    node_group.append(g)
                    rec.node_name.append(name)
                    rec.node_desc.append(" ".join(descs))
                    inc_edge.append(e)
                    inc_node.append(v)
        self.node_chunk.extend(node_chunk)
        self.node_group.extend(node_group)
        self.edge_chunk.extend(edge_chunk)
        self.inc_edge.extend(inc_edge)
        self.inc_node.extend(inc_node)
        self.n_chunks += len(chunks)
        return rec

    def finish(self) -> dict[str, object]:
        """Keyword arguments of ``hypergraph_from_flat`` (texts excluded)."""
        nodes = self.node_chunk.view()
        return dict(merge=self.merge, n_chunks=self.n_chunks, n_groups=len(self.group_key),
                    node_chunk=nodes, node_group=self.node_group.view(),
                    nc_node=np.arange(nodes.shape[0], dtype=np.int32), nc_chunk=nodes,
                    edge_chunk=self.edge_chunk.view(), inc_edge=self.inc_edge.view(),
                    inc_node=self.inc_node.view())
