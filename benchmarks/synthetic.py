"""Synthetic STITCH corpus, emitted as the flat arrays ``hypergraph_from_flat`` takes.

    python benchmarks/synthetic.py --states 100000 --dim 64      # prints a summary

Model (semi-merge: one entity state per (chunk, name group)):

* documents of 1-8 chunks (mean ~4); chunk sizes = entity states per chunk,
  1 + Poisson(mean - 1) (mean 8 by default);
* names: with probability ``p_local`` a document-local name (a pool of 3 per document:
  the article's own entities, repeated over its chunks -> small groups, dt of a few
  chunks), otherwise a global name drawn from a Zipf-Mandelbrot law
  P(k) ~ (k + q)^-s over ``vocab_ratio * n_states`` names (s = 1.0, q = 10: the top
  name holds ~1 % of states, like "american" on 2Wiki). A name repeated in
  one chunk is one state (dedup);
* hyperedges (topic sentences): round(k_c / 2) per chunk, sizes 2-6
  (P = .35 .30 .18 .10 .07); every state is in at least one hyperedge;
* embeddings: ``n_topics`` random unit centres; a document has one topic; chunk, edge
  and node vectors = normalise(centre + noise) (noise norm ``noise``, float32), so
  same-topic cosines are ~0.6 and cross-topic ~0; queries = normalise(centre + 0.5 noise)
  hit ~0.7 on their topic (above delta = 0.5), so ANN search behaves as on real data.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

EDGE_SIZES = np.array([2, 3, 4, 5, 6])
#: in-chunk name dedup removes ~12 % of draws with the defaults; draw that much more
DEDUP_OVERDRAW = 1.14
EDGE_SIZE_P = np.array([0.35, 0.30, 0.18, 0.10, 0.07])


@dataclass
class FlatCorpus:
    n_chunks: int
    n_groups: int
    node_chunk: np.ndarray
    node_group: np.ndarray
    nc_node: np.ndarray
    nc_chunk: np.ndarray
    edge_chunk: np.ndarray
    inc_edge: np.ndarray
    inc_node: np.ndarray
    chunk_topic: np.ndarray
    centers: np.ndarray
    seed: int

    # counts, as on hyperrag_fast.hypergraph.Hypergraph
    n_states = property(lambda self: int(self.node_chunk.shape[0]))
    n_edges = property(lambda self: int(self.edge_chunk.shape[0]))
    n_incidences = property(lambda self: int(self.inc_edge.shape[0]))

    def flat_args(self):
        return ("semi", self.n_chunks, self.n_groups, self.node_chunk, self.node_group,
                self.nc_node, self.nc_chunk, self.edge_chunk, self.inc_edge, self.inc_node)

    def flat_bytes(self) -> int:
        return sum(a.nbytes for a in self.flat_args()[3:])

    def summary(self) -> dict:
        sizes = np.bincount(self.node_group, minlength=self.n_groups)
        esz = np.bincount(self.inc_edge, minlength=self.n_edges)
        return {"states": self.n_states, "chunks": self.n_chunks, "groups": self.n_groups,
                "hyperedges": self.n_edges, "incidences": self.n_incidences,
                "states_per_chunk": self.n_states / max(self.n_chunks, 1),
                "group_size_mean": float(sizes.mean()), "group_size_max": int(sizes.max()),
                "groups_size1_frac": float((sizes == 1).mean()),
                "edge_size_mean": float(esz.mean()), "edge_size_max": int(esz.max())}


def zipf_mandelbrot(rng, n, vocab, s=1.0, q=10.0):
    w = (np.arange(1, vocab + 1, dtype=np.float64) + q) ** -s
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    return np.searchsorted(cdf, rng.random(n)).astype(np.int64)


def generate(n_states: int, seed: int = 0, states_per_chunk: float = 8.0, p_local: float = 0.35,
             vocab_ratio: float = 0.25, zipf_s: float = 1.0, zipf_q: float = 10.0,
             n_topics: int | None = None, dim: int = 64) -> FlatCorpus:
    """About ``n_states`` entity states (a little fewer after in-chunk dedup)."""
    rng = np.random.default_rng(seed)
    # chunk sizes (drawn 5 % over, then cut at n_states)
    n_states = int(n_states * DEDUP_OVERDRAW)
    n_c = int(n_states / states_per_chunk * 1.05) + 16
    k = 1 + rng.poisson(states_per_chunk - 1, n_c)
    cum = np.cumsum(k)
    n_c = int(np.searchsorted(cum, n_states) + 1)
    k = k[:n_c]
    k[-1] -= int(cum[n_c - 1] - n_states)
    k = k[k > 0]
    n_c = k.shape[0]
    chunk = np.repeat(np.arange(n_c, dtype=np.int64), k)
    # documents of 1..8 chunks
    dsz = rng.integers(1, 8, size=n_c // 2 + 2)
    doc_of_chunk = np.repeat(np.arange(dsz.shape[0]), dsz)[:n_c]
    n_docs = int(doc_of_chunk[-1]) + 1
    vocab = max(int(vocab_ratio * n_states), 16)
    name = zipf_mandelbrot(rng, chunk.shape[0], vocab, zipf_s, zipf_q)
    local = rng.random(chunk.shape[0]) < p_local
    name[local] = vocab + doc_of_chunk[chunk[local]] * 3 + rng.integers(0, 3, int(local.sum()))
    # one state per (chunk, name); chunk-major order = preprocessing order
    key = np.unique(chunk * np.int64(vocab + 3 * n_docs) + name)
    chunk = (key // (vocab + 3 * n_docs)).astype(np.int32)
    name = key % (vocab + 3 * n_docs)
    del key
    _, group = np.unique(name, return_inverse=True)
    group = group.astype(np.int32)
    n_groups = int(group.max()) + 1
    del name
    n = chunk.shape[0]
    k = np.bincount(chunk, minlength=n_c)
    start = np.zeros(n_c + 1, dtype=np.int64)
    np.cumsum(k, out=start[1:])
    # hyperedges
    ne = np.maximum(1, np.rint(k / 2.0)).astype(np.int64)
    ne[k == 0] = 0
    edge_chunk = np.repeat(np.arange(n_c, dtype=np.int32), ne)
    n_e = edge_chunk.shape[0]
    estart = np.zeros(n_c + 1, dtype=np.int64)
    np.cumsum(ne, out=estart[1:])
    # (a) fill: each hyperedge gets `size` random states of its chunk
    size = rng.choice(EDGE_SIZES, size=n_e, p=EDGE_SIZE_P)
    size = np.minimum(size, k[edge_chunk])
    fill_e = np.repeat(np.arange(n_e, dtype=np.int64), size)
    fc = edge_chunk[fill_e]
    fill_v = start[fc] + (rng.random(fill_e.shape[0]) * k[fc]).astype(np.int64)
    del fc
    # (b) coverage: a state no hyperedge drew joins one random hyperedge of its chunk
    seen = np.zeros(n, dtype=bool)
    seen[fill_v] = True
    lone = np.flatnonzero(~seen)
    del seen
    cov_e = estart[chunk[lone]] + (rng.random(lone.shape[0]) * ne[chunk[lone]]).astype(np.int64)
    pair = np.unique(np.concatenate([cov_e * n + lone, fill_e * n + fill_v]))
    del cov_e, fill_e, fill_v, lone
    inc_edge = (pair // n).astype(np.int32)
    inc_node = (pair % n).astype(np.int32)
    del pair
    n_topics = n_topics or max(32, n_c // 400)
    doc_topic = rng.integers(0, n_topics, n_docs)
    chunk_topic = doc_topic[doc_of_chunk].astype(np.int32)
    centers = unit(rng.standard_normal((n_topics, dim)).astype(np.float32))
    return FlatCorpus(n_c, n_groups, chunk, group, np.arange(n, dtype=np.int32), chunk.copy(),
                      edge_chunk, inc_edge, inc_node, chunk_topic, centers, seed)


def unit(x):
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def clustered(centers, topic, noise, seed, dtype=np.float32, block=1 << 20):
    """normalise(centers[topic] + noise * g / sqrt(dim)) row by row block, in ``dtype``."""
    rng = np.random.default_rng(seed)
    n, dim = topic.shape[0], centers.shape[1]
    out = np.empty((n, dim), dtype=dtype)
    for a in range(0, n, block):
        b = min(n, a + block)
        x = rng.standard_normal((b - a, dim), dtype=np.float32)
        x *= noise / np.sqrt(dim)
        x += centers[topic[a:b]]
        out[a:b] = unit(x)
    return out


def embeddings(c: FlatCorpus, noise: float = 0.8, dtype=np.float32):
    """(node_vec, edge_vec, chunk_vec): each row near its chunk's topic centre."""
    t = c.chunk_topic
    chunk_vec = clustered(c.centers, t, noise, c.seed + 1, dtype)
    edge_vec = clustered(c.centers, t[c.edge_chunk], noise, c.seed + 2, dtype)
    node_vec = clustered(c.centers, t[c.node_chunk], noise, c.seed + 3, dtype)
    return node_vec, edge_vec, chunk_vec


def queries(c: FlatCorpus, n: int, seed: int = 99, noise: float = 0.5):
    """Query vectors: normalise(centre of a random topic that has chunks + noise)."""
    rng = np.random.default_rng(seed)
    topics = np.unique(c.chunk_topic)
    t = rng.choice(topics, n)
    return clustered(c.centers, t, noise, seed + 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t = time.perf_counter()
    c = generate(a.states, a.seed, dim=a.dim)
    print(f"generated in {time.perf_counter() - t:.2f}s")
    for k, v in c.summary().items():
        print(f"  {k}: {v}")


if __name__ == "__main__":
    main()
