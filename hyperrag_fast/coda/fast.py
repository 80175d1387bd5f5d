"""Query similarities of CODA read only where the retrieval reads them (``sims="lazy"``,
docs/architecture.md §7, "CODA query cost").

The published retrieval (coda/retrieve.py) scores the query against every entity and
relation (40k x 384 and 31.5k distinct x 384 floats on 2Wiki: two memory-bound scans
per query) and standardises them over all items. Here: the entries are the exact ordered
top-k of a scan of int8 codes whose error bound selects the rows to rescore in float32
(kernels/dense.py ``code_topk``: a quarter of the bytes, no score vector); every
other similarity is computed for the items that are read (the entries' arcs, the
associated and kept items); the z-score's mean and standard deviation over all items
come from the first two moments of the rows, ``mean = mu . q``,
``E[s^2] = q^T M q`` (computed once per graph, in float64). Same figures up to float
rounding; ties at the k-th entry may fall to another id than NumPy's argpartition.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from ..engine import csr_positions, csr_rows
from ..kernels.coda_facts import best_sentences, dot_gather_ahead, sentence_bounds
from ..kernels.coda_query import first_seen
from ..kernels.dense import code_l1, dot_rows, icode_topk, quantize_rows

MOMENT_BLOCK = 4096  # rows per float64 block of the moment sums (bounded scratch)


def moments(rows: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(mu, M): the (weighted) mean of the rows and of their outer products, float64."""
    n, d = rows.shape
    w = np.ones(n) if weights is None else np.asarray(weights, np.float64)
    mu, M = np.zeros(d), np.zeros((d, d))
    for b in range(0, n, MOMENT_BLOCK):
        x = np.asarray(rows[b:b + MOMENT_BLOCK], np.float64)
        wb = w[b:b + MOMENT_BLOCK]
        mu += wb @ x
        M += (x * wb[:, None]).T @ x
    tot = float(w.sum())
    return (mu / tot, M / tot) if tot > 0 else (mu, M)


