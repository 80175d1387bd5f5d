"""CODA consolidation's name embedding (issue 23 item 3: consolidation <= 20 % of
``hyperrag index``): the entity names ``build_coda``'s ``vectors`` stage embeds, one per
ONNX run (bge-small's int8 graph quantizes activations over the whole batch, so batching
moves vectors; ``embed/onnx_bge.py``). Variants alternate in one process, rounds apart,
so ratios hold on a loaded machine; every row is checked against the code's vectors.

    OPENBLAS_NUM_THREADS=1 python benchmarks/experiments/coda_name_embed.py --index indexes/codaq_2w_bge --embedder bge-small --out benchmarks/experiments/results/coda_name_embed/bge-small.json

Measured over the first ``--names`` names the index did not embed (the raw KG's order):

* ``code``: ``kg_vectors._embed_calls`` as consolidation calls it (one thread per core,
  one shared single-threaded session); ``two_sessions``: the same parts, each thread its
  own session; ``one_session_2_threads``: one session at two intra-op threads, in turn;
* one thread: ``embed_1t`` (the encoder's ``embed``), ``run_1t`` (``session.run`` alone on
  token ids made beforehand: what Python adds), ``iobinding_1t``, ``arena_1t`` (CPU arena
  on), ``in_memory_1t`` (the original model optimised in memory, not the saved copy);
* result-moving, reported only: ``batch_B_1t`` (B names per run), with how many rows
  stay bit-identical and the cosine to the code's rows;
* over all the names: how many ONNX runs deduplicating by token-id sequence instead of by
  string would save.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import command, machine  # noqa: E402


def todo_names(index_dir: str) -> tuple[list[str], object]:
    """The distinct entity names consolidation embeds (not among the index's texts)."""
    from hyperrag_fast.cli_components import load_writer
    from hyperrag_fast.coda.raw_kg import RawKG, chunk_kgs_from_extractions
    from hyperrag_fast.coda.system import known_vectors, offline_types
    ix = load_writer(index_dir, threads=1)
    got = offline_types(ix)
    kg = RawKG.from_chunk_kgs(chunk_kgs_from_extractions(ix.extractions, got[0] if got else None))
    known = known_vectors(ix)
    return [t for t in dict.fromkeys(kg.ent_name) if t not in known], ix.embedder


def _session(ort, path: str, arena: bool, optimise: bool):
    o = ort.SessionOptions()
    o.intra_op_num_threads, o.inter_op_num_threads = 1, 1
    o.enable_cpu_mem_arena, o.log_severity_level = arena, 3
    o.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimise
                                  else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return ort.InferenceSession(path, sess_options=o, providers=["CPUExecutionProvider"])


def _feeds(ids: list[int], inputs: set[str]) -> dict:
    a = np.asarray([ids], np.int64)
    f = {"input_ids": a, "attention_mask": np.ones_like(a), "token_type_ids": np.zeros_like(a)}
    return {k: v for k, v in f.items() if k in inputs}


def _pool(enc):
    """The encoder's pooling of one unpadded row (``OnnxEncoder.embed``'s query branch)."""
    def out(hidden):
        return (hidden[:, 0] if enc.pooling == "cls"
                else hidden.sum(axis=1) / np.float32(hidden.shape[1]))
    return out


def variants(emb, names: list[str], batches: list[int]) -> dict:
    """name -> zero-argument callable returning the (len(names), dim) vectors."""
    from hyperrag_fast.coda import kg_vectors
    from hyperrag_fast.embed.base import l2_normalize
    from hyperrag_fast.embed.onnx_encoder import import_onnxruntime
    ort = import_onnxruntime()
    one = emb.with_threads(1)
    two = emb.with_threads(2)
    other = type(emb)(**{**emb._args, "intra_op_threads": 1})
    enc_ids = [e.ids for e in one.tokenizer.encode_batch(names, add_special_tokens=True)]
    pool = _pool(one)
    inputs = {i.name for i in one.session.get_inputs()}
    out_name = one.session.get_outputs()[0].name

    def code():
        got = dict(p for part, v in kg_vectors._embed_calls(emb, names) for p in zip(part, v))
        return np.stack([got[n] for n in names])

    def two_sessions():
        size = -(-len(names) // 8)
        parts = [names[b:b + size] for b in range(0, len(names), size)]
        with ThreadPoolExecutor(2) as ex:
            futs = [ex.submit((one if k % 2 == 0 else other).embed, p) for k, p in enumerate(parts)]
            return np.concatenate([f.result() for f in futs])

    def loop(session):
        def run():
            out = np.zeros((len(names), emb.dim), np.float32)
            for i, ids in enumerate(enc_ids):
                out[i] = pool(session.run(None, _feeds(ids, inputs))[0])[0]
            return l2_normalize(out)
        return run

    def iobinding():
        out = np.zeros((len(names), emb.dim), np.float32)
        b = one.session.io_binding()
        for i, ids in enumerate(enc_ids):
            for k, v in _feeds(ids, inputs).items():
                b.bind_cpu_input(k, v)
            b.bind_output(out_name)
            one.session.run_with_iobinding(b)
            out[i] = pool(b.get_outputs()[0].numpy())[0]
        return l2_normalize(out)

    v = {"code": code, "two_sessions": two_sessions,
         "one_session_2_threads": lambda: two.embed(names),
         "embed_1t": lambda: one.embed(names), "run_1t": loop(one.session),
         "iobinding_1t": iobinding}
    from hyperrag_fast.embed.onnx_cache import optimised_model
    model = one.default_model_path()
    cached = optimised_model(ort, model, one.model_sha256, lambda: None)
    if cached is not None:
        v["arena_1t"] = loop(_session(ort, os.fspath(cached), True, False))
    v["in_memory_1t"] = loop(_session(ort, os.fspath(model), False, True))
    for bsz in batches:
        b = type(emb)(**{**emb._args, "intra_op_threads": 1, "batch_size": bsz,
                         "batch_tokens": 10 ** 6})
        v[f"batch_{bsz}_1t"] = (lambda b=b: b.embed(names))
    return v


def dedup_counts(emb, names: list[str]) -> dict:
    ids = {tuple(e.ids) for e in emb.tokenizer.encode_batch(names, add_special_tokens=True)}
    return {"distinct_names": len(set(names)), "distinct_token_id_sequences": len(ids),
            "runs_saved": len(set(names)) - len(ids)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True, help="an index whose names CODA embeds")
    ap.add_argument("--embedder", required=True, choices=["minilm", "bge-small"])
    ap.add_argument("--names", type=int, default=2000, help="names per timed call")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", default="8,32", help="result-moving batch sizes, comma-separated")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    t0 = time.time()
    names, emb = todo_names(a.index)
    if emb is None:
        raise SystemExit("the index was loaded without its embedder")
    load0 = os.getloadavg()
    res = {"names_total": len(names), "dedup": dedup_counts(emb, names)}
    sample = names[:a.names]
    fns = variants(emb, sample, [int(x) for x in a.batches.split(",") if x])
    ref = fns["code"]()
    rates: dict[str, list[float]] = {k: [] for k in fns}
    ident: dict[str, dict] = {}
    for _ in range(a.rounds):
        for k, f in fns.items():
            t = time.perf_counter()
            got = f()
            rates[k].append(len(sample) / (time.perf_counter() - t))
            cos = (got * ref).sum(axis=1)
            ident[k] = {"identical_rows": int((got == ref).all(axis=1).sum()),
                        "cos_min": float(cos.min()), "cos_median": float(np.median(cos))}
    res["names_per_s"] = {k: {"median": round(statistics.median(r), 1),
                              "rounds": [round(x, 1) for x in r]} for k, r in rates.items()}
    res["vs_code"] = ident
    res["ratio_to_code"] = {k: round(res["names_per_s"][k]["median"]
                                     / res["names_per_s"]["code"]["median"], 3) for k in rates}
    res["ratio_to_embed_1t"] = {k: round(res["names_per_s"][k]["median"]
                                         / res["names_per_s"]["embed_1t"]["median"], 3)
                                for k in rates if k.endswith("_1t")}
    res.update(names_timed=len(sample), rounds=a.rounds, embedder=a.embedder,
               loadavg={"start": load0, "end": os.getloadavg()},
               seconds=round(time.time() - t0, 1), machine=machine(), command=command())
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: res[k] for k in ("dedup", "ratio_to_code", "vs_code")}, indent=1))


if __name__ == "__main__":
    main()
