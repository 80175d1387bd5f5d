"""The ``hyperrag`` argument parser (:mod:`hyperrag_fast.cli` runs it). The handlers come
in as a :class:`Commands` bundle, so this module imports none of them."""
from __future__ import annotations
from .config import DEFAULT_MAX_TOKENS, DEFAULT_MERGE, DEFAULT_OVERLAP, LLM_CONCURRENCY, LLM_TIMEOUT_S, LOCK_TIMEOUT_S

import argparse
from typing import Any, Callable, NamedTuple

Handler = Callable[[argparse.Namespace], Any]


class Commands(NamedTuple):
    """One handler per subcommand (``ask`` and ``eval`` add their own parsers)."""

    index: Handler
    add: Handler
    delete: Handler
    upgrade: Handler
    build_methods: Handler
    query: Handler
    ask: Handler
    info: Handler
    demo: Handler
    serve: Handler | None = None


def build_parser(commands: Commands) -> argparse.ArgumentParser:
    """The ``hyperrag`` argument parser; each subcommand runs its handler in ``commands``."""
    from .config import MERGES
    p = argparse.ArgumentParser(prog="hyperrag", description="STITCH-RAG multi-hop retrieval")
    sub = p.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON")
    common.add_argument("--quiet", action="store_true", help="no progress bars")
    comp = argparse.ArgumentParser(add_help=False)
    comp.add_argument("--extractor", choices=("offline", "regex", "llm"), default="offline",
                      help="llm: an OpenAI-compatible model (--model, --base-url, "
                           "$OPENAI_API_KEY), answers cached in --cache-dir")
    from .cli_answers import add_damaged_graph, add_llm_args
    llm = argparse.ArgumentParser(add_help=False)
    add_llm_args(llm)
    llm.add_argument("--timeout", type=float, default=LLM_TIMEOUT_S, help="seconds per LLM request")
    llm.add_argument("--concurrency", type=int, default=LLM_CONCURRENCY, help="LLM requests in flight")
    llm.add_argument("--retry-failures", action="store_true",
                     help="re-ask chunks whose cached LLM answers were unusable")
    from .config import DEFAULT_EMBEDDER
    from .embed.registry import INDEX_KINDS
    comp.add_argument("--embedder", choices=INDEX_KINDS, default=DEFAULT_EMBEDDER,
                      help="minilm: int8 ONNX all-MiniLM-L6-v2; bge-small: int8 ONNX "
                           "bge-small-en-v1.5; hashing: tests only (default: %(default)s)")

    from .config import CHUNK_VECTORS, BuildOptions
    build = argparse.ArgumentParser(add_help=False)
    build.add_argument("--workers", type=int, default=BuildOptions.workers,
                       help="extract and embed on a local Dask cluster of N single-threaded "
                            "workers (extra: distributed)")
    build.add_argument("--scheduler", default=BuildOptions.scheduler,
                       help="address of an existing Dask scheduler, e.g. tcp://host:8786")
    build.add_argument("--partition-docs", type=int, default=BuildOptions.partition_docs,
                       help="documents per partition (memory follows one partition)")
    build.add_argument("--chunk-vectors", choices=CHUNK_VECTORS, default=BuildOptions.chunk_vectors,
                       help="text: embed each passage (new index default); pooled: mean of its "
                            "sentences' and title's vectors; add keeps the index's")

    lock = argparse.ArgumentParser(add_help=False)
    lock.add_argument("--lock-timeout", type=float, default=LOCK_TIMEOUT_S, metavar="SECONDS",
                      help="wait this long for another writer of the index to finish "
                           "(default 0: refuse at once, exit 2; negative: wait indefinitely)")

    intake = argparse.ArgumentParser(add_help=False)
    intake.add_argument("--encoding", default="utf-8",
                        help="text encoding of .txt/.md files (default utf-8; undecodable "
                             "bytes are replaced and reported)")
    intake.add_argument("--follow-symlinks", action="store_true",
                        help="read symlinks that lead outside the source folder")

    s = sub.add_parser("index", parents=[common, comp, intake, llm, build, lock],
                       help="index documents")
    s.add_argument("source", help="file or folder of .txt/.md, or .json/.jsonl corpus")
    s.add_argument("index", help="index directory to write")
    s.add_argument("--merge", choices=MERGES, default=DEFAULT_MERGE)
    s.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    s.add_argument("--overlap", type=int, default=DEFAULT_OVERLAP)
    s.add_argument("--cache-dir", default=None,
                   help="embedding (and LLM answer) cache directory; LLM default <INDEX>.cache")
    s.add_argument("--force", action="store_true", help="replace an existing index")
    s.set_defaults(func=commands.index)

    s = sub.add_parser("add", parents=[common, intake, llm, build, lock],
                       help="add documents to an index")
    s.add_argument("index")
    s.add_argument("source")
    s.add_argument("--cache-dir", default=None, help="LLM answer cache (default <INDEX>.cache)")
    s.set_defaults(func=commands.add)

    s = sub.add_parser("delete", parents=[common, lock], help="delete documents by id")
    s.add_argument("index")
    s.add_argument("doc_ids", nargs="+")
    s.set_defaults(func=commands.delete)

    s = sub.add_parser("upgrade", parents=[common, lock],
                       help="verify an index saved before the fast checksums (sha256) and "
                            "record its xxh3_128 checksums: faster verified loads")
    s.add_argument("index")
    s.set_defaults(func=commands.upgrade)

    from .config import METHOD_NAMES, TUNED
    s = sub.add_parser("build-methods", parents=[common, lock],
                       help="build what merge_full/merge_none/coda*/stitch_consolidated read")
    s.add_argument("index")
    s.add_argument("methods", nargs="*", metavar="METHOD",
                   help="methods to prepare (default: every prebuilt structure)")
    s.add_argument("--cache-dir", default=None,
                   help="embedding cache directory (CODA entity names, merged descriptions): "
                        "a rebuild embeds nothing twice")
    s.set_defaults(func=commands.build_methods)

    s = sub.add_parser("query", parents=[common], help="retrieve chunks (JSON)")
    s.add_argument("index")
    s.add_argument("text", nargs="?", help="the question (or use --questions)")
    s.add_argument("--questions", default=None, metavar="FILE",
                   help="answer every line of FILE (- = stdin): a JSON object "
                        '{"question", "id"?} or plain text; prints one JSON line each')
    s.add_argument("--method", choices=METHOD_NAMES, default=TUNED.method)
    s.add_argument("--top-k", type=int, default=None,
                   help=f"chunks returned (default: the index embedder's preset, {TUNED.top_k})")
    s.add_argument("--k-nodes", type=int, default=None,
                   help="K_V: candidate entity states (default: the preset's)")
    s.add_argument("--k-chunks", type=int, default=None,
                   help="K_C: candidate chunks (default: the preset's)")
    s.add_argument("--explain", action="store_true", help="include intermediates")
    s.add_argument("--no-verify", action="store_true", help="skip checksums")
    add_damaged_graph(s)
    s.set_defaults(func=commands.query)

    from .cli_answers import add_ask_parser, add_eval_parser
    add_ask_parser(sub, [common], METHOD_NAMES, commands.ask)
    add_eval_parser(sub)

    s = sub.add_parser("info", parents=[common], help="manifest, counts, biggest name groups")
    s.add_argument("index")
    s.add_argument("--groups", type=int, default=10)
    s.add_argument("--no-verify", action="store_true")
    add_damaged_graph(s)
    s.set_defaults(func=commands.info)

    s = sub.add_parser("demo", parents=[common, comp, llm], help="index the example corpus, ask")
    s.add_argument("--dir", default=None, help="where to write the demo index")
    s.add_argument("--cache-dir", default=None, help="LLM answer cache (default <DIR>.cache)")
    s.set_defaults(func=commands.demo)

    if commands.serve is not None:
        from .cli_serve import add_serve_parser
        add_serve_parser(sub, [common], METHOD_NAMES, commands.serve)
    return p
