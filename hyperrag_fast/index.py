"""``HyperIndex``: build, save and incrementally update an index, the write side of
:class:`~hyperrag_fast.reader.IndexReader` (docs/architecture.md §1, §2).

An index is the chunks in preprocessing order, one stored extraction per chunk, the
hypergraph arrays built from those extractions, one embedding per node description,
topic sentence and chunk (its passage's, or pooled from its sentences: §10; memory-mapped
files), one
:class:`~hyperrag_fast.ann.VectorIndex` per kind and the BM25 postings. Building streams
partitions through :mod:`hyperrag_fast.indexing` (docs/architecture.md §10). ``add`` appends
the new documents' partitions to the loaded arrays and vectors (read through their memory
maps) and inserts only new rows into the HNSW graphs; ``delete`` reassembles the kept
extractions. Neither re-extracts nor re-embeds a stored text, so ``build(A + B)`` and
``build(A).add(B)`` give identical arrays and vectors.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import weakref
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from . import __version__
from .ann import AnnParams, VectorIndex
from .mmaps import trim_heap
from .indexing.clock import StageClock, peak_rss_mb, rss_mb
from .indexing.hnsw import build_vector_index, extend_vector_index, save_vector_index, spill
from .indexing.lexical import BM25Arrays, fit_bm25
from .config import (DEFAULT_CHUNK_VECTORS, DEFAULT_DAMAGED_GRAPH, DEFAULT_MAX_TOKENS,
                     DEFAULT_MERGE, DEFAULT_OVERLAP, BuildOptions)
from .indexing.vectors import TextVectors
from .chunking import LoadResult, chunk_passage
from .embed.base import Embedder
from .embed.cache import CachedEmbedder
from .extract.base import Extractor
from .hypergraph import MERGES, Hypergraph
from .reader import KINDS, IndexReader, check_embedder
from .records import Chunk, Extraction
from .store import SCRATCH_PREFIX, IndexMismatchError, StoredIndex

if TYPE_CHECKING:
    from .indexing.pipeline import Built, Seed

def _pipeline():
    """The build pipeline, imported by the writers only (a query process needs none of it)."""
    from .indexing import pipeline
    return pipeline


@dataclass
class BuildReport:
    """What a build/add did: chunk counts, skipped documents, extraction failures, and
    where the time and memory went (``stages``: see :mod:`hyperrag_fast.indexing.clock`)."""

    chunks: int = 0
    new_chunks: int = 0
    embedded_texts: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (doc_id, reason)
    extraction_errors: list[tuple[str, str]] = field(default_factory=list)  # (chunk_id, reason)
    stages: dict[str, Any] = field(default_factory=dict)

    def error_reasons(self) -> dict[str, int]:
        return dict(Counter(r for _, r in self.extraction_errors).most_common())

    def summary(self) -> str:
        s = (f"{self.new_chunks} new chunks ({self.chunks} total), "
             f"{self.embedded_texts} texts embedded")
        if self.skipped:
            s += f"; {len(self.skipped)} documents skipped: " + ", ".join(
                f"{d} ({r})" for d, r in self.skipped[:5]) + (" ..." if len(self.skipped) > 5 else "")
        if self.extraction_errors:
            s += f"; {len(self.extraction_errors)} extraction failures: " + ", ".join(
                f"{r} x{n}" for r, n in self.error_reasons().items())
        return s


class _Scratch:
    """A build's working directory (vector table, kind matrices), removed with its index;
    named with the builder's process id, so the next writer of an index can remove the
    scratch folder a killed build left inside it (``store``)."""

    def __init__(self, parent: str | os.PathLike | None) -> None:
        if parent is not None:
            Path(parent).mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=parent))
        self._done = weakref.finalize(self, shutil.rmtree, self.path, True)


class HyperIndex(IndexReader):
    """The index of one collection, writable. Construct with :meth:`build` or :meth:`load`;
    a query needs only the :class:`~hyperrag_fast.reader.IndexReader` it extends."""

    def __init__(self, chunks: list[Chunk], extractions: list[Extraction], graph: Hypergraph,
                 vectors: dict[str, np.ndarray], *, embedder_name: str, embedder_dim: int,
                 extractor_name: str, max_tokens: int, overlap: int,
                 ann_params: AnnParams, ann: dict[str, VectorIndex] | None = None,
                 extractor: Extractor | None = None, embedder: Embedder | None = None,
                 report: BuildReport | None = None, scratch: _Scratch | None = None,
                 bm25: BM25Arrays | None = None,
                 chunk_vectors: str = DEFAULT_CHUNK_VECTORS) -> None:
        super().__init__(
            chunks, extractions, graph, vectors, embedder_name=embedder_name,
            embedder_dim=embedder_dim, extractor_name=extractor_name, max_tokens=max_tokens,
            overlap=overlap, ann_params=ann_params,
            ann=ann if ann is not None else {
                k: build_vector_index(vectors[k], ann_params) for k in KINDS},
            bm25=bm25 if bm25 is not None else fit_bm25([chunk_passage(c) for c in chunks]),
            extractor=extractor, embedder=embedder, chunk_vectors=chunk_vectors)
        self.report = report or BuildReport(chunks=len(chunks))
        self._scratch = scratch

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, source: str | os.PathLike | LoadResult | Iterable[Any], extractor: Extractor,
              embedder: Embedder, merge: str = DEFAULT_MERGE, progress: bool = True,
              max_tokens: int = DEFAULT_MAX_TOKENS, overlap: int = DEFAULT_OVERLAP,
              cache_dir: str | os.PathLike | None = None,
              ann_params: AnnParams | None = None, options: BuildOptions | None = None,
              workdir: str | os.PathLike | None = None) -> "HyperIndex":
        """Index documents (a path, a LoadResult, Documents/dicts/strings) or ready Chunks.

        Streams partitions through chunk -> extract -> embed (:mod:`hyperrag_fast.indexing`);
        vectors go to memory-mapped files in a scratch folder under ``workdir`` (default:
        the system temp folder) that lives as long as the index. Empty documents are
        skipped and listed in ``index.report``; extraction failures are recorded there
        (count + reasons), never fatal. ``cache_dir`` wraps the embedder in a
        :class:`CachedEmbedder` (file ``embeddings.sqlite``).
        """
        if merge not in MERGES:
            raise ValueError(f"merge must be one of {MERGES}, got {merge!r}")
        options = options or BuildOptions()
        options = replace(options, chunk_vectors=options.chunk_vectors or DEFAULT_CHUNK_VECTORS)
        if cache_dir and options.distributed:
            raise ValueError("cache_dir cannot be combined with a distributed build: the "
                             "workers embed; drop one of the two")
        emb = CachedEmbedder(embedder, Path(cache_dir) / "embeddings.sqlite") if cache_dir else embedder
        scratch = _Scratch(workdir)
        clock = StageClock()
        with clock:
            built = _pipeline().stream_build(
                source, extractor, emb, merge=merge, max_tokens=max_tokens, overlap=overlap,
                options=options, workdir=scratch.path / "table", clock=clock, progress=progress)
            return cls._finish(built, scratch, clock, len(built.chunks), extractor_name=extractor.name,
                               max_tokens=max_tokens, overlap=overlap,
                               ann_params=ann_params or AnnParams(), extractor=extractor,
                               embedder=embedder, embedder_name=emb.name, embedder_dim=emb.dim,
                               chunk_vectors=options.chunk_vectors)

    @classmethod
    def _finish(cls, built: Built, scratch: _Scratch, clock: StageClock, new_chunks: int,
                previous: dict[str, VectorIndex] | None = None, **kw) -> "HyperIndex":
        """Kind matrices from the vector table (block by block), then the ANN indexes."""
        with clock.stage("assemble"):
            vectors = {}
            for k in KINDS:
                path = scratch.path / f"{k}.npy"
                built.table.write_npy(path, built.codes[k])
                vectors[k] = np.load(path, mmap_mode="r")
            built.table.close()
            shutil.rmtree(built.table.dir, ignore_errors=True)
            bm25 = fit_bm25([chunk_passage(c) for c in built.chunks])
        params = kw["ann_params"]
        trim_heap()  # the streaming build's freed objects, before the ANN stage's peak
        with clock.stage("ann"):  # one graph in memory at a time: each is spilled to disk
            ann = {k: spill(extend_vector_index(previous[k], vectors[k], params) if previous
                            else build_vector_index(vectors[k], params), scratch.path / f"{k}.usearch")
                   for k in KINDS}
        report = BuildReport(chunks=len(built.chunks), new_chunks=new_chunks,
                             embedded_texts=built.embedded_texts, skipped=built.skipped,
                             extraction_errors=_pipeline().extraction_errors(
                                 built.chunks[len(built.chunks) - new_chunks:],
                                 built.extractions[len(built.chunks) - new_chunks:]))
        report.stages = clock.report()
        return cls(built.chunks, built.extractions, built.graph, vectors, ann=ann,
                   report=report, scratch=scratch, bm25=bm25, **kw)

    def _seed(self) -> Seed:
        return _pipeline().Seed(self.chunks, self.extractions, self.graph, self.vectors(),
                                self.chunk_vectors)

    def _rebuilt(self, built: Built, scratch: _Scratch, clock: StageClock, new_chunks: int,
                 embedder: Embedder | None, extend: bool = False) -> BuildReport:
        new = self._finish(built, scratch, clock, new_chunks,
                           previous=self.ann if extend else None,
                           extractor_name=self.extractor_name,
                           max_tokens=self.max_tokens, overlap=self.overlap,
                           ann_params=self.ann_params, extractor=self.extractor,
                           embedder=self.embedder, embedder_name=self.embedder_name,
                           embedder_dim=self.embedder_dim, chunk_vectors=self.chunk_vectors)
        self.__dict__.update(new.__dict__)
        return self.report

    def add(self, source, extractor: Extractor | None = None, embedder: Embedder | None = None,
            progress: bool = True, options: BuildOptions | None = None,
            workdir: str | os.PathLike | None = None) -> BuildReport:
        """Append documents; only their chunks are extracted, only unseen texts embedded,
        and the existing vectors are read through their memory maps (never copied into
        memory). A document id already in the index raises ValueError (delete it first).
        Chunk vectors keep the index's representation; ``options.chunk_vectors`` naming
        another raises IndexMismatchError."""
        extractor = self._check_extractor(extractor or self.extractor)
        embedder = self._check_embedder(embedder or self.embedder)
        options = options or BuildOptions()
        if options.chunk_vectors not in (None, self.chunk_vectors):
            raise IndexMismatchError(f"chunk_vectors {options.chunk_vectors!r} differs from the "
                                     f"index's {self.chunk_vectors!r}")
        options = replace(options, chunk_vectors=self.chunk_vectors)
        scratch = _Scratch(workdir)
        clock = StageClock()
        with clock:
            built = _pipeline().stream_build(
                source, extractor, embedder, merge=self.merge, max_tokens=self.max_tokens,
                overlap=self.overlap, options=options,
                workdir=scratch.path / "table", clock=clock, progress=progress, seed=self._seed())
            return self._rebuilt(built, scratch, clock, len(built.chunks) - self.n_chunks,
                                 embedder, extend=True)

    def delete(self, doc_ids: Iterable[str], workdir: str | os.PathLike | None = None) -> int:
        """Remove every chunk of the given documents; returns the number removed.
        Unknown ids raise KeyError. Nothing is re-extracted; under ``merge="full"`` a merged
        node's description changes, so those new texts are embedded (needs the embedder)."""
        doc_ids = [doc_ids] if isinstance(doc_ids, str) else list(doc_ids)
        unknown = sorted(set(doc_ids) - set(self.doc_ids))
        if unknown:
            raise KeyError(f"documents not in the index: {unknown[:5]}")
        drop = set(doc_ids)
        keep = [i for i, c in enumerate(self.chunks) if c.doc_id not in drop]
        if not keep:
            raise ValueError("deleting these documents would leave the index empty")
        removed = len(self.chunks) - len(keep)
        scratch = _Scratch(workdir)
        clock = StageClock()
        with clock:
            table = TextVectors(scratch.path / "table", self.embedder_dim)
            _pipeline().seed_table(table, self._seed())
            chunks = [self.chunks[i] for i in keep]
            exts = [self.extractions[i] for i in keep]
            emb = self.embedder or _NoEmbedder(self.embedder_name, self.embedder_dim)
            graph, codes = _pipeline().assemble(chunks, exts, self.merge, None, table, emb, clock,
                                                self.chunk_vectors)
            built = _pipeline().Built(chunks, exts, graph, table, codes,
                          embedded_texts=clock.counts.get("texts_embedded", 0))
            self._rebuilt(built, scratch, clock, 0, emb)
        return removed

    def _check_extractor(self, ex: Extractor | None) -> Extractor:
        if ex is None:
            raise ValueError(f"this index was loaded without an extractor; pass one "
                             f"(the index was built with {self.extractor_name!r})")
        if ex.name != self.extractor_name:
            raise IndexMismatchError(f"extractor {ex.name!r} differs from the index's "
                                     f"{self.extractor_name!r}")
        return ex

    def _check_embedder(self, emb: Embedder | None) -> Embedder:
        if emb is None:
            raise ValueError(f"this index was loaded without an embedder; pass one "
                             f"(the index was built with {self.embedder_name!r})")
        check_embedder(emb, self.embedder_name, self.embedder_dim, "this index")
        return emb

    # --------------------------------------------------------------- persistence
    def manifest(self) -> dict[str, Any]:
        g = self.graph
        return {
            "library_version": __version__,
            "embedder": {"name": self.embedder_name, "dim": self.embedder_dim},
            "extractor": self.extractor_name,
            "merge": g.merge,
            "chunk_vectors": self.chunk_vectors,
            "chunking": {"max_tokens": self.max_tokens, "overlap": self.overlap},
            "counts": {"documents": len(self.doc_ids), "chunks": self.n_chunks,
                       "nodes": g.n_nodes, "edges": g.n_edges, "groups": g.n_groups,
                       "incidences": g.n_incidences,
                       "extraction_errors": sum(e.error is not None for e in self.extractions)},
            "ann": {**asdict(self.ann_params),
                    "backends": {k: v.backend for k, v in self.ann.items()}},
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Atomically write the index directory (see :mod:`hyperrag_fast.store`)."""
        g = self.graph
        arrays = dict(g.arrays())
        bm = self.bm25
        arrays.update(bm25_indptr=bm.indptr, bm25_indices=bm.indices, bm25_data=bm.data)
        for k, v in self.ann.items():  # what a query needs, derived once here, not at load
            d = v.distinct()
            if d is not None:
                arrays.update({f"{k}_rep": d.rep, f"{k}_dup_ptr": d.ptr, f"{k}_dup_ids": d.ids})
        s = StoredIndex(self.manifest(), arrays, self.vectors(), self.chunks,
                        self.extractions, g.node_name, g.node_desc, g.edge_text, g.group_key,
                        lexical={"terms": bm.terms, "n_docs": bm.n_docs, "k1": bm.k1, "b": bm.b})

        def write_ann(d: Path) -> dict[str, str]:
            return {k: f"{k}.usearch" for k, v in self.ann.items()
                    if save_vector_index(v, d / f"{k}.usearch")}

        t, peak = time.perf_counter(), rss_mb()
        from .publish import save_index  # the writing side: not imported by a query
        self.generation = save_index(path, s, write_ann)
        if self.report.stages:  # the build's stage figures gain the save
            self.report.stages["stages"]["save"] = {
                "s": round(time.perf_counter() - t, 3), "calls": 1,
                "peak_rss_mb": round(max(peak, rss_mb()), 1)}
            self.report.stages["peak_rss_mb"] = peak_rss_mb()
        return Path(path)

    @classmethod
    def load(cls, path: str | os.PathLike, embedder: Embedder | None = None, mmap: bool = True,
             verify: bool = True, extractor: Extractor | None = None,
             ann_params: AnnParams | None = None,
             damaged_graph: str = DEFAULT_DAMAGED_GRAPH) -> "HyperIndex":
        """Load a saved index to query or update it (:meth:`IndexReader.open`, as a
        HyperIndex); ``mmap`` maps arrays, vectors and usearch files read-only."""
        return cls.open(path, embedder, mmap, verify, extractor, ann_params, damaged_graph)


class _NoEmbedder:
    """Stands in for a missing embedder in delete (only full merge creates new texts)."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise ValueError("deleting from this index changes merged node descriptions, which "
                         "must be embedded: load the index with its embedder")
