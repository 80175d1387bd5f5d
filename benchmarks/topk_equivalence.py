"""Same top-8 before and after a change, on the real 2WikiMultiHopQA questions.

    # 1. with each checkout's code first on the path, dump the top-8 of every method
    #    (--coda-option KEY=VALUE ...: CODA options other than the defaults; --embedder E):
    PYTHONPATH=<before checkout> python benchmarks/topk_equivalence.py dump before.npz --index indexes/2wiki --cache-dir cache
    PYTHONPATH=<after checkout>  python benchmarks/topk_equivalence.py dump after.npz --index indexes/2wiki --cache-dir cache
    # 2. compare (several dumps per side: their methods together; a method dumped for fewer
    #    questions on one side is compared on the questions both hold):
    python benchmarks/topk_equivalence.py compare --before before.npz --after after.npz
    # the same through the `hyperrag` console (`hyperrag query --questions`, its one-shot
    # trims included): cli-dump instead of dump, then compare as in 2.
    PYTHONPATH=<checkout> python benchmarks/topk_equivalence.py cli-dump cli.npz --index indexes/2wiki --methods stitch dense
    # 3. graph-stage speed: alternate before/after dumps of stitch and stitch_paper, then
    python benchmarks/topk_equivalence.py speed --before b1.npz b2.npz --after a1.npz a2.npz
    # 4. the build side: the prebuilt structures two checkouts built (hyperrag build-methods),
    #    file by file (XXH3-128 of the bytes on disk); equal files = the same structures
    python benchmarks/topk_equivalence.py prebuilt --before indexes/a --after indexes/b

``dump`` runs every question through every registered method (or ``--methods``) exactly
as ``bench_2wiki.py`` does (``METHODS[name](state, q, text, options, False)`` with the
options every user of the index gets: the preset of its embedder, ``--options default`` for
``QueryOptions()`` read at run time) and stores the top-8 chunk ids, their scores
and ``graph_ms``. Methods that read a structure built by the explicit build step
(merge variants, CODA: ``hyperrag build-methods``) get it from ``<index>/methods``,
built there first when missing (code without that step builds them on first query).
``compare`` writes ``results/topk_equivalence.json``: per method, how many questions
have the identical ordered top-8, the largest score difference, and graph_ms p50 of
both runs (same machine, run one after the other).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
import time
from dataclasses import replace

import numpy as np

try:
    from . import _common as C
except ImportError:
    import _common as C


def _new_layout() -> bool:
    """Whether the code on the path has the explicit registry and build step (checked by
    file: an editable install can resolve missing submodules from another checkout)."""
    import hyperrag_fast
    return (Path(hyperrag_fast.__file__).parent / "prebuilt.py").is_file()


def _registry():
    """(METHODS, QueryOptions) of the code on the path (before or after the registry split)."""
    if _new_layout():
        from hyperrag_fast.config import QueryOptions
        from hyperrag_fast.methods import METHODS
    else:  # code before the explicit registry
        from hyperrag_fast.retriever import METHODS, QueryOptions, methods_registry
        methods_registry()
    return METHODS, QueryOptions


def _coda_setup(pairs):
    """``CodaSetup(options=CodaOptions(**pairs))`` from ``KEY=VALUE`` strings, each value
    parsed as the type of that field's default (None when no pairs)."""
    if not pairs:
        return None
    from dataclasses import fields

    from hyperrag_fast.config import CodaOptions
    from hyperrag_fast.methods import CodaSetup

    kinds = {f.name: type(f.default) for f in fields(CodaOptions)}
    kw = {}
    for p in pairs:
        k, _, v = p.partition("=")
        if k not in kinds:
            raise SystemExit(f"--coda-option: unknown CodaOptions field {k!r}")
        kw[k] = (v.lower() in ("1", "true", "yes")) if kinds[k] is bool else kinds[k](v)
    return CodaSetup(options=CodaOptions(**kw))


def _retriever(index_dir, methods, cache_dir, embedder=None, coda_options=None):
    from hyperrag_fast.embed.cache import CachedEmbedder
    from hyperrag_fast.eval.harness import default_embedder
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import Retriever

    base = default_embedder()
    if embedder:
        from hyperrag_fast.embed.registry import make_embedder
        base = make_embedder(embedder)
    # through the evaluation's embedding cache: texts embedded by the first run (questions,
    # merged descriptions, entity names) get the same vectors in the second
    emb = CachedEmbedder(base, Path(cache_dir) / "embeddings.sqlite") if cache_dir else base
    idx = HyperIndex.load(index_dir, embedder=emb)
    if not _new_layout():  # code that builds these structures on first query
        if coda_options:
            raise SystemExit("--coda-option needs the code with the explicit build step")
        return Retriever(idx, emb)
    from hyperrag_fast.methods import needs
    from hyperrag_fast.prebuilt import ensure_prebuilt
    structures = sorted({s for m in methods for s in needs(m, idx.merge)})
    return Retriever(idx, emb, prebuilt=ensure_prebuilt(index_dir, idx, structures),
                     coda=_coda_setup(coda_options))


