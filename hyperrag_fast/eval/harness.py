"""Retrieval-quality harness: index a dataset's corpus, run methods over a split, score them.

:func:`evaluate` builds (or reuses) the index, embeds every question once (timed, one
question at a time, uncached), runs each requested method on the query vector and the
question string only, and writes ``quality_<dataset>_<split>.json`` / ``.md`` (rows of
earlier runs of other methods on the same corpus/extractor/embedder are kept).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from tqdm import tqdm

from ..embed.base import Embedder
from ..embed.cache import CachedEmbedder
from ..extract.base import Extractor
from ..index import HyperIndex
from ..config import QueryOptions, preset_for
from ..methods import METHODS, needs
from ..prebuilt import Prebuilt, build_prebuilt, ensure_prebuilt
from ..retriever import Retriever
from ..store import FORMAT_VERSION, manifest_path
from .data import Dataset, corpus_checksum, load_dataset
from .metrics import KS, summarize
from .report import write_markdown

REPO_ROOT = Path(__file__).resolve().parents[2]
CONTRACT_SPLITS = {"musique_dev": ("all", "dev")}  # the split written as quality-<dataset>.json
_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def default_extractor() -> Extractor:
    from ..extract.offline import OfflineExtractor
    return OfflineExtractor()


def default_embedder() -> Embedder:
    from ..config import DEFAULT_EMBEDDER
    from ..embed.registry import make_embedder
    return make_embedder(DEFAULT_EMBEDDER)


def check_methods(methods: Sequence[str]) -> None:
    """ValueError naming the unknown methods and what is registered."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; registered: {sorted(METHODS)}")
    if not methods:
        raise ValueError("no methods given")


def prepare_methods(ix: HyperIndex, index_dir: str | os.PathLike | None,
                    methods: Sequence[str]) -> Prebuilt:
    """The explicit build step for ``methods`` (merge variants, CODA): loaded from
    ``index_dir`` when saved there, else built (and saved there when given)."""
    structures = sorted({s for m in methods for s in needs(m, ix.merge)})
    if index_dir is not None:
        return ensure_prebuilt(index_dir, ix, structures)
    return build_prebuilt(ix, structures)


# ------------------------------------------------------------------------- index
def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _reuse_reason(index_dir: Path, ds: Dataset, extractor: Extractor,
                  embedder: Embedder) -> str | None:
    """None if the saved index fits (extractor, embedder, corpus); else why not."""
    path = manifest_path(index_dir)
    if not path.is_file():
        return f"no index at {index_dir}"
    m = json.loads(path.read_text(encoding="utf-8"))
    if m.get("format_version") != FORMAT_VERSION:
        return f"format version {m.get('format_version')} != {FORMAT_VERSION}"
    if m.get("extractor") != extractor.name:
        return f"extractor {m.get('extractor')!r} != {extractor.name!r}"
    if m.get("embedder", {}).get("name") != embedder.name:
        return f"embedder {m.get('embedder', {}).get('name')!r} != {embedder.name!r}"
    if m.get("counts", {}).get("chunks") != len(ds.chunks):
        return f"{m.get('counts', {}).get('chunks')} chunks != {len(ds.chunks)} passages"
    return None


def load_or_build_index(ds: Dataset, extractor: Extractor, embedder: Embedder,
                        index_dir: str | os.PathLike | None, cache_dir: str | os.PathLike,
                        progress: bool = True) -> tuple[HyperIndex, dict[str, Any]]:
    """Reuse the index at ``index_dir`` if its manifest matches (extractor name, embedder
    name, corpus checksum of its chunks), else build with ``cache_dir`` and save there."""
    info: dict[str, Any] = {"path": str(index_dir) if index_dir else None,
                            "corpus_sha256": ds.corpus_sha256()}
    t0 = time.perf_counter()
    if index_dir is not None:
        reason = _reuse_reason(Path(index_dir), ds, extractor, embedder)
        if reason is None:
            # cached: variant engines (merge_full / merge_none) embed new descriptions
            cached = CachedEmbedder(embedder, Path(cache_dir) / "embeddings.sqlite")
            ix = HyperIndex.load(index_dir, embedder=cached, extractor=extractor)
            got = corpus_checksum(ix.chunks)
            reason = None if got == info["corpus_sha256"] else "corpus checksum differs"
            if reason is None:
                info.update(reused=True, load_s=time.perf_counter() - t0,
                            counts=ix.manifest()["counts"])
                return ix, info
        print(f"building the index: {reason}", file=sys.stderr)
    ix = HyperIndex.build(ds.chunks, extractor, embedder, progress=progress,
                          max_tokens=ds.max_words, cache_dir=cache_dir)
    info.update(reused=False, build_wall_s=time.perf_counter() - t0,
                peak_rss_mb_after_build=_peak_rss_mb(), counts=ix.manifest()["counts"],
                report=ix.report.summary())
    if index_dir is not None:
        ix.save(index_dir)
    return ix, info


