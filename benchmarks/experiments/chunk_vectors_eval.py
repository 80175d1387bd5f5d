"""Dev recall of the two chunk-vector representations (``--chunk-vectors text|pooled``,
docs/architecture.md §10), side by side in one run:

    python benchmarks/experiments/chunk_vectors_eval.py --work WORK      # ~15 min, 2 builds

For each option, ``hyperrag index`` builds the 2WikiMultiHopQA corpus (the harness's
passages as JSONL, one chunk per passage: ``--max-tokens`` = the longest passage), then
``python -m hyperrag_fast.eval --split dev --methods dense,stitch --index-dir`` evaluates
it; the harness must reuse that index (its manifest and corpus checksum match), which is
checked. Per option: build wall and peak RSS, texts embedded, R@2/5/8. Dev split only
(first 200 questions). Writes the harness's files to ``WORK/eval_<option>/`` and
``benchmarks/experiments/results/chunk_vectors_ab.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/
import _common as C  # noqa: E402
from bench_index_build import run_cli  # noqa: E402


def corpus_jsonl(path: Path) -> int:
    """The dev harness's passages as ``{"id", "title", "text"}`` lines; their longest word count."""
    from hyperrag_fast.eval.data import load_dataset
    ds = load_dataset("2wikimultihopqa", "dev")
    with open(path, "w", encoding="utf-8") as f:
        for c in ds.chunks:
            f.write(json.dumps({"id": c.doc_id, "title": c.title, "text": c.text},
                               ensure_ascii=False) + "\n")
    return ds.max_words


def main() -> None:
    from hyperrag_fast.config import CHUNK_VECTORS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, help="folder for the corpus, indexes, cache")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    src = work / "2wiki_dev.jsonl"
    max_words = corpus_jsonl(src)
    stamp = {"command": C.command(), "machine": C.machine()}
    out: dict = {"dataset": "2wikimultihopqa", "split": "dev", **stamp, "options": {}}
    for mode in CHUNK_VECTORS:
        ix = work / f"ix_{mode}"
        load = os.getloadavg()
        b = run_cli(["index", str(src), str(ix), "--chunk-vectors", mode, "--max-tokens",
                     str(max_words), "--force"], work)
        res_dir = work / f"eval_{mode}"
        cmd = [sys.executable, "-m", "hyperrag_fast.eval", "--dataset", "2wikimultihopqa",
               "--split", "dev", "--methods", "dense,stitch", "--index-dir", str(ix),
               "--cache-dir", str(work / "cache"), "--out-dir", str(res_dir), "--quiet"]
        subprocess.run(cmd, check=True)
        q = json.loads((res_dir / "quality_2wikimultihopqa_dev.json").read_text())
        if not q["index"].get("reused"):
            raise SystemExit(f"the harness rebuilt the {mode} index instead of reusing it")
        out["options"][mode] = {
            "build": {"wall_s": b["wall_s"], "peak_rss_mb": b["peak_rss_mb"],
                      "texts_embedded": b["out"]["report"]["embedded_texts"],
                      "embed_s": b["out"]["report"]["build"]["stages"]["embed"]["s"],
                      "loadavg_at_start": load},
            "eval_command": " ".join(cmd[1:]).replace(str(work), a.work),
            "recall": {m: {k: v for k, v in r.items() if k.startswith("recall@")}
                       for m, r in q["methods"].items()}}
        print(json.dumps({mode: out["options"][mode]["recall"]}), flush=True)
    o = out["options"]
    out["pooled_minus_text"] = {m: {k: o["pooled"]["recall"][m][k] - o["text"]["recall"][m][k]
                                    for k in o["text"]["recall"][m]} for m in o["text"]["recall"]}
    path = C.EXPERIMENTS / "chunk_vectors_ab.json"
    path.write_text(json.dumps(out, indent=2, default=C._default) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
