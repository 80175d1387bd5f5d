"""The query-induced chunk graph (STITCH-RAG §3.3, Alg. 1 l.29-30).

c ~ c' (c != c', both in C_q) when a node of c and a node of c' share a name group.
Built through the chunk-group bipartite structure with deduplicated edges, so the
cost is the size of the graph, never the corpus.
"""
from __future__ import annotations

import numpy as np

from ._config import jit


@jit
def chunk_graph(ix, sc, cq, max_group, weight_kind):
    """Adjacency of C_q in local ids: (ptr, nbr, w, wsum).

    ``weight_kind`` 0: every distinct neighbour weighs 1 (paper); 1: an edge weighs the
    sum over shared groups g of 1 / |chunks of g|. Groups in more than ``max_group``
    chunks make no edges (inf: all do). Column-normalising by ``wsum`` gives P;
    ``wsum == 0`` marks a dangling chunk (self-loop).
    """
    node_group, chunk_ptr, chunk_nodes, group_chunks = ix[1], ix[10], ix[11], ix[12]
    gcnt, gstart, gtouched, glast, cnt = sc[11], sc[12], sc[13], sc[16], sc[14]
    m = cq.shape[0]
    ng = 0
    # pass 1: distinct groups per chunk; how many C_q chunks each group spans
    for i in range(m):
        c = cq[i]
        for j in range(chunk_ptr[c], chunk_ptr[c + 1]):
            g = node_group[chunk_nodes[j]]
            if group_chunks[g] > max_group or glast[g] == i:
                continue
            if gcnt[g] == 0 and glast[g] == -1:
                gtouched[ng] = g
                ng += 1
            glast[g] = i
            gcnt[g] += 1
    cnt[3] = ng
    total = 0
    for t in range(ng):
        g = gtouched[t]
        gstart[g] = total
        total += gcnt[g]
    members = np.empty(total, dtype=np.int32)
    fill = np.empty(ng, dtype=np.int64)
    for t in range(ng):
        g = gtouched[t]
        fill[t] = gstart[g]
        gcnt[g] = t  # reuse as the group's position in gtouched
        glast[g] = -1
    # pass 2: members of each group (local chunk ids, increasing)
    bound = 0
    for i in range(m):
        c = cq[i]
        for j in range(chunk_ptr[c], chunk_ptr[c + 1]):
            g = node_group[chunk_nodes[j]]
            if group_chunks[g] > max_group or glast[g] == i:
                continue
            glast[g] = i
            t = gcnt[g]
            members[fill[t]] = i
            fill[t] += 1
    for t in range(ng):
        g = gtouched[t]
        glast[g] = -1
    for i in range(m):
        c = cq[i]
        for j in range(chunk_ptr[c], chunk_ptr[c + 1]):
            g = node_group[chunk_nodes[j]]
            if group_chunks[g] > max_group or glast[g] == i:
                continue
            glast[g] = i
            t = gcnt[g]
            bound += fill[t] - gstart[g] - 1
    for t in range(ng):
        glast[gtouched[t]] = -1
    # pass 3: deduplicated neighbours
    ptr = np.zeros(m + 1, dtype=np.int64)
    nbr = np.empty(bound, dtype=np.int32)
    w = np.empty(bound, dtype=np.float64)
    wsum = np.zeros(m, dtype=np.float64)
    mark = np.full(m, -1, dtype=np.int64)
    pos = np.empty(m, dtype=np.int64)
    k = 0
    for i in range(m):
        c = cq[i]
        for j in range(chunk_ptr[c], chunk_ptr[c + 1]):
            g = node_group[chunk_nodes[j]]
            if group_chunks[g] > max_group or glast[g] == i:
                continue
            glast[g] = i
            t = gcnt[g]
            wg = 1.0 if weight_kind == 0 else 1.0 / group_chunks[g]
            for s in range(gstart[g], fill[t]):
                jj = members[s]
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
        for s in range(ptr[i], k):
            wsum[i] += w[s]
    for t in range(ng):
        g = gtouched[t]
        glast[g] = -1
        gcnt[g] = 0
    cnt[3] = 0
    return ptr, nbr[:k], w[:k], wsum
