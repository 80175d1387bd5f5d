"""Which candidate source would bring the missed gold passages in (issue 21, MuSiQue bge).

    python benchmarks/experiments/candidate_recall.py --embedder bge-small \\
        --index 2wikimultihopqa=indexes/2wiki_bge-small --index hotpotqa_train=indexes/hotpot_bge-small \\
        --index musique_dev=indexes/musique_bge-small --cache-dir cache/bge-small --out <out.json>

For each dev family, the embedder's preset runs with its top 50 read; every gold passage
ranked below 5 is "missed", and split into "outside C_q" (never a candidate) and "inside".
For each candidate source S (a set of chunks computed from the question and the preset's
final top chunks, label-free) the report counts the missed gold passages S holds that are
outside C_q (what S could add) and the mean number of chunks S adds beyond C_q (its cost).
Labels are read for the counts only.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from quality_search import Bench, family_parser  # noqa: E402

from hyperrag_fast.config import preset_for  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info  # noqa: E402
from hyperrag_fast.methods import METHODS  # noqa: E402
from hyperrag_fast.methods.base import OWN  # noqa: E402
from hyperrag_fast.methods.stitch import _named_groups, bridge_chunks  # noqa: E402

SPLITS = {"2wikimultihopqa": "dev", "hotpotqa_train": "test", "musique_dev": "all"}
DEEP = 50


def title_pages_of_groups(lk, groups: np.ndarray) -> set[int]:
    """The chunks of every page whose title's name key is the key of one of ``groups``."""
    keys, out = lk.graph.group_key, set()
    table = lk.titles._table()
    for g in np.asarray(groups).tolist():
        k = keys[g]
        if k in table:
            out.update(lk.titles._more.get(k, [table[k]]))
    return out


def sources(b: Bench, q: np.ndarray, text: str, top: np.ndarray) -> dict[str, set[int]]:
    state = b.r.state
    eng, lk = state.engines[OWN], state.lookups[OWN]
    ann = state.index.ann["chunk_vec"]
    pages = lk.titles.pages()
    g = eng.graph
    out: dict[str, set[int]] = {}
    for k in (100, 200):
        out[f"dense{k}"] = set(ann.search(q, k)[0].tolist())
    for k in (50, 100):
        out[f"bm25_{k}"] = set(state.bm25.top_k(text, k)[0].tolist()) if state.bm25 else set()
    for n in (1, 3):
        ps = set(pages[top[:n]].tolist()) - {-1}
        out[f"siblings_top{n}"] = set(np.flatnonzero(np.isin(pages, list(ps))).tolist())
    for n in (2, 3, 5):
        s: set[int] = set()
        for t in top[:n].tolist():
            s.update(bridge_chunks(eng, q, t, _named_groups(lk, text, t), 20)[0].tolist())
        out[f"bridge_top{n}"] = s
    out["bridge_top1_max100"] = set(bridge_chunks(eng, q, int(top[0]), _named_groups(lk, text, int(top[0])),
                                                  100)[0].tolist())
    for n in (1, 3, 5):
        s = set()
        for t in top[:n].tolist():
            tg = g.node_group[g.chunk_nodes[g.chunk_ptr[t]:g.chunk_ptr[t + 1]]]
            named = set(_named_groups(lk, text, t).tolist())
            s.update(title_pages_of_groups(lk, np.asarray([x for x in set(tg.tolist()) if x not in named])))
        out[f"bridge_title_pages_top{n}"] = s
    for n in (1, 3):
        s = set()
        for t in top[:n].tolist():
            for ids in lk.titles.chunks_named_in(b.ds.passages[t], 1):
                if ids.size and pages[ids[0]] != pages[t]:
                    s.update(ids.tolist())
        out[f"titles_in_text_top{n}"] = s
    return out


def diagnose(b: Bench, o) -> dict:
    fn = METHODS[o.method]
    o = o.with_top_k(DEEP)
    row_of = {p: i for i, p in enumerate(b.ds.passages)}
    n_gold = miss_out = miss_in = 0
    hits: dict[str, int] = {}
    hits_in: dict[str, int] = {}
    added: dict[str, list[int]] = {}
    for qq, lab, v in zip(b.ds.questions, b.ds.labels, b.qvecs):
        out = fn(b.r.state, v, qq.question, o, True)
        cq = set(np.asarray(out.detail["cq"]).tolist())
        top5 = set(out.chunk_ids[:5].tolist())
        src = sources(b, v, qq.question, np.asarray(out.chunk_ids, np.int64))
        for k, s in src.items():
            added.setdefault(k, []).append(len(s - cq))
        for p in lab.gold:
            c = row_of[p]
            n_gold += 1
            if c in top5:
                continue
            inside = c in cq
            miss_in += inside
            miss_out += not inside
            for k, s in src.items():
                if c in s:
                    if inside:
                        hits_in[k] = hits_in.get(k, 0) + 1
                    else:
                        hits[k] = hits.get(k, 0) + 1
    return {"gold": n_gold, "missed_outside_cq": miss_out, "missed_inside_cq": miss_in,
            "sources": {k: {"outside_cq_reached": hits.get(k, 0), "inside_cq_held": hits_in.get(k, 0),
                            "mean_added": round(float(np.mean(a)), 1)} for k, a in added.items()}}


def main(argv=None) -> int:
    a = family_parser(__doc__.split("\n\n")[0]).parse_args(argv)
    emb = make_embedder(a.embedder)
    o = preset_for(emb.name)
    res = {"command": "python benchmarks/experiments/candidate_recall.py " + " ".join(argv or sys.argv[1:]),
           "machine": machine_info(), "git_commit": _git("rev-parse", "HEAD"), "embedder": emb.name,
           "families": {}}
    for x in a.index:
        dataset, path = x.split("=", 1)
        b = Bench(dataset, SPLITS[dataset], path, emb, a.cache_dir, a.data_dir)
        res["families"][dataset] = d = diagnose(b, o)
        print(dataset, json.dumps(d, indent=1), flush=True)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
