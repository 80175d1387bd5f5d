"""The streaming index build: documents -> chunks -> extractions -> flat arrays, with
embeddings written to disk as they arrive (docs/architecture.md §10).

Documents are cut into partitions of ``BuildOptions.partition_docs``; each partition is
chunked and extracted, its records appended to a :class:`FlatAssembler`, and its new
distinct texts embedded and appended to the vector table. (Embedding on a thread while the
next partition is extracted bought nothing on 2 cores and was removed, issue 22.) With ``workers`` or
``scheduler`` set, chunking, extraction and embedding of each partition run as Dask
tasks instead (``indexing.distributed``) and this process only assembles.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np
from tqdm import tqdm

from ..chunking import LoadResult, load_documents
from ..config import DEFAULT_CHUNK_VECTORS, BuildOptions
from ..embed.base import Embedder
from ..extract.base import Extractor
from ..hypergraph import Hypergraph
from .hypergraph import build_hypergraph, hypergraph_from_flat
from ..records import Chunk, Extraction
from .clock import StageClock
from .flat import FlatAssembler, GroupOf
from .partition import chunk_partition, embed_checked, extract_chunks, shared_names
from .pooled import chunk_keys, pooled_chunk_codes
from .vectors import TextVectors, source_codes

KINDS = ("node_vec", "edge_vec", "chunk_vec")


@dataclass
class Built:
    """A build's records, graph and the vector table with each kind's row codes."""

    chunks: list[Chunk]
    extractions: list[Extraction]
    graph: Hypergraph
    table: TextVectors
    codes: dict[str, np.ndarray]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    embedded_texts: int = 0


@dataclass
class Seed:
    """An existing index that a build appends to (``add``): its records, graph, the
    memory maps of its vectors, which stand for its texts in the vector table, and its
    chunk-vector representation (``BuildOptions.chunk_vectors``)."""

    chunks: list[Chunk]
    extractions: list[Extraction]
    graph: Hypergraph
    vectors: dict[str, np.ndarray]
    chunk_vectors: str = DEFAULT_CHUNK_VECTORS


def seed_table(table: TextVectors, seed: Seed) -> dict[str, int]:
    """Register the seed's matrices as table sources and its texts as known; returns the
    source id of each kind."""
    src = {k: table.add_source(seed.vectors[k]) for k in KINDS}
    table.know(seed.graph.node_desc, src["node_vec"])
    table.know(seed.graph.edge_text, src["edge_vec"])
    table.know(chunk_keys(seed.chunks, seed.chunk_vectors), src["chunk_vec"])
    return src


def _seed_flat(asm: FlatAssembler, g: Hypergraph) -> None:
    inc_edge = np.repeat(np.arange(g.n_edges, dtype=np.int32), np.diff(g.edge_ptr))
    asm.seed(g.node_chunk, g.node_group, g.edge_chunk, inc_edge, g.edge_nodes, g.n_chunks)


def _check_new_ids(parts: Sequence[Sequence[Any]], seed: Seed) -> None:
    have = {c.doc_id for c in seed.chunks}
    clash = sorted({d.doc_id for p in parts for d in p} & have)
    if clash:
        raise ValueError(f"documents already in the index: {clash[:5]}; delete them first")


# ----------------------------------------------------------------------- partitions
def partitions(source: Any, max_tokens: int, overlap: int, size: int,
               skipped: list[tuple[str, str]]) -> list[list[Any]]:
    """The source as lists of documents (or ready chunks), ``size`` documents each.
    Skipped documents are appended to ``skipped``."""
    if isinstance(source, LoadResult):
        docs, skips = source.documents, source.skipped
    elif not isinstance(source, (str, bytes)) and not hasattr(source, "__fspath__"):
        items = list(source)
        if items and all(isinstance(i, Chunk) for i in items):
            ids = [c.chunk_id for c in items]
            if len(set(ids)) != len(ids):
                raise ValueError("duplicate chunk ids in the input")
            return [items[b:b + size] for b in range(0, len(items), size)]
        if any(isinstance(i, Chunk) for i in items):
            raise TypeError("pass either chunks or documents, not a mix")
        res = load_documents(items)
        docs, skips = res.documents, res.skipped
    else:
        res = load_documents(source)
        docs, skips = res.documents, res.skipped
    skipped.extend((s.doc_id, s.reason) for s in skips)
    return [docs[b:b + size] for b in range(0, len(docs), size)]


# --------------------------------------------------------------------- the embedder
class _Embedder:
    """Embeds text lists in order and appends them to the table."""

    def __init__(self, embedder: Embedder, table: TextVectors, clock: StageClock,
                 bar: Any) -> None:
        self.embedder, self.table, self.clock, self.bar = embedder, table, clock, bar

    def put(self, texts: list[str]) -> None:
        if not texts:
            return
        with self.clock.stage("embed"):
            vecs = embed_checked(self.embedder, texts)
        self.table.append(vecs)
        self.clock.count("texts_embedded", len(texts))
        self.bar.update(len(texts))

    def close(self) -> None:
        pass


# ------------------------------------------------------------------------ the build
def stream_build(source: Any, extractor: Extractor, embedder: Embedder, *, merge: str,
                 max_tokens: int, overlap: int, options: BuildOptions, workdir,
                 clock: StageClock, progress: bool = True,
                 group_of: GroupOf | None = None, seed: Seed | None = None) -> Built:
    """Build the records, graph and vector table of ``source`` (see module docstring);
    with ``seed``, append them to an existing index's (``add``)."""
    skipped: list[tuple[str, str]] = []
    with clock.stage("chunk"):
        parts = partitions(source, max_tokens, overlap, options.partition_docs, skipped)
        if seed is not None:
            _check_new_ids(parts, seed)
    table = TextVectors(workdir, embedder.dim)
    pooled = (options.chunk_vectors or DEFAULT_CHUNK_VECTORS) == "pooled"
    n_seed = len(seed.chunks) if seed is not None else 0
    streaming = merge in ("semi", "none")
    asm = FlatAssembler(merge, group_of) if streaming else None
    chunks: list[Chunk] = []
    exts: list[Extraction] = []
    texts: dict[str, list[str]] = {"node_name": [], "node_desc": [], "edge_text": [],
                                   "group_key": []}
    codes: dict[str, list[np.ndarray]] = {k: [] for k in KINDS}
    if seed is not None:
        with clock.stage("assemble"):
            src = seed_table(table, seed)
            chunks, exts = list(seed.chunks), list(seed.extractions)
            if streaming:
                asm = FlatAssembler(merge, group_of, groups=seed.graph.group_key)
                _seed_flat(asm, seed.graph)
                for k in ("node_name", "node_desc", "edge_text"):
                    texts[k] = list(getattr(seed.graph, k))
                for k in KINDS:
                    n = seed.vectors[k].shape[0]
                    codes[k].append(source_codes(src[k], n))
    n_docs = sum(len(p) for p in parts)
    xbar = tqdm(total=n_docs, desc="extract", unit="doc", disable=not progress, file=sys.stderr)
    ebar = tqdm(desc="embed", unit="text", disable=not progress, file=sys.stderr)
    emb = _Embedder(embedder, table, clock, ebar)
    t_loop = time.perf_counter()
    try:
        for n_part, p_chunks, p_exts, p_vecs in _partition_results(
                parts, extractor, embedder, max_tokens, overlap, options, clock, skipped,
                group_of):
            p_exts = shared_names(p_exts)
            chunks.extend(p_chunks)
            exts.extend(p_exts)
            xbar.update(n_part)
            if not streaming:
                continue
            with clock.stage("assemble"):
                rec = asm.add(p_chunks, p_exts)
                texts["node_name"] += rec.node_name
                texts["node_desc"] += rec.node_desc
                texts["edge_text"] += rec.edge_text
                all_texts = rec.node_desc + rec.edge_text + ([] if pooled else rec.passages)
                c, new = table.reserve(all_texts)
                a, b = len(rec.node_desc), len(rec.node_desc) + len(rec.edge_text)
                for k, part in zip(KINDS, (c[:a], c[a:b], c[b:])):
                    codes[k].append(part)
            new_texts = [all_texts[i] for i in new]
            if p_vecs is None:
                emb.put(new_texts)
            else:
                with clock.stage("assemble"):
                    table.append(p_vecs(new_texts))
                clock.count("texts_embedded", len(new_texts))
                ebar.update(len(new_texts))
        emb.close()
        clock.seconds["extract_embed_wall"] += time.perf_counter() - t_loop
    finally:
        xbar.close()
        ebar.close()
    clock.count("chunks", len(chunks))
    if not chunks:
        raise ValueError("nothing to index: no non-empty documents" + (
            f" ({len(skipped)} skipped: " + ", ".join(f"{d}: {r}" for d, r in skipped[:5]) + ")"
            if skipped else ""))
    if streaming:
        with clock.stage("assemble"):
            texts["group_key"] = asm.group_key
            graph = hypergraph_from_flat(**asm.finish(), **texts)
            codes_ = {k: (np.concatenate(v) if v else np.zeros(0, np.int64))
                      for k, v in codes.items()}
        if pooled:  # the seed's rows, then the new chunks' pooled vectors
            codes_["chunk_vec"] = np.concatenate([codes_["chunk_vec"][:n_seed], pooled_chunk_codes(
                table, chunks, graph.edge_chunk, codes_["edge_vec"], n_seed, embedder, clock)])
    else:
        graph, codes_ = assemble(chunks, exts, merge, group_of, table, embedder, clock,
                                 "pooled" if pooled else "text")
    return Built(chunks, exts, graph, table, codes_, skipped,
                 embedded_texts=clock.counts.get("texts_embedded", 0))