# ------------------------------------------------------------------------- running
def embed_questions(embedder: Embedder, texts: Sequence[str],
                    progress: bool = True) -> tuple[np.ndarray, list[float]]:
    """One vector per question, each embedded alone and timed (ms)."""
    vecs, times = [], []
    embedder.embed([texts[0]])  # warm the session
    for t in tqdm(texts, desc="embed questions", disable=not progress, file=sys.stderr):
        t0 = time.perf_counter()
        v = np.asarray(embedder.embed([t]), dtype=np.float32)
        times.append((time.perf_counter() - t0) * 1e3)
        vecs.append(v[0])
    return np.stack(vecs), times


def method_options(name: str, given: QueryOptions | None, max_k: int,
                   preset: QueryOptions | None = None) -> QueryOptions:
    """``given`` (method set to ``name``) or ``preset`` (default: ``QueryOptions()``), the
    embedder's preset; top_k must cover ``max_k``."""
    o = replace(given if given is not None else (preset or QueryOptions()), method=name)
    if given is None and o.top_k < max_k:
        o = o.with_top_k(max_k)
    if o.top_k < max_k:
        raise ValueError(f"{name}: top_k {o.top_k} < {max_k}: Recall@{max_k} needs more")
    return o


def run_method(retriever: Retriever, name: str, o: QueryOptions, ds: Dataset,
               qvecs: np.ndarray, max_k: int, progress: bool = True) -> dict[str, Any]:
    """Run one method over the split. The method sees the query vector, the question
    string and the options, nothing else."""
    fn, state, passages = METHODS[name], retriever.state, ds.passages
    state.engine.warmup(o.stitch)
    fn(state, qvecs[0], ds.questions[0].question, o, False)  # warm (JIT, caches)
    ranked, rows, retrieval_ms, wall_ms = [], [], [], []
    for q, v in tqdm(list(zip(ds.questions, qvecs)), desc=name, disable=not progress,
                     file=sys.stderr):
        t0 = time.perf_counter()
        out = fn(state, v, q.question, o, False)
        wall_ms.append((time.perf_counter() - t0) * 1e3)
        retrieval_ms.append(out.candidates_ms + out.graph_ms)
        ids = [int(i) for i in np.asarray(out.chunk_ids)[:max_k]]
        if any(not 0 <= i < len(passages) for i in ids):
            raise ValueError(f"method {name!r} returned chunk rows outside 0..{len(passages) - 1}")
        ranked.append([passages[i] for i in ids])
        rows.append((ids, [float(s) for s in np.asarray(out.scores)[:max_k]]))
    return {"ranked": ranked, "rows": rows, "retrieval_ms": retrieval_ms, "wall_ms": wall_ms}


# ------------------------------------------------------------------------- provenance
def _git(*args: str) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def machine_info() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"platform": platform.platform(), "cpu": cpu, "cores": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "numpy": np.__version__,
            "loadavg_at_start": list(os.getloadavg()),
            "thread_env": {k: os.environ[k] for k in _THREAD_ENV if k in os.environ}}


