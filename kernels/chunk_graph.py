"""The query-induced chunk graph (STITCH-RAG §3.3, Alg. 1 l.29-30).

c ~ c' (c != c', both in C_q) when a node of c and a node of c' share a name group.
Built through the chunk-group bipartite structure with deduplicated edges, so the
cost is the size of the graph, never the corpus.
"""
from __future__ import annotations

import numpy as np

from ._config import jit
from .prefetch import prefetch_at

#: chunks ahead whose groups' entries are prefetched (node -> group -> per-group state)
AHEAD = 8


@jit
def chunk_graph(ix, sc, cq, max_group, weight_kind):
    """Adjacency of C_q in local ids: (ptr, nbr, w, wsum).

    ``weight_kind`` 0: every distinct neighbour weighs 1 (paper); 1: an edge weighs the
    sum over shared groups g of 1 / |chunks of g|. Groups in more than ``max_group``
    chunks make no edges (inf: all do). Column-normalising by ``wsum`` gives P;
    ``wsum == 0`` marks a dangling chunk (self-loop).
    """
    node_group, chunk_ptr, chunk_nodes, group_chunks = ix[1], ix[10], ix[11], ix[12]
    gcnt, gstart, gtouched, glast = sc[11], sc[12], sc[13], sc[16]
    m = cq.shape[0]
    # 1. the distinct eligible groups of each chunk (CSR cg), and members per group
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
            for j in range(chunk_ptr[c2], chunk_ptr[c2 + 1]):
                prefetch_at(node_group, chunk_nodes[j])
        if 0 <= i + AHEAD < m:
            c1 = cq[i + AHEAD]
            for j in range(chunk_ptr[c1], chunk_ptr[c1 + 1]):
                g1 = node_group[chunk_nodes[j]]
                prefetch_at(group_chunks, g1)
                prefetch_at(glast, g1)
                prefetch_at(gcnt, g1)
        if i < 0:
            continue
        c = cq[i]
        for j in range(chunk_ptr[c], chunk_ptr[c + 1]):
            g = node_group[chunk_nodes[j]]
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
    total = 0
    for t in range(ng):
        g = gtouched[t]
        gstart[g] = total
        total += gcnt[g]
        gcnt[g] = gstart[g]  # now the fill position
    members = np.empty(total, dtype=np.int32)
    bound = 0
    for i in range(m):
        for s in range(cg_ptr[i], cg_ptr[i + 1]):
            g = cg[s]
            members[gcnt[g]] = i
            gcnt[g] += 1
    for i in range(m):
        for s in range(cg_ptr[i], cg_ptr[i + 1]):
            g = cg[s]
            bound += gcnt[g] - gstart[g] - 1
    # 2. deduplicated neighbours through the chunk-group bipartite structure
    ptr = np.zeros(m + 1, dtype=np.int64)
    nbr = np.empty(bound, dtype=np.int32)
    w = np.empty(bound, dtype=np.float64)
    wsum = np.zeros(m, dtype=np.float64)
    mark = np.full(m, -1, dtype=np.int64)
    pos = np.empty(m, dtype=np.int64)
    k = 0
    for i in range(m):
        for s in range(cg_ptr[i], cg_ptr[i + 1]):
            g = cg[s]
            wg = 1.0 if weight_kind == 0 else 1.0 / group_chunks[g]
            for t in range(gstart[g], gcnt[g]):
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
    for t in range(ng):
        g = gtouched[t]
        glast[g] = -1
        gcnt[g] = 0
    return ptr, nbr[:k], w[:k], wsum
