"""Validation of the offline evidence coverage (hyperrag_fast/eval/coverage.py) against
hand labels of (evidence statement, retrieved context) pairs; see
benchmarks/graphrag_bench_labels/README.md.

    python benchmarks/gbench_labels.py sample --dumps DIR --out PAIRS.jsonl   # pairs to label
    python benchmarks/gbench_labels.py show PAIRS.jsonl --from 0 --to 10    # read them
    python benchmarks/gbench_labels.py score                                # agreement

``sample`` draws pairs stratified by subset and question type from the context dumps of
``python -m hyperrag_fast.eval --dataset graphrag_bench_* --dump`` (a random method of
``--methods`` and a random statement per question) and stores each context as character
spans of the source document (no corpus text enters the repository). ``show`` prints
statement and context only: never the metric's verdict. ``score`` rebuilds each context
from ``../shared/data``, applies the metric and reports accuracy and Cohen's kappa.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hyperrag_fast.eval.coverage import (THRESHOLD, THRESHOLD_V1, WINDOW, cohen_kappa,  # noqa: E402
                                         evidence_coverage)
from hyperrag_fast.eval.gbench import QTYPES, load_graphrag_bench  # noqa: E402

LABELS = ROOT / "benchmarks" / "graphrag_bench_labels" / "labels.jsonl"
HELDOUT = ROOT / "benchmarks" / "graphrag_bench_labels" / "labels_heldout.jsonl"
RESULT = ROOT / "benchmarks" / "results" / "gbench_metric_validation.json"


def _docs(subset: str, data_dir=None):
    docs, qs = load_graphrag_bench(subset, data_dir)
    return docs, {q.qid: q for q in qs}


def sample(a) -> None:
    rng = random.Random(a.seed)
    out = Path(a.out)
    pairs = ([json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
             if a.append else [])
    used = set()
    for f in a.exclude or ():
        used |= {json.loads(x)["qid"] for x in Path(f).read_text(encoding="utf-8").splitlines()}
    shift = a.first_pair - len(pairs) if a.first_pair is not None else 0
    for subset in a.subsets.split(","):
        docs, _ = _docs(subset, a.data_dir)
        rows: dict[str, dict] = {}
        for m in a.methods.split(","):
            path = Path(a.dumps) / f"quality-graphrag_bench_{subset}_{m}_contexts.jsonl"
            for line in path.read_text(encoding="utf-8").splitlines():
                r = json.loads(line)
                rows.setdefault(r["qid"], {"r": r, "ctx": {}})["ctx"][m] = r["passages"]
        by_type = defaultdict(list)
        for qid, v in rows.items():
            if qid not in used:
                by_type[v["r"]["type"]].append(qid)
        for t in QTYPES:
            for qid in rng.sample(sorted(by_type[t]), min(a.per_type, len(by_type[t]))):
                r, ctx = rows[qid]["r"], rows[qid]["ctx"]
                m = rng.choice(sorted(ctx))
                si = rng.randrange(len(r["evidence"]))
                text = docs[r["source"]].text
                spans = []
                for p in ctx[m][:a.k]:
                    s = text.find(p)
                    if s < 0:
                        raise ValueError(f"passage of {qid} not found in its source")
                    spans.append([s, s + len(p)])
                pairs.append({"pair": shift + len(pairs), "subset": subset, "qid": qid, "type": t,
                              "method": m, "k": a.k, "statement_index": si,
                              "statement": r["evidence"][si], "spans": spans})
    out.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs),
                           encoding="utf-8")
    print(f"{len(pairs)} pairs -> {a.out}")


def _context(p: dict, docs) -> list[str]:
    text = docs[p["subset"]][0][load_source(p, docs)].text
    return [text[s:e] for s, e in p["spans"]]


def load_source(p: dict, docs) -> str:
    return docs[p["subset"]][1][p["qid"]].source


def _all_docs(data_dir=None):
    return {s: _docs(s, data_dir) for s in ("medical", "novel")}


def show(a) -> None:
    docs = _all_docs(a.data_dir)
    pairs = [json.loads(x) for x in Path(a.pairs).read_text(encoding="utf-8").splitlines()]
    for p in pairs[a.start:a.stop]:
        print(f"===== pair {p['pair']} [{p['subset']} / {p['type']}]")
        print(f"STATEMENT: {p['statement']}")
        for i, c in enumerate(_context(p, docs)):
            print(f"--- passage {i + 1}\n{c}")
        print()


def agreement(rows: list[dict], docs, **metric) -> dict:
    """Accuracy, Cohen's kappa and confusion of the metric (``metric`` = keyword
    arguments of ``evidence_coverage``) against the labels of ``rows``."""
    human, machine = [], []
    per = defaultdict(lambda: [[], []])
    for p in rows:
        v = evidence_coverage([p["statement"]], _context(p, docs), **metric)[0].covered
        human.append(bool(p["label"]))
        machine.append(v)
        for key in (p["subset"], p["type"]):
            per[key][0].append(bool(p["label"]))
            per[key][1].append(v)
    n = len(rows)
    pairs = list(zip(human, machine))
    return {"n_labels": n, "accuracy": sum(h == m for h, m in pairs) / n,
            "kappa": cohen_kappa(human, machine),
            "positive_rate_labels": sum(human) / n, "positive_rate_metric": sum(machine) / n,
            "confusion": {"both_yes": sum(h and m for h, m in pairs),
                          "both_no": sum(not h and not m for h, m in pairs),
                          "label_yes_metric_no": sum(h and not m for h, m in pairs),
                          "label_no_metric_yes": sum(m and not h for h, m in pairs)},
            "by_group": {k: {"n": len(h), "accuracy": sum(x == y for x, y in zip(h, m)) / len(h),
                             "kappa": cohen_kappa(h, m) if len(set(h)) > 1 or len(set(m)) > 1
                             else None} for k, (h, m) in sorted(per.items())}}


def _read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def score(a) -> None:
    """Version 2 of the metric (the default) on the held-out labels is the headline (its
    rule was chosen on the design labels); both versions on both label sets beside it."""
    docs = _all_docs(a.data_dir)
    design, held = _read(LABELS), _read(HELDOUT)
    v1 = {"threshold": THRESHOLD_V1, "names": False}
    head = agreement(held, docs)
    out = {**{k: head[k] for k in ("n_labels", "accuracy", "kappa")},
           "headline": "metric version 2 (the default of hyperrag_fast/eval/coverage.py) on "
                       "the held-out labels, made after version 2 was fixed",
           "metric": {"version": 2, "window_sentences": WINDOW, "threshold": THRESHOLD,
                      "names_required": True},
           "heldout_v2": head, "heldout_v1": agreement(held, docs, **v1),
           "design_v2": agreement(design, docs), "design_v1": agreement(design, docs, **v1),
           "all_v2": agreement(design + held, docs),
           "labels": {"design": str(LABELS.relative_to(ROOT)),
                      "heldout": str(HELDOUT.relative_to(ROOT))},
           "command": "python benchmarks/gbench_labels.py score"}
    RESULT.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    mv = {k: out[k] for k in ("n_labels", "accuracy", "kappa")}
    mv.update(labels="held-out (benchmarks/graphrag_bench_labels/labels_heldout.jsonl)",
              metric_version=2, details=str(RESULT.relative_to(ROOT)))
    for name in ("quality-graphrag_bench.json", "quality-graphrag_bench_bge.json"):
        path = RESULT.parent / name
        if path.is_file():  # the results contract's metric_validation key
            d = json.loads(path.read_text(encoding="utf-8"))
            d["metric_validation"] = mv
            path.write_text(json.dumps(d, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for k in ("design_v1", "design_v2", "heldout_v1", "heldout_v2", "all_v2"):
        r = out[k]
        print(f"{k:>11}: n {r['n_labels']} accuracy {r['accuracy']:.3f} kappa {r['kappa']:.3f} "
              f"{r['confusion']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=None)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--dumps", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--methods", default="dense,bm25,coda_paper,coda")
    s.add_argument("--per-type", type=int, default=20)
    s.add_argument("--k", type=int, default=2, help="passages per labelled context")
    s.add_argument("--seed", type=int, default=23)
    s.add_argument("--subsets", default="medical,novel")
    s.add_argument("--append", action="store_true", help="add to the pairs already in --out")
    s.add_argument("--exclude", action="append", help="pairs/labels file whose questions "
                   "are not drawn again (repeatable)")
    s.add_argument("--first-pair", type=int, default=None, help="number of the first new pair")
    s.set_defaults(func=sample)
    s = sub.add_parser("show")
    s.add_argument("pairs")
    s.add_argument("--from", dest="start", type=int, default=0)
    s.add_argument("--to", dest="stop", type=int, default=10)
    s.set_defaults(func=show)
    s = sub.add_parser("score")
    s.set_defaults(func=score)
    a = p.parse_args()
    a.func(a)


if __name__ == "__main__":
    main()
