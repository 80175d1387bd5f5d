"""GraphRAG-Bench (Xiang et al. 2025) in the harness: Medical and Novel, per question type.

Each source document is its own corpus (``../shared/data/README.md``): one index per
document, built by the ordinary streamed build from the :class:`Document` with a word
budget of :data:`CHUNK_WORDS` (about 1,200 characters, the benchmark baselines' chunk
size; the measured mean is recorded). Every method runs on every question of its
document; the top :data:`TOP_K` passages are its retrieved context. Scored offline by
:mod:`.coverage` (never reported as the benchmark's number) and, with a judge
endpoint, by the benchmark's LLM-judged evidence recall and context relevance
(:mod:`.gbench_judge`). docs/architecture.md §9.
"""
from __future__ import annotations

import ast
import datetime as _dt
import json
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from tqdm import tqdm

from ..chunking import Document, chunk_documents, chunk_passage
from ..config import QueryOptions, preset_for
from ..embed.base import Embedder
from ..embed.cache import CachedEmbedder
from ..extract.base import Extractor
from ..index import HyperIndex
from ..methods import METHODS
from ..retriever import Retriever
from ..store import manifest_path
from .coverage import NAMES, THRESHOLD, WINDOW, evidence_coverage
from .data import _read_json, corpus_checksum, resolve_data_dir
from .harness import (_git, check_methods, default_embedder, default_extractor, machine_info,
                      method_options, prepare_methods)

SUBSETS = {"graphrag_bench_medical": "medical", "graphrag_bench_novel": "novel"}
QTYPES = ("Fact Retrieval", "Complex Reasoning", "Contextual Summarize", "Creative Generation")
CHUNK_WORDS = 220  # whitespace words; mean ~1,200 characters (Medical 1.25k, Novel 1.17k)
TOP_K = 5
RESULTS_FILE = "quality-graphrag_bench.json"


@dataclass(frozen=True)
class GBQuestion:
    """One benchmark question. Only ``question`` reaches a retriever; the rest are labels."""

    qid: str
    source: str
    question: str
    qtype: str
    answer: str
    evidence: tuple[str, ...]
    relations: tuple[str, ...]


