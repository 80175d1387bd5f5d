"""Question-term windows of CODA's candidate chunks (``CodaOptions.window_weight``;
docs/architecture.md §7, session 21): a chunk's best run of ``WIDTH`` consecutive sentences,
valued by the idf share of the question's BM25 terms it holds (idf as coda/select.py
``_held``: ln(1 + (N - df + 0.5) / (df + 0.5)), shares summing to 1 over the question's
terms). A passage whose question terms sit together in a few sentences is more likely to
state how they relate than one that names them pages apart. Each candidate's sentence term
sets are made once (on first use, from its passage text) and kept per retriever."""
from __future__ import annotations

import re

import numpy as np

WIDTH = 3
#: sentence ends (after . ! ? ; : and closing quotes or brackets) and line breaks
SENT = re.compile(r"(?<=[.!?;:])[\"'\u201d\u2019)\]]*\s+|\n+")
TOKEN = re.compile(r"(?u)\b\w+\b")  # lexical._TOKEN: BM25's tokens


class Windows:
    """Per chunk, its sentences' BM25 term ids (``text_of(chunk) -> passage``, ``vocab``:
    term -> id), made on first use (a benign race: two threads may both make a row)."""

    def __init__(self, text_of, vocab: dict[str, int], width: int = WIDTH) -> None:
        self.text_of, self.vocab, self.width = text_of, vocab, width
        self._rows: dict[int, tuple[frozenset, ...]] = {}

    def sentence_terms(self, c: int) -> tuple[frozenset, ...]:
        row = self._rows.get(c)
        if row is None:
            v = self.vocab
            row = tuple(frozenset(v[t] for t in TOKEN.findall(s.lower()) if t in v)
                        for s in SENT.split(self.text_of(c)) if s.strip())
            self._rows[c] = row
        return row

    def best(self, ids: np.ndarray, terms: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Per chunk of ``ids``: the largest summed ``w`` of the question ``terms`` one
        window of ``width`` consecutive sentences holds (a chunk with fewer sentences is
        one window; none: 0)."""
        wt = dict(zip(np.asarray(terms).tolist(), np.asarray(w, np.float64).tolist()))
        keys = wt.keys()
        out = np.zeros(len(ids))
        for j, c in enumerate(np.asarray(ids).tolist()):
            sw = [s & keys for s in self.sentence_terms(int(c))]
            best = 0.0
            for i in range(max(1, len(sw) - self.width + 1)):
                got = set().union(*sw[i:i + self.width])
                if got:
                    best = max(best, sum(wt[t] for t in got))
            out[j] = best
        return out


def question_weights(bm25, text: str) -> tuple[np.ndarray, np.ndarray]:
    """(the question's BM25 term ids, their idf shares)."""
    terms = np.asarray(bm25.terms(text), np.int64)
    df = np.array([p.size for p in bm25.postings(text)], np.float64)
    w = np.log1p((bm25.n_docs - df + 0.5) / (df + 0.5))
    return terms, (w / w.sum() if w.sum() > 0 else w)


def window_scores(retriever, bm25, text: str, ids: np.ndarray) -> np.ndarray:
    """:meth:`Windows.best` of the candidates ``ids`` for the question ``text`` (the
    retriever's :class:`Windows`, made on first use from its ``chunk_text``)."""
    win = getattr(retriever, "_windows", None)
    if win is None:
        win = retriever._windows = Windows(retriever.chunk_text, bm25._vocab)
    terms, w = question_weights(bm25, text)
    return win.best(ids, terms, w) if terms.size else np.zeros(len(ids))
