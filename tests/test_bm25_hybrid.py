"""BM25 against a literal twin; question-entity seeding."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.indexing.lexical import fit_bm25
from hyperrag_fast.lexical import BM25
from hyperrag_fast.config import HybridOptions
from hyperrag_fast.lexical import GroupLookup, TitleLookup, question_groups
from hyperrag_fast.indexing.hypergraph import build_hypergraph
from hyperrag_fast.records import Extraction, Segment

WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta"]


def _bm25_twin(docs, query, k1=1.5, b=0.75):
    toks = [d.split() for d in docs]
    N = len(docs)
    avgdl = sum(map(len, toks)) / N
    out = []
    for t in toks:
        s = 0.0
        for term in set(query.split()):
            df = sum(term in x for x in toks)
            if df == 0 or term not in t:
                continue
            idf = math.log(1 + (N - df + 0.5) / (df + 0.5))
            tf = t.count(term)
            s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(t) / avgdl))
        out.append(s)
    return np.array(out)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), min_size=1, max_size=6),
       st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
       st.floats(0.0, 2.0), st.floats(0.0, 1.0))
def test_bm25_matches_twin(docs, query, k1, b):
    docs = [" ".join(d) for d in docs]
    q = " ".join(query)
    bm = BM25(fit_bm25(docs, k1=k1, b=b, stop_words=False))
    got = bm.scores(q)
    np.testing.assert_allclose(got, _bm25_twin(docs, q, k1, b), atol=1e-9)
    for k in (1, 3, 10):  # the compiled top-k: the SciPy scores' order, bit for bit
        ids, s = bm.top_k(q, k)
        nz = np.flatnonzero(got > 0)
        want = nz[np.lexsort((nz, -got[nz]))][:k]
        np.testing.assert_array_equal(ids, want)
        np.testing.assert_array_equal(s, got[want])


def test_bm25_top_k_order_and_empty_query():
    bm = BM25(fit_bm25(["cat cat", "cat", "dog"], stop_words=False))
    ids, s = bm.top_k("cat", 5)
    assert list(ids) == [0, 1] and s[0] > s[1]
    assert bm.top_k("unicorn", 3)[0].size == 0


def test_question_seeds_by_ngram():
    ex = [Extraction((Segment("t", (("United States", "u"), ("Alice Smith", "a"))),)),
          Extraction((Segment("t", (("Alice Smith", "b"),)),)),
          Extraction((Segment("t", (("Bob", "c"),)),))]
    g = build_hypergraph(ex)
    lk = GroupLookup(g)
    groups = question_groups("Where was alice smith born, in the United-States?", lk, "ngram")
    assert sorted(g.group_key[x] for x in groups) == ["alice smith", "united states"]
    alice = g.group_key.index("alice smith")
    assert sorted(lk.seed_nodes([alice], math.inf).tolist()) == [1, 2]
    assert lk.seed_nodes([alice], 1).size == 0  # in 2 chunks: over the cap
    assert question_groups("x", lk, "none") == []


def test_hybrid_options_validation():
    import pytest

    with pytest.raises(ValueError, match="seeds"):
        HybridOptions(seeds="magic")
    with pytest.raises(ValueError):
        HybridOptions(bm25_weight=-1)


def test_question_seeds_min_words():
    ex = [Extraction((Segment("t", (("West of Shanghai", "a"), ("Shanghai", "b"))),)),
          Extraction((Segment("t", (("Boris Karloff", "c"),)),))]
    lk = GroupLookup(build_hypergraph(ex))
    keys = lambda groups: sorted(lk.graph.group_key[x] for x in groups)  # noqa: E731
    q = "Who directed West Of Shanghai?"
    assert keys(question_groups(q, lk, "ngram")) == ["shanghai", "west of shanghai"]
    assert keys(question_groups(q, lk, "ngram", ngram_min_words=2)) == ["west of shanghai"]
    assert question_groups(q, lk, "none") == []
    import pytest

    with pytest.raises(ValueError, match="seeds"):  # spaCy NER seeds were removed (issue 22)
        HybridOptions(seeds="ner")
    with pytest.raises(ValueError, match="ngram_min_words"):
        HybridOptions(ngram_min_words=0)


def test_option_checks():
    import pytest

    with pytest.raises(ValueError, match="hop_weight"):
        HybridOptions(hop_weight="magic")
    with pytest.raises(ValueError, match="hop"):
        HybridOptions(hop_chunks=-1)


def test_title_words_match_one_word_titles_only():
    """With ngram_min_words 2, a one-word n-gram seeds its group only when ``title_words``
    is on and the word is a chunk title's name; the titles are read on first use."""
    import pytest

    ex = [Extraction((Segment("t", (("Hamlet", "a"), ("Denmark", "b"))),)),
          Extraction((Segment("t", (("Denmark", "c"), ("Who", "d"))),))]
    reads = []
    lk = GroupLookup(build_hypergraph(ex), TitleLookup(lambda: reads.append(1) or ["Hamlet", "", "Elsinore"]))
    keys = lambda groups: sorted(lk.graph.group_key[x] for x in groups)  # noqa: E731
    q = "Who wrote Hamlet, set in Denmark?"
    assert keys(question_groups(q, lk, "ngram", ngram_min_words=2)) == [] and not reads
    assert keys(question_groups(q, lk, "ngram", ngram_min_words=2, title_words=True)) == ["hamlet"]
    question_groups(q, lk, "ngram", ngram_min_words=2, title_words=True)
    assert reads == [1]
    assert keys(question_groups(q, lk, "ngram", title_words=True)) == ["denmark", "hamlet", "who"]
    with pytest.raises(ValueError, match="titles"):
        question_groups(q, GroupLookup(lk.graph), "ngram", ngram_min_words=2, title_words=True)
