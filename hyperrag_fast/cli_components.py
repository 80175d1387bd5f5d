"""The components a ``hyperrag`` command works with (docs/architecture.md §12): the
extractor an option or an index's manifest names, the embedder of an index, and the index
opened to query (:func:`open_reader`, the read side) or loaded to update
(:func:`load_writer`, the write side). :class:`Components` holds the objects a caller
hands over instead (``cli.main(argv, extractor=..., embedder=...)``: the Python API's way
of passing components in as objects; the tests use it).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cli_errors import CliError
from .embed.registry import embedder_for_name, make_embedder
from .store import read_manifest


@dataclass(frozen=True)
class Components:
    """Objects used instead of the ones the options or the index name (None: as named)."""

    extractor: Any = None
    embedder: Any = None


def _given(args) -> Components:
    return getattr(args, "components", None) or Components()


def make_extractor(kind: str, args=None, index_path: str | None = None):
    """``offline`` (spaCy, the default), ``regex`` (dependency-free, tests only) or ``llm``
    (STITCH-RAG's LLM extraction; ``args`` carry --model/--base-url/--api-key, else the
    OPENAI_* environment, and the cache folder, see :func:`llm_cache_dir`); the extractor
    the caller passed in (:class:`Components`), if any."""
    given = _given(args).extractor
    if given is not None:
        return given
    if kind == "llm":
        return _llm_extractor(args, args.model, index_path)
    from .extract.offline import OfflineExtractor, RegexExtractor
    return RegexExtractor() if kind == "regex" else OfflineExtractor()


def llm_cache_dir(args, index_path: str | None) -> Path:
    """``--cache-dir``, else ``<INDEX>.cache`` beside the index: LLM answers are cached
    there (``llm_extract.sqlite``), so a rerun or an ``add`` repeats no finished call."""
    if args.cache_dir:
        return Path(args.cache_dir)
    if index_path is None:
        raise CliError("--extractor llm needs --cache-dir here")
    return Path(f"{Path(index_path).absolute()}.cache")


def _llm_extractor(args, model: str | None, index_path: str | None):
    from .cli_answers import make_client
    from .extract.llm import LLMExtractor
    from .intake import check_writable_parent
    client = make_client(args.base_url, model, args.api_key, args.timeout)
    cache = llm_cache_dir(args, index_path) / "llm_extract.sqlite"
    check_writable_parent(cache)
    return LLMExtractor(client, cache, max_concurrency=args.concurrency,
                        retry_failures=args.retry_failures)


def new_embedder(args):
    """The embedder of a new index: ``--embedder``, or the one the caller passed in."""
    given = _given(args).embedder
    return make_embedder(args.embedder) if given is None else given


def embedder_for(manifest: dict[str, Any], threads: int | None = None, args=None):
    """The embedder an index was built with, from its manifest name (or the one the caller
    passed in: the index then checks that it is the same). ``threads``: the ONNX
    embedder's intra-op threads (one question: 1 spares ~40 ms of CPU starting the pool;
    its vectors are bit-identical to the default's)."""
    given = _given(args).embedder
    if given is not None:
        return given
    try:
        return embedder_for_name(manifest["embedder"]["name"], intra_op_threads=threads)
    except ValueError as e:
        raise CliError(f"the index was built with embedder {manifest['embedder']['name']!r}, "
                       f"which the CLI cannot construct; use the Python API") from e


def extractor_for(manifest: dict[str, Any], args=None, index_path: str | None = None):
    """The extractor an index was built with, from its manifest name (an LLM one with
    the model of the name and the endpoint of ``args`` / the environment)."""
    name = manifest["extractor"]
    if name.startswith("llm:") and args is not None:
        from .extract.llm import PROMPT_VERSION
        model, version = name[len("llm:"):].rsplit(":", 1)
        if version != PROMPT_VERSION or (args.model and args.model != model):
            raise CliError(f"the index was built with extractor {name!r}; this CLI would "
                           f"extract with 'llm:{args.model or model}:{PROMPT_VERSION}'")
        return _llm_extractor(args, model, index_path)
    if name.startswith("offline-spacy"):
        return make_extractor("offline", args)
    if name.startswith("regex-v1"):
        return make_extractor("regex", args)
    raise CliError(f"the index was built with extractor {name!r}, which the CLI cannot "
                   f"construct; use the Python API")


def load_writer(path: str, with_extractor: bool = False, verify: bool = True, args=None,
                threads: int | None = None):
    """The index at ``path`` to update (``HyperIndex``: the write side)."""
    from .index import HyperIndex
    manifest = read_manifest(path)
    extractor = extractor_for(manifest, args, path) if with_extractor else None
    return HyperIndex.load(path, embedder=embedder_for(manifest, threads, args), verify=verify,
                           extractor=extractor)


def open_reader(path: str, verify: bool = True, threads: int | None = None, args=None):
    """The index at ``path`` to query (``IndexReader``: no write-side module is imported);
    ``args.damaged_graph`` (``--damaged-graph``) when given."""
    from .config import DEFAULT_DAMAGED_GRAPH
    from .reader import IndexReader
    return IndexReader.open(path, embedder=embedder_for(read_manifest(path), threads, args),
                            verify=verify,
                            damaged_graph=getattr(args, "damaged_graph", DEFAULT_DAMAGED_GRAPH))
