"""A results-preserving lead for CODA's bge-small name embedding (issue 23 item 3), measured
and not adopted: run the int8 model layer by layer over many names ("layer-major") instead
of name by name. Each name still has its own ONNX runs of batch one, so every vector is
the one the code makes; a layer's int8 weights (~1.8 MB) are read by all the names in a
block while they sit in the core's L2 cache, instead of all 12 layers' (~21 MB) once per
name.

Needs the ``onnx`` package to cut the shipped model into 13 graphs (embeddings, then each
layer) at the tensors that cross layers. Since layermajor7 the runner is the package's
(``hyperrag_fast/embed/layer_major.py``: pieces cut once, saved pre-optimised and mapped);
the committed results before that came from this file's own copy (pieces optimised in
memory), which gave the same vectors.

    OPENBLAS_NUM_THREADS=1 python benchmarks/experiments/coda_layer_major.py --index indexes/codaq_2w_bge --names 3000 --out benchmarks/experiments/results/coda_name_embed/layer_major_bge-small.json

Compared, alternating (``--rounds``) on the first ``--names`` names consolidation embeds
(the raw KG's order; ``coda_name_embed.todo_names``):

* ``code_2t``: ``kg_vectors._embed_calls`` as consolidation calls it (two threads, one
  shared single-threaded session); ``layer_major_2t``: two threads, each over its half of
  the names, layer-major in blocks of ``--block`` names, sessions shared;
* ``embed_1t`` (the encoder's ``embed``, one thread) and ``layer_major_1t``.

Every variant's rows are compared with the code's (bit-identical or not); ``--all-names``
also checks all the names (one thread each way, not timed).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command, machine  # noqa: E402
from coda_name_embed import todo_names  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True, help="a bge-small index whose names CODA embeds")
    ap.add_argument("--names", type=int, default=3000)
    ap.add_argument("--block", type=int, default=256, help="names per layer-major block")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--all-names", action="store_true", help="also check every name (slow)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    from hyperrag_fast.coda import kg_vectors
    names, emb = todo_names(a.index)
    if getattr(emb, "pooling", None) != "cls":
        raise SystemExit("this experiment reproduces bge-small (CLS pooling) only")
    one = emb.with_threads(1)
    from hyperrag_fast.embed.layer_major import layer_major
    lm = layer_major(one, a.block)  # the package's runner (since layermajor7; was this file's)
    sample = names[:a.names]

    def code_2t():
        got = dict(p for part, v in kg_vectors._embed_calls(emb, sample) for p in zip(part, v))
        return np.stack([got[n] for n in sample])

    def layer_major_2t():
        h = -(-len(sample) // 2)
        with ThreadPoolExecutor(2) as ex:
            return np.concatenate(list(ex.map(lm.embed, [sample[:h], sample[h:]])))

    fns = {"code_2t": code_2t, "layer_major_2t": layer_major_2t,
           "embed_1t": lambda: one.embed(sample), "layer_major_1t": lambda: lm.embed(sample)}
    ref = code_2t()
    rates: dict[str, list] = {k: [] for k in fns}
    same = {}
    load0 = __import__("os").getloadavg()
    for _ in range(a.rounds):
        for k, f in fns.items():
            t = time.perf_counter()
            got = f()
            rates[k].append(len(sample) / (time.perf_counter() - t))
            same[k] = int((got == ref).all(axis=1).sum())
    med = {k: round(statistics.median(v), 1) for k, v in rates.items()}
    res = {"names_timed": len(sample), "block": a.block, "rounds": a.rounds,
           "names_per_s": {k: {"median": med[k], "rounds": [round(x, 1) for x in v]}
                           for k, v in rates.items()},
           "ratio": {"layer_major_2t/code_2t": round(med["layer_major_2t"] / med["code_2t"], 3),
                     "layer_major_1t/embed_1t": round(med["layer_major_1t"] / med["embed_1t"], 3)},
           "identical_rows_vs_code": same,
           "loadavg": {"start": load0, "end": __import__("os").getloadavg()}}
    if a.all_names:
        x, y = one.embed(names), lm.embed(names)
        res["all_names"] = {"names": len(names), "identical_rows": int((x == y).all(axis=1).sum())}
    res.update(machine=machine(), command=command())
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: res[k] for k in res if k not in ("machine",)}, indent=1))


if __name__ == "__main__":
    main()
