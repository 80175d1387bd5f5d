"""Complex Reasoning per statement (issue 23, session 21): which evidence statements the
best baseline's top 5 (BM25 on Novel, dense on Medical) covers that ``coda``'s top 5
misses, and why; then candidate selection signals replayed by lookup.

    OPENBLAS_NUM_THREADS=1 python benchmarks/coda_cr_diag.py --embedder minilm \\
        --index-root indexes/coord17_gb_minilm --cache-dir cache/coord17_gb_minilm \\
        --rows-cache <dir> --out <file>

Rows are ``benchmarks/coda_cr.py``'s (``question_rows``: the shipped ``coda``'s pool, each
pool / "wide" chunk's statement coverage) plus, per "wide" chunk, its full BM25 score
(``coda`` reads BM25 only for the best ``max(dense_pool, top_k)`` chunks) and, per
3-sentence window (the offline metric's unit, docs/architecture.md §9), the idf share of
the question's BM25 terms the window holds. The replay of ``coda``'s selection is
``benchmarks/coda_select_grid.py``'s (checked against the retriever's own top 5).
"""
from __future__ import annotations

import argparse
import json
import pickle
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from coda_cr import CR, question_rows  # noqa: E402
from coda_select_grid import compact, select as grid_select  # noqa: E402
from hyperrag_fast.chunking import chunk_passage  # noqa: E402
from hyperrag_fast.embed.cache import CachedEmbedder  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.coverage import sentences  # noqa: E402
from hyperrag_fast.eval.gbench import QTYPES, _safe, load_graphrag_bench  # noqa: E402
from hyperrag_fast.eval.harness import _git  # noqa: E402
from hyperrag_fast.index import HyperIndex  # noqa: E402
from hyperrag_fast.prebuilt import ensure_prebuilt  # noqa: E402
from hyperrag_fast.retriever import Retriever  # noqa: E402
from hyperrag_fast.settings import CodaOptions  # noqa: E402

TOK = re.compile(r"(?u)\b\w+\b")  # lexical._TOKEN
K = 5


def extra_rows(d: Path, qs, emb, rows) -> None:
    """Adds ``bmf`` (full BM25 of every chunk) and ``win`` (per wide chunk: the best
    3-sentence window's idf share of the question's BM25 terms) to ``rows``."""
    ix = HyperIndex.load(d, embedder=emb)
    st = Retriever(ix, emb, prebuilt=ensure_prebuilt(d, ix, ["coda"])).state
    bm = st.bm25
    passages = [chunk_passage(c) for c in ix.chunks]
    sent_terms = {}
    for q, r in zip(qs, rows):
        terms = bm.terms(q.question).tolist()
        idf = {t: r["tidf"][t] for t in terms}
        tot = sum(idf.values()) or 1.0
        r["bmf"] = bm.scores(q.question).copy()
        win = {}
        for c in r["wide"]:
            if c not in sent_terms:
                sent_terms[c] = [{bm._vocab[t] for t in TOK.findall(s.lower()) if t in bm._vocab}
                                 for s in sentences(passages[c])]
            sw = sent_terms[c]
            best = 0.0
            for i in range(max(1, len(sw) - 2)):
                u = set().union(*sw[i:i + 3]) if sw else set()
                best = max(best, sum(v for t, v in idf.items() if t in u) / tot)
            win[c] = best
        r["win"] = win


def rows_for(sub, index_root, emb, o, cache: Path | None, tag: str):
    pk = cache / f"{sub}_{tag}_diag.pkl" if cache else None
    if pk is not None and pk.is_file():
        return pickle.loads(pk.read_bytes())
    _, qs = load_graphrag_bench(sub)
    rows = []
    for src in sorted({q.source for q in qs}):
        d = Path(index_root) / sub / _safe(src)
        sq = [q for q in qs if q.source == src]
        rs = question_rows(d, sq, emb, o)
        extra_rows(d, sq, emb, rs)
        rows += rs
    if pk is not None:
        pk.parent.mkdir(parents=True, exist_ok=True)
        pk.write_bytes(pickle.dumps(rows))
    return rows


