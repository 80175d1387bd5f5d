"""Several passages per title: the HotpotQA sample with one chunk per sentence (issue 15).

    python benchmarks/multi_passage_titles.py --index indexes/hotpot_sentences \
        --cache-dir cache --out benchmarks/experiments/results/quality_search/multi_passage_titles

2Wiki and the HotpotQA sample hold one passage per title, so a rule keyed on titles
(``HybridOptions.title_chunks``) cannot be judged there on a corpus where one title spans
several passages and only some of them hold the evidence. This probe splits every HotpotQA
passage into its sentences (each a chunk titled by its page) and takes the supporting
sentences as gold: a retriever that lifts every passage of a named title crowds the top-k
with the wrong sentences. Nothing is tuned here; rows are read side by side.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from hyperrag_fast.config import TUNED
from hyperrag_fast.embed.registry import make_embedder
from hyperrag_fast.eval.data import (Dataset, Label, Question, _read_json, resolve_data_dir)
from hyperrag_fast.eval.harness import (_git, default_extractor, embed_questions,
                                        load_or_build_index, machine_info, run_method)
from hyperrag_fast.eval.metrics import mean_recall
from hyperrag_fast.chunking import Document, chunk_id
from hyperrag_fast.records import Chunk
from hyperrag_fast.retriever import Retriever

KS = (2, 5, 8)


def sentence_dataset(data_dir: str | None) -> Dataset:
    """HotpotQA sample, one chunk per non-empty sentence; gold = supporting sentences."""
    d = resolve_data_dir(data_dir) / "hotpotqa_train"
    corpus = _read_json(d / "corpus.json")
    docs, chunks = [], []
    for title, sents in corpus.items():
        text = "".join(sents)
        docs.append(Document(title, title, text))
        pos = 0
        for s in sents:
            start, pos = pos, pos + len(s)
            body = s.strip()
            if body:
                chunks.append(Chunk(chunk_id(title, start, pos, body), title, title, body, start, pos))
    qs, labels = [], []
    for r in _read_json(d / "questions.json"):
        ctx = dict((t, s) for t, s in r["context"])
        gold = set()
        for t, i in r["supporting_facts"]:
            if i < len(ctx.get(t, ())) and ctx[t][i].strip():
                gold.add(t + "\n" + ctx[t][i].strip())
        qs.append(Question(str(r["_id"]), r["question"]))
        labels.append(Label(frozenset(gold), str(r["type"])))
    return Dataset("hotpotqa_sentences", "test", docs, chunks, qs, labels)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--index", required=True, help="index folder (built on first use)")
    p.add_argument("--cache-dir", default="cache")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", required=True, help="output stem (.json and .md)")
    a = p.parse_args(argv)
    emb = make_embedder(a.embedder)
    ds = sentence_dataset(a.data_dir)
    ix, info = load_or_build_index(ds, default_extractor(), emb, a.index, a.cache_dir)
    r = Retriever(ix, emb)
    qv, _ = embed_questions(emb, [q.question for q in ds.questions], progress=False)
    golds = [lab.gold for lab in ds.labels]
    h = TUNED.hybrid
    rows = [("dense", "dense", TUNED), ("bm25", "bm25", TUNED), ("stitch_paper", "stitch_paper", TUNED),
            ("stitch, title_chunks 0", "stitch", replace(TUNED, hybrid=replace(h, title_chunks=0.0)))]
    rows += [(f"stitch, title_chunks {v:g}", "stitch", replace(TUNED, hybrid=replace(h, title_chunks=v)))
             for v in (0.3, 1.0, 3.0, 10.0)]
    rows.append(("stitch (config.TUNED)", "stitch", TUNED))
    out_rows = []
    for label, method, o in rows:
        out = run_method(r, method, o, ds, qv, max(KS), progress=False)
        m = mean_recall(out["ranked"], golds, KS)
        out_rows.append({"label": label, "method": method, "title_chunks": o.hybrid.title_chunks,
                         **{f"recall@{k}": round(m[f"recall@{k}"], 4) for k in KS}})
        print(label, [out_rows[-1][f"recall@{k}"] for k in KS], file=sys.stderr, flush=True)
    res = {"command": "python benchmarks/multi_passage_titles.py " + " ".join(argv or sys.argv[1:]),
           "machine": machine_info(), "git_commit": _git("rev-parse", "HEAD"),
           "git_dirty": bool(_git("status", "--porcelain")), "embedder": emb.name,
           "chunks": len(ds.chunks), "titles": len(ds.documents), "questions": len(ds.questions),
           "index": {k: v for k, v in info.items() if k != "report"}, "rows": out_rows}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out + ".json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    lines = ["# Several passages per title (HotpotQA sample, one chunk per sentence)", "",
             f"Command: `{res['command']}` at `{res['git_commit'][:7]}`; {res['chunks']} chunks "
             f"under {res['titles']} titles, {res['questions']} questions, gold = supporting "
             f"sentences.", "", "| row | R@2 | R@5 | R@8 |", "|---|---|---|---|"]
    lines += [f"| {x['label']} | " + " | ".join(f"{x[f'recall@{k}']:.3f}" for k in KS) + " |"
              for x in out_rows]
    Path(a.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
