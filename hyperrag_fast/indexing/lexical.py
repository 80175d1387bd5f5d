"""BM25 postings, computed once at build time and saved with the index (docs/architecture.md
§5), so a query process neither refits them nor imports scikit-learn."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..reader import BM25Arrays

TOKEN_PATTERN = r"(?u)\b\w+\b"


def fit_bm25(texts: Sequence[str], k1: float = 1.5, b: float = 0.75,
             stop_words: bool = True) -> BM25Arrays:
    """Okapi BM25 with the Lucene idf ln(1 + (N - df + 0.5) / (df + 0.5)); tokens are
    lower-cased ``\\w+`` runs, English stop words dropped (scikit-learn's list)."""
    if not 0.0 <= b <= 1.0 or k1 < 0:
        raise ValueError("BM25 needs k1 >= 0 and 0 <= b <= 1")
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer

    vec = CountVectorizer(lowercase=True, token_pattern=TOKEN_PATTERN,
                          stop_words=list(ENGLISH_STOP_WORDS) if stop_words else None,
                          dtype=np.float32)
    texts = list(texts)
    try:
        tf = vec.fit_transform(texts).tocsr().astype(np.float64)
    except ValueError:  # no term at all (empty vocabulary)
        return BM25Arrays(np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0),
                          [], len(texts), k1, b)
    n_docs = tf.shape[0]
    dl = np.asarray(tf.sum(axis=1)).ravel()
    avgdl = dl.mean() if n_docs else 1.0
    df = np.bincount(tf.indices, minlength=tf.shape[1])
    idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
    rows = np.repeat(np.arange(n_docs), np.diff(tf.indptr))
    norm = k1 * (1.0 - b + b * dl[rows] / max(avgdl, 1e-9))
    data = idf[tf.indices] * tf.data * (k1 + 1.0) / (tf.data + norm)
    w = sp.csr_matrix((data, tf.indices, tf.indptr), shape=tf.shape).tocsc()
    w.sort_indices()
    terms = [None] * len(vec.vocabulary_)
    for t, j in vec.vocabulary_.items():
        terms[j] = t
    return BM25Arrays(w.indptr.astype(np.int64), w.indices.astype(np.int64),
                      w.data.astype(np.float64), terms, n_docs, k1, b)
