"""``IndexReader``: one generation of a saved index, opened read-only for queries
(docs/architecture.md §1, §3).

It holds what a query reads and nothing it would need to build: the chunks (texts read on
first use), the hypergraph arrays, the memory-mapped vectors, one opened
:class:`~hyperrag_fast.ann.VectorIndex` per kind and the BM25 postings. Opening reads
CURRENT, validates the generation (checksums, structure, counts: :mod:`hyperrag_fast.store`)
and maps its files. The write side (:class:`hyperrag_fast.index.HyperIndex`: build, add,
delete, save) extends this class; nothing here imports it.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .ann import AnnParams, DistinctRows, VectorIndex
from .config import DEFAULT_CHUNK_VECTORS, DEFAULT_DAMAGED_GRAPH
from .errors import DamagedGraphWarning
from .embed.base import Embedder
from .hypergraph import ARRAY_FIELDS, Hypergraph
from .records import Chunk, Extraction
from .store import IndexCorruptedError, IndexMismatchError, load_index, read_generation

if TYPE_CHECKING:
    from .extract.base import Extractor

KINDS = ("node_vec", "edge_vec", "chunk_vec")


class BM25Arrays(NamedTuple):
    """Column-compressed BM25 weights (one column per term, rows = chunks) and the terms,
    in column order. ``weights[c, t] = idf(t) tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))``
    (fitted at build time: ``indexing.lexical.fit_bm25``)."""

    indptr: np.ndarray   # int64 (n_terms + 1)
    indices: np.ndarray  # int64 chunk ids, ascending within a column
    data: np.ndarray     # float64 weights
    terms: list[str]
    n_docs: int
    k1: float
    b: float


def check_embedder(embedder: Embedder, name: str, dim: int, where: str) -> None:
    """IndexMismatchError unless ``embedder`` has the index's name and dim."""
    if embedder.name != name or int(embedder.dim) != int(dim):
        raise IndexMismatchError(
            f"{where} was built with embedder {name!r} (dim {dim}); given "
            f"{embedder.name!r} (dim {embedder.dim}): queries would be embedded in another space")