def cov_of(r, ids) -> np.ndarray:
    got = np.zeros(r["n_st"], bool)
    for c in ids:
        got |= r["cov"].get(int(c), False)
    return got


def diagnose(rows, base: str) -> dict:
    """Per CR question: statements the baseline's top 5 covers and ``coda``'s misses."""
    o = CodaOptions()
    out = Counter()
    comp = defaultdict(list)
    for r in rows:
        if r["type"] != CR or not r["n_st"]:
            continue
        if base == "bm25":
            b = [int(c) for c in np.argsort(-r["bmf"], kind="stable")[:K] if r["bmf"][c] > 0]
        else:
            b = [int(c) for c in np.argsort(-r["cs"], kind="stable")[:K]]
        a = r["coda"][:K]
        ca, cb = cov_of(r, a), cov_of(r, b)
        out["questions"] += 1
        out["statements"] += r["n_st"]
        out["coda_covered"] += int(ca.sum())
        out["base_covered"] += int(cb.sum())
        out["base_only"] += int((cb & ~ca).sum())
        out["coda_only"] += int((ca & ~cb).sum())
        out["both_missed"] += int((~ca & ~cb).sum())
        out["coverable_in_doc_wide"] += int(cov_of(r, r["wide"]).sum())
        # top-5 redundancy: covered statements held by >= 2 chosen chunks; chosen chunks
        # covering no statement
        for name, ids in (("coda", a), ("base", b)):
            m = np.array([r["cov"].get(int(c), np.zeros(r["n_st"], bool)) for c in ids], bool)
            out[f"{name}_redundant_statements"] += int((m.sum(0) >= 2).sum()) if m.size else 0
            out[f"{name}_chunks_covering_nothing"] += int((~m.any(1)).sum()) if m.size else 0
        cm = compact(r)
        pos = {int(c): j for j, c in enumerate(cm["pool"].tolist())}
        p = {k: getattr(o, k) for k in ("lexical_weight", "fact_weight", "graph_weight",
                                         "cover_weight", "cover_pairs", "dedup_sim")}
        val = cm["cs"] + p["lexical_weight"] * cm["bm"] + p["fact_weight"] * cm["sm"] + \
            p["graph_weight"] * cm["g"]
        order = np.lexsort((cm["pool"], -val))
        rank = {int(cm["pool"][j]): i + 1 for i, j in enumerate(order)}
        sel = [pos[c] for c in a if c in pos]
        last = sel[-1] if sel else None
        assoc_only = set(r["items"]) - set(np.argsort(-r["cs"], kind="stable")[:o.dense_pool].tolist()) \
            - {int(c) for c in np.flatnonzero(r["bm"] > 0)}
        out["coda_top5_from_association_only"] += sum(c in assoc_only for c in a)
        for s in np.flatnonzero(cb & ~ca):
            hold = [c for c in b if r["cov"][c][s]]
            c = min(hold, key=lambda x: rank.get(x, 10 ** 6))
            out["base_only_holder_in_pool"] += c in pos
            out["base_only_holder_holds_kept_item"] += c in r["items"]
            out["base_only_holder_in_bm25_top20"] += bool(r["bm"][c] > 0)
            # is the statement's holder crowded out by a chosen chunk covering a statement
            # that another chosen chunk covers too?
            if c in pos and last is not None:
                j = pos[c]
                comp["rank"].append(rank[c])
                for k, key in (("cs", "dense"), ("bm", "bm25_top20"), ("sm", "best_sentence"),
                               ("g", "graph")):
                    w = 1.0 if k == "cs" else p.get({"bm": "lexical_weight", "sm": "fact_weight",
                                                       "g": "graph_weight"}.get(k, ""), 1.0)
                    comp[f"{key}_minus_5th"].append(float(w * (cm[k][j] - cm[k][last])))
                comp["bm25_full_norm_holder"].append(float(r["bmf"][c] / max(r["bmf"].max(), 1e-12)))
                comp["win_holder_minus_5th"].append(float(r["win"].get(c, 0) - r["win"].get(a[-1], 0)))
    res = dict(out)
    res["holder_component_median"] = {k: float(np.median(v)) for k, v in comp.items()}
    res["holder_component_mean"] = {k: float(np.mean(v)) for k, v in comp.items()}
    res["holder_rank_hist"] = {f"<={x}": int(sum(v <= x for v in comp["rank"]))
                               for x in (5, 8, 10, 15, 20, 40)} if comp["rank"] else {}
    return res


