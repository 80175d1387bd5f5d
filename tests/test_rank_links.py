"""The ranker's link columns (HybridOptions.rank_links, issue 21): GroupLookup.bridge_titles
against a literal twin, on a real index the query path's columns equal the detail's, and
the presets' weights fit their columns."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast import config
from hyperrag_fast.config import LINK_FEATURES, PRESETS, HybridOptions
from hyperrag_fast.engine import split_names
from hyperrag_fast.lexical import GroupLookup, TitleLookup
from hyperrag_fast.methods.stitch import FEATURES, fused_top

KEYS = ["nottingham forest", "nottingham forest f c", "forest", "ada", "lord byron", "byron"]


def _twin(titles, chunk_groups, keys, cq, top, qgroups):
    """One loop per definition: chunk c of another page than top[j] scores 1 / (1 + j)
    when its title's (first) group is one of top[j]'s names less the question's and those of
    top[j]'s own title ("exact"), or when " title " and " name " contain one another ("words")."""
    tl = TitleLookup(lambda: titles)
    key_of = {p: tl.page_key(p) for p in range(len(titles))}
    gid = {k: g for g, k in reversed(list(enumerate(keys)))}
    exact, words = [0.0] * len(cq), [0.0] * len(cq)
    for j, t in enumerate(top):
        own = {g for g, k in enumerate(keys) if k == key_of[t]}  # every group of t's title
        names = set(chunk_groups[t]) - set(qgroups) - own
        for i, c in enumerate(cq):
            tk = key_of[c]
            if not tk or tl.pages()[c] == tl.pages()[t]:
                continue
            if tk in gid and gid[tk] in names:
                exact[i] = max(exact[i], 1 / (1 + j))
            if any(f" {keys[x]} " in f" {tk} " or f" {tk} " in f" {keys[x]} " for x in names):
                words[i] = max(words[i], 1 / (1 + j))
    return exact, words


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["Nottingham Forest F.C.", "Nottingham Forest", "Ada",
                                           "Lord Byron", "Forest", "", "Other"]),
                          st.lists(st.integers(0, len(KEYS)), max_size=4)), min_size=1, max_size=8),
       st.lists(st.integers(0, 7), max_size=3), st.lists(st.integers(0, len(KEYS)), max_size=2),
       st.booleans(), st.lists(st.lists(st.integers(0, 7), min_size=1, max_size=8), max_size=2))
def test_bridge_titles_match_twin(chunks, top, qgroups, twice, subsets):
    """Against the twin, with or without a name key of two groups (``KEYS`` + "forest"),
    over several calls on one lookup (its page arrays filled a few pages at a time)."""
    keys = KEYS + (["forest"] if twice else ["other name"])
    titles = [t for t, _ in chunks]
    groups = [gs for _, gs in chunks]
    n = len(chunks)
    ptr = np.cumsum([0] + [len(gs) for gs in groups])
    graph = SimpleNamespace(group_key=keys, chunk_ptr=ptr, chunk_nodes=np.arange(ptr[-1]),
                            node_group=np.asarray([x for gs in groups for x in gs], np.int64))
    lk = GroupLookup(graph, TitleLookup(lambda: titles))
    top = list(dict.fromkeys(t % n for t in top))
    for sub in subsets + [list(range(n))]:
        cq = np.asarray([c % n for c in sub], np.int64)
        exact, words = lk.bridge_titles(cq, np.asarray(top, np.int64), np.asarray(qgroups, np.int64))
        want_e, want_w = _twin(titles, groups, keys, cq.tolist(), top, qgroups)
        assert exact.tolist() == pytest.approx(want_e) and words.tolist() == pytest.approx(want_w)


def test_bridge_titles_literal():
    """The page named in the hop's passage scores, with or without a suffix ("F.C."); the
    hop's own page, the question's names and a chunk with no title do not."""
    titles = ["Craig Westcarr", "Nottingham Forest F.C.", "Nottingham Forest F.C.", "Ada", ""]
    groups = [[0, 3], [1], [1, 2], [3], [0]]
    ptr = np.cumsum([0] + [len(g) for g in groups])
    graph = SimpleNamespace(group_key=KEYS, chunk_ptr=ptr, chunk_nodes=np.arange(ptr[-1]),
                            node_group=np.asarray([x for g in groups for x in g], np.int64))
    lk = GroupLookup(graph, TitleLookup(lambda: titles))
    exact, words = lk.bridge_titles(np.arange(5), np.asarray([0]), np.asarray([3]))
    assert exact.tolist() == [0, 0, 0, 0, 0]  # "nottingham forest" is no page's title
    assert words.tolist() == [0, 1, 1, 0, 0]  # ... but its words are inside "nottingham forest f c"
    exact, words = lk.bridge_titles(np.arange(5), np.asarray([0]), np.asarray([], np.int64))
    assert exact.tolist() == [0, 0, 0, 1, 0] and words.tolist() == [0, 1, 1, 1, 0]


def test_rank_links_validated_and_presets_fit_their_columns():
    with pytest.raises(ValueError, match="rank_links"):
        HybridOptions(rank_links=("nope",))
    with pytest.raises(ValueError, match="rank_links"):
        HybridOptions(rank_links=("bridge_title", "bridge_title"))
    assert config.PAPER_HYBRID.rank_links == ()
    for o in PRESETS.values():
        assert set(o.hybrid.rank_links) <= set(LINK_FEATURES)
        names = split_names((*FEATURES, *o.hybrid.rank_links), len(o.hybrid.rank_links), o.hybrid.rank_split)
        assert len(o.hybrid.rank_weights) == 1 + len(names)
    with pytest.raises(ValueError, match="weights"):
        fused_top(np.arange(3), np.zeros((3, 2)), (0.0, 1.0), 2)


def ada_index():
    """(index, retriever) over four passages, two of them one page's (hashing embedder)."""
    from hyperrag_fast.chunking import Document
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.extract.offline import RegexExtractor
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import Retriever
    docs = [Document("a", "Ada Lovelace", "Ada Lovelace was the daughter of Lord Byron."),
            Document("b", "Lord Byron", "Lord Byron died in Missolonghi in Greece."),
            Document("c", "Lord Byron", "Lord Byron wrote Don Juan in Italy."),
            Document("d", "Missolonghi", "Missolonghi is a town in Greece.")]
    emb = HashingEmbedder()
    ix = HyperIndex.build(docs, RegexExtractor(), emb, progress=False)
    return ix, Retriever(ix, emb)


def test_link_columns_on_the_query_path_equal_the_detail(tmp_path):
    """On a real index every LINK_FEATURES column is computed (finite, one row per C_q
    chunk), and the default ranking is bias + X @ w over the detail's own features."""
    ix, r = ada_index()
    base = config.TUNED
    every = replace(base, hybrid=replace(base.hybrid, rank_weights=(), rank_links=LINK_FEATURES))
    out = r.retrieve("Where did the father of Ada Lovelace die?", every, detail=True)
    X = out.detail["features"]
    assert X.shape == (len(out.detail["cq"]), len(FEATURES) + len(LINK_FEATURES))
    assert np.isfinite(X).all()
    a = r.retrieve("Where did the father of Ada Lovelace die?", base.with_top_k(3), detail=True)
    ids, _ = fused_top(np.asarray(a.detail["cq"]), a.detail["features"], base.hybrid.rank_weights, 3)
    row = {c.chunk_id: i for i, c in enumerate(ix.chunks)}
    assert [row[c.chunk_id] for c in a.chunks] == ids.tolist()