# ------------------------------------------------------------------------- entry
def evaluate(dataset: str, split: str, methods: Sequence[str],
             index_dir: str | os.PathLike | None = None,
             cache_dir: str | os.PathLike | None = None,
             options_by_method: dict[str, QueryOptions] | None = None, *,
             data_dir: str | os.PathLike | None = None,
             out_dir: str | os.PathLike | None = None,
             dump: bool = False, progress: bool = True, ks: Sequence[int] = KS,
             extractor_factory: Callable[[], Extractor] | None = None,
             embedder_factory: Callable[[], Embedder] | None = None,
             command: str | None = None) -> dict[str, Any]:
    """Evaluate ``methods`` on ``dataset``/``split``; returns the results dict and, unless
    ``out_dir`` is None, writes ``quality_<dataset>_<split>.json``/``.md`` there
    (``dump``: also per-question top-k ids per method as JSONL)."""
    methods = list(dict.fromkeys(methods))
    check_methods(methods)
    options_by_method = dict(options_by_method or {})
    stray = sorted(set(options_by_method) - set(methods))
    if stray:
        raise ValueError(f"options given for methods not run: {stray}")
    max_k = max(ks)
    ds = load_dataset(dataset, split, data_dir)
    extractor = (extractor_factory or default_extractor)()
    embedder = (embedder_factory or default_embedder)()
    preset = preset_for(embedder.name)  # the index records this embedder (manifest)
    opts = {m: method_options(m, options_by_method.get(m), max_k, preset) for m in methods}
    machine = machine_info()
    ix, index_info = load_or_build_index(ds, extractor, embedder, index_dir,
                                         cache_dir if cache_dir is not None else "cache",
                                         progress)
    retriever = Retriever(ix, embedder, prebuilt=prepare_methods(ix, index_dir, methods))
    qvecs, embed_ms = embed_questions(embedder, [q.question for q in ds.questions], progress)
    run = {"command": command or " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
           "git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain")),
           "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    golds = [lab.gold for lab in ds.labels]
    qtypes = [lab.qtype for lab in ds.labels]
    results: dict[str, Any] = {}
    dumps: dict[str, list[dict[str, Any]]] = {}
    for name in methods:
        r = run_method(retriever, name, opts[name], ds, qvecs, max_k, progress)
        row = summarize(r["ranked"], golds, qtypes, r["retrieval_ms"], embed_ms, ks)
        row["wall_ms_p50"] = float(np.percentile(r["wall_ms"], 50))
        row["options"] = _plain(asdict(opts[name]))
        row["run"] = run
        results[name] = row
        if dump:
            dumps[name] = _dump_rows(ds, r, max_k)
    out = {"dataset": dataset, "split": split, "n_questions": len(ds.questions),
           "extractor": extractor.name, "embedder": embedder.name, "index": index_info,
           "machine": machine, **run, "methods": results}
    if out_dir is not None:
        out = write_results(out, Path(out_dir), dumps)
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, float) and not np.isfinite(v):
        return str(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _dump_rows(ds: Dataset, r: dict[str, Any], max_k: int) -> list[dict[str, Any]]:
    chunks = ds.chunks
    out = []
    for q, lab, (ids, scores) in zip(ds.questions, ds.labels, r["rows"]):
        top = [chunks[i].doc_id for i in ids]
        gold_ids = sorted(c.doc_id for c in chunks if f"{c.title}\n{c.text}" in lab.gold)
        out.append({"qid": q.qid, "question": q.question, "top": top, "scores": scores,
                    "gold": gold_ids, "type": lab.qtype,
                    "hits": [t in set(gold_ids) for t in top]})
    return out


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_results(out: dict[str, Any], out_dir: Path,
                  dumps: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Write JSON + Markdown (the contract split's JSON, the test split's unless
    ``CONTRACT_SPLITS`` names another, is ``quality-<dataset>.json`` and no second copy), keeping rows of other methods from an
    earlier run when it used the same corpus, extractor and embedder. Returns the merged
    results."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"quality_{out['dataset']}_{out['split']}"
    contract = out["split"] in CONTRACT_SPLITS.get(out["dataset"], ("test",))
    path = out_dir / f"quality-{out['dataset']}.json" if contract else stem.with_suffix(".json")
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        same = (old.get("extractor") == out["extractor"] and old.get("embedder") == out["embedder"]
                and old.get("index", {}).get("corpus_sha256") == out["index"]["corpus_sha256"])
        if same:
            out = {**out, "methods": {**{k: v for k, v in old["methods"].items()
                                         if k not in out["methods"]}, **out["methods"]}}
    text = json.dumps(out, indent=1, ensure_ascii=False) + "\n"
    _write_atomic(path, text)
    write_markdown(out, stem.with_suffix(".md"))
    for name, rows in (dumps or {}).items():
        with open(f"{stem}_{name}_topk.jsonl", "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return out
