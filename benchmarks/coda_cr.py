"""Why CODA's lead on GraphRAG-Bench Complex Reasoning is small (issue 23, session 13):
which chunks association adds or misses, and which selection rules would use it better.

    OPENBLAS_NUM_THREADS=1 python benchmarks/coda_cr.py --embedder minilm \\
        --index-root indexes/coda_gb_minilm_s10 --cache-dir cache/coda_gb_minilm

Per question (both subsets, every dev question: data README), the shipped ``coda`` is run
with detail; its candidate pool (the kept items' chunks, the ``dense_pool`` nearest and
the best BM25 chunks, as ``CodaRetriever._relevance``) and the 40 nearest / 40 best BM25
chunks ("wide") get each evidence statement's offline coverage once (docs/architecture.md
§9: a statement is covered by a context when one of its passages covers it), so a
selection rule's top-5 coverage is a lookup. The replica of ``coda``'s formula is checked
against the retriever's own top 5 (``replica_agreement``). Reported per subset and type:
the greedy oracle of the pool and of "wide"; what association changes (``coda`` against
the same formula with ``graph_weight`` 0: chunks it brings, statements they add and the
displaced chunks held); the statements ``coda`` misses though a pool chunk covers them,
and whether that chunk holds a kept item (association reached it); and selection rules
(``rules``) on the same pool. Writes ``benchmarks/results/coda_cr_<embedder>.json``.
"""
from __future__ import annotations

import argparse
import json
import pickle
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hyperrag_fast.chunking import chunk_passage  # noqa: E402
from hyperrag_fast.coda.retrieve import CodaOptions  # noqa: E402
from hyperrag_fast.embed.cache import CachedEmbedder  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.data import load_dataset  # noqa: E402
from hyperrag_fast.eval.coverage import content_words, statement_coverage, windows  # noqa: E402
from hyperrag_fast.eval.gbench import QTYPES, _safe, load_graphrag_bench  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402
from hyperrag_fast.index import HyperIndex  # noqa: E402
from hyperrag_fast.prebuilt import ensure_prebuilt  # noqa: E402
from hyperrag_fast.retriever import Retriever  # noqa: E402

WIDE, K = 40, 5
CR = "Complex Reasoning"