def _base_options(ret, QueryOptions, which: str):
    """``preset``: the options every user of this index gets (the Retriever's, i.e. the preset
    of the index's embedder, docs/architecture.md §6); ``default``: ``QueryOptions()`` (what
    dumps made before presets existed used; code without presets has only that)."""
    if which == "default" or getattr(ret, "options", None) is None:
        return QueryOptions()
    return ret.options


def dump(a):
    import hyperrag_fast
    from hyperrag_fast.eval.data import load_dataset

    METHODS, QueryOptions = _registry()
    methods = a.methods or sorted(METHODS)
    ds = load_dataset("2wikimultihopqa", "all")
    qs = [q.question for q in ds.questions]
    qs = qs[:a.questions] if a.questions else qs
    ret = _retriever(a.index, methods, a.cache_dir, a.embedder, a.coda_option)
    ret.warmup()
    vecs = np.stack([ret._embed([q])[0] for q in qs]) if a.one_by_one else ret._embed(qs)
    base = _base_options(ret, QueryOptions, a.options)
    out = {"code": np.array(hyperrag_fast.__file__), "methods": np.array(methods),
           "command": np.array(C.command()), "options": np.array(a.options)}
    for m in methods:
        o = replace(base, method=m)
        fn = METHODS[m]
        t0 = time.perf_counter()
        for q, text in zip(vecs[:3], qs[:3]):  # warm (JIT, BM25, lookups)
            fn(ret.state, q, text, o, False)
        ids, sc, t = [], [], []
        for q, text in zip(vecs, qs):
            r = fn(ret.state, q, text, o, False)
            i8 = np.full(8, -1, np.int64)
            s8 = np.full(8, np.nan)
            n = min(8, len(r.chunk_ids))
            i8[:n], s8[:n] = np.asarray(r.chunk_ids)[:n], np.asarray(r.scores)[:n]
            ids.append(i8)
            sc.append(s8)
            t.append(r.graph_ms)
        out[m + "_ids"], out[m + "_scores"], out[m + "_graph_ms"] = np.array(ids), np.array(sc), np.array(t)
        print(m, "graph_ms p50", round(float(np.median(t)), 4), "wall s", round(time.perf_counter() - t0, 1),
              flush=True)
        np.savez(a.file, **out)  # after every method: a stopped dump keeps what it finished


def cli_dump(a):
    """The top-8 of ``hyperrag query INDEX --questions FILE --json --method M``: the console
    a user runs (its one-shot trims, ``hyperrag_fast.console``), with the code on the path,
    stored under the keys ``dump`` uses (chunk ids as strings)."""
    import os
    import subprocess
    import sys
    import tempfile

    import hyperrag_fast
    from hyperrag_fast.eval.data import load_dataset

    exe = Path(sys.executable).with_name("hyperrag")
    qs = [q.question for q in load_dataset("2wikimultihopqa", "all").questions]
    qs = qs[:a.questions] if a.questions else qs
    out = {"code": np.array(hyperrag_fast.__file__), "methods": np.array(a.methods),
           "command": np.array(C.command())}
    with tempfile.TemporaryDirectory() as tmp:
        qfile = Path(tmp) / "questions.jsonl"
        qfile.write_text("".join(json.dumps({"question": q}) + "\n" for q in qs), encoding="utf-8")
        for m in a.methods:
            r = subprocess.run([str(exe), "query", a.index, "--questions", str(qfile), "--json",
                                "--method", m], capture_output=True, text=True, check=True,
                               env=dict(os.environ))
            rows = [json.loads(line) for line in r.stdout.splitlines()]
            assert len(rows) == len(qs), (m, len(rows), r.stderr[-2000:])
            ids = np.full((len(rows), 8), "", dtype="U64")
            sc = np.full((len(rows), 8), np.nan)
            for i, row in enumerate(rows):
                top = row["chunks"][:8]
                ids[i, :len(top)] = [c["chunk_id"] for c in top]
                sc[i, :len(top)] = [c["score"] for c in top]
            out[m + "_ids"], out[m + "_scores"] = ids, sc
            out[m + "_graph_ms"] = np.array([row["timings"]["graph_ms"] for row in rows])
            print(m, "questions", len(rows), flush=True)
            np.savez(a.file, **out)


