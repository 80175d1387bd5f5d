"""Where an index build's time and memory go, through the real ``hyperrag index`` path.

    python benchmarks/bench_index_build.py --corpus 2wiki                  # ~5 min
    python benchmarks/bench_index_build.py --corpus synthetic_10k --corpus synthetic_30k \\
        --corpus synthetic_100k --add 30000                              # scaling + add
    python benchmarks/bench_index_build.py --workers-check 1500            # Dask 1 vs 2
    python benchmarks/bench_index_build.py --embed-ab 600    # embed stage vs one call, same texts
    python benchmarks/bench_index_build.py --chunk-vectors-ab 2wiki --repeats 2  # text vs pooled
    python benchmarks/bench_index_build.py --coda-cost minilm    # CODA consolidation vs the build

Each corpus is written as JSONL and indexed by ``hyperrag index SRC OUT --json --quiet``
in a child process; its wall time and peak RSS come from ``os.wait4`` (the whole
process), the per-stage busy seconds and peak RSS from the build's own report
(``hyperrag_fast.indexing.clock``: load+chunk, extract, embed, assemble, ann, save). In the
same run, the raw embedder (``OnnxMiniLM().embed`` in one call, length-sorted) embeds
the index's distinct texts (or ``--raw-fraction`` of them, a uniform sample) and its
throughput is set beside the build's embed stage. Synthetic corpora come from
``synthetic_text.py`` (the first n of a corpus generated for 1.01 n, so the 1 % beyond
is what ``--add`` appends to the same index). Results merge into
``results/index_build.json`` (one section per corpus/check, each with its command,
commit and machine).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:
    from . import _common as C
    from . import synthetic_text
except ImportError:
    import _common as C
    import synthetic_text

DATA = Path(os.environ.get("HYPERRAG_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data")
OUT = C.RESULTS / "index_build.json"  # --out writes another file
SIZES = {"synthetic_10k": 10_000, "synthetic_30k": 30_000, "synthetic_100k": 100_000}


def _hyperrag() -> list[str]:
    exe = Path(sys.executable).with_name("hyperrag")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "hyperrag_fast.cli"]


def run_cli(args: list[str], workdir: Path) -> dict:
    """Run ``hyperrag ARGS --json --quiet``; wall seconds, peak RSS (MB) and its JSON."""
    out, err = workdir / "stdout.json", workdir / "stderr.txt"
    t = time.perf_counter()
    with open(out, "wb") as fo, open(err, "wb") as fe:
        p = subprocess.Popen(_hyperrag() + args + ["--json", "--quiet"], stdout=fo, stderr=fe)
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"hyperrag {' '.join(args)} failed:\n{err.read_text()[-2000:]}")
    return {"wall_s": wall, "peak_rss_mb": ru.ru_maxrss / 1024, "cpu_s": ru.ru_utime + ru.ru_stime,
            "out": json.loads(out.read_text())}


def corpus_file(name: str, tmp: Path) -> tuple[Path, int]:
    if name == "2wiki":
        recs = json.loads((DATA / "2wikimultihopqa" / "corpus.json").read_text())
        path = tmp / "2wiki.jsonl"
        with open(path, "w", encoding="utf-8") as f:
            for p in recs:
                f.write(json.dumps({"id": p["title"], "title": p["title"], "text": p["text"]},
                                   ensure_ascii=False) + "\n")
        return path, len(recs)
    n = SIZES[name]
    return synthetic_split(n, tmp)[0], n


def synthetic_split(n: int, tmp: Path) -> tuple[Path, Path]:
    """(first n passages, the next 1 %) of the corpus generated for 1.01 n."""
    total = n + max(1, n // 100)
    base, new = tmp / f"syn{n}.jsonl", tmp / f"syn{n}_add.jsonl"
    with open(base, "w", encoding="utf-8") as fb, open(new, "w", encoding="utf-8") as fn:
        for i, rec in enumerate(synthetic_text.passages(total)):
            (fb if i < n else fn).write(json.dumps(rec, ensure_ascii=False) + "\n")
    return base, new


def index_texts(index: Path) -> dict[str, list[str]]:
    from hyperrag_fast.chunking import chunk_passage
    from hyperrag_fast.index import HyperIndex
    ix = HyperIndex.load(index, verify=False)
    g = ix.graph
    return {"node_desc": list(g.node_desc), "edge_text": list(g.edge_text),
            "passage": [chunk_passage(c) for c in ix.chunks]}


def raw_embedder(texts: list[str], fraction: float, seed: int = 0) -> dict:
    from hyperrag_fast.embed.onnx_minilm import OnnxMiniLM
    rng = np.random.default_rng(seed)
    pick = texts if fraction >= 1 else [texts[i] for i in np.sort(
        rng.choice(len(texts), max(1, int(fraction * len(texts))), replace=False))]
    emb = OnnxMiniLM()
    emb.embed(pick[:64])  # session warm-up
    t = time.perf_counter()
    emb.embed(pick)
    dt = time.perf_counter() - t
    return {"texts": len(pick), "s": dt, "texts_per_s": len(pick) / dt}


def profile_corpus(name: str, raw_fraction: float, keep: Path | None) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-build-{name}-"))
    try:
        src, n = corpus_file(name, tmp)
        r = run_cli(["index", str(src), str(tmp / "ix")], tmp)
        rep = r["out"]["report"]
        build = rep["build"]
        st = build["stages"]
        texts = index_texts(tmp / "ix")
        distinct = list(dict.fromkeys(t for ts in texts.values() for t in ts))
        raw = raw_embedder(distinct, raw_fraction)
        embedded = rep["embedded_texts"]
        out = {
            "passages": n, "wall_s": r["wall_s"], "peak_rss_mb": r["peak_rss_mb"],
            "cpu_s": r["cpu_s"], "texts_embedded": embedded,
            "stages_s": {k: st.get(k, {}).get("s", 0.0) for k in
                         ("chunk", "extract", "embed", "assemble", "ann", "save")},
            "stages_peak_rss_mb": {k: v.get("peak_rss_mb") for k, v in st.items()},
            "extract_embed_wall_s": st.get("extract_embed_wall", {}).get("s"),
            "texts": {"states": len(texts["node_desc"]), "topics": len(texts["edge_text"]),
                      "passages": len(texts["passage"]),
                      "distinct_state_descriptions": len(set(texts["node_desc"])),
                      "distinct_topics": len(set(texts["edge_text"])),
                      "distinct_all": len(distinct)},
            "counts": r["out"]["counts"],
            "embed_raw_texts_per_s": raw["texts_per_s"], "embed_raw": raw,
            "embed_stage_texts_per_s": embedded / max(st["embed"]["s"], 1e-9),
        }
        out["embed_stage_over_raw"] = out["embed_stage_texts_per_s"] / out["embed_raw_texts_per_s"]
        if keep is not None:
            shutil.move(str(tmp / "ix"), str(keep / name))
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def chunk_vectors_ab(name: str, repeats: int) -> dict:
    """``hyperrag index`` with ``--chunk-vectors text`` and ``pooled`` (config.CHUNK_VECTORS)
    alternated A B B A ... in one run: wall, peak RSS, stage seconds; medians per option."""
    from hyperrag_fast.config import CHUNK_VECTORS
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-cv-{name}-"))
    try:
        src, n = corpus_file(name, tmp)
        order = [m for r in range(repeats) for m in (CHUNK_VECTORS[::-1] if r % 2 else CHUNK_VECTORS)]
        runs: dict[str, list] = {m: [] for m in CHUNK_VECTORS}
        for mode in order:
            load = os.getloadavg()
            r = run_cli(["index", str(src), str(tmp / "ix"), "--chunk-vectors", mode, "--force"], tmp)
            st = r["out"]["report"]["build"]["stages"]
            runs[mode].append({
                "wall_s": r["wall_s"], "peak_rss_mb": r["peak_rss_mb"], "cpu_s": r["cpu_s"],
                "texts_embedded": r["out"]["report"]["embedded_texts"], "loadavg_at_start": load,
                "stages_s": {k: v.get("s") for k, v in st.items()},
                "stages_peak_rss_mb": {k: v.get("peak_rss_mb") for k, v in st.items()}})
            print(json.dumps({mode: {k: runs[mode][-1][k] for k in
                                     ("wall_s", "peak_rss_mb", "texts_embedded")}}), flush=True)
        med = {m: {k: float(np.median([x[k] for x in rs])) for k in
                   ("wall_s", "peak_rss_mb", "cpu_s", "texts_embedded")} | {
                   "embed_s": float(np.median([x["stages_s"]["embed"] for x in rs]))}
               for m, rs in runs.items()}
        return {"corpus": name, "passages": n, "order": order, "median": med,
                "pooled_over_text": {k: med["pooled"][k] / med["text"][k] for k in med["text"]},
                "runs": runs}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def embed_ab(n_docs: int, partition_docs: int, repeats: int = 3) -> dict:
    """The embed stage's own cost of partitioning, isolated from machine load: the same
    texts (states' sentences, topics, passages of the first n 2Wiki passages, from the
    offline extractor) embedded as the build does (one ``embed`` call per partition's new
    texts) and in one call, alternated in one process; medians of ``repeats``."""
    from hyperrag_fast.indexing.flat import partition_texts
    from hyperrag_fast.indexing.partition import chunk_partition, embed_checked, extract_chunks
    from hyperrag_fast.chunking import load_documents
    from hyperrag_fast.embed.onnx_minilm import OnnxMiniLM
    from hyperrag_fast.extract.offline import OfflineExtractor
    tmp = Path(tempfile.mkdtemp(prefix="bench-ab-"))
    try:
        src, _ = corpus_file("2wiki", tmp)
        docs = load_documents(src).documents[:n_docs]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ex, emb, seen, parts = OfflineExtractor(), OnnxMiniLM(), set(), []
    for b in range(0, len(docs), partition_docs):
        chunks = chunk_partition(docs[b:b + partition_docs], 256, 0)
        new = [t for t in partition_texts(chunks, extract_chunks(ex, chunks)) if t not in seen]
        seen.update(new)
        parts.append(new)
    texts = [t for p in parts for t in p]
    emb.embed(texts[:64])
    one, per = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        embed_checked(emb, texts)
        one.append(len(texts) / (time.perf_counter() - t))
        t = time.perf_counter()
        for p in parts:
            embed_checked(emb, p)
        per.append(len(texts) / (time.perf_counter() - t))
    return {"passages": len(docs), "partition_docs": partition_docs, "texts": len(texts),
            "one_call_texts_per_s": float(np.median(one)),
            "per_partition_texts_per_s": float(np.median(per)),
            "per_partition_over_one_call": float(np.median(per) / np.median(one)),
            "all_one_call": one, "all_per_partition": per}


def add_check(n: int, built: Path | None, full_wall: float | None) -> dict:
    """``hyperrag add`` of the next 1 % to the n-passage synthetic index (the one the
    scaling run just built, else a fresh build), as a fraction of that full build."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-add-"))
    try:
        base, new = synthetic_split(n, tmp)
        if built is not None and built.exists() and full_wall:
            shutil.move(str(built), str(tmp / "ix"))
            full_s = full_wall
        else:
            full_s = run_cli(["index", str(base), str(tmp / "ix")], tmp)["wall_s"]
        add = run_cli(["add", str(tmp / "ix"), str(new)], tmp)
        return {"base_passages": n, "new_passages": sum(1 for _ in open(new)),
                "full_wall_s": full_s, "add_wall_s": add["wall_s"],
                "add_peak_rss_mb": add["peak_rss_mb"], "add_over_full": add["wall_s"] / full_s,
                "add_stages": add["out"]["report"]["build"].get("stages")}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def workers_check(n: int) -> dict:
    """Extract+embed wall of the same partitions on 1 and on 2 single-threaded Dask
    workers (and the default single process), first n 2Wiki passages."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    try:
        src, _ = corpus_file("2wiki", tmp)
        lines = src.read_text(encoding="utf-8").splitlines()[:n]
        sub = tmp / "sub.jsonl"
        sub.write_text("\n".join(lines) + "\n", encoding="utf-8")
        res = {}
        for label, extra in (("1", ["--workers", "1"]), ("2", ["--workers", "2"]),
                             ("process", [])):
            r = run_cli(["index", str(sub), str(tmp / f"ix{label}"), "--partition-docs", "50",
                         *extra], tmp)
            st = r["out"]["report"]["build"]["stages"]
            res[label] = {"wall_s": r["wall_s"], "peak_rss_mb": r["peak_rss_mb"],
                          "extract_embed_wall_s": st["extract_embed_wall"]["s"]}
        return {"passages": n, "1_s": res["1"]["extract_embed_wall_s"],
                "2_s": res["2"]["extract_embed_wall_s"],
                "speedup": res["1"]["extract_embed_wall_s"] / res["2"]["extract_embed_wall_s"],
                "single_process_s": res["process"]["extract_embed_wall_s"], "runs": res}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


CODA_OUT = C.RESULTS / "coda_cost.json"


def coda_cost(embedder: str, keep: Path | None, questions: int) -> dict:
    """CODA's consolidation beside the build it consolidates, in one run (issue 23 item 3):
    ``hyperrag index`` of the 2Wiki corpus with ``embedder``, then ``hyperrag build-methods
    INDEX coda stitch_consolidated`` (the CODA system, its saved graphs and the
    consolidated hypergraph) on it, each a child process (wall, peak RSS from
    ``os.wait4``), the build step's own stage seconds (``meta.json``), then the CODA query
    through the public API (``bench_whole_query.py --method coda``, one BLAS thread; one
    ONNX thread, ``coda_query``, and two, ``coda_query_threads_2``)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-coda-{embedder}-"))
    try:
        src, n = corpus_file("2wiki", tmp)
        ix = tmp / "ix"
        load0 = os.getloadavg()
        b = run_cli(["index", str(src), str(ix), "--embedder", embedder], tmp)
        load1 = os.getloadavg()
        c = run_cli(["build-methods", str(ix), "coda", "stitch_consolidated"], tmp)
        load2 = os.getloadavg()
        from hyperrag_fast.store import generation_dir
        coda_dir = generation_dir(ix) / "prebuilt" / "coda"
        meta = json.loads((coda_dir / "meta.json").read_text())
        disk = {p.name: round(sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 2 ** 20, 1)
                for p in sorted((generation_dir(ix) / "prebuilt").iterdir())}
        out = {"embedder": embedder, "passages": n, "counts": b["out"]["counts"],
               "index": {k: b[k] for k in ("wall_s", "peak_rss_mb", "cpu_s")},
               "index_stages_s": {k: v.get("s") for k, v in
                                  b["out"]["report"]["build"]["stages"].items()},
               "consolidation": {k: c[k] for k in ("wall_s", "peak_rss_mb", "cpu_s")},
               "consolidation_stages": meta.get("stages"), "coda_counts": meta.get("counts"),
               "types_from": meta.get("types_from"), "prebuilt_disk_mb": disk,
               "loadavg": {"before_index": load0, "before_consolidation": load1,
                           "after": load2}}
        out["consolidation_over_index_wall"] = c["wall_s"] / b["wall_s"]
        out["consolidation_over_index_peak_rss"] = c["peak_rss_mb"] / b["peak_rss_mb"]
        out["coda_query"] = _coda_query(ix, embedder, questions, 1, tmp)
        # and at two ONNX threads, the API's default on this machine (issue 23 item 3)
        out["coda_query_threads_2"] = _coda_query(ix, embedder, questions, 2, tmp)
        if keep is not None:
            shutil.move(str(ix), str(keep / f"2wiki_{embedder}"))
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _coda_query(ix: Path, embedder: str, questions: int, threads: int, tmp: Path) -> dict:
    """The CODA query through the public API (``bench_whole_query.py --method coda``) at
    ``threads`` ONNX intra-op threads and one BLAS thread: p50/p99 and the run's load."""
    q = tmp / f"q{threads}.json"
    cmd = [sys.executable, str(Path(__file__).with_name("bench_whole_query.py")), "--index",
           str(ix), "--embedder", embedder, "--method", "coda", "--questions", str(questions),
           "--repeats", "1", "--out", str(q)] + (["--threads", str(threads)] if threads != 1 else [])
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})  # latency: one thread
    if r.returncode != 0:
        raise SystemExit(f"bench_whole_query failed:\n{r.stderr[-2000:]}")
    wq = json.loads(q.read_text())
    out = {k: wq[k] for k in wq if k.endswith(("_p50", "_p99", "_s"))
           or k in ("n_calls", "loadavg_at_end")}
    out["env"] = {"OPENBLAS_NUM_THREADS": "1", "onnx_threads": threads}
    return out


