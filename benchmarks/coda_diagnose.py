"""Why CODA's associative navigation loses to its own entry points (issue 23): per
pathway, how many of the top-8 chunks it alone brings and how often they are gold;
how interference elimination scores gold and non-gold items; how hub entities (many
chunks) reach the top.

    python benchmarks/coda_diagnose.py --dataset 2wikimultihopqa --split dev \\
        --index indexes/coda_2wiki_minilm --methods coda_paper,coda

Needs the index's CODA structure (``hyperrag build-methods INDEX coda``). Writes
``benchmarks/results/coda_diagnose_<dataset>_<embedder>.json``.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hyperrag_fast.coda.retrieve import PAPER, CodaOptions  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.data import load_dataset  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402
from hyperrag_fast.index import HyperIndex  # noqa: E402
from hyperrag_fast.prebuilt import load_prebuilt  # noqa: E402
from hyperrag_fast.retriever import Retriever  # noqa: E402

PATHS = ("entry", "semantic", "contextual", "functional")
HUB = 20  # an entity in more chunks than this is a hub


def diagnose(r, g, qv, qs, golds, passages, o: CodaOptions, k: int = 8) -> dict:
    brought = Counter()
    gold_brought = Counter()
    z_kept = defaultdict(list)
    hub_top = 0
    n_top = 0
    kept_sizes = Counter()
    for v, q, gold in zip(qv, qs, golds):
        res = r.retrieve(v, q, k, o, detail=True)
        d = res.detail
        epath = dict(zip(d["entities"].tolist(), d["entity_path"]))
        rpath = dict(zip(d["relations"].tolist(), d["relation_path"]))
        ke, kr = set(d["kept_entities"].tolist()), set(d["kept_relations"].tolist())
        for p in PATHS:
            kept_sizes[p] += sum(epath[e] == p for e in ke) + sum(rpath[x] == p for x in kr)
        es = g.ent_vec @ v
        zs = (es - es.mean()) / max(es.std(), 1e-12)
        for c in res.chunk_ids.tolist():
            n_top += 1
            ins = [e for e in ke if c in set(g.ent_chunks[g.ent_chunk_ptr[e]:g.ent_chunk_ptr[e + 1]].tolist())]
            insr = [x for x in kr if c in set(g.rel_chunks[g.rel_chunk_ptr[x]:g.rel_chunk_ptr[x + 1]].tolist())]
            paths = {epath[e] for e in ins} | {rpath[x] for x in insr}
            src = next((p for p in PATHS if p in paths), "dense fill")
            is_gold = passages[c] in gold
            brought[src] += 1
            gold_brought[src] += is_gold
            for e in ins:
                z_kept["gold" if is_gold else "not_gold"].append(float(zs[e]))
            if ins and max(len(g.ent_chunks[g.ent_chunk_ptr[e]:g.ent_chunk_ptr[e + 1]]) for e in ins) > HUB and not is_gold:
                hub_top += 1
    return {"top_chunks_by_source": dict(brought),
            "gold_precision_by_source": {s: gold_brought[s] / brought[s] for s in brought},
            "kept_items_per_question": {p: kept_sizes[p] / len(qs) for p in PATHS},
            "entity_z_in_top_chunks": {k: {"mean": float(np.mean(v)), "n": len(v)}
                                       for k, v in z_kept.items()},
            "non_gold_top_chunks_holding_a_hub_entity": hub_top / max(n_top, 1)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default="2wikimultihopqa")
    p.add_argument("--split", default="dev")
    p.add_argument("--index", required=True)
    p.add_argument("--embedder", default="minilm")
    a = p.parse_args()
    ds = load_dataset(a.dataset, a.split)
    emb = make_embedder(a.embedder)
    ix = HyperIndex.load(a.index, embedder=emb)
    pre = load_prebuilt(a.index, ["coda"])
    ret = Retriever(ix, emb, prebuilt=pre)
    cr = ret.state.coda.retriever
    g = cr.g
    qs = [q.question for q in ds.questions]
    qv = np.asarray(emb.embed(qs), np.float32)
    golds = [lab.gold for lab in ds.labels]
    passages = ds.passages
    hub = np.diff(g.ent_chunk_ptr)
    out = {"command": "python benchmarks/coda_diagnose.py " + " ".join(sys.argv[1:]),
           "git_commit": _git("rev-parse", "HEAD"), "machine": machine_info(),
           "graph": {"entities": g.n_entities, "relations": g.n_relations,
                     "hubs_over_20_chunks": int((hub > HUB).sum()),
                     "max_entity_chunks": int(hub.max()),
                     "top_hubs": [[g.ent_name[i], int(hub[i])] for i in np.argsort(-hub)[:10]]},
           "rows": {}}
    variants = {"paper": PAPER, "paper_no_semantic": replace(PAPER, semantic=False),
                "paper_no_elimination": replace(PAPER, elimination=False),
                "ours": CodaOptions()}
    for name, o in variants.items():
        out["rows"][name] = diagnose(cr, g, qv, qs, golds, passages, o)
        print(name, json.dumps(out["rows"][name]))
    path = ROOT / "benchmarks" / "results" / f"coda_diagnose_{a.dataset}_{a.embedder}.json"
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
