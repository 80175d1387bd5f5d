"""Vectors of the raw KG (:mod:`.raw_kg`; CodaRAG §3.1), build side: texts the index
already embedded are looked up, the rest embedded once (docs/architecture.md §7)."""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from ..config import CODA_LAYER_MAJOR, CODA_LAYER_MAJOR_BLOCK, CODA_LAYER_MAJOR_ENV
from ..embed.base import Embedder
from .raw_kg import MAX_PIECES, RawKG, RowTable, _unique_rows, l2_rows_inplace, segment_sum

EMBED_CALL = 8192  # texts per embed call of embed_known


def embed_known(texts: Sequence[str], embedder: Embedder | None,
                known: dict[str, np.ndarray], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(vectors, found mask): texts in ``known`` are looked up, the rest embedded once
    (when an embedder is given; else their rows are zero and the mask False), in calls of
    ``EMBED_CALL`` texts (an ONNX encoder sorts a call by length: short names pad less;
    MiniLM 8,192 names 970/s vs 740/s in calls of 256, same vectors)."""
    embed_missing(texts, embedder, known)
    out = np.zeros((len(texts), dim), np.float32)
    mask = np.zeros(len(texts), bool)
    _fill(out, mask, texts, known)
    return out, mask


def embed_missing(texts: Sequence[str], embedder: Embedder | None,
                  known: dict[str, np.ndarray]) -> list[str]:
    """Add to ``known`` the vectors of the distinct ``texts`` it lacks, embedded as
    :func:`embed_known` embeds them; returns the texts still lacking (no embedder)."""
    todo = [t for t in dict.fromkeys(texts) if t not in known]
    if not todo or embedder is None:
        return todo
    for part, vecs in _embed_calls(embedder, todo):
        known.update(zip(part, np.asarray(vecs, dtype=np.float32)))
    return []


def _fill(out: np.ndarray, mask: np.ndarray, texts: Sequence[str],
          known: dict[str, np.ndarray]) -> None:
    for i, t in enumerate(texts):
        v = known.get(t)
        if v is not None:
            out[i] = v
            mask[i] = True


class KnownRows:
    """:func:`embed_known`'s matrix of texts all in ``known``, made ``block`` rows at a
    time for a writer that streams it to disk (:func:`~hyperrag_fast.prebuilt._save_graph`):
    the whole n x dim matrix is never held (docs/architecture.md §7). ``after_block()``
    runs after each block is handed out (e.g. the index's mapped pages released)."""

    def __init__(self, texts: Sequence[str], known: dict[str, np.ndarray], dim: int,
                 after_block=None, block: int = 4096) -> None:
        self.texts, self.known, self.block, self.after = texts, known, block, after_block
        self.shape, self.dtype = (len(texts), dim), np.dtype(np.float32)

    def blocks(self):
        for b in range(0, self.shape[0], self.block):
            part = self.texts[b:b + self.block]
            out = np.zeros((len(part), self.shape[1]), np.float32)
            _fill(out, np.zeros(len(part), bool), part, self.known)
            yield out
            if self.after is not None:
                self.after()

    def __array__(self, dtype=None, copy=None):
        return np.concatenate(list(self.blocks()) or [np.zeros(self.shape, np.float32)]
                              ).astype(dtype or self.dtype, copy=False)


def _embed_calls(embedder: Embedder, texts: list[str]):
    """(part, vectors) per call of at most ``EMBED_CALL`` texts. An encoder that can run
    with one intra-op thread (``with_threads``, the ONNX encoders) is called from one
    thread per core, each call single-threaded: short texts such as names keep a core
    busier that way (2 cores: MiniLM 1,350 vs 1,000-1,250 names/s, bge-small, whose batch
    is one text, 650-760 vs 310/s); every row is a function of its own text, so the
    vectors are the same (docs/architecture.md §7). A batch-1 encoder runs layer-major,
    threaded or not, when :func:`_layer_major_on` (``embed/layer_major.py``: the same
    vectors)."""
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    threaded = workers > 1 and hasattr(embedder, "with_threads") and len(texts) > 256
    size = min(EMBED_CALL, -(-len(texts) // (4 * workers))) if threaded else EMBED_CALL
    parts = [texts[b:b + size] for b in range(0, len(texts), size)]
    one = embedder.with_threads(1) if threaded else embedder
    run = one.embed
    if _layer_major_on() and getattr(one, "batch_size", None) == 1:
        from ..embed.layer_major import layer_major
        run = layer_major(one, CODA_LAYER_MAJOR_BLOCK).embed  # the same vectors, faster
    if not threaded:
        for part in parts:
            yield part, run(part)
        return
    from concurrent.futures import ThreadPoolExecutor

    from ..mmaps import trim_heap
    try:
        with ThreadPoolExecutor(workers) as pool:
            yield from zip(parts, pool.map(run, parts))
    finally:  # the sessions and the threads' freed buffers go back to the kernel
        del one, run
        trim_heap()


def _layer_major_on() -> bool:
    """``settings.CODA_LAYER_MAJOR``, or ``$HYPERRAG_FAST_LAYER_MAJOR`` ("1" / "0") when set."""
    env = os.environ.get(CODA_LAYER_MAJOR_ENV)
    if env is None:
        return CODA_LAYER_MAJOR
    if env not in ("0", "1"):
        raise ValueError(f"${CODA_LAYER_MAJOR_ENV} must be 0 or 1, got {env!r}")
    return env == "1"


def piece_means(descs: Sequence[Sequence[str]], embedder: Embedder | None,
                known: dict[str, np.ndarray], dim: int) -> RowTable:
    """L2 mean of each item's first ``MAX_PIECES`` description vectors, computed once per
    distinct description tuple (row values as if computed for every item). Each distinct
    piece is looked up (or embedded) once: the pieces of many tuples are the same sentence,
    and the sums read the same rows in the same order (bit-identical)."""
    uniq, of = _unique_rows([tuple(d[:MAX_PIECES]) for d in descs])
    ptr = np.zeros(len(uniq) + 1, np.int64)
    ptr[1:] = np.cumsum([len(t) for t in uniq])
    piece_id: dict[str, int] = {}
    idx = np.fromiter((piece_id.setdefault(x, len(piece_id)) for t in uniq for x in t),
                      np.int64, count=int(ptr[-1]))
    del uniq
    pv, _ = embed_known(list(piece_id), embedder, known, dim)
    del piece_id
    sums = segment_sum(ptr, idx, pv)
    del pv, idx
    return RowTable(l2_rows_inplace(sums), of)


def add_known(out: np.ndarray, texts: Sequence[str], embedder: Embedder | None,
              known: dict[str, np.ndarray]) -> None:
    """``out[i] += vector(texts[i])`` for every text in ``known`` or embedded now (the rest:
    ``+= 0``), with :func:`embed_known`'s vectors, but without holding them all: each
    embed call's rows are added as they come and let go (docs/architecture.md §7)."""
    rows: dict[str, list[int]] = {}
    for i, t in enumerate(texts):
        rows.setdefault(t, []).append(i)
    found = np.zeros(len(texts), bool)
    for t, r in rows.items():
        v = known.get(t)
        if v is not None:
            out[r] += v
            found[r] = True
    todo = [t for t in rows if t not in known]
    if todo and embedder is not None:
        for part, vecs in _embed_calls(embedder, todo):
            vecs = np.asarray(vecs, dtype=np.float32)
            r = [i for t in part for i in rows[t]]
            out[r] += np.repeat(vecs, [len(rows[t]) for t in part], axis=0)
            found[r] = True
    out[~found] += 0.0  # as adding the zero row of a text not found


def raw_vectors(kg: RawKG, embedder: Embedder | None, known: dict[str, np.ndarray],
                dim: int) -> tuple[np.ndarray, RowTable]:
    """Raw entity vectors and relation vectors (a :class:`RowTable`; see the module
    docstring). Pieces already in ``known`` (e.g. the index's sentence vectors) are not
    re-embedded; each distinct entity name is embedded once, its vector added to its
    entity's row in place (no n x dim name matrix)."""
    t = piece_means(kg.ent_desc, embedder, known, dim)
    same = t.of.shape[0] == t.rep.shape[0] and np.array_equal(t.of, np.arange(t.of.shape[0]))
    ent = t.rep if same else t.rep[t.of]  # each row its own: no copy
    del t
    add_known(ent, kg.ent_name, embedder, known)
    return l2_rows_inplace(ent), piece_means(kg.rel_desc, embedder, known, dim)
