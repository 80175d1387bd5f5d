"""``HyperIndex``: build, save, load and incrementally update an index (DESIGN §2, §4).

An index is the chunks in preprocessing order, one stored extraction per chunk, the
hypergraph arrays built from those extractions, one embedding per node description,
topic sentence and chunk passage, and one :class:`~hyperrag_fast.ann.VectorIndex` per
kind. ``add``/``delete`` never re-extract or re-embed a stored text: the hypergraph is
rebuilt from the stored extractions (linear) and vectors are looked up by text, so
``build(A + B)`` and ``build(A).add(B)`` give identical arrays and vectors.
"""
from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from tqdm import tqdm

from . import __version__
from .ann import AnnParams, VectorIndex
from .chunking import Document, LoadResult, chunk_documents, chunk_passage, load_documents
from .embed.base import Embedder
from .embed.cache import CachedEmbedder
from .extract.base import Extractor
from .hypergraph import ARRAY_FIELDS, Hypergraph, build_hypergraph
from .records import Chunk, Extraction
from .store import (IndexCorruptedError, IndexMismatchError, StoredIndex, load_index,
                    save_index)

KINDS = ("node_vec", "edge_vec", "chunk_vec")
_EXTRACT_BATCH = 64
_EMBED_BATCH = 256


@dataclass
class BuildReport:
    """What a build/add did: chunk counts, skipped documents, extraction failures."""

    chunks: int = 0
    new_chunks: int = 0
    embedded_texts: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (doc_id, reason)
    extraction_errors: list[tuple[str, str]] = field(default_factory=list)  # (chunk_id, reason)

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


