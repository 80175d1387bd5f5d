"""Okapi BM25 over chunk passages with SciPy sparse matrices (the lexical reference row
of the quality table, and the optional lexical term of the STITCH prior, DESIGN §8)."""
from __future__ import annotations

import threading
from typing import Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer

from .kernels.lexical import bm25_topk


class BM25:
    """BM25 (k1, b) with the Lucene idf ln(1 + (N - df + 0.5) / (df + 0.5)).

    The document-term weights are precomputed once (CSC), so a query costs the postings
    of its terms only: ``top_k`` tokenises in Python (sklearn's analyzer) and sums the
    postings in a compiled kernel that releases the GIL; thread-safe.
    """

    def __init__(self, texts: Sequence[str], k1: float = 1.5, b: float = 0.75,
                 stop_words: bool = True) -> None:
        if not 0.0 <= b <= 1.0 or k1 < 0:
            raise ValueError("BM25 needs k1 >= 0 and 0 <= b <= 1")
        self.k1, self.b = k1, b
        self._vec = CountVectorizer(lowercase=True, token_pattern=r"(?u)\b\w+\b",
                                    stop_words=list(ENGLISH_STOP_WORDS) if stop_words else None,
                                    dtype=np.float32)
        tf = self._vec.fit_transform(list(texts)).tocsr().astype(np.float64)
        n_docs = tf.shape[0]
        dl = np.asarray(tf.sum(axis=1)).ravel()
        avgdl = dl.mean() if n_docs else 1.0
        df = np.bincount(tf.indices, minlength=tf.shape[1])
        idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
        rows = np.repeat(np.arange(n_docs), np.diff(tf.indptr))
        norm = k1 * (1.0 - b + b * dl[rows] / max(avgdl, 1e-9))
        data = idf[tf.indices] * tf.data * (k1 + 1.0) / (tf.data + norm)
        self.weights = sp.csr_matrix((data, tf.indices, tf.indptr), shape=tf.shape).tocsc()
        self.weights.sort_indices()
        self.n_docs = n_docs
        self._analyze = self._vec.build_analyzer()
        self._vocab = self._vec.vocabulary_
        self._csc = (self.weights.indptr.astype(np.int64), self.weights.indices.astype(np.int64),
                     self.weights.data.astype(np.float64))
        self._local = threading.local()

    def terms(self, query: str) -> np.ndarray:
        """Ascending column ids of the distinct known terms of ``query``."""
        v = self._vocab
        return np.array(sorted({v[t] for t in self._analyze(query) if t in v}), dtype=np.int64)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document (float64, length n_docs)."""
        terms = self._vec.transform([query]).indices
        if terms.size == 0:
            return np.zeros(self.n_docs)
        return np.asarray(self.weights[:, terms].sum(axis=1)).ravel()

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