def _z(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / max(float(x.std()), 1e-12)


def question_rows(d: Path, qs, emb, o: CodaOptions, golds=None) -> list[dict]:
    """Everything a selection rule needs, per question of the source index at ``d``:
    GraphRAG-Bench questions (units = evidence statements, offline coverage) or, with
    ``golds`` (one set of gold passage strings per question), a multi-hop family (units =
    gold passages: a unit's coverage is the passage itself, so coverage = recall)."""
    ix = HyperIndex.load(d, embedder=emb)
    # a CODA system saved before its graphs were saved is assembled (no extraction, no
    # embedding: prebuilt.assemble_saved_coda) and published in a new generation
    st = Retriever(ix, emb, prebuilt=ensure_prebuilt(d, ix, ["coda"])).state
    cr, g = st.coda.retriever, st.coda.retriever.g
    passages = [chunk_passage(c) for c in ix.chunks]
    wins = None if golds is not None else [windows([p]) for p in passages]
    words = [set(content_words(p)) for p in passages]
    cv = np.asarray(ix.chunk_vec, np.float32)
    sv, sc = np.asarray(ix.edge_vec, np.float32), np.asarray(ix.graph.edge_chunk)
    eptr, echk = np.asarray(g.ent_chunk_ptr), np.asarray(g.ent_chunks)
    rptr, rchk = np.asarray(g.rel_chunk_ptr), np.asarray(g.rel_chunks)
    qv = np.asarray(emb.embed([q.question for q in qs]), np.float32)
    rows = []
    for i, (q, v) in enumerate(zip(qs, qv)):
        res = cr.retrieve(v, q.question, K, o, True, st.bm25)
        det = res.detail
        KE, KR = det["kept_entities"], det["kept_relations"]
        ez, rz = _z((g.ent_vec @ v).astype(np.float64)), _z((g.rel_vec @ v).astype(np.float64))
        items: dict[int, list[tuple[str, float]]] = defaultdict(list)
        for key, ids, z, ptr, chk in (("e", KE, ez, eptr, echk), ("r", KR, rz, rptr, rchk)):
            for x in ids.tolist():
                cs_x = chk[ptr[x]:ptr[x + 1]]
                w = max(0.0, float(z[x])) / (1.0 + np.log(max(len(cs_x), 1)))
                for c in cs_x.tolist():
                    items[int(c)].append((f"{key}{x}", w))
        cs = (cv @ v).astype(np.float64)
        bm = st.bm25.scores(q.question)
        bm = bm / max(float(bm.max()), 1e-12)
        smax = np.full(len(passages), -1.0)
        np.maximum.at(smax, sc, (sv @ v).astype(np.float64))
        dn = np.argsort(-cs, kind="stable")
        bn = np.argsort(-bm, kind="stable")
        bm_top = [int(c) for c in bn[:max(o.dense_pool, K)] if bm[c] > 0]
        pool = sorted(set(items) | set(dn[:o.dense_pool].tolist()) | set(bm_top))
        wide = sorted(set(pool) | set(dn[:WIDE].tolist()) | set(bn[:WIDE].tolist()))
        if golds is None:
            units = list(q.evidence)
            cov = {c: np.array([statement_coverage(s, wins[c], passages[c]).covered
                                for s in units], bool) for c in wide}
        else:
            units = sorted(golds[i])
            cov = {c: np.array([passages[c] == u for u in units], bool) for c in wide}
        qw = set(content_words(q.question))
        bptr, bidx, _ = st.bm25._csc
        tset: dict[int, set[int]] = defaultdict(set)
        tidf = {}
        pool_set = set(wide)  # the "wide" rules read the terms of every wide chunk
        for t in st.bm25.terms(q.question).tolist():
            docs = bidx[bptr[t]:bptr[t + 1]]
            tidf[t] = float(np.log(1.0 + (len(passages) - docs.size + 0.5) / (docs.size + 0.5)))
            for c in docs.tolist():
                if c in pool_set:
                    tset[c].add(t)
        rows.append({"type": getattr(q, "qtype", "all"), "pool": np.array(pool), "wide": wide,
                     "cov": cov, "n_st": len(units), "cs": cs, "bm": np.where(np.isin(
                         np.arange(len(passages)), bm_top), bm, 0.0), "smax": smax,
                     "items": items, "qw": qw, "words": words, "cv": cv,
                     "tset": dict(tset), "tidf": tidf,
                     "coda": res.chunk_ids.tolist()})
    return rows


def select(r: dict, o: CodaOptions, rule: str = "max", gw: float | None = None,
           lam: float = 0.0, lw: float | None = None, fw: float | None = None,
           wide: bool = False, mu: float = 0.0) -> list[int]:
    """Top K of the pool: ``rule`` "max" is ``coda`` (a chunk's largest kept-item
    weight), "novel" counts each kept item once over the chosen chunks (summed weights
    of the items not yet chosen), "qcov" adds ``lam`` x the share of the question's
    content words a chunk newly covers, "mmr" subtracts ``lam`` x the largest cosine with
    a chosen chunk. ``wide``: the pool plus the 40 nearest and 40 best BM25 chunks (a
    larger candidate pool; BM25 is read only where the pool has it)."""
    gw = o.graph_weight if gw is None else gw
    pool = np.array(r["wide"]) if wide else r["pool"]
    if rule == "dense":
        return [int(c) for c in pool[np.lexsort((pool, -r["cs"][pool]))][:K]]
    lw = o.lexical_weight if lw is None else lw
    fw = o.fact_weight if fw is None else fw
    base = o.dense_weight * r["cs"][pool] + lw * r["bm"][pool] + fw * r["smax"][pool]
    seen: set[str] = set()
    qcov: set[str] = set()
    tcov: set[int] = set()
    chosen: list[int] = []
    near = np.zeros(pool.size)
    free = np.ones(pool.size, bool)
    while len(chosen) < min(K, pool.size):
        if rule in ("novel", "novelmax"):
            agg = sum if rule == "novel" else (lambda ws: max(ws, default=0.0))
            g = np.array([agg([w for k, w in r["items"].get(int(c), ()) if k not in seen])
                          for c in pool])
        else:
            g = np.array([max((w for _, w in r["items"].get(int(c), ())), default=0.0) for c in pool])
        val = base + gw * g
        if rule == "qcov" and r["qw"]:
            val = val + lam * np.array([len((r["qw"] & r["words"][c]) - qcov) for c in pool]) / len(r["qw"])
        if rule in ("tcov", "tcovu", "tcov2") and r["tidf"]:
            wt = (r["tidf"] if rule == "tcov" else {t: 1.0 for t in r["tidf"]} if rule == "tcovu"
                  else {t: v * v for t, v in r["tidf"].items()})
            tot = sum(wt.values())
            val = val + lam * np.array([sum(wt[t] for t in r["tset"].get(int(c), set()) - tcov)
                                        for c in pool]) / tot
        if rule == "mmr":
            val = val - lam * np.maximum(near, 0.0)
        if mu:  # with any rule: minus ``mu`` x the largest cosine with a chosen chunk
            val = val - mu * np.maximum(near, 0.0)
        cand = np.flatnonzero(free)
        for j in cand[np.lexsort((pool[cand], -val[cand]))]:
            vj = r["cv"][pool[j]]
            free[j] = False
            if o.dedup_sim <= 0 or all(float(vj @ r["cv"][c]) <= o.dedup_sim for c in chosen):
                c = int(pool[j])
                chosen.append(c)
                seen.update(k for k, _ in r["items"].get(c, ()))
                qcov |= r["qw"] & r["words"][c]
                tcov |= r["tset"].get(c, set())
                near = np.maximum(near, r["cv"][pool] @ vj)
                break
        else:
            break
    return chosen


def coverage(r: dict, ids) -> np.ndarray:
    got = np.zeros(r["n_st"], bool)
    for c in ids:
        got |= r["cov"].get(int(c), False)
    return got


def oracle(r: dict, cands) -> float:
    got = np.zeros(r["n_st"], bool)
    for _ in range(K):
        best = max(cands, key=lambda c: int((r["cov"][c] & ~got).sum()))
        got |= r["cov"][best]
    return float(got.mean()) if r["n_st"] else 0.0


def by_type(rows, values) -> dict:
    by = defaultdict(list)
    for r, x in zip(rows, values):
        by[r["type"]].append(x)
    out = {t: float(np.mean(by[t])) for t in QTYPES if by[t]}
    out["all"] = float(np.mean(values))
    return out


RULES = {"dense (in pool)": {"rule": "dense"}, "coda (max, gw 0.03)": {},
         "no association (gw 0)": {"gw": 0.0}}
RULES.update({f"max gw {g}": {"gw": g} for g in (0.1, 0.3)})
RULES.update({f"novelmax gw {g}": {"rule": "novelmax", "gw": g} for g in (0.03, 0.1)})
RULES.update({f"lw {x}": {"lw": x} for x in (0.0, 0.1, 0.2, 0.5)})
RULES.update({f"fw {x}": {"fw": x} for x in (0.0, 0.1, 0.4)})
RULES.update({f"qcov {x}": {"rule": "qcov", "lam": x} for x in (0.05, 0.1, 0.2, 0.3, 0.5)})
RULES.update({f"qcov {x} gw {g}": {"rule": "qcov", "lam": x, "gw": g}
              for x in (0.1, 0.2, 0.3) for g in (0.0, 0.1)})
RULES.update({f"qcov {x} lw {y}": {"rule": "qcov", "lam": x, "lw": y}
              for x in (0.1, 0.2, 0.3) for y in (0.1, 0.2)})
RULES.update({f"tcov {x}": {"rule": "tcov", "lam": x} for x in (0.05, 0.1, 0.2, 0.3, 0.5)})
RULES.update({f"tcovu {x}": {"rule": "tcovu", "lam": x} for x in (0.1, 0.2, 0.3)})
RULES.update({f"tcov {x} gw {g}": {"rule": "tcov", "lam": x, "gw": g}
              for x in (0.1, 0.2, 0.3) for g in (0.0, 0.1)})
RULES.update({f"tcov {x} lw {y}": {"rule": "tcov", "lam": x, "lw": y}
              for x in (0.1, 0.2, 0.3) for y in (0.1, 0.2)})
RULES.update({f"mmr {x}": {"rule": "mmr", "lam": x} for x in (0.1, 0.3)})
# session 14: larger weights, idf^2 term weights, a wider candidate pool
RULES.update({f"tcov {x}": {"rule": "tcov", "lam": x} for x in (0.7, 1.0)})
RULES.update({f"tcov2 {x}": {"rule": "tcov2", "lam": x} for x in (0.2, 0.5, 1.0)})
RULES.update({f"tcov {x} wide": {"rule": "tcov", "lam": x, "wide": True} for x in (0.2, 0.5, 1.0)})
RULES.update({"coda wide": {"wide": True}})
RULES.update({f"tcov {x} mmr {m}": {"rule": "tcov", "lam": x, "mu": m}
              for x in (0.3, 0.5) for m in (0.1, 0.2)})


def analyse(rows, o: CodaOptions) -> dict:
    agree = [select(r, o) == r["coda"] for r in rows]
    out = {"n_questions": len(rows), "replica_agreement": float(np.mean(agree)),
           "oracle_pool": by_type(rows, [oracle(r, r["pool"].tolist()) for r in rows]),
           "oracle_wide": by_type(rows, [oracle(r, r["wide"]) for r in rows]),
           "pool_size": by_type(rows, [float(r["pool"].size) for r in rows]),
           "dense_sd_top20": by_type(rows, [float(np.std(np.sort(r["cs"])[-20:])) for r in rows]),
           "dense_top1_minus_20th": by_type(rows, [float(np.sort(r["cs"])[-1] - np.sort(r["cs"])[-20])
                                                   for r in rows])}
    added, gain, loss, miss, reached, rank = [], [], [], [], [], []
    for r in rows:
        a, b = select(r, o), select(r, o, gw=0.0)
        new, old = set(a) - set(b), set(b) - set(a)
        added.append(float(len(new)))
        ca, cb = coverage(r, a), coverage(r, b)
        gain.append(float((ca & ~cb).sum()) / max(r["n_st"], 1))
        loss.append(float((cb & ~ca).sum()) / max(r["n_st"], 1))
        pool_cov = [c for c in r["pool"].tolist()]
        m = rch = 0
        ranks = []
        base = r["cs"] + 0.3 * r["bm"] + 0.2 * r["smax"]
        order = sorted(pool_cov, key=lambda c: -base[c])
        for s in np.flatnonzero(~ca):
            holders = [c for c in pool_cov if r["cov"][c][s]]
            if holders:
                m += 1
                rch += any(c in r["items"] for c in holders)
                ranks.append(min(order.index(c) for c in holders) + 1)
        miss.append(m / max(r["n_st"], 1))
        reached.append(rch / m if m else np.nan)
        rank.append(float(np.median(ranks)) if ranks else np.nan)
    out["association_vs_gw0"] = {
        "chunks_changed_in_top5": by_type(rows, added),
        "statements_gained_share": by_type(rows, gain),
        "statements_lost_share": by_type(rows, loss)}
    out["missed_in_pool"] = {
        "share_of_statements": by_type(rows, miss),
        "covering_chunk_holds_kept_item": {t: float(np.nanmean(v)) for t, v in _group(rows, reached).items()},
        "median_rank_of_best_covering_chunk": {t: float(np.nanmedian(v)) for t, v in _group(rows, rank).items()}}
    out["rules"] = {name: by_type(rows, [float(coverage(r, select(r, o, **spec)).mean())
                                         if r["n_st"] else 0.0 for r in rows])
                    for name, spec in RULES.items()}
    return out


def _group(rows, values) -> dict:
    by = defaultdict(list)
    for r, x in zip(rows, values):
        by[r["type"]].append(x)
        by["all"].append(x)
    return by


FAMILIES = {"2wiki": ("2wikimultihopqa", "dev"), "hotpot": ("hotpotqa_train", "test"),
            "musique": ("musique_dev", "all")}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--index-root", default=None, help="GraphRAG-Bench per-source indexes")
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--subsets", default="medical,novel")
    p.add_argument("--family", action="append", default=[],
                   help="NAME=INDEX for a multi-hop dev family (2wiki, hotpot, musique)")
    p.add_argument("--every", type=int, default=1, help="every n-th GraphRAG-Bench question (speed)")
    p.add_argument("--out", default=None)
    p.add_argument("--rows-cache", default=None, help="directory: per-family rows (pickle), reused")
    a = p.parse_args()
    emb0 = make_embedder(a.embedder)
    emb = CachedEmbedder(emb0, Path(a.cache_dir) / "embeddings.sqlite") if a.cache_dir else emb0
    o = CodaOptions()
    out = {"command": "python benchmarks/coda_cr.py " + " ".join(sys.argv[1:]),
           "git_commit": _git("rev-parse", "HEAD"), "machine": machine_info(),
           "embedder": emb0.name, "top_k": K, "subsets": {}}
    jobs = []
    if a.index_root:
        for sub in a.subsets.split(","):
            _, qs = load_graphrag_bench(sub)
            qs = qs[::a.every]
            jobs.append((sub, [(Path(a.index_root) / sub / _safe(src),
                                [q for q in qs if q.source == src], None)
                               for src in sorted({q.source for q in qs})]))
    for spec in a.family:
        name, d = spec.split("=", 1)
        ds = load_dataset(*FAMILIES[name])
        jobs.append((name, [(Path(d), ds.questions, [lab.gold for lab in ds.labels])]))
    for sub, parts in jobs:
        pk = Path(a.rows_cache) / f"{sub}_{a.embedder}_{a.every}.pkl" if a.rows_cache else None
        if pk is not None and pk.is_file():
            rows = pickle.loads(pk.read_bytes())
        else:
            rows = []
            for d, qs, golds in parts:
                rows += question_rows(d, qs, emb, o, golds)
            if pk is not None:
                pk.parent.mkdir(parents=True, exist_ok=True)
                pk.write_bytes(pickle.dumps(rows))
        out["subsets"][sub] = res = analyse(rows, o)
        print(sub, json.dumps({k: res[k] for k in ("replica_agreement", "oracle_pool", "dense_sd_top20",
                                                   "association_vs_gw0", "missed_in_pool")}), flush=True)
        for name, cov in res["rules"].items():
            print(f"{sub:>8} {name:>24} all {cov['all']:.3f} CR {cov.get(CR, 0):.3f}", flush=True)
    path = Path(a.out) if a.out else ROOT / "benchmarks" / "results" / f"coda_cr_{a.embedder}.json"
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