class HyperIndex:
    """The index of one collection. Construct with :meth:`build` or :meth:`load`."""

    def __init__(self, chunks: list[Chunk], extractions: list[Extraction], graph: Hypergraph,
                 vectors: dict[str, np.ndarray], *, embedder_name: str, embedder_dim: int,
                 extractor_name: str, max_tokens: int, overlap: int,
                 ann_params: AnnParams, ann: dict[str, VectorIndex] | None = None,
                 extractor: Extractor | None = None, embedder: Embedder | None = None,
                 report: BuildReport | None = None) -> None:
        self.chunks = chunks
        self.extractions = extractions
        self.graph = graph
        self.node_vec, self.edge_vec, self.chunk_vec = (vectors[k] for k in KINDS)
        self.embedder_name, self.embedder_dim = embedder_name, int(embedder_dim)
        self.extractor_name = extractor_name
        self.max_tokens, self.overlap = max_tokens, overlap
        self.ann_params = ann_params
        self.ann = ann if ann is not None else {
            k: VectorIndex(vectors[k], ann_params) for k in KINDS}
        self.extractor, self.embedder = extractor, embedder
        self.report = report or BuildReport(chunks=len(chunks))
        self._chunk_index = {c.chunk_id: i for i, c in enumerate(chunks)}

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
        return self._chunk_index[chunk_id]

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, source: str | os.PathLike | LoadResult | Iterable[Any], extractor: Extractor,
              embedder: Embedder, merge: str = "semi", progress: bool = True,
              max_tokens: int = 256, overlap: int = 0,
              cache_dir: str | os.PathLike | None = None,
              ann_params: AnnParams | None = None) -> "HyperIndex":
        """Index documents (a path, a LoadResult, Documents/dicts/strings) or ready Chunks.

        Empty documents are skipped and listed in ``index.report``; extraction failures
        are recorded there (count + reasons), never fatal. ``cache_dir`` wraps the
        embedder in a :class:`CachedEmbedder` (file ``embeddings.sqlite``).
        """
        chunks, skipped = _to_chunks(source, max_tokens, overlap)
        if not chunks:
            raise ValueError("nothing to index: no non-empty documents" + (
                f" ({len(skipped)} skipped: " + ", ".join(f"{d}: {r}" for d, r in skipped[:5]) + ")"
                if skipped else ""))
        emb = CachedEmbedder(embedder, Path(cache_dir) / "embeddings.sqlite") if cache_dir else embedder
        report = BuildReport(skipped=skipped)
        extractions = _extract(extractor, chunks, progress, report)
        return cls._assemble(chunks, extractions, merge, emb, {}, progress, report,
                             extractor_name=extractor.name, max_tokens=max_tokens,
                             overlap=overlap, ann_params=ann_params or AnnParams(),
                             extractor=extractor, embedder=embedder)

    @classmethod
    def _assemble(cls, chunks, extractions, merge, embed_with, known, progress, report,
                  **kw) -> "HyperIndex":
        graph = build_hypergraph(extractions, merge=merge)
        texts = {"node_vec": graph.node_desc, "edge_vec": graph.edge_text,
                 "chunk_vec": [chunk_passage(c) for c in chunks]}
        vectors = _embed_all(embed_with, texts, known, progress, report)
        report.chunks = len(chunks)
        return cls(chunks, extractions, graph, vectors, embedder_name=embed_with.name,
                   embedder_dim=embed_with.dim, report=report, **kw)

    def _known_vectors(self) -> dict[str, np.ndarray]:
        known: dict[str, np.ndarray] = {}
        for texts, mat in ((self.graph.node_desc, self.node_vec), (self.graph.edge_text, self.edge_vec),
                           ([chunk_passage(c) for c in self.chunks], self.chunk_vec)):
            known.update(zip(texts, mat))
        return known

    def _rebuilt(self, chunks, extractions, embedder, progress, report) -> None:
        new = self._assemble(chunks, extractions, self.merge, embedder, self._known_vectors(),
                             progress, report, extractor_name=self.extractor_name,
                             max_tokens=self.max_tokens, overlap=self.overlap,
                             ann_params=self.ann_params, extractor=self.extractor,
                             embedder=self.embedder)
        self.__dict__.update(new.__dict__)

    def add(self, source, extractor: Extractor | None = None, embedder: Embedder | None = None,
            progress: bool = True) -> BuildReport:
        """Append documents; only their chunks are extracted, only unseen texts embedded.
        A document id already in the index raises ValueError (delete it first)."""
        extractor = self._check_extractor(extractor or self.extractor)
        embedder = self._check_embedder(embedder or self.embedder)
        chunks, skipped = _to_chunks(source, self.max_tokens, self.overlap)
        clash = sorted({c.doc_id for c in chunks} & set(self.doc_ids))
        if clash:
            raise ValueError(f"documents already in the index: {clash[:5]}; delete them first")
        report = BuildReport(skipped=skipped)
        extractions = _extract(extractor, chunks, progress, report) if chunks else []
        self._rebuilt(self.chunks + chunks, self.extractions + extractions, embedder, progress,
                      report)
        return report

    def delete(self, doc_ids: Iterable[str]) -> int:
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
        emb = self.embedder or _NoEmbedder(self.embedder_name, self.embedder_dim)
        self._rebuilt([self.chunks[i] for i in keep], [self.extractions[i] for i in keep],
                      emb, False, BuildReport())
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
        s = StoredIndex(self.manifest(), g.arrays(), self.vectors(), self.chunks,
                        self.extractions, g.node_name, g.node_desc, g.edge_text, g.group_key)

        def write_ann(d: Path) -> dict[str, str]:
            return {k: f"{k}.usearch" for k, v in self.ann.items() if v.save(d / f"{k}.usearch")}

        save_index(path, s, write_ann)
        return Path(path)

    @classmethod
    def load(cls, path: str | os.PathLike, embedder: Embedder | None = None, mmap: bool = True,
             verify: bool = True, extractor: Extractor | None = None,
             ann_params: AnnParams | None = None) -> "HyperIndex":
        """Load a saved index; ``mmap`` maps arrays, vectors and usearch files read-only.
        An embedder (or extractor) whose name/dim differs from the manifest raises
        IndexMismatchError; ``verify=False`` skips the checksums."""
        s = load_index(path, mmap=mmap, verify=verify)
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
        saved = {k: v for k, v in m["ann"].items() if k != "backends"}
        params = ann_params or AnnParams(**saved)
        ann = {k: VectorIndex.load(s.vectors[k], s.ann_files.get(k), params, view=mmap)
               for k in KINDS}
        return cls(s.chunks, s.extractions, graph, s.vectors, embedder_name=emb["name"],
                   embedder_dim=emb["dim"], extractor_name=m["extractor"],
                   max_tokens=m["chunking"]["max_tokens"], overlap=m["chunking"]["overlap"],
                   ann_params=params, ann=ann, extractor=extractor, embedder=embedder)


