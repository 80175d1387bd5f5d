"""``hyperrag`` command line: index, add, delete, upgrade, build-methods, query, ask, info,
demo, eval, serve.

``ask`` and ``eval`` live in :mod:`hyperrag_fast.cli_answers`.

Every query default comes from :mod:`hyperrag_fast.config` (``hyperrag query`` with no
options runs ``config.TUNED``, the API's ``QueryOptions()``). Every command takes ``--json``; errors (missing paths, corrupted or mismatched index,
missing optional packages) print one line on stderr and exit with status 2.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .cli_components import (Components, embedder_for, extractor_for, load_writer,  # noqa: F401
                             make_extractor, new_embedder, open_reader)
from .cli_errors import CliError, debug, is_user_error, keep_until_exit, report, run_console
from .store import read_manifest

EXAMPLE_CORPUS = Path(__file__).resolve().parent / "data" / "examples"
DEMO_QUESTIONS = (
    "In which town did Ada Lovelace's father die?",
    "On which river is the birthplace of Marie Curie?",
    "In which city was the device that inspired the Analytical Engine's punched cards "
    "first demonstrated?",
)


def _existing(path: str) -> str:
    if not Path(path).exists():
        raise CliError(f"no such file or folder: {path}")
    return path


# -------------------------------------------------------------------- commands
def _build_options(a):
    from .config import BuildOptions
    return BuildOptions(partition_docs=a.partition_docs, workers=a.workers,
                        scheduler=a.scheduler,
                        chunk_vectors=a.chunk_vectors)


def _workdir(index: str) -> Path:
    """Build scratch files go inside the index folder (the writer holds its lock), so saving
    hard-links them and the next writer removes what a killed build left."""
    return Path(index).absolute()


def _documents(a):
    """Load ``a.source`` (checked, with ``--encoding``/``--follow-symlinks``) up front."""
    from .chunking import load_documents
    from .intake import check_encoding
    check_encoding(a.encoding)
    try:
        return load_documents(_existing(a.source), encoding=a.encoding,
                              follow_symlinks=a.follow_symlinks)
    except PermissionError as e:
        raise CliError(f"{e.filename or a.source}: permission denied") from None


def _all_failed(rep, what: str) -> None:
    if rep.new_chunks and len(rep.extraction_errors) == rep.new_chunks:
        reasons = ", ".join(f"{r} x{n}" for r, n in list(rep.error_reasons().items())[:3])
        raise CliError(f"extraction failed for every chunk ({rep.new_chunks}): {reasons}; "
                       f"{what}")


def cmd_index(a) -> dict[str, Any]:
    from .index import HyperIndex
    from .intake import check_new_index_target, check_writable_parent
    from .publish import first_build, unfinished_build, writer_lock
    from .store import current_generation
    resumed = unfinished_build(a.index)  # what a killed first build left: carry on
    if resumed:
        check_writable_parent(Path(a.index))
    else:
        check_new_index_target(a.index, a.force, lambda p: current_generation(p) is not None
                               or (p / "manifest.json").is_file())  # or an old-format index
    if a.cache_dir:
        check_writable_parent(Path(a.cache_dir) / "embeddings.sqlite")
    extractor = make_extractor(a.extractor, a, a.index)
    docs = _documents(a)
    created = not Path(a.index).exists()
    try:
        with writer_lock(a.index, a.lock_timeout) as root, \
                first_build(root) if created or resumed else nullcontext():
            ix = HyperIndex.build(docs, extractor, new_embedder(a), merge=a.merge,
                                  progress=not a.quiet, max_tokens=a.max_tokens,
                                  overlap=a.overlap, cache_dir=a.cache_dir,
                                  options=_build_options(a), workdir=_workdir(a.index))
            _all_failed(ix.report, "nothing was saved")
            ix.save(a.index)
    except BaseException:
        if created:  # a failed first build leaves no folder holding only the lock file
            _remove_failed_first_build(Path(a.index))
        raise
    return {"index": a.index, "report": _report(ix.report, docs.warnings),
            "counts": ix.manifest()["counts"]}


def _remove_failed_first_build(root: Path) -> None:
    import os
    import shutil
    from .store import SCRATCH_PREFIX
    if not root.is_dir():
        return
    for p in root.iterdir():  # this process's build scratch
        if p.name.startswith(f"{SCRATCH_PREFIX}{os.getpid()}-"):
            shutil.rmtree(p, ignore_errors=True)
    if {p.name for p in root.iterdir()} <= {".lock"}:
        (root / ".lock").unlink(missing_ok=True)
        root.rmdir()


def cmd_add(a) -> dict[str, Any]:
    from .intake import check_writable_parent
    from .publish import writer_lock
    check_writable_parent(_existing(a.index))
    docs = _documents(a)
    with writer_lock(a.index, a.lock_timeout, create=False):  # load .. save: one writer
        ix = load_writer(a.index, with_extractor=True, args=a)
        rep = ix.add(docs, progress=not a.quiet, options=_build_options(a),
                     workdir=_workdir(a.index))
        _all_failed(rep, "nothing was added")
        ix.save(a.index)
    return {"index": a.index, "report": _report(rep, docs.warnings),
            "counts": ix.manifest()["counts"]}


def cmd_delete(a) -> dict[str, Any]:
    from .publish import writer_lock
    with writer_lock(a.index, a.lock_timeout, create=False):  # load .. save: one writer
        ix = load_writer(a.index, args=a)
        try:
            removed = ix.delete(a.doc_ids)
        except KeyError as e:
            raise CliError(e.args[0]) from None
        ix.save(a.index)
    return {"index": a.index, "removed_chunks": removed, "counts": ix.manifest()["counts"]}


def query_options(a, embedder_name: str | None = None):
    """The :class:`~hyperrag_fast.config.QueryOptions` of ``hyperrag query`` arguments:
    the preset of the index's embedder (``config.preset_for``), with the options given."""
    from .config import preset_for
    o = preset_for(embedder_name)
    o = replace(o, method=a.method,
                k_nodes=o.k_nodes if a.k_nodes is None else a.k_nodes,
                k_chunks=o.k_chunks if a.k_chunks is None else a.k_chunks)
    return o if a.top_k is None else o.with_top_k(a.top_k)