def _as_list(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        s = v.strip()
        if s.startswith("["):
            try:
                v = ast.literal_eval(s)
            except (ValueError, SyntaxError):
                return [s]
        else:
            return [s] if s else []
    return [str(x) for x in v if str(x).strip()]


def load_graphrag_bench(subset: str, data_dir: str | os.PathLike | None = None
                        ) -> tuple[dict[str, Document], list[GBQuestion]]:
    """Documents by source and questions of ``medical`` or ``novel``, in file order."""
    if subset not in SUBSETS.values():
        raise ValueError(f"unknown GraphRAG-Bench subset {subset!r}; choose medical or novel")
    d = resolve_data_dir(data_dir) / "graphrag_bench" / subset
    docs = {}
    for rec in _read_json(d / "corpus.json"):
        if rec["source"] in docs:
            raise ValueError(f"{d}: source {rec['source']!r} repeats")
        docs[rec["source"]] = Document(rec["source"], "", rec["text"])
    qs = []
    for r in _read_json(d / "questions.json"):
        if r["source"] not in docs:
            raise ValueError(f"{d}: question {r['id']!r} asks about unknown source {r['source']!r}")
        if r["question_type"] not in QTYPES:
            raise ValueError(f"{d}: question {r['id']!r} has type {r['question_type']!r}")
        ev = _as_list(r.get("evidence"))
        if not ev:
            raise ValueError(f"{d}: question {r['id']!r} has no evidence statement")
        rel = _as_list(r.get("evidence_triple", r.get("evidence_relations")))
        qs.append(GBQuestion(str(r["id"]), r["source"], r["question"], r["question_type"],
                             str(r.get("answer", "")), tuple(ev), tuple(rel)))
    return docs, qs


def _safe(source: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in source)


def source_index(doc: Document, extractor: Extractor, embedder: Embedder,
                 index_dir: Path | None, cache_dir: Path, progress: bool = True
                 ) -> tuple[HyperIndex, dict[str, Any]]:
    """The index of one source document: reused from ``index_dir`` when its manifest
    names the same extractor and embedder and its chunks are the chunking of ``doc``,
    else built (streamed, from the document) and saved there."""
    want = corpus_checksum(chunk_documents([doc], CHUNK_WORDS))
    info: dict[str, Any] = {"path": str(index_dir) if index_dir else None, "corpus_sha256": want}
    t0 = time.perf_counter()
    if index_dir is not None and manifest_path(index_dir).is_file():
        m = json.loads(manifest_path(index_dir).read_text(encoding="utf-8"))
        if m.get("extractor") == extractor.name and m.get("embedder", {}).get("name") == embedder.name:
            cached = CachedEmbedder(embedder, cache_dir / "embeddings.sqlite")
            ix = HyperIndex.load(index_dir, embedder=cached, extractor=extractor)
            if corpus_checksum(ix.chunks) == want:
                info.update(reused=True, load_s=round(time.perf_counter() - t0, 3))
                return ix, info
        print(f"rebuilding {index_dir}: extractor, embedder or chunking differ", file=sys.stderr)
    ix = HyperIndex.build([doc], extractor, embedder, progress=progress,
                          max_tokens=CHUNK_WORDS, cache_dir=cache_dir)
    if corpus_checksum(ix.chunks) != want:
        raise AssertionError("the streamed build chunked the document differently")
    info.update(reused=False, build_wall_s=round(time.perf_counter() - t0, 3))
    if index_dir is not None:
        ix.save(index_dir)
    return ix, info


def retrieve_all(ix: HyperIndex, embedder: Embedder, index_dir: Path | None,
                 methods: Sequence[str], qs: Sequence[GBQuestion], top_k: int,
                 options_by_method: dict[str, QueryOptions] | None = None,
                 progress: bool = True) -> dict[str, dict[str, Any]]:
    """Per method: top-``top_k`` chunk rows per question and query times (ms); a method
    without given options runs at the preset of the index's embedder, as in the harness."""
    retriever = Retriever(ix, embedder, prebuilt=prepare_methods(ix, index_dir, methods))
    preset = preset_for(embedder.name)
    state = retriever.state
    qv = np.stack([np.asarray(embedder.embed([q.question]), np.float32)[0] for q in qs])
    out = {}
    for name in methods:
        o = method_options(name, (options_by_method or {}).get(name), top_k, preset)
        fn = METHODS[name]
        state.engine.warmup(o.stitch)
        fn(state, qv[0], qs[0].question, o, False)
        rows, ms = [], []
        for q, v in tqdm(list(zip(qs, qv)), desc=name, disable=not progress, file=sys.stderr):
            t0 = time.perf_counter()
            r = fn(state, v, q.question, o, False)
            ms.append((time.perf_counter() - t0) * 1e3)
            rows.append([int(i) for i in np.asarray(r.chunk_ids)[:top_k]])
        out[name] = {"rows": rows, "ms": ms}
    return out


def summarize_coverage(qs: Sequence[GBQuestion], per_q: Sequence[float]) -> dict[str, float]:
    """Mean per-question coverage per question type and over all (``all``), plus ``n``."""
    by: dict[str, list[float]] = defaultdict(list)
    for q, c in zip(qs, per_q):
        by[q.qtype].append(c)
    out = {t: float(np.mean(by[t])) for t in QTYPES if by[t]}
    out["all"] = float(np.mean(per_q))
    out["n"] = {t: len(by[t]) for t in QTYPES if by[t]}
    return out


def run_subset(subset: str, methods: Sequence[str], index_root: Path | None, cache_dir: Path,
               extractor: Extractor, embedder: Embedder, top_k: int = TOP_K,
               data_dir=None, options_by_method=None, progress: bool = True,
               limit: int | None = None) -> dict[str, Any]:
    """Run ``methods`` over one subset: contexts (top-k passages) per method and question,
    offline coverage per type, index info per source. ``limit``: first questions only."""
    docs, qs = load_graphrag_bench(subset, data_dir)
    if limit:
        qs = qs[:limit]
    by_src: dict[str, list[int]] = defaultdict(list)
    for i, q in enumerate(qs):
        by_src[q.source].append(i)
    contexts: dict[str, list[list[str]]] = {m: [[] for _ in qs] for m in methods}
    ms: dict[str, list[float]] = {m: [] for m in methods}
    indexes, n_chunks, chars = {}, 0, []
    for src, idx in by_src.items():
        d = index_root / _safe(src) if index_root is not None else None
        ix, info = source_index(docs[src], extractor, embedder, d, cache_dir, progress)
        passages = [chunk_passage(c) for c in ix.chunks]
        n_chunks += len(passages)
        chars += [len(p) for p in passages]
        info["chunks"] = len(passages)
        indexes[src] = info
        got = retrieve_all(ix, ix.embedder or embedder, d, methods, [qs[i] for i in idx], top_k,
                           options_by_method, progress)
        for m in methods:
            for i, rows in zip(idx, got[m]["rows"]):
                contexts[m][i] = [passages[r] for r in rows]
            ms[m] += got[m]["ms"]
    res = {}
    for m in methods:
        per_q = [float(np.mean([c.covered for c in evidence_coverage(q.evidence, ctx)]))
                 for q, ctx in zip(qs, contexts[m])]
        res[m] = {"coverage": summarize_coverage(qs, per_q),
                  "evidence_recall_llm": None, "context_relevance_llm": None,
                  "latency_ms_p50": float(np.percentile(ms[m], 50))}
    return {"questions": qs, "contexts": contexts, "methods": res, "indexes": indexes,
            "n_chunks": n_chunks, "mean_chunk_chars": float(np.mean(chars))}


def chunking_info() -> dict[str, Any]:
    return {"unit": "whitespace words", "max_words": CHUNK_WORDS, "overlap": 0,
            "breaks": "last paragraph break, else sentence end, in the budget's second half "
                      "(hyperrag_fast.chunking.chunk_documents)",
            "target": "about 1,200 characters, as the benchmark's baselines",
            "top_k_context": TOP_K}


def evaluate_gbench(datasets: Sequence[str], methods: Sequence[str], index_dir=None,
                    cache_dir="cache", *, data_dir=None, out_dir=None,
                    progress: bool = True, top_k: int = TOP_K,
                    extractor_factory: Callable[[], Extractor] | None = None,
                    embedder_factory: Callable[[], Embedder] | None = None,
                    judge=None, command: str | None = None, limit: int | None = None,
                    out_name: str = RESULTS_FILE, dump: bool = False) -> dict[str, Any]:
    """Evaluate ``methods`` on the given GraphRAG-Bench datasets; writes ``out_name``
    (the results contract, docs/architecture.md §9) merged with rows of earlier runs
    on the same embedder. ``judge``: a :class:`~.gbench_judge.GBenchJudge` for the
    LLM-judged columns (else they stay None: not run). ``dump``: also each method's
    contexts per question as ``<out_name stem>_<subset>_<method>_contexts.jsonl``."""
    methods = list(dict.fromkeys(methods))
    check_methods(methods)
    extractor = (extractor_factory or default_extractor)()
    embedder = (embedder_factory or default_embedder)()
    out: dict[str, Any] = {
        "machine": machine_info(),
        "command": command or " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain")),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "embedder": embedder.name, "extractor": extractor.name, "chunking": chunking_info(),
        "coverage_definition": {"window_sentences": WINDOW, "threshold": THRESHOLD,
                                "names_required": NAMES, "version": 2,
                                "doc": "docs/architecture.md §9 (offline evidence coverage); "
                                       "NOT the benchmark's LLM-judged evidence recall"},
        "subsets": {}, "indexes": {}}
    for ds in datasets:
        sub = SUBSETS[ds]
        root = Path(index_dir) / sub if index_dir is not None else None
        r = run_subset(sub, methods, root, Path(cache_dir), extractor, embedder, top_k,
                       data_dir, progress=progress, limit=limit)
        if judge is not None:
            for m in methods:
                r["methods"][m].update(judge.score(r["questions"], r["contexts"][m]))
        run = {k: out[k] for k in ("command", "git_commit", "git_dirty", "timestamp")}
        for m in methods:  # rows of several runs merge: each row says which run made it
            r["methods"][m]["run"] = run
        out["subsets"][sub] = r["methods"]
        if dump and out_dir is not None:
            write_contexts(Path(out_dir) / Path(out_name).stem, sub, r)
        out["indexes"][sub] = {"sources": r["indexes"], "n_chunks": r["n_chunks"],
                               "mean_chunk_chars": round(r["mean_chunk_chars"], 1),
                               "n_questions": len(r["questions"])}
    if out_dir is not None:
        out = write_gbench(out, Path(out_dir) / out_name)
    return out