def assemble(chunks: Sequence[Chunk], extractions: Sequence[Extraction], merge: str,
             group_of: GroupOf | None, table: TextVectors, embedder: Embedder | None,
             clock: StageClock, chunk_vectors: str = DEFAULT_CHUNK_VECTORS
             ) -> tuple[Hypergraph, dict[str, np.ndarray]]:
    """The whole graph at once (any merge) and its vector codes; texts the table does not
    know are embedded (``add``, ``delete`` and full merge use this path)."""
    pooled = chunk_vectors == "pooled"
    with clock.stage("assemble"):
        graph = build_hypergraph(extractions, merge=merge, group_of=group_of)
        kinds = (graph.node_desc, graph.edge_text, [] if pooled else chunk_keys(chunks, "text"))
        all_texts = [t for ts in kinds for t in ts]
        c, new = table.reserve(all_texts)
    if new:
        if embedder is None:
            raise ValueError(f"{len(new)} new texts must be embedded: pass an embedder")
        with clock.stage("embed"):
            vecs = np.concatenate([embed_checked(embedder, [all_texts[i] for i in new[b:b + 4096]])
                                   for b in range(0, len(new), 4096)])
        table.append(vecs)
        clock.count("texts_embedded", len(new))
    a, b = len(kinds[0]), len(kinds[0]) + len(kinds[1])
    codes = dict(zip(KINDS, (c[:a], c[a:b], c[b:])))
    if pooled:
        codes["chunk_vec"] = pooled_chunk_codes(table, chunks, graph.edge_chunk,
                                                codes["edge_vec"], 0, embedder, clock)
    return graph, codes


