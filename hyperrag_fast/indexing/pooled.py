"""Pooled chunk vectors, ``BuildOptions.chunk_vectors="pooled"`` (docs/architecture.md §10).

A chunk's vector is the L2-normalised mean of the L2-normalised vectors of its topic
sentences (its hyperedge texts, embedded anyway; with the offline extractor every
sentence of the chunk) and of its title, instead of the embedding of the passage, the
longest text of a build. A chunk with no hyperedge (its extraction failed) falls back to
the passage's own embedding. Pooled vectors live in the vector table under the key
:func:`pooled_key` (a passage text prefixed by a NUL marker, never an embedded text), so
``add`` and ``delete`` find the stored ones as they find any other text.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..chunking import chunk_passage
from ..embed.base import Embedder
from ..records import Chunk
from .clock import StageClock
from .partition import embed_checked
from .vectors import TextVectors

POOL_MARK = "\x00pooled\x00"
BLOCK = 4096  # chunks (or texts to embed) per block


def pooled_key(chunk: Chunk) -> str:
    """The vector-table key of a chunk's pooled vector."""
    return POOL_MARK + chunk_passage(chunk)


def chunk_keys(chunks: Sequence[Chunk], mode: str) -> list[str]:
    """The table keys of the chunks' vectors under representation ``mode``."""
    return [pooled_key(c) if mode == "pooled" else chunk_passage(c) for c in chunks]


def pool_rows(vecs: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """Row i = normalise(mean of normalise(vecs[ptr[i]:ptr[i+1]])); every range non-empty."""
    v = np.asarray(vecs, np.float64)
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    m = np.add.reduceat(v, ptr[:-1], axis=0) / np.diff(ptr)[:, None]
    m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    return m.astype(np.float32)


def _embed_new(table: TextVectors, texts: list[str], embedder: Embedder | None,
               clock: StageClock) -> np.ndarray:
    codes, new = table.reserve(texts)
    for b in range(0, len(new), BLOCK):
        if embedder is None:
            raise ValueError(f"{len(new)} new texts must be embedded: pass an embedder")
        with clock.stage("embed"):
            vecs = embed_checked(embedder, [texts[i] for i in new[b:b + BLOCK]])
        table.append(vecs)
        clock.count("texts_embedded", vecs.shape[0])
    return codes


def pooled_chunk_codes(table: TextVectors, chunks: Sequence[Chunk], edge_chunk: np.ndarray,
                       edge_codes: np.ndarray, first: int, embedder: Embedder | None,
                       clock: StageClock) -> np.ndarray:
    """Table codes of the pooled vectors of ``chunks[first:]``; those the table does not
    know are computed (titles and fallback passages embedded first) and appended.
    ``edge_chunk[e]`` is hyperedge e's chunk index and ``edge_codes[e]`` its text's code."""
    n = len(chunks)
    order = np.argsort(np.asarray(edge_chunk), kind="stable")
    ptr = np.searchsorted(np.asarray(edge_chunk)[order], np.arange(n + 1))
    todo = [i for i in range(first, n) if not table.has(pooled_key(chunks[i]))]
    extra: dict[int, int] = {}  # chunk -> position in ``texts`` (title, or passage fallback)
    texts: list[str] = []
    for i in todo:
        c = chunks[i]
        if ptr[i + 1] == ptr[i]:
            extra[i] = len(texts)
            texts.append(chunk_passage(c))
        elif c.title:
            extra[i] = len(texts)
            texts.append(c.title)
    extra_codes = _embed_new(table, texts, embedder, clock)
    with clock.stage("assemble"):
        codes, new = table.reserve([pooled_key(c) for c in chunks[first:]])
    for b in range(0, len(new), BLOCK):
        with clock.stage("assemble"):
            rows, cut = [], [0]
            for j in new[b:b + BLOCK]:
                i = first + j
                got = list(edge_codes[order[ptr[i]:ptr[i + 1]]])
                if i in extra:  # the title, or the passage itself when there is no sentence
                    got.append(extra_codes[extra[i]])
                rows.extend(got)
                cut.append(cut[-1] + len(got))
            table.append(pool_rows(table.gather(np.asarray(rows, np.int64)), np.asarray(cut)))
    return codes