def write_contexts(stem: Path, subset: str, r: dict[str, Any]) -> None:
    """Per method: one JSONL row per question (id, type, evidence, retrieved passages)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    for m, ctxs in r["contexts"].items():
        with open(f"{stem}_{subset}_{m}_contexts.jsonl", "w", encoding="utf-8") as f:
            for q, c in zip(r["questions"], ctxs):
                f.write(json.dumps({"qid": q.qid, "source": q.source, "type": q.qtype,
                                    "question": q.question, "evidence": list(q.evidence),
                                    "passages": c}, ensure_ascii=False) + "\n")


def write_gbench(out: dict[str, Any], path: Path) -> dict[str, Any]:
    """Write ``out``, keeping method rows (and ``metric_validation``) of an earlier file
    with the same embedder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        if old.get("embedder") == out["embedder"]:
            for sub, rows in old.get("subsets", {}).items():
                new = out["subsets"].setdefault(sub, {})
                out["subsets"][sub] = {**{k: v for k, v in rows.items() if k not in new}, **new}
            for k in ("metric_validation", "indexes"):
                if k in old and k not in out:
                    out[k] = old[k]
            for sub, v in old.get("indexes", {}).items():
                out["indexes"].setdefault(sub, v)
    out.setdefault("metric_validation", None)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return out
