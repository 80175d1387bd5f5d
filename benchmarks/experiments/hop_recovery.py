"""Which candidate generator would bring back the gold passages the preset loses at R@5
(issue 21, the second hop; docs/architecture.md §5). An upper bound, not a method: for
every gold passage ranked below 5 by the embedder's preset, is it among the chunks each
generator proposes from the first round's top chunk t (the chunk ranked first)?

    python benchmarks/experiments/hop_recovery.py --embedder minilm \
        --index 2wikimultihopqa=indexes/2wiki_minilm \
        --index hotpotqa_train=indexes/quality_hotpot_minilm \
        --index musique_dev=indexes/quality_musique_minilm --cache-dir cache/quality_search \
        --out benchmarks/experiments/results/quality_search/hop_recovery_minilm

Generators (k = ``--k`` chunks each; "bridge" = a name group of t that neither the
question nor t's title names, weighted as ``stitch.bridge_groups``): ``q+bridge node`` =
the ANN top-k of normalise(q + v) for the best bridge state v of t; ``q+bridge text`` =
the top-k of the embedded string "question bridge-name" (one more embedder call);
``q+t`` = normalise(q + v(t)) (= ``hop_dense``); ``bridge title`` = the chunks of the
pages whose title is a bridge name of t; ``bridge group > max`` = chunks of bridge
groups larger than ``hop_bridge_max`` (which ``hop_bridge`` skips).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from quality_search import FAMILIES, Bench  # noqa: E402

from hyperrag_fast.config import preset_for  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402
from hyperrag_fast.methods import METHODS  # noqa: E402
from hyperrag_fast.methods.base import OWN  # noqa: E402
from hyperrag_fast.methods.stitch import _named_groups, bridge_groups  # noqa: E402

GENS = ("q+bridge node", "q+bridge text", "q+name vec", "bm25 q+name", "bm25 name", "q+t",
        "bridge title", "bridge group > max", "any")


def _norm(v):
    n = float(np.sqrt((v * v).sum()))
    return (v / n).astype(np.float32) if n > 0 else None


def proposals(b: Bench, emb, i: int, t: int, o, k: int) -> dict[str, set[int]]:
    st = b.r.state
    eng, lk = st.engines[OWN], st.lookups[OWN]
    g = eng.graph
    q = b.qvecs[i].astype(np.float64)
    text = b.ds.questions[i].question
    ann = st.index.ann["chunk_vec"]
    named = _named_groups(lk, text, t)
    grp, w = bridge_groups(eng, b.qvecs[i], t, named)
    out = {x: set() for x in GENS}
    v = _norm(q + eng.chunk_vec[t].astype(np.float64))
    if v is not None:
        out["q+t"] = set(ann.search(v, k + 1)[0].tolist()) - {t}
    if grp.size:
        best = int(grp[np.argmax(w)])
        t_nodes = g.chunk_nodes[g.chunk_ptr[t]:g.chunk_ptr[t + 1]]
        vb = [int(x) for x in t_nodes if g.node_group[x] == best]
        v = _norm(q + eng.node_vec[vb[0]].astype(np.float64))
        if v is not None:
            out["q+bridge node"] = set(ann.search(v, k + 1)[0].tolist()) - {t}
        name = g.group_key[best] if g.group_key else ""
        qv = np.asarray(emb.embed([f"{text} {name}"]), np.float32)[0]
        out["q+bridge text"] = set(ann.search(_norm(qv.astype(np.float64)), k + 1)[0].tolist()) - {t}
        nv = np.asarray(emb.embed([name]), np.float64)[0]
        v = _norm(q + nv)
        if v is not None:
            out["q+name vec"] = set(ann.search(v, k + 1)[0].tolist()) - {t}
        if st.bm25 is not None:
            out["bm25 q+name"] = set(st.bm25.top_k(f"{text} {name}", k + 1)[0].tolist()) - {t}
            out["bm25 name"] = set(st.bm25.top_k(name, k + 1)[0].tolist()) - {t}
        table = lk.titles._table()
        for x in grp.tolist():
            key = g.group_key[x]
            if key in table:
                out["bridge title"] |= set(np.asarray(lk.titles._more.get(key, [table[key]])).tolist())
            if g.group_chunks[x] > o.hybrid.hop_bridge_max:
                nodes = g.group_nodes[g.group_ptr[x]:g.group_ptr[x + 1]]
                for n in nodes.tolist():
                    out["bridge group > max"] |= set(g.nc_chunks[g.nc_ptr[n]:g.nc_ptr[n + 1]].tolist())
    out["any"] = set().union(*(out[x] for x in GENS[:-1]))
    return out


def run(b: Bench, emb, o, k: int) -> dict:
    fn, st = METHODS[o.method], b.r.state
    pas = b.ds.passages
    lost = {x: 0 for x in ("lost", "in C_q", "top chunk gold")}
    hits = {x: 0 for x in GENS}
    new = {x: 0 for x in GENS}  # recovered and not in C_q before
    sizes = {x: [] for x in GENS}
    for i, (v, qq, gold) in enumerate(zip(b.qvecs, b.ds.questions, b.golds)):
        out = fn(st, v, qq.question, o, True)
        ids = out.chunk_ids.tolist()
        gold_ids = [c for c in range(len(pas)) if pas[c] in gold] if len(gold) else []
        miss = [c for c in gold_ids if c not in ids[:5]]
        if not miss or not ids:
            continue
        t = int(ids[0])
        prop = proposals(b, emb, i, t, o, k)
        cq = set(np.asarray(out.detail["cq"]).tolist())
        for x in GENS:
            sizes[x].append(len(prop[x]))
        for c in miss:
            lost["lost"] += 1
            lost["in C_q"] += c in cq
            lost["top chunk gold"] += t in gold_ids
            for x in GENS:
                hits[x] += c in prop[x]
                new[x] += c in prop[x] and c not in cq
    return {**lost, "recovered_by": hits, "recovered_not_in_cq": new,
            "median_proposed": {x: float(np.median(s)) if s else 0.0 for x, s in sizes.items()}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--index", action="append", required=True, help="DATASET=INDEX_DIR")
    p.add_argument("--cache-dir", default="cache")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    index = dict(x.split("=", 1) for x in a.index)
    emb = make_embedder(a.embedder)
    o = preset_for(emb.name)
    res = {}
    for f, (ds, sp) in FAMILIES.items():
        if ds in index:
            b = Bench(ds, sp, index[ds], emb, a.cache_dir, a.data_dir)
            res[f] = run(b, emb, o, a.k)
            print(f, json.dumps(res[f]), file=sys.stderr, flush=True)
    out = {"command": "python benchmarks/experiments/hop_recovery.py " + " ".join(argv or sys.argv[1:]),
           "machine": machine_info(), "git_commit": _git("rev-parse", "HEAD"),
           "git_dirty": bool(_git("status", "--porcelain")), "embedder": emb.name, "k": a.k,
           "families": res}
    Path(a.out + ".json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
