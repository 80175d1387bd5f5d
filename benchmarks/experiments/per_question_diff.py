"""Per-question R@k difference of two methods from one ``python -m hyperrag_fast.eval ... --dump``
folder (issue 21: does the graph stage cost recall, and on which questions?).

    python -m hyperrag_fast.eval --dataset 2wikimultihopqa --split dev --methods stitch,no_ppr \
        --embedder bge-small --index-dir indexes/2wiki_bge-small --cache-dir cache/bge-small \
        --out-dir <dump dir> --dump --quiet
    python benchmarks/experiments/per_question_diff.py <dump dir> --a stitch --b no_ppr \
        --k 5 --out <out.json>
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dump_dir")
    p.add_argument("--a", default="stitch")
    p.add_argument("--b", default="no_ppr")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--out", required=True)
    p.add_argument("--note", default="", help="the command that made the dump (recorded)")
    a = p.parse_args(argv)
    rows = {}
    for m in (a.a, a.b):
        f = next(Path(a.dump_dir).glob(f"*_{m}_topk.jsonl"))
        rows[m] = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()]
    diff, total = [], 0.0
    for x, y in zip(rows[a.a], rows[a.b]):
        assert x["qid"] == y["qid"]
        ra, rb = (sum(r["hits"][:a.k]) / len(r["gold"]) for r in (x, y))
        total += ra - rb
        if ra != rb:
            diff.append({"qid": x["qid"], "type": x["type"], "question": x["question"], "gold": x["gold"],
                         a.a: {"recall": round(ra, 4), "top": x["top"][:a.k]},
                         a.b: {"recall": round(rb, 4), "top": y["top"][:a.k]}})
    n = len(rows[a.a])
    args = list(argv or sys.argv[1:])
    if "--note" in args:  # recorded apart, as dump_command
        del args[args.index("--note"):args.index("--note") + 2]
    out = {"command": "python benchmarks/experiments/per_question_diff.py " + " ".join(args),
           "dump_command": a.note, "k": a.k, "n_questions": n,
           f"recall@{a.k}": {m: round(sum(sum(r["hits"][:a.k]) / len(r["gold"]) for r in rows[m]) / n, 5)
                             for m in (a.a, a.b)},
           "mean_difference": round(total / n, 5),
           "questions_better_worse": [sum(d[a.a]["recall"] > d[a.b]["recall"] for d in diff),
                                      sum(d[a.a]["recall"] < d[a.b]["recall"] for d in diff)],
           "questions": diff}
    Path(a.out).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in out.items() if k != "questions"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