def _partition_results(parts, extractor, embedder, max_tokens, overlap, options, clock,
                       skipped, group_of) -> Iterator[tuple[int, list[Chunk], list[Extraction], Any]]:
    """(documents, chunks, extractions, vectors-of(texts) or None) per partition, in order."""
    if options.distributed:
        from .distributed import dask_partitions
        for part, (chunks, exts, texts, vecs, skips, secs) in zip(parts, dask_partitions(
                parts, extractor, embedder, max_tokens, overlap, group_of, options)):
            skipped.extend(skips)
            for k, s in secs.items():
                clock.seconds[f"worker_{k}"] += s
            row = {t: i for i, t in enumerate(texts)}
            yield len(part), chunks, exts, (lambda new, vecs=vecs, row=row:
                                 vecs[[row[t] for t in new]] if new
                                 else np.zeros((0, vecs.shape[1]), np.float32))
        return
    for part in parts:
        with clock.stage("chunk"):
            chunks = chunk_partition(part, max_tokens, overlap, skipped)
        with clock.stage("extract"):
            exts = extract_chunks(extractor, chunks)
        yield len(part), chunks, exts, None


def extraction_errors(chunks: Sequence[Chunk], exts: Sequence[Extraction]) -> list[tuple[str, str]]:
    return [(c.chunk_id, e.error) for c, e in zip(chunks, exts) if e.error is not None]
