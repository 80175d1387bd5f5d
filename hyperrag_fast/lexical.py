"""The question text's side of a query: the name key phi, name-group seeds and BM25.

* :func:`normalize_name`: the name key phi (STITCH-RAG §3.2; docs/architecture.md §2),
  shared with the build side;
* :class:`GroupLookup` / :func:`question_groups`: names in the question -> name groups ->
  seed states (question-entity seeds, docs/architecture.md §5);
* :class:`TitleLookup`: chunk titles the question names (docs/architecture.md §5);
* :class:`BM25`: Okapi BM25 over chunk passages (the ``bm25`` reference row and the
  optional lexical prior term, docs/architecture.md §5).

A leaf module: no query or build code is imported (the BM25 postings are fitted at build
time, ``hyperrag_fast.indexing.lexical``).
"""
from __future__ import annotations

import math
import re
import threading
import unicodedata
from typing import Callable, Sequence

import numpy as np

from .engine import chunk_group_best, idf_postings, recip_rank
from .kernels.lexical import bm25_topk, residual_terms
from .kernels.links import member_of, title_hits

_PUNCT_OR_SPACE = re.compile(r"[\W_]+", re.UNICODE)
_TOKEN = re.compile(r"(?u)\b\w+\b")  # indexing.lexical.TOKEN_PATTERN


def normalize_name(name: str) -> str:
    """Canonical name key: ``"  Google,  Inc. "`` -> ``"google inc"``.

    Unicode NFKC, casefold, every run of punctuation/whitespace becomes one space,
    stripped. Returns ``""`` for a name with no word characters.
    """
    s = unicodedata.normalize("NFKC", name).casefold()
    return _PUNCT_OR_SPACE.sub(" ", s).strip()


class TitleLookup:
    """Chunk titles by name key, read on first use through ``titles`` (a callable giving
    one title per chunk): a query that never asks for them never reads the chunks."""

    def __init__(self, titles: Callable[[], Sequence[str]]) -> None:
        self._titles = titles
        self._first: dict[str, int] | None = None  # key -> its first chunk
        self._more: dict[str, list[int]] = {}  # key -> every chunk, for keys of several
        self._page: np.ndarray | None = None  # chunk -> its title's first chunk (-1: none)
        self._max_words = 0
        self._lock = threading.Lock()

    def _table(self) -> dict[str, int]:
        if self._first is not None:  # built: no lock on the query path
            return self._first
        with self._lock:
            if self._first is None:
                first: dict[str, int] = {}
                page: list[int] = []
                for c, t in enumerate(self._titles()):
                    key = normalize_name(t) if t else ""
                    if not key:
                        page.append(-1)
                        continue
                    if key in first:
                        self._more.setdefault(key, [first[key]]).append(c)
                    else:
                        first[key] = c
                    page.append(first[key])
                self._page = np.asarray(page, np.int64)
                self._keys = {c: k for k, c in first.items()}
                self._max_words = max((k.count(" ") + 1 for k in first), default=0)
                self._first = first
        return self._first

    def page_key(self, c: int) -> str:
        """The name key of chunk ``c``'s title ("" for none)."""
        p = int(self.pages()[c])
        return self._keys[p] if p >= 0 else ""

    def pages(self) -> np.ndarray:
        """Per chunk, the first chunk of its title (its page's id; -1 for a chunk with no
        title): chunks of one page share it."""
        self._table()
        return self._page

    def keys(self):
        """The name keys of the chunk titles (a read-only view: ``key in keys()``)."""
        return self._table().keys()

    def chunks_named_in(self, text: str, min_words: int = 1) -> list[np.ndarray]:
        """The chunks of each title (>= ``min_words`` words) the question ``text`` contains
        whole, as name keys; a title found inside a longer title found in the question is
        dropped ("The Trail of the Lonesome Pine (song)" keeps only the song)."""
        table = self._table()
        words = normalize_name(text).split()
        spans = [(i, i + n) for n in range(max(min_words, 1), min(self._max_words, len(words)) + 1)
                 for i in range(len(words) - n + 1) if " ".join(words[i:i + n]) in table]
        keep = {" ".join(words[i:j]) for i, j in spans
                if not any(a <= i and j <= b and (a, b) != (i, j) for a, b in spans)}
        return [np.asarray(self._more.get(k, [table[k]]), np.int64) for k in sorted(keep)]


