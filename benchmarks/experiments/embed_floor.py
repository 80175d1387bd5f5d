"""Where a query embedding's time goes (issue 21, whole query <= 10 ms): the int8 MiniLM
ONNX session a ``Retriever`` runs, one question per call, variants alternating in one
process so that ratios hold on a loaded machine.

    OPENBLAS_NUM_THREADS=1 python benchmarks/experiments/embed_floor.py --out benchmarks/experiments/results/embed_floor/minilm.json

Measured, p50 over the first ``--questions`` 2Wiki questions (``--rounds`` rounds, each
variant once per round, the round medians' median reported):

* ``embed`` (``OnnxMiniLM.embed([q])``) against ``session.run`` alone on the same token
  ids and the tokenizer call alone: what Python adds around the model;
* ``run`` at fixed lengths ``--lengths`` tokens: the intercept is the per-call cost that
  does not grow with the question (reading the weights, one kernel launch per node), the
  slope the per-token work;
* the same at one and two intra-op threads, with onnxruntime's CPU memory arena off (the
  default) and on (``arena=True``), and with the session built from the original model
  optimised in memory (``model_cache=False``) instead of the saved optimised copy;
* which operator types take the time (onnxruntime's own profiler, one thread, summed per
  op type over ``--profile-calls`` calls of the median-length question; the profiler's
  overhead inflates small operators, so read shares, not milliseconds).

The model's weights are int8 with per-column scales that onnxruntime folds into float32 at
load (``embed/onnx_cache.py``): every MatMul runs in float32, so the per-token slope is
float32 GEMM work, and integer (VNNI) kernels would change the vectors (see the file's
reading). docs/architecture.md §2.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hyperrag_fast.embed.onnx_encoder import import_onnxruntime
from hyperrag_fast.embed.registry import make_embedder
from hyperrag_fast.eval.data import load_dataset
from hyperrag_fast.eval.harness import _git, machine_info


def _feeds(ids: np.ndarray) -> dict[str, np.ndarray]:
    return {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}


def _p50_ms(fn, items) -> float:
    w = []
    for x in items:
        t0 = time.perf_counter()
        fn(x)
        w.append(time.perf_counter() - t0)
    return float(np.median(w) * 1e3)


def _op_shares(model_path: str, ids: np.ndarray, calls: int) -> dict[str, float]:
    """Per op type, its share of the summed node time (onnxruntime's profiler, one thread)."""
    ort = import_onnxruntime()
    o = ort.SessionOptions()
    o.intra_op_num_threads, o.inter_op_num_threads = 1, 1
    o.enable_cpu_mem_arena = False
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    o.log_severity_level = 3
    o.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        o.profile_file_prefix = str(Path(tmp) / "ort")
        s = ort.InferenceSession(model_path, sess_options=o, providers=["CPUExecutionProvider"])
        for _ in range(calls):
            s.run(None, _feeds(ids))
        events = json.loads(Path(s.end_profiling()).read_text())
    by_op: dict[str, float] = collections.defaultdict(float)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            by_op[e["args"]["op_name"]] += e["dur"]
    tot = sum(by_op.values()) or 1.0
    return {k: round(v / tot, 4) for k, v in sorted(by_op.items(), key=lambda kv: -kv[1])}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--questions", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--lengths", type=int, nargs="+", default=[2, 8, 16, 24, 32])
    p.add_argument("--profile-calls", type=int, default=200)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    qs = [q.question for q in load_dataset("2wikimultihopqa", "all").questions[:a.questions]]
    variants = {f"threads{t}{suffix}": make_embedder("minilm", intra_op_threads=t, **kw)
                for t in (1, 2) for suffix, kw in (("", {}), ("_arena", {"arena": True}),
                                                   ("_in_memory", {"model_cache": False}))}
    base = variants["threads1"]
    toks = [np.array([base.tokenizer.encode(q).ids], dtype=np.int64) for q in qs]
    fixed = {n: np.array([[101] + [2073] * (n - 2) + [102]], dtype=np.int64) for n in a.lengths}
    ref = [base.session.run(None, _feeds(t))[0] for t in toks]
    same = {k: all(np.array_equal(e.session.run(None, _feeds(t))[0], r) for t, r in zip(toks, ref))
            for k, e in variants.items()}
    rounds: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(a.rounds):
        rounds["tokenizer"].append(_p50_ms(lambda q: base.tokenizer.encode_batch([q]), qs))
        for k, e in variants.items():
            rounds[f"{k}.embed"].append(_p50_ms(lambda q: e.embed([q]), qs))
            rounds[f"{k}.run"].append(_p50_ms(lambda t: e.session.run(None, _feeds(t)), toks))
            for n, ids in fixed.items():
                rounds[f"{k}.run_len{n}"].append(_p50_ms(lambda t: e.session.run(None, _feeds(t)),
                                                         [ids] * len(qs)))
    med = {k: float(np.median(v)) for k, v in rounds.items()}
    fits = {}
    for k in variants:
        slope, icept = np.polyfit(a.lengths, [med[f"{k}.run_len{n}"] for n in a.lengths], 1)
        fits[k] = {"ms_per_token": float(slope), "ms_at_zero_tokens": float(icept)}
    lens = sorted(t.shape[1] for t in toks)
    model_path = base.session._model_path  # the saved optimised copy the session runs
    out = {"command": "OPENBLAS_NUM_THREADS=1 python benchmarks/experiments/embed_floor.py "
                      + " ".join(argv or sys.argv[1:]),
           "git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain")),
           "machine": machine_info(), "loadavg_at_end": list(os.getloadavg()),
           "questions": len(qs), "tokens_p50": float(np.median(lens)), "tokens_mean": float(np.mean(lens)),
           "bit_identical_to_threads1": same, "p50_ms": med, "rounds_ms": dict(rounds),
           "length_fit": fits,
           "op_time_shares_threads1": _op_shares(model_path, toks[int(np.argsort([t.shape[1] for t in toks])[len(toks) // 2])],
                                                 a.profile_calls)}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("p50_ms", "length_fit", "bit_identical_to_threads1")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