def _dumps(files):
    """{array name: array} of one side's dumps (several files: their methods together)."""
    arrays, sides = {}, []
    for f in files:
        z = np.load(f)
        sides.append(z)
        arrays.update({k: z[k] for k in z.files if k.endswith(("_ids", "_scores", "_graph_ms"))})
    return arrays, sides


def compare(a):
    x, xs = _dumps(a.before)
    y, ys = _dumps(a.after)

    def side(zs, files, note):
        cmds = [str(z["command"]) if "command" in z.files else note for z in zs]
        return {"file": " ".join(files), "code": str(zs[0]["code"]),
                "command": " ; ".join(c for c in cmds if c)}
    run = {"before": side(xs, a.before, a.before_command), "after": side(ys, a.after, a.after_command),
           "note": a.note}
    methods = {}
    for m in sorted({k[:-4] for k in x if k.endswith("_ids")}):
        if m + "_ids" not in y:
            methods[m] = "missing after"
            continue
        n = min(x[m + "_ids"].shape[0], y[m + "_ids"].shape[0])  # the questions both dumped
        same = (x[m + "_ids"][:n] == y[m + "_ids"][:n]).all(axis=1)
        d = np.abs(x[m + "_scores"][:n] - y[m + "_scores"][:n])
        methods[m] = {"questions": int(n), "identical_ordered_top8": int(same.sum()),
                      "max_abs_score_diff": float(np.nanmax(d)) if np.isfinite(d).any() else 0.0,
                      "graph_ms_p50_before": float(np.median(x[m + "_graph_ms"][:n])),
                      "graph_ms_p50_after": float(np.median(y[m + "_graph_ms"][:n]))}
        print(m, methods[m])
    if a.into:  # add these methods to an existing result, the run recorded beside the others
        text = Path(a.into).read_text(encoding="utf-8")
        res = json.loads(text)
        res.setdefault("runs", []).append({"label": a.label, "command": C.command(),
                                           "machine": C.machine(), **run})
        res.setdefault(a.key, {}).update({m: {**v, "run": a.label} if isinstance(v, dict) else v
                                          for m, v in methods.items()})
        C.write_result(Path(a.into).name, res, Path(a.into).parent, C.json_indent(text))
    else:
        C.write_result(a.out, {**run, "methods": methods})


def _generation(index_dir) -> Path:
    return Path(index_dir) / (Path(index_dir) / "CURRENT").read_text(encoding="utf-8").strip()


def _prebuilt_files(index_dir) -> dict[str, dict[str, str]]:
    """{structure: {file: XXH3-128 of its bytes}} of the live generation's prebuilt/ (the
    files its manifest lists, hashed again from disk; a file unlike its manifest fails)."""
    from hyperrag_fast.checksums import file_digest

    gen = _generation(index_dir)
    listed = json.loads((gen / "manifest.json").read_text(encoding="utf-8")).get("prebuilt", {})
    out = {s: {f: file_digest(gen / f, "xxh3_128") for f in sorted(files)} for s, files in listed.items()}
    bad = [f for s, files in listed.items() for f, h in files.items() if out[s][f] != h]
    assert not bad, f"{index_dir}: files unlike the manifest: {bad}"
    return out


def _json_keys_differing(before, after, rel: str) -> list[str] | None:
    """The top-level keys whose values differ between two JSON objects (None: not both)."""
    try:
        x, y = (json.loads((_generation(i) / rel).read_text(encoding="utf-8")) for i in (before, after))
    except (ValueError, OSError):
        return None
    if not (isinstance(x, dict) and isinstance(y, dict)):
        return None
    return sorted(k for k in set(x) | set(y) if x.get(k, ...) != y.get(k, ...))


def prebuilt(a):
    """Per structure: how many files the two indexes' prebuilt/ share byte for byte (the
    structures of docs/architecture.md §7); for a differing JSON file, the keys that differ."""
    x, y = _prebuilt_files(a.before), _prebuilt_files(a.after)
    out = {}
    for s in sorted(set(x) | set(y)):
        fx, fy = x.get(s, {}), y.get(s, {})
        both = sorted(set(fx) & set(fy))
        out[s] = {"files_before": len(fx), "files_after": len(fy),
                  "identical_files": sum(fx[f] == fy[f] for f in both),
                  "differing": {f: (_json_keys_differing(a.before, a.after, f) if f.endswith(".json")
                                    else None) for f in both if fx[f] != fy[f]},
                  "only_before": sorted(set(fx) - set(fy)), "only_after": sorted(set(fy) - set(fx))}
        print(s, {k: v for k, v in out[s].items() if v or k.startswith("files")})
    res = {"before": {"index": a.before}, "after": {"index": a.after}, "note": a.note,
           "structures": out, "identical": all(not (v["differing"] or v["only_before"] or v["only_after"])
                                               for v in out.values())}
    if a.into:  # a new key of an existing result, the rest kept
        text = Path(a.into).read_text(encoding="utf-8")
        old = json.loads(text)
        old[a.key] = {"command": C.command(), "machine": C.machine(), **res}
        C.write_result(Path(a.into).name, old, Path(a.into).parent, C.json_indent(text))
    else:
        C.write_result(a.out, res)


