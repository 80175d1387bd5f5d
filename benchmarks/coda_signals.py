"""Which chunk signals add offline evidence coverage on GraphRAG-Bench (dev), the study
behind CODA's ``fact_weight`` / ``dedup_sim`` defaults and the finding that the offline
KG's association signals do not help (docs/architecture.md §7, §9).

    OPENBLAS_NUM_THREADS=1 python benchmarks/coda_signals.py \\
        --index-root indexes/coda_gb_minilm --subset medical

Per question: the candidates are the union of the 40 nearest chunks (dense) and the 40
best BM25 chunks; every candidate's coverage of every evidence statement is computed
once (a statement is covered by a context when one of its passages covers it), so a
ranking formula's top-5 coverage is a lookup. Signals per chunk: ``cs`` dense cosine,
``bm`` BM25 (divided by the question's best), ``smax`` best cosine over the chunk's
sentences, ``rmax`` best cosine over the CODA graph's relations in the chunk, ``entz``
sum over the chunk's entities of max(0, z(sim)) / (1 + ln |chunks|), ``ppr`` the
entity PPR mass from the 10 nearest entities (per entity divided by its chunk count).
Writes ``benchmarks/results/coda_signals_<embedder>_<subset>.json``.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hyperrag_fast.chunking import chunk_passage  # noqa: E402
from hyperrag_fast.embed.cache import CachedEmbedder  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.coverage import statement_coverage, windows  # noqa: E402
from hyperrag_fast.eval.gbench import QTYPES, _safe, load_graphrag_bench  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402
from hyperrag_fast.index import HyperIndex  # noqa: E402
from hyperrag_fast.kernels.ppr import ppr_power  # noqa: E402
from hyperrag_fast.prebuilt import load_prebuilt  # noqa: E402
from hyperrag_fast.retriever import Retriever  # noqa: E402

CAND = 40


def signals(d: Path, qs, emb) -> list[dict]:
    ix = HyperIndex.load(d, embedder=emb)
    st = Retriever(ix, emb, prebuilt=load_prebuilt(d, ["coda"])).state
    cr = st.coda.retriever
    g = cr.g
    passages = [chunk_passage(c) for c in ix.chunks]
    wins = [windows([p]) for p in passages]
    n = len(passages)
    qv = np.asarray(emb.embed([q.question for q in qs]), np.float32)
    nch = np.diff(g.ent_chunk_ptr).astype(float)
    ent_of = np.repeat(np.arange(g.n_entities), np.diff(g.ent_chunk_ptr))
    rel_of = np.repeat(np.arange(g.n_relations), np.diff(g.rel_chunk_ptr))
    cv = np.asarray(ix.chunk_vec, np.float32)
    rows = []
    for q, v in zip(qs, qv):
        cs = cv @ v
        bm = st.bm25.scores(q.question)
        smax = np.full(n, -1.0)
        np.maximum.at(smax, ix.graph.edge_chunk, ix.edge_vec @ v)
        es = (g.ent_vec @ v).astype(np.float64)
        z = (es - es.mean()) / (es.std() + 1e-12)
        entz = np.zeros(n)
        np.add.at(entz, g.ent_chunks, (np.maximum(z, 0) / (1 + np.log(np.maximum(nch, 1))))[ent_of])
        e0 = np.argsort(-es)[:10]
        p = np.zeros(g.n_entities)
        p[e0] = np.maximum(es[e0], 0) + 1e-12
        pi, _ = ppr_power(g.adj_ptr, g.adj_nbr, g.adj_w, cr.wsum, p / p.sum(), 0.85, 1e-6, 1000)
        ppr = np.zeros(n)
        np.add.at(ppr, g.ent_chunks, (pi / np.maximum(nch, 1))[ent_of])
        rmax = np.full(n, -1.0)
        np.maximum.at(rmax, g.rel_chunks, (g.rel_vec @ v).astype(np.float64)[rel_of])
        cand = np.array(sorted(set(np.argsort(-cs)[:CAND].tolist()) | set(np.argsort(-bm)[:CAND].tolist())))
        cov = {int(c): np.array([statement_coverage(s, wins[c], passages[c]).covered
                                 for s in q.evidence]) for c in cand}
        rows.append({"type": q.qtype, "cand": cand, "cov": cov, "cv": cv, "n_st": len(q.evidence),
                     "cs": cs, "bm": bm / max(bm.max(), 1e-12), "smax": smax, "rmax": rmax,
                     "entz": entz, "ppr": ppr / max(ppr.max(), 1e-12)})
    return rows


def top5(r: dict, score: np.ndarray, dedup: float, k: int = 5) -> list[int]:
    c = r["cand"]
    order = c[np.lexsort((c, -score[c]))]
    chosen: list[int] = []
    for x in order:
        if dedup >= 1 or all(float(r["cv"][x] @ r["cv"][y]) <= dedup for y in chosen):
            chosen.append(int(x))
            if len(chosen) == k:
                break
    return chosen


FORMULAS = {  # name -> (weights over signals, dedup)
    "dense": ({"cs": 1}, 1.0), "bm25": ({"bm": 1}, 1.0),
    "hybrid (s8 coda: dense + 0.3 bm25)": ({"cs": 1, "bm": 0.3}, 1.0),
    "hybrid + 0.2 smax": ({"cs": 1, "bm": 0.3, "smax": 0.2}, 1.0),
    "hybrid + 0.2 smax, dedup 0.99 (coda s9)": ({"cs": 1, "bm": 0.3, "smax": 0.2}, 0.99),
    "hybrid, dedup 0.99": ({"cs": 1, "bm": 0.3}, 0.99),
    "hybrid + 0.1 rmax": ({"cs": 1, "bm": 0.3, "rmax": 0.1}, 1.0),
    "hybrid + 0.3 rmax": ({"cs": 1, "bm": 0.3, "rmax": 0.3}, 1.0),
    "hybrid + 0.02 entz": ({"cs": 1, "bm": 0.3, "entz": 0.02}, 1.0),
    "hybrid + 0.05 entz": ({"cs": 1, "bm": 0.3, "entz": 0.05}, 1.0),
    "hybrid + 0.1 ppr": ({"cs": 1, "bm": 0.3, "ppr": 0.1}, 1.0),
    "hybrid + 0.3 ppr": ({"cs": 1, "bm": 0.3, "ppr": 0.3}, 1.0),
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--index-root", required=True)
    p.add_argument("--subset", default="medical")
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--cache-dir", default=None)
    a = p.parse_args()
    emb0 = make_embedder(a.embedder)
    emb = CachedEmbedder(emb0, Path(a.cache_dir) / "embeddings.sqlite") if a.cache_dir else emb0
    _, qs = load_graphrag_bench(a.subset)
    rows = []
    for src in sorted({q.source for q in qs}):
        d = Path(a.index_root) / a.subset / _safe(src)
        if d.is_dir():
            rows += signals(d, [q for q in qs if q.source == src], emb)
    out = {"command": "python benchmarks/coda_signals.py " + " ".join(sys.argv[1:]),
           "git_commit": _git("rev-parse", "HEAD"), "machine": machine_info(),
           "subset": a.subset, "embedder": emb0.name, "n_questions": len(rows),
           "candidates": f"union of the {CAND} nearest and {CAND} best BM25 chunks",
           "rows": {}}
    by_oracle = defaultdict(list)
    for r in rows:
        got = np.zeros(r["n_st"], bool)
        for _ in range(5):
            best = max(r["cov"], key=lambda c: int((r["cov"][c] & ~got).sum()))
            got |= r["cov"][best]
        by_oracle[r["type"]].append(got.mean())
    out["oracle_top5_in_candidates"] = {t: float(np.mean(v)) for t, v in by_oracle.items()}
    for name, (w, dd) in FORMULAS.items():
        by = defaultdict(list)
        for r in rows:
            score = sum(x * r[k] for k, x in w.items())
            got = np.zeros(r["n_st"], bool)
            for c in top5(r, score, dd):
                got |= r["cov"][c]
            by[r["type"]].append(float(got.mean()))
        cov = {t: float(np.mean(by[t])) for t in QTYPES if by[t]}
        cov["all"] = float(np.mean([x for v in by.values() for x in v]))
        out["rows"][name] = cov
        print(f"{name:>42} all {cov['all']:.3f} CR {cov.get('Complex Reasoning', 0):.3f}", flush=True)
    path = ROOT / "benchmarks" / "results" / f"coda_signals_{a.embedder}_{a.subset}.json"
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
