"""The symbolic index builder against a plain-Python twin (docs/architecture.md §3, STITCH-RAG §3.2)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.indexing.hypergraph import build_hypergraph, hypergraph_from_flat
from hyperrag_fast.kernels.csr import csr_from_pairs
from hyperrag_fast.lexical import normalize_name

from strategies import extractions


def _twin(ex, merge):
    """Nodes, groups, incidences exactly as the merge definitions say."""
    nodes, inc, edges = [], set(), []  # node = (first chunk, key, chunks)
    index = {}
    for c, x in enumerate(ex):
        for s in x.segments:
            e = len(edges)
            edges.append(c)
            for j, (name, _) in enumerate(s.entities):
                key = normalize_name(name)
                if not key:
                    continue
                ident = {"semi": (e, key), "full": key, "none": (e, key)}[merge]
                if ident not in index:
                    index[ident] = len(nodes)
                    nodes.append([c, key, []])
                v = index[ident]
                if c not in nodes[v][2]:
                    nodes[v][2].append(c)
                inc.add((e, v))
    return nodes, inc, edges


@settings(max_examples=200, deadline=None)
@given(extractions(), st.sampled_from(["semi", "full", "none"]))
def test_builder_matches_twin(ex, merge):
    g = build_hypergraph(ex, merge=merge)
    nodes, inc, edges = _twin(ex, merge)
    assert g.n_nodes == len(nodes) and g.n_edges == len(edges)
    np.testing.assert_array_equal(g.edge_chunk, edges)
    np.testing.assert_array_equal(g.node_chunk, [n[0] for n in nodes])
    got_inc = {(e, int(v)) for e in range(g.n_edges) for v in g.edge_nodes[g.edge_ptr[e]:g.edge_ptr[e + 1]]}
    assert got_inc == inc
    got_inc_t = {(int(e), v) for v in range(g.n_nodes) for e in g.node_edges[g.node_ptr[v]:g.node_ptr[v + 1]]}
    assert got_inc_t == inc
    for v in range(g.n_nodes):
        assert sorted(g.nc_chunks[g.nc_ptr[v]:g.nc_ptr[v + 1]].tolist()) == sorted(nodes[v][2])
    for c in range(g.n_chunks):
        members = {v for v in range(g.n_nodes) if c in nodes[v][2]}
        assert set(g.chunk_nodes[g.chunk_ptr[c]:g.chunk_ptr[c + 1]].tolist()) == members
    # groups: same key <=> same group (semi); singletons otherwise; sorted by t_v
    for gid in range(g.n_groups):
        mem = g.group_nodes[g.group_ptr[gid]:g.group_ptr[gid + 1]]
        assert np.all(np.diff(g.node_chunk[mem]) >= 0)
        assert len({nodes[v][1] for v in mem}) == 1
        assert len({c for v in mem for c in nodes[v][2]}) == g.group_chunks[gid]
    if merge == "semi":
        assert g.n_groups == len({n[1] for n in nodes})
    elif merge == "none":  # a group is one name within one chunk
        assert g.n_groups == len({(n[0], n[1]) for n in nodes})
    else:
        assert g.n_groups == g.n_nodes


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 60), st.integers(1, 12))
def test_csr_from_pairs_is_a_stable_counting_sort(seed, n, n_rows):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n_rows, n).astype(np.int32)
    cols = rng.integers(0, 100, n).astype(np.int32)
    ptr, idx = csr_from_pairs(rows, cols, n_rows)
    order = np.argsort(rows, kind="stable")
    np.testing.assert_array_equal(idx, cols[order])
    np.testing.assert_array_equal(ptr, np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n_rows))]))


def test_unsorted_group_members_get_sorted():
    # states given out of preprocessing order: the builder sorts each group by t_v
    g = hypergraph_from_flat("semi", 3, 1, node_chunk=[2, 0, 1], node_group=[0, 0, 0],
                             nc_node=[0, 1, 2], nc_chunk=[2, 0, 1], edge_chunk=[0],
                             inc_edge=[0], inc_node=[1])
    np.testing.assert_array_equal(g.group_nodes, [1, 2, 0])


def test_bad_inputs_rejected():
    with pytest.raises(ValueError, match="merge"):
        build_hypergraph([], merge="partial")
    with pytest.raises(ValueError, match="outside"):
        hypergraph_from_flat("semi", 1, 1, [0], [3], [0], [0], [0], [0], [0])


def test_names_normalise_to_one_group():
    from hyperrag_fast.records import Extraction, Segment

    ex = [Extraction((Segment("t", (("Google, Inc.", "a"),)),)),
          Extraction((Segment("t", (("google inc", "b"), ("!!!", "dropped"))),))]
    g = build_hypergraph(ex)
    assert g.n_groups == 1 and g.n_nodes == 2 and g.group_key == ["google inc"]