def chunk_sims(chunk_vec: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``chunk_vec @ q`` by the compiled float32 dots (no BLAS call on the query path)."""
    V = np.ascontiguousarray(chunk_vec, np.float32)
    out = np.empty(V.shape[0], np.float32)
    dot_rows(V, np.ascontiguousarray(q, np.float32), out)
    return out


def gather_sims(V: np.ndarray, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``V[rows] @ q`` (float64) by the compiled float32 dots over those rows only
    (kernels/dense.py ``dot_gather``'s floats, rows fetched ahead: kernels/coda_facts.py)."""
    out = np.empty(rows.shape[0], np.float32)
    dot_gather_ahead(np.ascontiguousarray(V, np.float32), np.asarray(rows, np.int64),
                     np.ascontiguousarray(q, np.float32), out)
    return out.astype(np.float64)


class Rows(threading.local):
    """Per-thread zeroed rows of a retriever's queries (kernels/coda_query.py leaves them
    zeroed): entity, relation and chunk marks (uint8), chunk weights and the entity prior
    (float64). Made on a thread's first query."""

    def __init__(self, n_ent: int, n_rel: int, n_chunks: int) -> None:
        self.ent, self.rel = np.zeros(n_ent, np.uint8), np.zeros(n_rel, np.uint8)
        self.chunk, self.chunk_w = np.zeros(n_chunks, np.uint8), np.zeros(n_chunks)
        self.prior = np.zeros(n_ent)


def first_paths(parts, mark) -> tuple[np.ndarray, np.ndarray]:
    """The ids of ``parts`` (pairs (ids, path code)) in order of first occurrence with the
    path code of that occurrence (a dict's ``setdefault`` over the parts in order)."""
    vals = np.concatenate([np.asarray(a, np.int64) for a, _ in parts])
    code = np.concatenate([np.full(len(a), c, np.int8) for a, c in parts])
    pos = first_seen(vals, mark)
    return vals[pos], code[pos]


def prior_at(row: np.ndarray, ids: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """``p[ids]`` of ``p = zeros; p[ids] = vals; p /= p.sum()`` (the same floats: the sum
    runs over the same zeroed row), through the zeroed ``row``, left zeroed."""
    row[ids] = vals
    out = row[ids] / row.sum()
    row[ids] = 0.0
    return out


def not_in_sorted(x: np.ndarray, srt: np.ndarray) -> np.ndarray:
    """``~np.isin(x, srt)`` for an ascending ``srt`` (binary search, no sort or table)."""
    if srt.size == 0:
        return np.ones(len(x), bool)
    return srt[np.minimum(np.searchsorted(srt, x), srt.size - 1)] != x


def positions_in(x: np.ndarray, ids: np.ndarray, n0: int) -> np.ndarray:
    """Position of each of ``x`` in the distinct ``ids`` (-1 when absent), ``ids[:n0]``
    ascending (binary search), the short rest compared one by one."""
    at = np.full(x.size, -1, np.int64)
    if n0:
        s = np.minimum(np.searchsorted(ids[:n0], x), n0 - 1)
        at[ids[s] == x] = s[ids[s] == x]
    if ids.size > n0:
        eq = x[:, None] == ids[None, n0:]
        hit = eq.any(axis=1)
        at[hit] = n0 + eq[hit].argmax(axis=1)
    return at


def max_row_norms(V: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """The largest L2 norm (float64, 0 when none) of the rows of ``V`` owned by each of
    ``0..n-1`` (``owner``: each row's owner), in blocks of float64 rows."""
    V = np.asarray(V)
    nrm = np.concatenate([np.linalg.norm(V[b:b + 4096].astype(np.float64), axis=1)
                          for b in range(0, V.shape[0], 4096)] or [np.zeros(0)])
    mx = np.zeros(n)
    np.maximum.at(mx, np.asarray(owner, np.int64), nrm)
    return mx


def best_sentence_sims(V: np.ndarray, ptr: np.ndarray, order: np.ndarray, ids: np.ndarray,
                       q: np.ndarray) -> np.ndarray:
    """max sim(q, s) (float64, -1 when none) over the sentences ``s = order[ptr[c]:ptr[c +
    1]]`` of each chunk ``c`` in ``ids``: the float32 dots of :func:`gather_sims` in one
    compiled pass (kernels/coda_facts.py), reading only those rows."""
    out = np.empty(len(ids))
    best_sentences(np.ascontiguousarray(V, np.float32), ptr, order, np.asarray(ids, np.int64),
                   np.ascontiguousarray(q, np.float32), out)
    return out


class Facts:
    """A retriever's sentence rows for ``fact_weight`` (coda/retrieve.py): chunk -> its
    sentences (``ptr`` / ``order``, CSR); the rows' largest norm per chunk and their int8
    codes are made on first use (a benign race: two threads may both make them)."""

    def __init__(self, sent_vec: np.ndarray, sent_chunk: np.ndarray, n_chunks: int) -> None:
        sc = np.asarray(sent_chunk, np.int64)
        self.V, self.sent_chunk, self.n_chunks = sent_vec, sent_chunk, n_chunks
        self.order = np.argsort(sc, kind="stable")
        self.ptr = np.concatenate([[0], np.cumsum(np.bincount(sc, minlength=n_chunks))]).astype(np.int64)
        self._norm = self._codes = None

    def best(self, q: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """:func:`best_sentence_sims` of the chunks ``ids``."""
        return best_sentence_sims(self.V, self.ptr, self.order, ids, q)

    def upper(self, q: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Upper bounds of :meth:`best`: |q| x the chunk's largest sentence norm (+ the
        float32 dots' rounding), -1 for a chunk without sentences."""
        if self._norm is None:
            self._norm = max_row_norms(self.V, self.sent_chunk, self.n_chunks)
        has = self.ptr[ids + 1] > self.ptr[ids]
        qn = float(np.linalg.norm(np.asarray(q, np.float64)))
        return np.where(has, qn * self._norm[ids] * (1 + 1e-4) + 1e-6, -1.0)

    def bounds(self, q: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Tighter upper bounds of :meth:`best` from the rows' int8 codes
        (kernels/coda_facts.py ``sentence_bounds``: within ~0.03 on 2Wiki, a quarter of
        the bytes read), -1 for a chunk without sentences."""
        if self._codes is None:  # in chunk order: a chunk's sentences are adjacent rows
            self._codes = (*codes(np.ascontiguousarray(np.asarray(self.V)[self.order], np.float32)),
                           np.arange(self.order.size, dtype=np.int64))
        C, sc, l1, seq = self._codes
        out = np.empty(len(ids))
        sentence_bounds(C, sc, l1, self.ptr, seq, np.asarray(ids, np.int64),
                        np.ascontiguousarray(q, np.float32), out)
        return out


class GraphSims:
    """Per-graph state of the lazy similarities (made on first use, then shared)."""

    def __init__(self, g) -> None:
        self.ent = np.ascontiguousarray(g.ent_vec, np.float32)
        self.rep = np.ascontiguousarray(g.rel_vec.rep, np.float32)
        self.of = np.asarray(g.rel_vec.of, np.int64)
        self.n_ent, self.n_rel = self.ent.shape[0], self.of.shape[0]
        self.rel_ord = np.argsort(self.of, kind="stable")  # distinct row -> its relations
        self.rel_ptr = np.concatenate([[0], np.cumsum(np.bincount(self.of, minlength=self.rep.shape[0]))])
        self.ent_codes, self.rep_codes = codes(self.ent), codes(self.rep)
        # FastRP rows' codes (kernels/coda_assoc.py functional_topk_coded)
        self.frp_codes = codes(np.ascontiguousarray(g.frp, np.float32))
        self._spare = threading.local()  # per thread: NaN similarity arrays for reuse
        self.ent_mom = moments(self.ent) if self.n_ent else None
        self.rel_mom = (moments(self.rep, np.bincount(self.of, minlength=self.rep.shape[0]))
                        if self.n_rel else None)

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        """All-NaN entity and relation similarity arrays: this thread's spare pair (handed
        back by :meth:`QuerySims.release`) or a new one, so a query does not allocate
        and fill two corpus-sized arrays (2Wiki: 40k + 199k float64)."""
        pair = getattr(self._spare, "pair", None)
        if pair is None:
            return np.full(self.n_ent, np.nan), np.full(self.n_rel, np.nan)
        self._spare.pair = None
        return pair

    def give(self, pair: tuple[np.ndarray, np.ndarray]) -> None:
        self._spare.pair = pair


def codes(V: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """int8 codes, row scales and the codes' L1 norms of ``V`` (kernels/dense.py
    ``quantize_rows``, ``code_l1``)."""
    C, sc = np.empty(V.shape, np.int8), np.empty(V.shape[0], np.float32)
    quantize_rows(V, C, sc)
    l1 = np.empty(V.shape[0], np.int64)
    code_l1(C, l1)
    return C, sc, l1


_lock = threading.Lock()



def graph_sims(holder) -> GraphSims:
    """``holder._gsims`` (a retriever), made once under a lock."""
    gs = getattr(holder, "_gsims", None)
    if gs is None:
        with _lock:
            gs = getattr(holder, "_gsims", None)
            if gs is None:
                gs = holder._gsims = GraphSims(holder.g)
    return gs


def _stats(mom, q64) -> tuple[float, float]:
    mu, M = mom
    m = float(mu @ q64)
    return m, math.sqrt(max(float(q64 @ M @ q64) - m * m, 0.0))


class QuerySims:
    """One query's similarities: ``ent`` / ``rel`` arrays (float64, NaN where not
    computed), filled by :meth:`fill`; :meth:`top_entities` / :meth:`top_relations`
    exact ordered top-k; :meth:`z` standardised over all items from the moments.
    :meth:`release` (when the query is done) resets the filled entries to NaN and hands
    the arrays back to the graph's spare pair; ``ent`` / ``rel`` are not read after it."""

    def __init__(self, gs: GraphSims, q: np.ndarray) -> None:
        self.gs, self.q = gs, np.ascontiguousarray(q, np.float32)
        self.ent, self.rel = gs.take()
        self._filled: list[tuple[np.ndarray, np.ndarray]] = []
        q64 = self.q.astype(np.float64)
        self.ent_stats = _stats(gs.ent_mom, q64) if gs.ent_mom is not None else (0.0, 0.0)
        self.rel_stats = _stats(gs.rel_mom, q64) if gs.rel_mom is not None else (0.0, 0.0)

    def _topk(self, V, codes, k) -> tuple[np.ndarray, np.ndarray]:
        """Exact ordered top-k of ``V @ q`` from the int8 codes, rescored (kernels/dense.py)."""
        k = min(int(k), V.shape[0])
        ids, s = np.empty(k, np.int64), np.empty(k, np.float32)
        if k > 0:
            icode_topk(codes[0], codes[1], codes[2], V, self.q, k, ids, s)
        return ids, s

    def top_entities(self, k: int) -> np.ndarray:
        ids, _ = self._topk(self.gs.ent, self.gs.ent_codes, k)
        self.fill(ids, None)
        return ids

    def top_relations(self, k: int) -> np.ndarray:
        """The k best relations: their rows lie among the k best distinct rows, each
        expanded to its relations (ordered by similarity, then id)."""
        gs = self.gs
        keys, s = self._topk(gs.rep, gs.rep_codes, k)
        rows, owner = csr_rows(gs.rel_ptr, gs.rel_ord, keys)
        rs = s.astype(np.float64)[owner]
        top = rows[np.lexsort((rows, -rs))[:k]].astype(np.int64)
        self.fill(None, top)
        return top

    def fill(self, ents: np.ndarray | None, rels: np.ndarray | None) -> None:
        """Compute the similarities of the given entity / relation ids (those not yet
        computed)."""
        if ents is not None and len(ents):
            ents = np.asarray(ents, np.int64)
            ents = ents[np.isnan(self.ent[ents])]  # not yet computed (the same dots)
            out = np.empty(ents.size, np.float32)
            dot_gather_ahead(self.gs.ent, ents, self.q, out)
            self.ent[ents] = out
            self._filled.append((self.ent, ents))
        if rels is not None and len(rels):
            rels = np.asarray(rels, np.int64)
            rels = rels[np.isnan(self.rel[rels])]
            out = np.empty(rels.size, np.float32)
            dot_gather_ahead(self.gs.rep, self.gs.of[rels], self.q, out)
            self.rel[rels] = out
            self._filled.append((self.rel, rels))

    def fill_arcs(self, ptr, nbr, rel, entries) -> None:
        """The similarities of every neighbour and relation on the entries' arcs."""
        if entries.size:
            arcs, _ = csr_positions(ptr, entries)
            self.fill(nbr[arcs], rel[arcs])

    @staticmethod
    def _z(sim, ids, stats) -> np.ndarray:
        m, sd = stats
        return (sim[ids] - m) / sd if sd > 0 else np.zeros(len(ids))

    def z(self, E: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """z-scores of entities ``E`` and relations ``R``, position by position."""
        self.fill(E, R)
        return self._z(self.ent, E, self.ent_stats), self._z(self.rel, R, self.rel_stats)

    def release(self) -> None:
        """The filled entries back to NaN, the arrays back to the graph (class docstring)."""
        if self.ent is None:
            return
        for arr, ids in self._filled:
            arr[ids] = np.nan
        self.gs.give((self.ent, self.rel))
        self.ent = self.rel = None
        self._filled = []