def growth(corpora: dict) -> dict:
    syn = {k: v for k, v in corpora.items() if k.startswith("synthetic_")}
    if len(syn) < 2:
        return {}
    xs = [v["passages"] for v in syn.values()]
    out = {"wall": C.loglog_slope(xs, [v["wall_s"] for v in syn.values()]),
           "peak_rss": C.loglog_slope(xs, [v["peak_rss_mb"] for v in syn.values()])}
    for s in ("chunk", "extract", "embed", "assemble", "ann", "save"):
        out[s] = C.loglog_slope(xs, [v["stages_s"][s] for v in syn.values()])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", action="append", default=[],
                    choices=["2wiki", *SIZES])
    ap.add_argument("--raw-fraction", type=float, default=1.0,
                    help="share of the distinct texts the raw embedder run embeds")
    ap.add_argument("--add", type=int, default=0, help="base size of the 1%% add check")
    ap.add_argument("--workers-check", type=int, default=0,
                    help="2Wiki passages for the Dask 1-vs-2-workers check")
    ap.add_argument("--keep", default=None, help="move built indexes here")
    ap.add_argument("--embed-ab", type=int, default=0,
                    help="2Wiki passages for the partitioned-vs-one-call embed comparison")
    ap.add_argument("--chunk-vectors-ab", default=None, choices=["2wiki", *SIZES],
                    help="build this corpus with --chunk-vectors text and pooled, alternated")
    ap.add_argument("--repeats", type=int, default=2, help="runs per option of --chunk-vectors-ab")
    ap.add_argument("--coda-cost", action="append", default=[], choices=["minilm", "bge-small"],
                    help=f"CODA consolidation vs the 2Wiki build with this embedder "
                         f"(into {CODA_OUT.name})")
    ap.add_argument("--coda-questions", type=int, default=200,
                    help="2Wiki questions of the CODA query run")
    ap.add_argument("--out", default=None, help=f"results file (default {OUT})")
    a = ap.parse_args()
    if a.coda_cost:
        path = Path(a.out) if a.out else CODA_OUT
        res = json.loads(path.read_text()) if path.exists() else {}
        keep = Path(a.keep) if a.keep else None
        for e in a.coda_cost:
            stamp = {"command": C.command(), "machine": C.machine(),
                     "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            res[e] = {**coda_cost(e, keep, a.coda_questions), "run": stamp}
            res.update(command=stamp["command"], machine=stamp["machine"])  # the last run's
            print(json.dumps({e: {k: res[e][k] for k in ("index", "consolidation",
                                                        "consolidation_over_index_wall",
                                                        "coda_query", "coda_query_threads_2")}}),
                  flush=True)
            path.write_text(json.dumps(res, indent=2, default=C._default) + "\n")
        return
    out_path = Path(a.out) if a.out else OUT
    res = json.loads(out_path.read_text()) if out_path.exists() else {}
    res.setdefault("corpora", {})
    res.setdefault("runs", {})
    stamp = {"command": C.command(), "machine": C.machine(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    keep = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-keep-"))
    for name in a.corpus:
        res["corpora"][name] = {**profile_corpus(name, a.raw_fraction, keep), "run": stamp}
        print(json.dumps({name: {k: res["corpora"][name][k] for k in
                                 ("wall_s", "peak_rss_mb", "stages_s", "embed_stage_over_raw")}}))
        out_path.write_text(json.dumps(res, indent=2, default=C._default) + "\n")
    if a.add:
        name = f"synthetic_{a.add // 1000}k"
        full = res["corpora"].get(name, {}).get("wall_s") if name in a.corpus else None
        res["add"] = {**add_check(a.add, keep / name, full), "run": stamp}
        res["add_1pct_over_full"] = res["add"]["add_over_full"]
    if a.embed_ab:
        res["embed_ab"] = {**embed_ab(a.embed_ab, 512), "run": stamp}
    if a.chunk_vectors_ab:
        res.setdefault("chunk_vectors_ab", {})[a.chunk_vectors_ab] = {
            **chunk_vectors_ab(a.chunk_vectors_ab, a.repeats), "run": stamp}
    if a.workers_check:
        res["workers"] = {**workers_check(a.workers_check), "run": stamp}
    res["growth_exponent"] = growth(res["corpora"]).get("wall")
    res["growth_exponents"] = growth(res["corpora"])
    res["machine"] = stamp["machine"]
    out_path.write_text(json.dumps(res, indent=2, default=C._default) + "\n")
    if not a.keep:
        shutil.rmtree(keep, ignore_errors=True)
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
