"""A synthetic corpus + engine + queries with exact top-50 candidates (shared by the
threads, bandwidth and profile benchmarks, which measure the stage after candidate search)."""
from __future__ import annotations

import numpy as np

from hyperrag_fast.ann import VectorIndex
from hyperrag_fast.config import AnnParams
from hyperrag_fast.engine import StitchEngine
from hyperrag_fast.indexing.hypergraph import hypergraph_from_flat
from hyperrag_fast.config import StitchOptions
from hyperrag_fast.config import QueryOptions

try:
    from . import synthetic
except ImportError:
    import synthetic

# Read from the library at run time (the presets may be retuned): "default" is what
# ``QueryOptions()`` uses (``hyperrag_fast.config.TUNED_STITCH``), "paper" is
# ``StitchOptions.paper()`` (method ``stitch_paper``). Candidate budgets likewise.
_QO = QueryOptions()
K = _QO.k_nodes
K_CHUNKS = _QO.k_chunks

VARIANTS = {
    "default": _QO.stitch,
    "paper": StitchOptions.paper(),
}


def describe(opts: StitchOptions) -> dict:
    """The options as a JSON-able dict (so every result names the options it used)."""
    return {k: (str(v) if isinstance(v, float) and v != v or v == float("inf") else v)
            for k, v in opts.__dict__.items()}


def exact_topk(mat, qs, k=K):
    """Exact top-k candidate rows per query: the library's own search (``ann.VectorIndex``)."""
    return VectorIndex(mat, AnnParams(backend="exact")).search(np.asarray(qs, np.float32), k)[0]


def setup(n_states, n_queries=200, dim=64, seed=0):
    c = synthetic.generate(n_states, seed=seed, dim=dim)
    g = hypergraph_from_flat(*c.flat_args())
    node_vec, edge_vec, chunk_vec = synthetic.embeddings(c)
    qs = synthetic.queries(c, n_queries, seed=seed + 100)
    cn = exact_topk(node_vec, qs)
    cc = exact_topk(chunk_vec, qs, K_CHUNKS)
    eng = StitchEngine(g, node_vec, edge_vec, chunk_vec)
    for o in VARIANTS.values():
        eng.warmup(o)
    return c, g, eng, qs, cn, cc
