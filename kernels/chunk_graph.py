"""The query-induced chunk graph (STITCH-RAG §3.3, Alg. 1 l.29-30).

c ~ c' (c != c', both in C_q) when a node of c and a node of c' share a name group.
Both forms go through the chunk-group bipartite structure, so the cost is the size of
the graph, never the corpus: ``chunk_groups`` gives the incidences (the factored form
the PPR of ``ppr_factored`` sweeps directly), ``chunk_graph`` the deduplicated CSR.
"""
from __future__ import annotations

import numpy as np

from ._config import jit
from .prefetch import prefetch_at

#: chunks ahead whose groups' entries are prefetched (node -> group -> per-group state)
AHEAD = 8


@jit
def chunk_groups(ix, sc, cq, max_group):
    """The eligible groups of C_q (groups in at most ``max_group`` corpus chunks; inf: all),
    in local ids: (cg_ptr, cg, gptr, members, gn). ``cg[cg_ptr[i]:cg_ptr[i + 1]]`` are
    the distinct groups of chunk i (in the order of its nodes), ``members[gptr[l]:gptr[l + 1]]``
    the chunks of group l (ascending local ids), ``gn[l]`` its corpus chunk count."""
    node_group, chunk_ptr, chunk_nodes, group_chunks = ix.node_group, ix.chunk_ptr, ix.chunk_nodes, ix.group_chunks
    gcnt, gtouched, glast = sc.group_count, sc.touched_groups, sc.group_last
    m = cq.shape[0]
    n_ref = 0
    for i in range(m):
        n_ref += chunk_ptr[cq[i] + 1] - chunk_ptr[cq[i]]
    cg_ptr = np.zeros(m + 1, dtype=np.int64)
    cg = np.empty(n_ref, dtype=np.int32)
    ng = 0
    k = 0
    for i in range(-2 * AHEAD, m):
        # the groups of C_q's nodes are scattered: fetch node_group 2 AHEAD chunks early,
        # then each group's entries AHEAD chunks early (a hint only)
        if i + 2 * AHEAD < m:
            c2 = cq[i + 2 * AHEAD]
            for j in range(np.uint64(chunk_ptr[c2]), np.uint64(chunk_ptr[c2 + 1])):
                prefetch_at(node_group, chunk_nodes[j])
        if 0 <= i + AHEAD < m:
            c1 = cq[i + AHEAD]
            for j in range(np.uint64(chunk_ptr[c1]), np.uint64(chunk_ptr[c1 + 1])):
                g1 = node_group[chunk_nodes[j]]
                prefetch_at(group_chunks, g1)
                prefetch_at(glast, g1)
                prefetch_at(gcnt, g1)
        if i < 0:
            continue
        c = cq[i]
        for j in range(np.uint64(chunk_ptr[c]), np.uint64(chunk_ptr[c + 1])):
            g = np.uint32(node_group[np.uint32(chunk_nodes[j])])
            if group_chunks[g] > max_group or glast[g] == i:
                continue
            if glast[g] == -1:
                gtouched[ng] = g
                ng += 1
            glast[g] = i
            gcnt[g] += 1
            cg[k] = g
            k += 1
        cg_ptr[i + 1] = k
    gptr = np.zeros(ng + 1, dtype=np.int64)
    gn = np.empty(ng, dtype=np.int64)
    for t in range(ng):
        g = gtouched[t]
        gptr[t + 1] = gptr[t] + gcnt[g]
        gn[t] = group_chunks[g]
        gcnt[g] = gptr[t]  # now the fill position
        glast[g] = t  # now the local id
    members = np.empty(gptr[ng], dtype=np.int32)
    for i in range(m):
        for s in range(np.uint64(cg_ptr[i]), np.uint64(cg_ptr[i + 1])):
            g = np.uint32(cg[s])
            members[gcnt[g]] = i
            gcnt[g] += 1
            cg[s] = glast[g]
    for t in range(ng):
        g = gtouched[t]
        glast[g] = -1
        gcnt[g] = 0
    return cg_ptr, cg[:k], gptr, members, gn


@jit
def chunk_graph(ix, sc, cq, max_group, weight_kind):
    """Adjacency of C_q in local ids: (ptr, nbr, w, wsum).

    ``weight_kind`` 0: every distinct neighbour weighs 1 (paper); 1: an edge weighs the
    sum over shared groups g of 1 / |chunks of g|. Groups in more than ``max_group``
    chunks make no edges (inf: all do). Column-normalising by ``wsum`` gives P;
    ``wsum == 0`` marks a dangling chunk (self-loop).
    """
    cg_ptr, cg, gptr, members, gn = chunk_groups(ix, sc, cq, max_group)
    return dedup_arcs(cg_ptr, cg, gptr, members, gn, weight_kind)


@jit
def dedup_arcs(cg_ptr, cg, gptr, members, gn, weight_kind):
    """The deduplicated CSR (ptr, nbr, w, wsum) of the factored chunk graph."""
    m = cg_ptr.shape[0] - 1
    bound = 0
    for i in range(m):
        for s in range(np.uint64(cg_ptr[i]), np.uint64(cg_ptr[i + 1])):
            bound += gptr[cg[s] + 1] - gptr[cg[s]] - 1
    ptr = np.zeros(m + 1, dtype=np.int64)
    nbr = np.empty(bound, dtype=np.int32)
    w = np.empty(bound, dtype=np.float64)
    wsum = np.zeros(m, dtype=np.float64)
    mark = np.full(m, -1, dtype=np.int64)
    pos = np.empty(m, dtype=np.int64)
    k = 0
    for i in range(m):
        for s in range(np.uint64(cg_ptr[i]), np.uint64(cg_ptr[i + 1])):
            g = cg[s]
            wg = 1.0 if weight_kind == 0 else 1.0 / gn[g]
            for t in range(np.uint64(gptr[g]), np.uint64(gptr[g + 1])):
                jj = members[t]
                if jj == i:
                    continue
                if mark[jj] != i:
                    mark[jj] = i
                    pos[jj] = k
                    nbr[k] = jj
                    w[k] = wg
                    k += 1
                elif weight_kind != 0:
                    w[pos[jj]] += wg
        ptr[i + 1] = k
        for t in range(ptr[i], k):
            wsum[i] += w[t]
    return ptr, nbr[:k], w[:k], wsum
