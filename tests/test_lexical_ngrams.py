"""GroupLookup.ngram_keys (the question's name n-grams, kept per thread for the last text)
against its definition, over several calls and texts on one lookup."""
from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.lexical import GroupLookup, normalize_name

WORDS = st.sampled_from(["Ada", "Lovelace", "lord", "BYRON", "F.C.", "Nottingham", "forest", "-", "é"])
TEXT = st.lists(WORDS, max_size=9).map(" ".join)


def _twin(text: str, max_n: int, min_n: int, max_words: int) -> list[str]:
    w = normalize_name(text).split()
    return [" ".join(w[i:i + n]) for n in range(min_n, min(max_n, max_words) + 1)
            for i in range(len(w) - n + 1)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(TEXT, st.integers(0, 8), st.integers(1, 4)), min_size=1, max_size=6),
       st.sampled_from([["ada"], ["ada", "lord byron"], ["a b c d e f g h"]]))
def test_ngram_keys_match_the_definition(calls, keys):
    lk = GroupLookup(SimpleNamespace(group_key=keys))
    for text, max_n, min_n in calls + calls[:1]:
        got = lk.ngram_keys(text, max_n=max_n, min_n=min_n)
        assert got == _twin(text, max_n, min_n, lk.max_words)
        got.append("mutated")  # a caller's list is its own
        assert lk.ngram_keys(text, max_n=max_n, min_n=min_n) == _twin(text, max_n, min_n, lk.max_words)