def check_embedder(embedder: Embedder, name: str, dim: int, where: str) -> None:
    """IndexMismatchError unless ``embedder`` has the index's name and dim."""
    if embedder.name != name or int(embedder.dim) != int(dim):
        raise IndexMismatchError(
            f"{where} was built with embedder {name!r} (dim {dim}); given "
            f"{embedder.name!r} (dim {embedder.dim}): queries would be embedded in another space")


class _NoEmbedder:
    """Stands in for a missing embedder in delete (only full merge creates new texts)."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise ValueError("deleting from this index changes merged node descriptions, which "
                         "must be embedded: load the index with its embedder")


# --------------------------------------------------------------------- helpers
def _to_chunks(source, max_tokens: int, overlap: int) -> tuple[list[Chunk], list[tuple[str, str]]]:
    if isinstance(source, LoadResult):
        docs, skipped = source.documents, source.skipped
    elif isinstance(source, (str, os.PathLike)):
        res = load_documents(source)
        docs, skipped = res.documents, res.skipped
    else:
        items = list(source)
        if items and all(isinstance(i, Chunk) for i in items):
            ids = [c.chunk_id for c in items]
            if len(set(ids)) != len(ids):
                raise ValueError("duplicate chunk ids in the input")
            return items, []
        if any(isinstance(i, Chunk) for i in items):
            raise TypeError("pass either chunks or documents, not a mix")
        res = load_documents(items)
        docs, skipped = res.documents, res.skipped
    skips = [(s.doc_id, s.reason) for s in skipped]
    chunks = chunk_documents(docs, max_tokens=max_tokens, overlap=overlap)
    have = {c.doc_id for c in chunks}
    skips += [(d.doc_id, "no tokens") for d in docs if d.doc_id not in have]
    return chunks, skips


def _extract(extractor: Extractor, chunks: list[Chunk], progress: bool,
             report: BuildReport) -> list[Extraction]:
    """Extract in batches with a progress bar; a raising batch is retried chunk by chunk
    and a raising chunk becomes a recorded failure (DESIGN §4: never abort)."""
    out: list[Extraction] = []
    with tqdm(total=len(chunks), desc="extract", unit="chunk", disable=not progress,
              file=sys.stderr) as bar:
        for b in range(0, len(chunks), _EXTRACT_BATCH):
            part = chunks[b:b + _EXTRACT_BATCH]
            try:
                got = list(extractor.extract(part))
                if len(got) != len(part):
                    raise ValueError(f"extractor returned {len(got)} results for {len(part)} chunks")
            except Exception:  # noqa: BLE001 - isolate the failing chunk(s)
                got = []
                for c in part:
                    try:
                        got.extend(extractor.extract([c]))
                    except Exception as e:  # noqa: BLE001 - recorded, not fatal
                        got.append(Extraction((), error=f"{type(e).__name__}: {e}"))
            out.extend(got)
            bar.update(len(part))
    report.new_chunks = len(chunks)
    report.extraction_errors = [(c.chunk_id, e.error) for c, e in zip(chunks, out)
                                if e.error is not None]
    return out


def _embed_all(embedder: Embedder, texts: dict[str, list[str]], known: dict[str, np.ndarray],
               progress: bool, report: BuildReport) -> dict[str, np.ndarray]:
    """One float32 matrix per kind; only texts absent from ``known`` are embedded (once)."""
    todo = list(dict.fromkeys(t for ts in texts.values() for t in ts if t not in known))
    found = dict(known)
    with tqdm(total=len(todo), desc="embed", unit="text", disable=not progress or not todo,
              file=sys.stderr) as bar:
        for b in range(0, len(todo), _EMBED_BATCH):
            part = todo[b:b + _EMBED_BATCH]
            vecs = np.asarray(embedder.embed(part), dtype=np.float32)
            if vecs.shape != (len(part), embedder.dim):
                raise ValueError(f"embedder {embedder.name!r} returned shape {vecs.shape}, "
                                 f"expected ({len(part)}, {embedder.dim})")
            found.update(zip(part, vecs))
            bar.update(len(part))
    report.embedded_texts = len(todo)
    dim = int(embedder.dim)
    return {k: (np.stack([found[t] for t in ts]).astype(np.float32) if ts
                else np.zeros((0, dim), np.float32)) for k, ts in texts.items()}