class IndexReader:
    """The read-only index of one collection: open a saved one with :meth:`open`."""

    def __init__(self, chunks: list[Chunk], extractions: list[Extraction], graph: Hypergraph,
                 vectors: dict[str, np.ndarray], *, embedder_name: str, embedder_dim: int,
                 extractor_name: str, max_tokens: int, overlap: int, ann_params: AnnParams,
                 ann: dict[str, VectorIndex], bm25: BM25Arrays,
                 extractor: Extractor | None = None, embedder: Embedder | None = None,
                 chunk_vectors: str = DEFAULT_CHUNK_VECTORS) -> None:
        self.chunks = chunks
        self.extractions = extractions
        self.graph = graph
        self.node_vec, self.edge_vec, self.chunk_vec = (vectors[k] for k in KINDS)
        self.embedder_name, self.embedder_dim = embedder_name, int(embedder_dim)
        self.extractor_name = extractor_name
        self.max_tokens, self.overlap = max_tokens, overlap
        self.ann_params = ann_params
        self.chunk_vectors = chunk_vectors  # "text" or "pooled" (BuildOptions.chunk_vectors)
        self.ann = ann
        self.extractor, self.embedder = extractor, embedder
        self.bm25 = bm25
        self._chunk_index: dict[str, int] | None = None  # built on first use (a query needs none)
        #: the saved generation directory these arrays are (set by open and save; None:
        #: built or changed in memory); prebuilt structures are read from it
        self.generation: Path | None = None
        #: kinds searched exactly because their usearch graph was damaged (kind -> why;
        #: only when opened with ``damaged_graph="exact"``)
        self.damaged_graphs: dict[str, str] = {}

    @property
    def merge(self) -> str:
        return self.graph.merge

    @property
    def n_chunks(self) -> int:
        return len(self.chunks)

    @property
    def doc_ids(self) -> list[str]:
        return list(dict.fromkeys(c.doc_id for c in self.chunks))

    def vectors(self) -> dict[str, np.ndarray]:
        return {"node_vec": self.node_vec, "edge_vec": self.edge_vec, "chunk_vec": self.chunk_vec}

    def chunk_index(self, chunk_id: str) -> int:
        if self._chunk_index is None:
            self._chunk_index = {c.chunk_id: i for i, c in enumerate(self.chunks)}
        return self._chunk_index[chunk_id]

    @classmethod
    def open(cls, path: str | os.PathLike, embedder: Embedder | None = None, mmap: bool = True,
             verify: bool = True, extractor: Extractor | None = None,
             ann_params: AnnParams | None = None,
             damaged_graph: str = DEFAULT_DAMAGED_GRAPH):
        """Open the live generation of a saved index; ``mmap`` maps arrays, vectors and
        usearch files read-only. An embedder (or extractor) whose name/dim differs from the
        manifest raises IndexMismatchError; ``verify=False`` skips the checksums.
        ``damaged_graph``: "error" (default) raises IndexCorruptedError for a usearch graph
        failing its checksum or structural check; "exact" searches that kind exactly on
        its float32 vectors instead, with a :class:`DamagedGraphWarning`
        (``damaged_graphs`` then names the kinds and why; ``config.DAMAGED_GRAPHS``)."""
        return read_generation(path, lambda gen: cls._open_generation(
            gen, path, embedder, mmap, verify, extractor, ann_params, damaged_graph))

    @classmethod
    def _open_generation(cls, gen, path, embedder, mmap, verify, extractor, ann_params,
                         damaged_graph=DEFAULT_DAMAGED_GRAPH):
        s = load_index(gen, mmap=mmap, verify=verify, damaged_graph=damaged_graph)
        m = s.manifest
        emb = m["embedder"]
        if embedder is not None:
            check_embedder(embedder, emb["name"], emb["dim"], str(path))
        if extractor is not None and extractor.name != m["extractor"]:
            raise IndexMismatchError(f"{path}: built with extractor {m['extractor']!r}, "
                                     f"given {extractor.name!r}")
        missing = set(ARRAY_FIELDS) - set(s.arrays)
        if missing:
            raise IndexCorruptedError(f"{path}: arrays missing: {sorted(missing)}")
        graph = Hypergraph(m["merge"], len(s.chunks), **{k: s.arrays[k] for k in ARRAY_FIELDS},
                           node_name=s.node_name, node_desc=s.node_desc,
                           edge_text=s.edge_text, group_key=s.group_key)
        try:
            saved = {"storage": "f32", **{k: v for k, v in m["ann"].items() if k != "backends"}}
            params = ann_params or AnnParams(**saved)
        except (KeyError, AttributeError, TypeError, ValueError):
            raise IndexCorruptedError(f"{gen / 'manifest.json'}: its 'ann' settings are "
                                      f"invalid; the index is corrupted") from None
        a = s.arrays

        def distinct(k):
            return (DistinctRows(a[f"{k}_rep"], a[f"{k}_dup_ptr"], a[f"{k}_dup_ids"])
                    if f"{k}_rep" in a else None)

        ann, damaged = {}, {}
        for k in KINDS:
            f = s.ann_files.get(k)
            if f is not None and k in s.damaged_ann:
                damaged[k] = f"{f}: {k}'s usearch graph does not match the manifest"
            elif f is not None:
                try:
                    if distinct(k) is None:
                        raise IndexCorruptedError(f"{gen / 'manifest.json'}: {k} has a usearch "
                                                  f"graph but no distinct rows ({k}_rep)")
                    ann[k] = VectorIndex.load(s.vectors[k], f, params, view=mmap,
                                              distinct=distinct(k))
                    continue
                except IndexCorruptedError as e:
                    if damaged_graph != "exact":
                        raise
                    damaged[k] = str(e)
            ann[k] = VectorIndex.load(s.vectors[k], None, params)
        for k, why in damaged.items():
            warnings.warn(DamagedGraphWarning(f"{why} (damaged_graph='exact': searching {k} "
                                              f"exactly on its float32 vectors)"), stacklevel=3)
        lx = s.lexical
        bm25 = BM25Arrays(a["bm25_indptr"], a["bm25_indices"], a["bm25_data"], lx["terms"],
                          lx["n_docs"], lx["k1"], lx["b"])
        out = cls(s.chunks, s.extractions, graph, s.vectors, embedder_name=emb["name"],
                  embedder_dim=emb["dim"], extractor_name=m["extractor"],
                  max_tokens=m["chunking"]["max_tokens"], overlap=m["chunking"]["overlap"],
                  ann_params=params, ann=ann, extractor=extractor, embedder=embedder,
                  bm25=bm25, chunk_vectors=m.get("chunk_vectors", DEFAULT_CHUNK_VECTORS))
        out.generation = Path(gen)
        out.damaged_graphs = damaged
        return out