def _retriever(ix, path: str, method: str, verify: bool = True):
    """A retriever with the prebuilt structures ``method`` reads (none for most), from
    the generation ``ix`` was opened from."""
    from .methods import needs
    from .prebuilt_reader import load_prebuilt
    from .retriever import Retriever
    return Retriever(ix, prebuilt=load_prebuilt(path, needs(method, ix.merge), verify,
                                                ix.generation))


def cmd_query(a) -> dict[str, Any] | None:
    """One query (``text``), or with ``--questions`` one JSON line per question (printed
    here, as they are answered; see :mod:`hyperrag_fast.cli_batch`)."""
    from .cli_batch import read_questions, run_batch
    if a.questions is not None and a.text is not None:
        raise CliError("give a question or --questions FILE, not both")
    if a.questions is None and (a.text is None or not a.text.strip()):
        raise CliError("empty query: give a question (or --questions FILE)")
    questions = read_questions(a.questions) if a.questions is not None else None
    from .lean import import_usearch, lean_cache_loads, settle, skip_blas_probe
    # this process is ours: cached kernels load without Numba's compile registries, and
    # SciPy stays out (see hyperrag_fast.lean)
    lean_cache_loads() or skip_blas_probe()
    import_usearch()
    ix = open_reader(a.index, verify=not a.no_verify, threads=1 if questions is None else None,
                     args=a)
    settle()  # ~60 MB of freed ONNX setup heap back to the OS; gc as in hyperrag_fast.lean
    opts = query_options(a, ix.embedder_name)
    r = _retriever(ix, a.index, a.method, verify=not a.no_verify)
    keep_until_exit(r)  # a one-shot process ends without freeing it (hyperrag_fast.console)

    def render(res) -> dict[str, Any]:
        out: dict[str, Any] = {"query": res.query, "method": a.method, "timings": res.timings,
                               "chunks": [vars(c) for c in res.chunks]}
        if a.explain:
            out["explain"] = {k: _plain(v) for k, v in (res.detail or {}).items()}
            if "cq" in out["explain"]:
                out["explain"]["cq_chunk_ids"] = [ix.chunks[i].chunk_id
                                                  for i in out["explain"]["cq"]]
        return out

    if questions is None:
        return render(r.retrieve(a.text, opts, detail=a.explain))
    for line in run_batch(questions, lambda qs: r.retrieve_batch(qs, opts, detail=a.explain),
                          render):
        print(line, flush=True)
    return None


