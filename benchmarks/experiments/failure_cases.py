"""Worked failure cases of the default ``stitch`` method with every intermediate score.

    python benchmarks/experiments/failure_cases.py --index-dir indexes/2wiki --n 3

Takes, per question type, the first ``n`` test-split questions (file order) whose
Recall@k < 1 and writes, for each, the gold passages' fate (in C_q? sim, Score, prior, pi, rank), the top-8 with
their scores, the most activated entity states (A, a_space, a_time, a) and the seeds.
Output: benchmarks/experiments/results/failure_cases.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from hyperrag_fast.embed.registry import make_embedder
from hyperrag_fast.eval.data import load_dataset
from hyperrag_fast.eval.harness import default_embedder, default_extractor, load_or_build_index
from hyperrag_fast.retriever import QueryOptions, Retriever


def _title(ix, c: int) -> str:
    return ix.chunks[int(c)].title


def describe(ix, r, q, gold: frozenset[str], passages: list[str]) -> list[str]:
    res = r.retrieve(q.question, QueryOptions(), detail=True)
    d = res.detail
    cq = np.asarray(d["cq"])
    pos = {int(c): i for i, c in enumerate(cq)}
    order = np.argsort(-np.asarray(d["cq_pi"]), kind="stable")
    rank = {int(cq[i]): k + 1 for k, i in enumerate(order)}
    g = ix.graph
    out = [f"### {q.qid}: {q.question}", ""]
    gold_ids = [i for i, p in enumerate(passages) if p in gold]
    out += ["Gold passages:", "", "| title | in C_q | sim(q,c) | Score | prior | pi | rank |",
            "|---|---|---|---|---|---|---|"]
    for c in gold_ids:
        if c in pos:
            i = pos[c]
            out.append(f"| {_title(ix, c)} | yes | {d['cq_sim'][i]:.3f} | {d['cq_score'][i]:.3f} | "
                       f"{d['cq_prior'][i]:.4f} | {d['cq_pi'][i]:.4f} | {rank[c]} |")
        else:
            sim = float(ix.chunk_vec[c] @ r.embedder.embed([q.question])[0])
            out.append(f"| {_title(ix, c)} | no | {sim:.3f} | - | - | - | - |")
    out += ["", f"|C_q| = {len(cq)}; top-8 retrieved:", "", "| # | title | gold | sim | Score | prior | pi |",
            "|---|---|---|---|---|---|---|"]
    for k, i in enumerate(order[:8]):
        c = int(cq[i])
        out.append(f"| {k + 1} | {_title(ix, c)} | {'yes' if c in gold_ids else ''} | "
                   f"{d['cq_sim'][i]:.3f} | {d['cq_score'][i]:.3f} | {d['cq_prior'][i]:.4f} | "
                   f"{d['cq_pi'][i]:.4f} |")
    seeds = sorted({g.group_key[g.node_group[v]] for v in np.asarray(d["seed_nodes"])})
    out += ["", f"Question-entity seeds (name groups): {', '.join(seeds) or 'none'}", ""]
    a = np.asarray(d["node_a"])
    top = np.argsort(-a, kind="stable")[:8]
    out += ["Most influenced entity states:", "", "| state (chunk) | A | a_space | a_time | a |",
            "|---|---|---|---|---|"]
    for i in top:
        v = int(d["node_ids"][i])
        out.append(f"| {g.node_name[v]} ({_title(ix, g.node_chunk[v])}) | {d['node_A'][i]:.3f} | "
                   f"{d['node_space'][i]:.3f} | {d['node_time'][i]:.3f} | {a[i]:.3f} |")
    return out + [""]


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default="2wikimultihopqa", choices=("2wikimultihopqa", "hotpotqa_train"))
    p.add_argument("--index-dir", default="indexes/2wiki")
    p.add_argument("--cache-dir", default="cache")
    p.add_argument("--embedder", default=None, help="embedder kind (default: config.DEFAULT_EMBEDDER)")
    p.add_argument("--n", type=int, default=3, help="cases per question type")
    p.add_argument("--k", type=int, default=8, help="a failure has Recall@k < 1")
    p.add_argument("--out", default="benchmarks/experiments/results/failure_cases.md")
    a = p.parse_args(argv)
    ds = load_dataset(a.dataset, "test")
    emb = make_embedder(a.embedder) if a.embedder else default_embedder()
    ix, _ = load_or_build_index(ds, default_extractor(), emb, a.index_dir, a.cache_dir)
    r = Retriever(ix, emb)
    passages = ds.passages
    lines = [f"# Worked failure cases: `stitch` (default options) on {a.dataset} test, "
             f"{a.n} per question type (Recall@{a.k} < 1, file order)", "",
             f"Command: `python benchmarks/experiments/failure_cases.py {' '.join(argv or sys.argv[1:])}`  ",
             f"Embedder: `{emb.name}`", ""]
    cases: dict[str, list[str]] = {}
    for q, lab in zip(ds.questions, ds.labels):
        if len(cases.get(lab.qtype, [])) >= a.n:
            continue
        res = r.retrieve(q.question, QueryOptions())
        got = {passages[ix.chunk_index(c.chunk_id)] for c in res.chunks[:a.k]}
        if len(got & lab.gold) < len(lab.gold):
            cases.setdefault(lab.qtype, []).append(describe(ix, r, q, lab.gold, passages))
    for qtype in sorted(cases):
        lines += [f"## {qtype or 'untyped'}", ""]
        for case in cases[qtype]:
            lines += case
    Path(a.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
