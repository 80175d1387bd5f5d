"""The engine's per-options caches stay bounded and never change a result (docs/architecture.md §4)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from hyperrag_fast import engine as E
from hyperrag_fast.config import TUNED
from hyperrag_fast.engine import StitchEngine
from hyperrag_fast.indexing.hypergraph import build_hypergraph
from hyperrag_fast.records import Extraction, Segment


def _engine(dim=8):
    chunks = [[["Ann", "Bob"]], [["Bob", "Cy"]], [["Cy", "Dee"]], [["Eve", "Ann"]]]
    ex = [Extraction(tuple(Segment(f"s{c}{j}", tuple((n, f"{n} in {c}") for n in seg))
                           for j, seg in enumerate(ch))) for c, ch in enumerate(chunks)]
    g = build_hypergraph(ex)
    rng = np.random.default_rng(0)
    unit = lambda n: (lambda m: m / np.linalg.norm(m, axis=1, keepdims=True))(  # noqa: E731
        rng.normal(size=(max(n, 1), dim)).astype(np.float32))[:n]
    return StitchEngine(g, unit(g.n_nodes), unit(g.n_edges), unit(g.n_chunks)), unit(1)[0]


def test_many_distinct_options_keep_the_caches_bounded_and_results_equal():
    eng, q = _engine()
    v0, c0 = np.arange(eng.graph.n_nodes), np.arange(2)
    first = {}
    for rep in range(2):  # the second pass re-derives what the bound evicted: same answers
        for i in range(3 * E._CACHE_MAX):
            o = replace(TUNED.stitch, top_k=4, alpha_value=0.1 + i / 1000.0)
            r = eng.query(q, v0, c0, o)
            got = (r.chunk_ids.tolist(), np.round(r.scores, 12).tolist())
            assert first.setdefault(i, got) == got, (rep, i)
            for cache in (eng._params, eng._arrays, eng._weights):
                assert 0 < len(cache) <= E._CACHE_MAX
    assert len(eng._params) == E._CACHE_MAX


def test_keep_drops_the_oldest_entry():
    import threading
    d: dict = {}
    for k in range(E._CACHE_MAX + 3):
        E._keep(threading.Lock(), d, k, k * 2)
    assert list(d) == list(range(3, E._CACHE_MAX + 3)) and d[E._CACHE_MAX + 2] == 2 * (E._CACHE_MAX + 2)
