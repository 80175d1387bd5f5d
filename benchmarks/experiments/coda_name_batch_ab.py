"""What embedding CODA's entity names in batches would buy and move (issue 23 item 3), a
result-moving option measured, not adopted: ``hyperrag build-methods INDEX coda
stitch_consolidated`` with the embedder's default batch (bge-small: one text per ONNX run)
against the same step with ``--batches`` names per run, alternating, each a child
process (wall and peak RSS from ``os.wait4``, the step's stages from ``meta.json``).

    python benchmarks/experiments/coda_name_batch_ab.py --index indexes/<copy at its first generation> --embedder bge-small --batches 0,32 --rounds 2 --out benchmarks/experiments/results/coda_name_embed/batch_ab_bge-small.json

``0`` = the code as it is. ``--index`` must be a scratch copy: after each run its CURRENT
is set back to the generation it had and the new generation is deleted. The raw entity
vectors of each batched run are compared with the code's (identical rows, cosine).
Run it under the timing lock; the child inherits the environment.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import command, machine  # noqa: E402

#: the child: the hyperrag command, the embedder class's default batch set first
CHILD = ("import sys, importlib; b = int(sys.argv.pop(1)); mod, cls = sys.argv.pop(1).split(':'); "
         "e = getattr(importlib.import_module(mod), cls); "
         "e.default_batch_size = b or e.default_batch_size; "
         "from hyperrag_fast.console import run; sys.exit(run())")
CLASSES = {"bge-small": "hyperrag_fast.embed.onnx_bge:OnnxBgeSmall",
           "minilm": "hyperrag_fast.embed.onnx_minilm:OnnxMiniLM"}


def build(index: Path, embedder: str, batch: int) -> dict:
    """One ``build-methods`` child; the index is put back to its generation after."""
    gen0 = (index / "CURRENT").read_text().strip()
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(batch), CLASSES[embedder], "build-methods",
                          str(index), "coda", "stitch_consolidated", "--quiet"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        raise SystemExit(f"build-methods failed: {p.stderr.read().decode()[-2000:]}")
    gen = (index / "CURRENT").read_text().strip()
    coda = index / gen / "prebuilt" / "coda"
    meta = json.loads((coda / "meta.json").read_text())
    ent = np.load(coda / "raw_ent_vec.npy")
    (index / "CURRENT").write_text(gen0 + "\n")
    shutil.rmtree(index / gen)
    return {"wall_s": round(wall, 2), "peak_rss_mb": round(ru.ru_maxrss / 1024, 1),
            "cpu_s": round(ru.ru_utime + ru.ru_stime, 2),
            "stages_s": {k: v["s"] for k, v in meta["stages"].items()},
            "loadavg_after": os.getloadavg()}, ent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True, type=Path)
    ap.add_argument("--embedder", required=True, choices=["minilm", "bge-small"])
    ap.add_argument("--batches", default="0,32", help="0 = the code's default batch")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    batches = [int(x) for x in a.batches.split(",")]
    runs: dict[int, list] = {b: [] for b in batches}
    ref, moved = None, {}
    for _ in range(a.rounds):
        for b in batches:
            r, ent = build(a.index, a.embedder, b)
            runs[b].append(r)
            if b == 0:
                ref = ent if ref is None else ref
                moved[b] = {"identical_rows": int((ent == ref).all(axis=1).sum())}
            elif ref is not None:
                cos = (ent * ref).sum(axis=1)
                moved[b] = {"identical_rows": int((ent == ref).all(axis=1).sum()),
                            "rows": int(ent.shape[0]), "cos_min": float(cos.min()),
                            "cos_p01": float(np.quantile(cos, 0.01)),
                            "cos_median": float(np.median(cos))}
    med = {str(b): {k: float(np.median([r[k] for r in rs])) for k in ("wall_s", "peak_rss_mb")}
           | {"vectors_s": float(np.median([r["stages_s"]["vectors"] for r in rs]))}
           for b, rs in runs.items()}
    out = {"embedder": a.embedder, "runs": {str(b): rs for b, rs in runs.items()},
           "median": med, "raw_entity_vectors_vs_code": {str(b): m for b, m in moved.items()},
           "machine": machine(), "command": command()}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({"median": med, "moved": out["raw_entity_vectors_vs_code"]}, indent=1))


if __name__ == "__main__":
    main()
