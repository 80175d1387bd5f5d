"""A results-preserving lead for CODA's bge-small name embedding (issue 23 item 3), measured
and not adopted: run the int8 model layer by layer over many names ("layer-major") instead
of name by name. Each name still has its own ONNX runs of batch one, so every vector is
the one the code makes; a layer's int8 weights (~1.8 MB) are read by all the names in a
block while they sit in the core's L2 cache, instead of all 12 layers' (~21 MB) once per
name.

Needs the ``onnx`` package (not a dependency of hyperrag_fast) to cut the shipped model
into 13 graphs (embeddings, then each layer) at the tensors that cross layers; each piece
is optimised in memory by onnxruntime as the whole model is.

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
import re
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


def pieces(model_path: str) -> list:
    """[(input names, output names, serialized model)]: embeddings, then layers 0-11."""
    import onnx
    from onnx.utils import Extractor
    m = onnx.shape_inference.infer_shapes(onnx.load(model_path))
    g = m.graph
    produced = {o: n for n in g.node for o in n.output}
    inits = {i.name for i in g.initializer}

    def seg(n) -> int:
        r = re.search(r"/encoder/layer\.(\d+)/", n.output[0])
        return int(r.group(1)) if r else (11 if n.output[0] in {o.name for o in g.output} else -1)

    seg_of = {o: seg(n) for n in g.node for o in n.output}
    used: dict[str, set] = {}
    for n in g.node:
        for x in n.input:
            used.setdefault(x, set()).add(seg(n))
    final = {o.name for o in g.output}

    def const(x: str) -> bool:
        return x in inits or (x in produced and produced[x].op_type == "Constant")

    ex, out = Extractor(m), []
    for i in range(-1, 12):
        nodes = [n for n in g.node if seg(n) == i and n.op_type != "Constant"]
        ins = sorted({x for n in nodes for x in n.input
                      if x and not const(x) and seg_of.get(x, -2) != i})
        outs = sorted({o for n in nodes for o in n.output if used.get(o, set()) - {i} or o in final})
        out.append((ins, outs, ex.extract_model(ins, outs).SerializeToString()))
    return out


class LayerMajor:
    """The encoder's vectors, run a piece at a time over blocks of names (one thread)."""

    def __init__(self, enc, model_path: str, block: int) -> None:
        from hyperrag_fast.embed.onnx_encoder import import_onnxruntime
        ort = import_onnxruntime()
        self.enc, self.block, self.parts = enc, block, []
        for ins, outs, raw in pieces(model_path):
            o = ort.SessionOptions()
            o.intra_op_num_threads, o.inter_op_num_threads = 1, 1
            o.enable_cpu_mem_arena, o.log_severity_level = False, 3
            o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            self.parts.append((ins, outs, ort.InferenceSession(
                raw, sess_options=o, providers=["CPUExecutionProvider"])))
        self.final = self.parts[-1][1][0]

    def embed(self, texts: list[str]) -> np.ndarray:
        from hyperrag_fast.embed.base import l2_normalize
        encs = self.enc.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        out = np.zeros((len(texts), self.enc.dim), np.float32)
        for b in range(0, len(encs), self.block):
            states = []
            for e in encs[b:b + self.block]:
                a = np.asarray([e.ids], np.int64)
                states.append({"input_ids": a, "attention_mask": np.ones_like(a),
                               "token_type_ids": np.zeros_like(a)})
            for ins, outs, s in self.parts:
                for st in states:
                    st.update(zip(outs, s.run(outs, {k: st[k] for k in ins})))
            for r, st in enumerate(states):
                out[b + r] = st[self.final][0, 0]  # CLS pooling (bge-small)
        return l2_normalize(out)


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
    lm = LayerMajor(one, str(one.default_model_path()), a.block)
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