def cmd_ask(a) -> dict[str, Any]:
    from .cli_answers import cmd_ask as ask
    return ask(a, lambda path, verify: _retriever(open_reader(path, verify=verify, args=a), path,
                                                   a.method, verify))


def cmd_build_methods(a) -> dict[str, Any]:
    """Build (and save beside the index) what the named methods read."""
    from .methods import needs
    from .prebuilt import STRUCTURES, build_methods
    from .publish import writer_lock
    if a.cache_dir:
        from .intake import check_writable_parent
        check_writable_parent(Path(a.cache_dir) / "embeddings.sqlite")
    from .mmaps import map_large_allocations
    map_large_allocations()  # freed large buffers go back to the kernel: the step's peak
    with writer_lock(a.index, a.lock_timeout, create=False):  # one writer of prebuilt/
        merge, names = read_manifest(a.index)["merge"], a.methods or None
        structures = (sorted({s for m in names for s in needs(m, merge)}) if names
                      else [s for s in STRUCTURES if s != f"merge_{merge}"])
        # CODA embeds from one single-threaded session per core (coda/kg_vectors.py): load
        # the index with such a session, not one more that would sit idle (docs §7)
        one = not a.cache_dir and not any(s.startswith("merge_") for s in structures)
        ix = load_writer(a.index, args=a, threads=1 if one else None)
        if a.cache_dir and ix.embedder is not None:
            from .embed.cache import CachedEmbedder
            ix.embedder = CachedEmbedder(ix.embedder, Path(a.cache_dir) / "embeddings.sqlite")
        have = build_methods(a.index, ix, structures)
    return {"index": a.index, "built": structures, "have": have}


def cmd_upgrade(a) -> dict[str, Any]:
    """xxh3_128 checksums and the manifest seal for an older index; prebuilt structures
    saved beside its generations (before issue 24) adopted into one."""
    from .prebuilt import adopt_legacy
    from .publish_linked import upgrade_checksums
    adopted = adopt_legacy(_existing(a.index), a.lock_timeout)  # first: a new generation
    done = upgrade_checksums(a.index, a.lock_timeout)  # makes the old folder stale
    summary = ("recorded xxh3_128 checksums and the manifest seal" if done
               else "already has xxh3_128 checksums and the manifest seal")
    if adopted:
        summary += f"; adopted the prebuilt structures {', '.join(adopted)}"
    return {"index": a.index, "upgraded": done, "adopted": adopted,
            "report": {"summary": summary}, "counts": read_manifest(a.index)["counts"]}


def cmd_info(a) -> dict[str, Any]:
    ix = open_reader(a.index, verify=not a.no_verify, args=a)
    g = ix.graph
    sizes = Counter()
    for key, n in zip(g.group_key, g.group_sizes().tolist()):
        sizes[key] += n
    m = read_manifest(a.index)
    m.pop("files", None)
    m.pop("xxh3_128", None)
    return {"manifest": m, "biggest_groups": sizes.most_common(a.groups)}


def cmd_serve(a) -> None:
    """The HTTP service (:mod:`hyperrag_fast.serve`, extra ``serve``), until a signal."""
    from .serve import require
    require()
    from .serve.main import serve
    serve(a)


def cmd_demo(a) -> dict[str, Any]:
    from .index import HyperIndex
    from .retriever import Retriever
    if not EXAMPLE_CORPUS.is_dir():
        raise CliError(f"the example corpus is not at {EXAMPLE_CORPUS}: broken install?")
    target = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="hyperrag-demo-")) / "index"
    embedder = new_embedder(a)
    ix = HyperIndex.build(EXAMPLE_CORPUS, make_extractor(a.extractor, a, str(target)), embedder,
                          progress=not a.quiet)
    ix.save(target)
    from .config import PAPER, TUNED
    r = Retriever(ix, embedder)
    # our dev-tuned default, the paper's method as published, and dense.
    variants = {
        "stitch": TUNED,
        "stitch_paper": PAPER,
        "dense": replace(TUNED, method="dense"),
    }
    answers = []
    for q in DEMO_QUESTIONS:
        tops = {name: [{"doc_id": c.doc_id, "title": c.title, "score": c.score}
                       for c in r.retrieve(q, o).chunks[:3]] for name, o in variants.items()}
        answers.append({"query": q, "top": tops})
    return {"index": str(target), "counts": ix.manifest()["counts"], "answers": answers}