class GroupLookup:
    """Name-group id of a normalised name key (exact match), built once per graph.
    ``titles`` (the index's :class:`TitleLookup`) backs :meth:`title_keys`."""

    def __init__(self, graph, titles: TitleLookup | None = None) -> None:
        self.graph = graph
        self.titles = titles
        keys = graph.group_key
        self._id = dict(zip(keys, range(len(keys))))  # C speed; keys are usually distinct
        self._ids: dict[str, list[int]] = {}  # keys that name several groups
        if len(self._id) < len(keys):
            for g, key in enumerate(keys):
                self._ids.setdefault(key, []).append(g)
            self._ids = {k: v for k, v in self._ids.items() if len(v) > 1}
        self.max_words = max(map(str.count, keys, [" "] * len(keys)), default=0) + 1
        self._rows: tuple[_Rows, _Rows] | None = None  # bridge_titles' arrays (by page, by name)
        self._lock = threading.Lock()
        self._local = threading.local()  # ngram_keys' last text

    def title_keys(self):
        """Name keys of the chunk titles (:meth:`TitleLookup.keys`, read on first use)."""
        if self.titles is None:
            raise ValueError("title_words needs the chunk titles: this lookup has none")
        return self.titles.keys()

    def groups_of_keys(self, keys: Sequence[str]) -> list[int]:
        """Ascending distinct group ids of the keys that are name keys."""
        one, several = self._id, self._ids
        if not several:  # the usual case: one group per key
            return sorted({one[k] for k in keys if k in one})
        out: set[int] = set()
        for k in keys:
            if k in several:
                out.update(several[k])
            elif k in one:
                out.add(one[k])
        return sorted(out)

    def ngram_keys(self, text: str, max_n: int = 6, min_n: int = 1) -> list[str]:
        """The word n-grams (``min_n`` <= n <= ``max_n``, at most the longest name key's
        words) of ``text``'s name key, by n then position (a new list). The last text's
        n-grams are kept per thread: one query asks for them several times."""
        memo = self._local
        if getattr(memo, "text", None) != text:
            memo.text, memo.words, memo.by_n, memo.groups = text, normalize_name(text).split(), {}, {}
        words, by_n, out = memo.words, memo.by_n, []
        for n in range(min_n, min(max_n, self.max_words) + 1):
            got = by_n.get(n)
            if got is None:
                got = by_n[n] = [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]
            out += got
        return out

    def text_groups(self, text: str, min_n: int = 1) -> list[int]:
        """``groups_of_keys(ngram_keys(text, min_n=min_n))`` (a new list), kept per thread
        with the text's n-grams."""
        if getattr(self._local, "text", None) != text:
            self.ngram_keys(text, max_n=0)  # a new text: its memo
        got = self._local.groups.get(min_n)
        if got is None:
            got = self._local.groups[min_n] = self.groups_of_keys(self.ngram_keys(text, min_n=min_n))
        return list(got)

    def bridge_titles(self, cq: np.ndarray, top: np.ndarray, qgroups: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
        """``HybridOptions.rank_links``' "bridge_title" and "bridge_title_words" per chunk of
        ``cq`` (docs/architecture.md §5): for the j-th chunk t of ``top`` (best first), its
        bridge names B_t (its name groups, less the question's ``qgroups`` and t's own title's
        group); a chunk of another page than t scores 1 / (1 + j) (the best j) when its
        title's group is in B_t ("bridge_title"), or, for "bridge_title_words", when its
        title's name key and a name of B_t contain one another as whole words (a page
        titled "Nottingham Forest F.C." for the name "Nottingham Forest").

        Array steps over C_q's distinct pages and t's names (no Python loop over either):
        pages' title groups and n-gram groups, and names' n-gram pages, are read from arrays
        filled on first use (:class:`_Rows`)."""
        n = cq.shape[0]
        exact, words = np.zeros(n), np.zeros(n)
        if self.titles is None or not n:
            return exact, words
        g, pages = self.graph, self.titles.pages()
        pg = pages[cq]
        valid = pg >= 0
        up, inv = _unique_inverse(pg[valid])
        if self._rows is None:
            with self._lock:
                if self._rows is None:
                    self._rows = (_Rows(pages.shape[0], self._page_row),
                                  _Rows(len(g.group_key), self._name_row))
        by_page, by_name = self._rows
        gid, gram_groups, owner = by_page.get(up)
        best_e, best_w = np.zeros(up.shape[0]), np.zeros(up.shape[0])
        drop = np.asarray(qgroups, np.int64)
        for j, t in enumerate(np.asarray(top, np.int64).tolist()):
            own = np.asarray(self.groups_of_keys([self.titles.page_key(t)]), np.int64)
            tg = g.node_group[g.chunk_nodes[g.chunk_ptr[t]:g.chunk_ptr[t + 1]]].astype(np.int64)
            tg = tg[~(_member(tg, drop) | _member(tg, own))]  # B_t
            if not tg.size:
                continue
            # title group in B_t; or a name of B_t inside the title, or the title inside a name
            title_hits(gid, gram_groups, owner, up, tg, by_name.get(tg)[1], int(pages[t]), 1.0 / (1.0 + j),
                       best_e, best_w)
        exact[valid], words[valid] = best_e[inv], best_w[inv]
        return exact, words

    def _page_row(self, p: int) -> tuple[int, list[int]]:
        """Page ``p``'s title group (the first of its name key's, -1: none) and the groups
        of its name key's word n-grams."""
        k = self.titles.page_key(p)
        gk = self.groups_of_keys([k])
        return (gk[0] if gk else -1), self.groups_of_keys(sorted(_grams(k)))

    def _name_row(self, x: int) -> tuple[int, list[int]]:
        """The pages titled by a word n-gram of group ``x``'s name key."""
        first = self.titles._table()
        return 0, sorted({first[s] for s in _grams(self.graph.group_key[x]) if s in first})

    def seed_nodes(self, groups: Sequence[int], max_chunks: float) -> np.ndarray:
        """All states of the given groups, skipping groups in more than ``max_chunks`` chunks."""
        g = self.graph
        parts = [g.group_nodes[g.group_ptr[x]:g.group_ptr[x + 1]] for x in groups
                 if g.group_chunks[x] <= max_chunks]
        return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, np.int64)


