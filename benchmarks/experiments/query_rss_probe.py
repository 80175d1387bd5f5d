"""Where a cold query's peak memory goes, one query feature at a time.

    python benchmarks/experiments/query_rss_probe.py --index indexes/2wiki [--processes 5] [--out query_rss.json]

Each process loads the index as ``hyperrag query`` does (same loader, ``lean`` settings),
then answers one question several times, each time with one more feature of the default
switched on, and records the process's peak RSS (``ru_maxrss``) after each: ``dense``;
``stitch`` with one round and no title features; with the title features (``title_words``,
``title_chunks``); the default (its second round, started from named titles too). The peak
only grows, so each step's increment is what that feature added. Medians over
``--processes`` fresh processes. Writes ``benchmarks/experiments/results/query_rss.json``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common
import _common as C  # noqa: E402

QUESTION = "Where was the director of the film The Last Voyage born?"
STEPS = ("load", "dense", "stitch one round, no titles", "+ title features", "+ second round (default)")

CHILD = """
import json, resource, sys
from dataclasses import replace
from hyperrag_fast.cli import _retriever, load_writer
from hyperrag_fast.config import TUNED
from hyperrag_fast.lean import settle, skip_blas_probe
skip_blas_probe()
path, q = sys.argv[1], sys.argv[2]
ix = load_writer(path, threads=1)
settle()
r = _retriever(ix, path, "stitch")
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
h = TUNED.hybrid
one = replace(h, hop_chunks=0, hop_titles=False)
out = [rss()]
for o in (replace(TUNED, method="dense"),
          replace(TUNED, hybrid=replace(one, title_words=False, title_chunks=0.0)),
          replace(TUNED, hybrid=one), TUNED):
    r.retrieve(q, o)
    out.append(rss())
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--processes", type=int, default=5)
    ap.add_argument("--out", default="query_rss.json")
    a = ap.parse_args()
    runs = []
    for _ in range(a.processes):
        p = subprocess.run([sys.executable, "-c", CHILD, a.index, QUESTION], capture_output=True,
                           text=True, check=True)
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    peaks = np.median(np.asarray(runs), axis=0)
    out = {"index": a.index, "question": QUESTION, "processes": a.processes,
           "peak_rss_mb_median": {s: round(float(v), 1) for s, v in zip(STEPS, peaks)},
           "added_mb_median": {s: round(float(v), 1) for s, v in
                               zip(STEPS[1:], np.median(np.diff(np.asarray(runs), axis=1), axis=0))},
           "runs": runs}
    C.write_result(a.out, out, C.EXPERIMENTS)
    print(json.dumps({k: out[k] for k in ("peak_rss_mb_median", "added_mb_median")}, indent=1))


if __name__ == "__main__":
    main()