def variant_rows(rows, lex: str, win_w: float) -> list[dict]:
    """compact rows with ``bm`` = BM25 over every pool chunk (``lex`` "all") and the
    window term share added to the best-sentence column as ``win_w`` / fact_weight."""
    out = []
    for r in rows:
        cm = compact(r)
        if lex == "all":
            cm["bm"] = r["bmf"][cm["pool"]] / max(float(r["bmf"].max()), 1e-12)
        cm["win"] = np.array([r["win"].get(int(c), 0.0) for c in cm["pool"]])
        out.append(cm)
    return out


def evaluate(cms, p: dict, win_w: float = 0.0) -> dict:
    by = defaultdict(list)
    for cm in cms:
        if win_w:
            cm = dict(cm, sm=cm["sm"] + win_w / max(p["fact_weight"], 1e-9) * cm["win"])
        s = grid_select(cm, p, K)
        v = float(cm["cov"][s].any(0).mean()) if cm["n_st"] and len(s) else 0.0
        by[cm["type"]].append(v)
        by["all"].append(v)
    return {t: float(np.mean(by[t])) for t in list(QTYPES) + ["all"] if by[t]}


def main() -> None:
    a = argparse.ArgumentParser()
    a.add_argument("--index-root", required=True)
    a.add_argument("--embedder", default="minilm")
    a.add_argument("--cache-dir", default=None)
    a.add_argument("--subsets", default="medical,novel")
    a.add_argument("--rows-cache", default=None)
    a.add_argument("--points", default="[]", help="JSON list of [options, lex, win_w]")
    a.add_argument("--out", default=None)
    args = a.parse_args()
    emb0 = make_embedder(args.embedder)
    emb = CachedEmbedder(emb0, Path(args.cache_dir) / "embeddings.sqlite") if args.cache_dir else emb0
    o = CodaOptions()
    d0 = {k: getattr(o, k) for k in ("cover_weight", "fact_weight", "lexical_weight",
                                      "graph_weight", "dedup_sim", "cover_pairs")}
    doc = {"command": "python benchmarks/coda_cr_diag.py " + " ".join(
        x for x in sys.argv[1:] if not x.startswith("/")), "git_commit": _git("rev-parse", "HEAD"),
        "embedder": emb0.name, "subsets": {}}
    for sub in args.subsets.split(","):
        rows = rows_for(sub, args.index_root, emb, o,
                        Path(args.rows_cache) if args.rows_cache else None, args.embedder)
        cm0 = variant_rows(rows, "top", 0.0)
        agree = float(np.mean([[int(c) for c in cm["pool"][grid_select(cm, d0, K)]] == r["coda"][:K]
                               for cm, r in zip(cm0, rows)]))
        res = {"replica_agreement": agree,
               "diag_vs_bm25": diagnose(rows, "bm25"), "diag_vs_dense": diagnose(rows, "dense"),
               "points": []}
        print(sub, args.embedder, json.dumps({k: res[k] for k in ("replica_agreement",)}), flush=True)
        print(json.dumps(res["diag_vs_bm25"]), "\n", json.dumps(res["diag_vs_dense"]), flush=True)
        cms = {"top": cm0}
        for spec in [[{}, "top", 0.0]] + json.loads(args.points):
            p, lex, ww = dict(d0, **spec[0]), spec[1], spec[2]
            if lex not in cms:
                cms[lex] = variant_rows(rows, lex, 0.0)
            cov = evaluate(cms[lex], p, ww)
            res["points"].append({"options": spec[0], "lexical": lex, "window_weight": ww,
                                  "coverage": cov})
            print(f"{sub} {json.dumps(spec)} all {cov['all']:.4f} CR {cov[CR]:.4f}", flush=True)
        doc["subsets"][sub] = res
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