def _report(rep, warnings: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    summary = rep.summary()
    if warnings:
        summary += f"; {len(warnings)} warning{'s' * (len(warnings) != 1)}: " + "; ".join(
            w for _, w in warnings[:5]) + (" ..." if len(warnings) > 5 else "")
    return {"summary": summary, "skipped": rep.skipped, "warnings": [list(w) for w in warnings],
            "extraction_errors": len(rep.extraction_errors),
            "error_reasons": rep.error_reasons(), "embedded_texts": rep.embedded_texts,
            "build": rep.stages}


def _plain(v: Any) -> Any:
    return v.tolist() if isinstance(v, np.ndarray) else v


# ---------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """The ``hyperrag`` parser (:mod:`hyperrag_fast.cli_parser`) bound to this module's handlers."""
    from .cli_parser import Commands
    from .cli_parser import build_parser as parser_for
    return parser_for(Commands(index=cmd_index, add=cmd_add, delete=cmd_delete,
                               upgrade=cmd_upgrade, build_methods=cmd_build_methods,
                               query=cmd_query, ask=cmd_ask, info=cmd_info, demo=cmd_demo,
                               serve=cmd_serve))


def _print_human(cmd: str, out: dict[str, Any]) -> None:
    if cmd == "ask":
        from .cli_answers import print_ask
        print_ask(out)
    elif cmd == "query":
        print(json.dumps(out, indent=2, ensure_ascii=False))
    elif cmd == "demo":
        print(f"indexed {out['counts']['chunks']} chunks into {out['index']}")
        for a in out["answers"]:
            print(f"\nQ: {a['query']}")
            for name, top in a["top"].items():
                print(f"  {name:>13}: " + " | ".join(t["title"] for t in top))
    elif cmd == "info":
        m = out["manifest"]
        print(f"format {m['format_version']}, embedder {m['embedder']['name']} "
              f"(dim {m['embedder']['dim']}), extractor {m['extractor']}, merge {m['merge']}")
        print("counts: " + ", ".join(f"{k}={v}" for k, v in m["counts"].items()))
        print("biggest name groups: " + ", ".join(f"{k} ({n})" for k, n in out["biggest_groups"]))
    elif cmd == "build-methods":
        print(f"built {', '.join(out['built']) or 'nothing'}; the index now has "
              f"{', '.join(out['have']) or 'no prebuilt structures'}")
    else:
        if "report" in out:
            print(out["report"]["summary"])
        print("counts: " + ", ".join(f"{k}={v}" for k, v in out["counts"].items()))


def main(argv: Sequence[str] | None = None, *, extractor=None, embedder=None) -> int:
    """Run one ``hyperrag`` command; its exit status. ``extractor`` / ``embedder``: objects
    to use instead of the ones the options or the index name (:class:`Components`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["eval"]:  # its own parsers and output (argparse cannot forward options)
        from .cli_answers import run_eval
        return run_eval(argv[1:], make_extractor)
    args = build_parser().parse_args(argv)
    args.components = Components(extractor, embedder)
    try:
        out = args.func(args)
    except Exception as e:  # noqa: BLE001 - known kinds only (cli_errors), the rest raised
        if debug() or not is_user_error(e):
            raise
        return report(e)
    if out is None:  # the command printed its own output (query --questions)
        return 0
    if args.json:
        print(json.dumps(out, ensure_ascii=False, default=_plain))
    else:
        _print_human(args.command, out)
    return 0


def run() -> int:
    """``python -m hyperrag_fast.cli``: :func:`main` under the exit rules of
    :mod:`hyperrag_fast.cli_errors` (the ``hyperrag`` command is
    :func:`hyperrag_fast.console.run`, which imports this module under them too)."""
    return run_console(main)


if __name__ == "__main__":
    sys.exit(run())