def speed(a):
    """graph_ms p50 of each dump (runs alternated before/after, same machine, one session)
    and the median of the per-run p50s per side."""
    res = {"runs": [], "note": a.note, "methods": {}}
    sides = {"before": a.before, "after": a.after}
    for side, files in sides.items():
        for f in files:
            z = np.load(f)
            res["runs"].append({"side": side, "file": f, "code": str(z["code"]),
                                "command": str(z["command"]) if "command" in z.files else a.before_command,
                                **{m: float(np.median(z[m + "_graph_ms"])) for m in a.methods}})
    for m in a.methods:
        b = [r[m] for r in res["runs"] if r["side"] == "before"]
        f = [r[m] for r in res["runs"] if r["side"] == "after"]
        res["methods"][m] = {"graph_ms_p50_before_runs": b, "graph_ms_p50_after_runs": f,
                             "before_median": float(np.median(b)), "after_median": float(np.median(f)),
                             "after_over_before": float(np.median(f) / np.median(b))}
        print(m, res["methods"][m])
    C.write_result(a.out, res)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("file")
    d.add_argument("--index", default="indexes/2wiki")
    d.add_argument("--questions", type=int, default=0, help="0 = all")
    d.add_argument("--cache-dir", default=None, help="embedding cache (the eval harness's --cache-dir)")
    d.add_argument("--methods", nargs="+", default=None, help="default: every registered method")
    d.add_argument("--one-by-one", action="store_true",
                   help="embed each question alone, as Retriever.retrieve does (use no --cache-dir)")
    d.add_argument("--embedder", default=None, help="default: the library's default embedder")
    d.add_argument("--options", choices=("preset", "default"), default="preset",
                   help="preset: the index embedder's preset (as users get it); default: QueryOptions()")
    d.add_argument("--coda-option", nargs="+", default=None, metavar="KEY=VALUE",
                   help="CODA options of every coda* method (CodaSetup), e.g. cover_weight=0.5")
    cd = sub.add_parser("cli-dump", help="dump through the hyperrag console (--questions)")
    cd.add_argument("file")
    cd.add_argument("--index", default="indexes/2wiki")
    cd.add_argument("--questions", type=int, default=0, help="0 = all")
    cd.add_argument("--methods", nargs="+", default=["stitch"])
    c = sub.add_parser("compare")
    c.add_argument("--before", nargs="+", required=True, help="dumps of the code before")
    c.add_argument("--after", nargs="+", required=True, help="dumps of the code after")
    c.add_argument("--out", default="topk_equivalence.json")
    c.add_argument("--into", default=None, help="an existing result: add these methods to it, "
                   "the run under 'runs' (with --label)")
    c.add_argument("--label", default="")
    c.add_argument("--key", default="methods", help="with --into: the key the methods go under")
    c.add_argument("--before-command", default=None, help="recorded when the dump did not store it")
    c.add_argument("--after-command", default=None)
    c.add_argument("--note", default="")
    sp = sub.add_parser("speed", help="graph-stage p50 of alternating before/after dumps")
    sp.add_argument("--before", nargs="+", required=True)
    sp.add_argument("--after", nargs="+", required=True)
    sp.add_argument("--methods", nargs="+", default=["stitch", "stitch_paper"])
    sp.add_argument("--out", default="graph_stage_2wiki_ab.json")
    sp.add_argument("--before-command", default=None)
    sp.add_argument("--note", default="")
    pb = sub.add_parser("prebuilt", help="the prebuilt structures of two indexes, file by file")
    pb.add_argument("--before", required=True, help="index whose structures the code before built")
    pb.add_argument("--after", required=True, help="index whose structures the code after built")
    pb.add_argument("--out", default="prebuilt_equivalence.json")
    pb.add_argument("--into", default=None, help="an existing result: write under --key")
    pb.add_argument("--key", default="prebuilt")
    pb.add_argument("--note", default="")
    a = ap.parse_args()
    {"dump": dump, "cli-dump": cli_dump, "compare": compare, "speed": speed,
     "prebuilt": prebuilt}[a.cmd](a)


if __name__ == "__main__":
    main()
