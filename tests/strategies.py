"""Hypothesis strategies: random extractions -> hypergraphs with random unit vectors."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from hyperrag_fast.indexing.hypergraph import build_hypergraph
from hyperrag_fast.records import Extraction, Segment

NAMES = ["Alice", "Bob", "Canada", "Delta Corp", "Eve", "Film X", "Gary", "Hanoi"]


@st.composite
def extractions(draw, max_chunks=7, max_segments=4, max_entities=4):
    n_names = draw(st.integers(1, len(NAMES)))
    n_chunks = draw(st.integers(1, max_chunks))
    out = []
    for c in range(n_chunks):
        if draw(st.integers(0, 9)) == 0:  # a failed / empty chunk: dangling
            out.append(Extraction((), error="test skip"))
            continue
        segs = []
        for s in range(draw(st.integers(0, max_segments))):
            k = draw(st.integers(1, max_entities))
            ents = tuple(
                (NAMES[draw(st.integers(0, n_names - 1))], f"desc {c}.{s}.{j}") for j in range(k)
            )
            segs.append(Segment(f"topic {c}.{s}", ents))
        out.append(Extraction(tuple(segs)))
    return out


def unit_rows(rng, n, dim, dtype=np.float64):
    x = rng.normal(size=(max(n, 0), dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(dtype)


@st.composite
def instances(draw, merge=None, dtype=np.float64, dim=6):
    """(graph, node_vec, edge_vec, chunk_vec, q, cand_nodes, cand_chunks)."""
    ex = draw(extractions())
    m = merge or draw(st.sampled_from(["semi", "semi", "full", "none"]))
    g = build_hypergraph(ex, merge=m)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    nv, ev, cv = (unit_rows(rng, n, dim, dtype) for n in (g.n_nodes, g.n_edges, g.n_chunks))
    # bias the query toward some node so activations happen
    q = rng.normal(size=dim)
    if g.n_nodes and draw(st.booleans()):
        q = q * 0.3 + nv[rng.integers(g.n_nodes)]
    q = (q / np.linalg.norm(q)).astype(dtype)
    cand_nodes = np.unique(rng.integers(0, max(g.n_nodes, 1), size=draw(st.integers(0, 8)))) if g.n_nodes else np.empty(0, np.int64)
    cand_chunks = np.unique(rng.integers(0, g.n_chunks, size=draw(st.integers(0, 4))))
    return g, nv, ev, cv, q, cand_nodes, cand_chunks


@st.composite
def stitch_options(draw):
    from hyperrag_fast.config import StitchOptions

    graph_weight = draw(st.sampled_from(["uniform", "inverse_size"]))
    pprs = ["power", "push", "auto", "none"] + (["factored"] if graph_weight == "inverse_size" else [])
    return StitchOptions.paper(
        delta=draw(st.sampled_from([-0.5, 0.0, 0.2, 0.5])),
        lam=draw(st.sampled_from([0.0, 0.3, 1.0])),
        damping=draw(st.sampled_from([0.0, 0.3, 0.85])),
        top_k=draw(st.integers(1, 10)),
        decay=draw(st.sampled_from(["tanh", "exp", "sigmoid"])),
        alpha=draw(st.sampled_from(["ratio", "fixed", "log"])),
        alpha_value=draw(st.sampled_from([0.1, 1.0, 3.0])),
        spatial=draw(st.booleans()),
        temporal=draw(st.booleans()),
        prior=draw(st.sampled_from(["continuous", "continuous", "binary"])),
        group_weight=draw(st.sampled_from(["log1p", "idf"])),
        temporal_max_group=draw(st.sampled_from([float("inf"), 2.0, 3.0])),
        temporal_from_space=draw(st.sampled_from([0.0, 0.0, 0.5, 1.0])),
        graph_max_group=draw(st.sampled_from([float("inf"), 1.0, 2.0, 4.0])),
        graph_weight=graph_weight,
        ppr=draw(st.sampled_from(pprs)),
    )


def ppr_prior_and_damping(draw, rng, m):
    """A PPR prior over m nodes (1, 2, 5 or m nonzeros; sometimes coarse values, giving
    exact ties and near-ties in pi), normalised, and a damping in [0, 0.95]."""
    nnz = draw(st.sampled_from([1, 2, 5, m]))
    p = np.zeros(m)
    p[rng.choice(m, size=min(nnz, m), replace=False)] = rng.random(min(nnz, m)) + 1e-3
    if draw(st.booleans()):
        p = np.round(p * 4) / 4 + 1e-3 * (p > 0)
    p /= p.sum()
    return p, draw(st.sampled_from([0.0, 0.2, 0.5, 0.85, 0.95]))

