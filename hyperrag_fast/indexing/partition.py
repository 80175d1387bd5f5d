"""One partition of the index build, with no cross-partition state: chunk, extract (a
failing chunk is recorded, never fatal), embed. The single-process build calls the pieces;
a Dask worker runs :func:`worker_partition` whole (docs/architecture.md §10)."""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from ..chunking import chunk_documents
from ..embed.base import Embedder
from ..extract.base import Extractor
from ..records import Chunk, Extraction, Segment
from .flat import GroupOf, partition_texts

EXTRACT_BATCH = 64


def chunk_partition(part: Sequence[Any], max_tokens: int, overlap: int,
                    skipped: list[tuple[str, str]] | None = None) -> list[Chunk]:
    """Chunks of one partition (ready chunks pass through)."""
    if part and isinstance(part[0], Chunk):
        return list(part)
    chunks = chunk_documents(part, max_tokens=max_tokens, overlap=overlap)
    if skipped is not None:
        have = {c.doc_id for c in chunks}
        skipped.extend((d.doc_id, "no tokens") for d in part if d.doc_id not in have)
    return chunks


def shared_names(exts: Sequence[Extraction]) -> list[Extraction]:
    """The same extractions with every entity name interned: a name recurs across many
    chunks (Zipf); one string per distinct name instead of one per occurrence."""
    intern = sys.intern
    return [e if e.error is not None else Extraction(tuple(
        Segment(s.topic, tuple((intern(n), d) for n, d in s.entities)) for s in e.segments),
        None, e.ner) for e in exts]


def extract_chunks(extractor: Extractor, chunks: Sequence[Chunk],
                   progress: Callable[[int], None] | None = None) -> list[Extraction]:
    """Extract in batches; a raising batch is retried chunk by chunk and a raising chunk
    becomes a recorded failure (never abort the build)."""
    out: list[Extraction] = []
    for b in range(0, len(chunks), EXTRACT_BATCH):
        part = chunks[b:b + EXTRACT_BATCH]
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
        if progress is not None:
            progress(len(part))
    return out


def embed_checked(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    vecs = np.asarray(embedder.embed(list(texts)), dtype=np.float32)
    if vecs.shape != (len(texts), int(embedder.dim)):
        raise ValueError(f"embedder {embedder.name!r} returned shape {vecs.shape}, "
                         f"expected ({len(texts)}, {embedder.dim})")
    return vecs


def worker_partition(part: Sequence[Any], extractor: Extractor, embedder: Embedder,
                     max_tokens: int, overlap: int, group_of: GroupOf | None,
                     passages: bool = True
                     ) -> tuple[list[Chunk], list[Extraction], list[str], np.ndarray, list, dict]:
    """One partition end to end, with no cross-partition state (a Dask task): chunks,
    extractions, the partition's distinct texts, their vectors, skips, busy seconds."""
    t0 = time.perf_counter()
    skipped: list[tuple[str, str]] = []
    chunks = chunk_partition(part, max_tokens, overlap, skipped)
    t1 = time.perf_counter()
    exts = extract_chunks(extractor, chunks)
    t2 = time.perf_counter()
    texts = partition_texts(chunks, exts, group_of, passages)
    vecs = embed_checked(embedder, texts) if texts else np.zeros((0, embedder.dim), np.float32)
    t3 = time.perf_counter()
    return chunks, exts, texts, vecs, skipped, {"chunk": t1 - t0, "extract": t2 - t1,
                                               "embed": t3 - t2}