def _unique_inverse(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values of the 1-D int array ``a`` and each entry's position
    among them (``np.unique(a, return_inverse=True)`` without importing ``numpy.ma``)."""
    order = np.argsort(a, kind="stable")
    s = a[order]
    new = np.ones(s.shape[0], bool)
    new[1:] = s[1:] != s[:-1]
    inv = np.empty(a.shape[0], np.int64)
    inv[order] = np.cumsum(new) - 1
    return s[new], inv


def _member(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.isin(a, b)`` for a short ``b`` (one comparison per pair, no sort; compiled)."""
    return member_of(np.ascontiguousarray(a, np.int64), np.ascontiguousarray(b, np.int64))


def top_links(eng, bm25, text: str, q: np.ndarray, cq: np.ndarray, t0: int, names, bridge) -> dict:
    """``config.TOP_LINKS`` columns of ``names`` read off the first round's top chunk t0 (its own
    row 0; docs/architecture.md §5, "Ranker features inside C_q"): residual_cover
    (``lexical.BM25.residual_cover``), hop_rank = 1 / (1 + rank) in C_q of sim(c, normalize(q +
    v(t0))), top_bridge = the largest weight of t0's bridge groups (``bridge()`` = ``methods.stitch.bridge_groups``)
    among the chunk's name groups."""
    out, own, g = {}, cq == t0, eng.graph
    if "residual_cover" in names and bm25 is not None:
        out["residual_cover"] = bm25.residual_cover(text, cq, t0)
    if "hop_rank" in names:
        hv = np.asarray(q, np.float64) + eng.chunk_vec[t0].astype(np.float64)
        hs = eng.chunk_vec[cq].astype(np.float64) @ (hv / max(float(np.sqrt(hv @ hv)), 1e-12))
        hs[own] = -np.inf
        out["hop_rank"] = np.where(own, 0.0, recip_rank(hs))
    if "top_bridge" in names:
        out["top_bridge"] = np.where(own, 0.0, chunk_group_best(g, cq, *bridge()))
    return out


class _Rows:
    """A CSR of int rows over ids 0..n-1, each row (and one int per id, ``head``) made by
    ``make(id)`` on first use and kept in arrays sized by ``n``, not Python objects
    (``GroupLookup.bridge_titles``' pages and names). Thread-safe."""

    def __init__(self, n: int, make) -> None:
        self.make = make
        self.head = np.full(n, -2, np.int64)  # -2: not made yet
        self.start = np.zeros(n, np.int64)
        self.count = np.zeros(n, np.int64)
        self.values = np.empty(max(n, 16), np.int64)
        self.used = 0
        self._lock = threading.Lock()

    def get(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(``head`` per id, the rows of ``ids`` concatenated, the index into ``ids`` each
        value came from)."""
        new = ids[self.head[ids] == -2]
        if new.size:
            self._fill(new.tolist())
        start, count = self.start[ids], self.count[ids]
        owner = np.repeat(np.arange(ids.shape[0]), count)
        pos = np.arange(owner.shape[0]) + (start - (np.cumsum(count) - count))[owner]
        return self.head[ids], self.values[pos], owner

    def _fill(self, ids: list[int]) -> None:
        rows = [(i, *self.make(i)) for i in dict.fromkeys(ids)]
        with self._lock:
            for i, head, row in rows:
                if self.head[i] != -2:  # made by another thread meanwhile
                    continue
                end = self.used + len(row)
                if end > self.values.shape[0]:
                    grown = np.empty(max(end, 2 * self.values.shape[0]), np.int64)
                    grown[:self.used] = self.values[:self.used]
                    self.values = grown
                self.values[self.used:end] = row
                self.start[i], self.count[i], self.used = self.used, len(row), end
                self.head[i] = head  # last: the id reads as made only now


def _grams(key: str) -> set[str]:
    """The word n-grams of a name key (every contiguous run of its words)."""
    w = key.split()
    return {" ".join(w[i:j]) for i in range(len(w)) for j in range(i + 1, len(w) + 1)}


def question_groups(text: str, lookup: GroupLookup, mode: str, ngram_min_words: int = 1,
                    title_words: bool = False) -> list[int]:
    """Group ids named in the question (see :class:`HybridOptions`): its n-grams of at
    least ``ngram_min_words`` words that are name keys, and with ``title_words`` a shorter
    one that is a chunk title's name."""
    if mode == "none":
        return []
    extra: list[int] = []  # groups matched by the rule for short n-grams
    if title_words and ngram_min_words > 1:
        titles = lookup.title_keys()
        short = lookup.ngram_keys(text, max_n=ngram_min_words - 1)
        extra += lookup.groups_of_keys([k for k in short if k in titles])
    return sorted(set(lookup.text_groups(text, ngram_min_words)) | set(extra))


class BM25:
    """BM25 over chunk passages from its saved postings (``indexing.lexical.BM25Arrays``).

    A query costs the postings of its terms only: ``top_k`` tokenises in Python (lower-
    cased ``\\w+`` runs, looked up in the term list; stop words are not terms) and sums
    the postings in a compiled kernel that releases the GIL; thread-safe.
    """

    def __init__(self, arrays) -> None:
        self.k1, self.b, self.n_docs = arrays.k1, arrays.b, int(arrays.n_docs)
        self._vocab = {t: j for j, t in enumerate(arrays.terms)}
        self._csc = (np.asarray(arrays.indptr, np.int64), np.asarray(arrays.indices, np.int64),
                     np.asarray(arrays.data, np.float64))
        self._local = threading.local()

    def terms(self, query: str) -> np.ndarray:
        """Ascending column ids of the distinct known terms of ``query``. The last query's
        are kept per thread (one question asks up to four times): the same array, not to
        be modified."""
        memo = self._local
        if getattr(memo, "query", None) != query:
            v = self._vocab
            memo.terms = np.array(sorted({v[t] for t in _TOKEN.findall(query.lower()) if t in v}),
                                  dtype=np.int64)
            memo.query = query
        return memo.terms

    def postings(self, query: str) -> list[np.ndarray]:
        """Per distinct known term of ``query`` (:meth:`terms` order), the documents
        holding it (ascending ids)."""
        ptr, idx, _ = self._csc
        return [idx[ptr[t]:ptr[t + 1]] for t in self.terms(query)]

    def term_postings(self, query: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`postings` without a copy: (indptr, indices, :meth:`terms`), term t's
        documents being ``indices[indptr[t]:indptr[t + 1]]``."""
        return self._csc[0], self._csc[1], self.terms(query)

    def residual_cover(self, query: str, cq: np.ndarray, t0: int) -> np.ndarray:
        """Per document of ``cq``: the idf-weighted share (ln(1 + N / df)) of the distinct
        known terms of ``query`` it holds and document ``t0`` lacks (the ``rank_links``
        column "residual_cover", docs/architecture.md §5; ``t0`` itself 0)."""
        ptr, idx, terms, w = idf_postings(self, query, math.log1p)
        out = np.zeros(cq.shape[0])
        tot = residual_terms(ptr, idx, terms, w, np.append(np.asarray(cq, np.int64), t0), 1, out)
        return out / tot if tot > 0 else out

    def scores(self, query: str, ids: np.ndarray | None = None) -> np.ndarray:
        """BM25 score (float64) of every document, or of the documents ``ids`` only (no
        corpus-sized array; the same sums, added in the same term order)."""
        ptr, idx, data = self._csc
        out = np.zeros(self.n_docs if ids is None else len(ids))
        for t in self.terms(query):
            col, d = idx[ptr[t]:ptr[t + 1]], data[ptr[t]:ptr[t + 1]]
            if ids is None:
                np.add.at(out, col, d)
            elif col.size:  # a posting list is ascending: each id's position in it, if there
                at = np.minimum(np.searchsorted(col, ids), col.size - 1)
                hit = col[at] == ids
                out[hit] += d[at[hit]]
        return out

    def top_k(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores) of the k best documents with score > 0, best first, ties by id."""
        if isinstance(k, bool) or int(k) != k:
            raise ValueError(f"k must be an integer, got {k!r}")
        k = max(int(k), 0)
        sc = getattr(self._local, "scratch", None)
        if sc is None:
            sc = self._local.scratch = (np.zeros(self.n_docs), np.zeros(self.n_docs, np.uint8))
        ids, s = np.empty(k, np.int64), np.empty(k)
        n = bm25_topk(*self._csc, self.terms(query), k, sc[0], sc[1], ids, s) if k else 0
        return ids[:n], s[:n]
