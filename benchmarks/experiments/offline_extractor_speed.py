"""Offline extractor throughput and name-group sizes on 2WikiMultiHopQA (docs/architecture.md §2, §5).

    python benchmarks/experiments/offline_extractor_speed.py [--sample 1000] [--out benchmarks/experiments/results/offline_extractor_speed.md]

Speed: paragraphs/s (passage = title + "\\n" + text, one chunk each) on a fixed
random sample, for n_process = 1 and 2 (model load excluded). Groups: over the
whole corpus with n_process = 2, the 15 biggest normalised names by chunk count.
"""
from __future__ import annotations

import argparse
import collections
import json
import platform
import random
import sys
import time

from hyperrag_fast.chunking import chunk_documents, load_documents
from hyperrag_fast.extract.offline import OfflineExtractor
from hyperrag_fast.lexical import normalize_name

CORPUS = "/work/shared/data/2wikimultihopqa/corpus.json"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=CORPUS)
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--out", default="benchmarks/experiments/results/offline_extractor_speed.md")
    args = ap.parse_args()
    docs = load_documents(args.corpus).documents
    chunks = chunk_documents(docs, max_tokens=100_000)  # one chunk per passage
    sample = random.Random(0).sample(chunks, min(args.sample, len(chunks)))
    rows = []
    for n_process in (1, 2):
        ex = OfflineExtractor(n_process=n_process)
        ex.extract(sample[:8])  # load the model (and warm up) outside the timing
        t = time.perf_counter()
        ex.extract(sample)
        dt = time.perf_counter() - t
        rows.append((n_process, len(sample), dt, len(sample) / dt))
        print(f"n_process={n_process}: {len(sample) / dt:.1f} paragraphs/s", file=sys.stderr)
    t = time.perf_counter()
    out = OfflineExtractor(n_process=2).extract(chunks)
    full_dt = time.perf_counter() - t
    chunks_of = collections.defaultdict(set)
    states = collections.Counter()
    n_seg = n_states = 0
    for c, x in zip(chunks, out):
        for seg in x.segments:
            n_seg += 1
            for name, _ in seg.entities:
                key = normalize_name(name)
                chunks_of[key].add(c.chunk_id)
                states[key] += 1
                n_states += 1
    sizes = sorted(((len(v), k) for k, v in chunks_of.items()), reverse=True)
    errors = sum(x.error is not None for x in out)
    lines = [
        "# Offline extractor speed and name-group sizes (2WikiMultiHopQA corpus)",
        "",
        f"Command: `python benchmarks/experiments/offline_extractor_speed.py --sample {args.sample}`  ",
        f"Extractor: `{OfflineExtractor().name}` (spaCy senter + ner, docs/architecture.md §2)  ",
        f"Machine: {platform.machine()}, Python {platform.python_version()}, 2 cores shared; "
        "passage = title + text as one chunk; the title line is not parsed (title = subject entity).",
        "",
        "| n_process | passages | seconds | paragraphs/s |",
        "|---|---|---|---|",
        *[f"| {n} | {m} | {dt:.1f} | {r:.1f} |" for n, m, dt, r in rows],
        "",
        f"Whole corpus ({len(chunks)} passages, n_process=2): {full_dt:.0f} s, "
        f"{n_seg} segments, {n_states} entity states, {len(chunks_of)} name groups, "
        f"{errors} chunks with errors.",
        "",
        "Top 15 normalised names by number of chunks (group size = entity states):",
        "",
        "| name | chunks | states |",
        "|---|---|---|",
        *[f"| {k} | {n} | {states[k]} |" for n, k in sizes[:15]],
        "",
        f"Groups over 50 chunks: {sum(n > 50 for n, _ in sizes)}; over 10 chunks: "
        f"{sum(n > 10 for n, _ in sizes)}; singletons: {sum(n == 1 for n, _ in sizes)}.",
    ]
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
