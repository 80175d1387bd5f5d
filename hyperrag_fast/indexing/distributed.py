"""Scale-out of the index build on Dask ``distributed`` (docs/architecture.md §10).

Each partition of documents is one task: chunk, extract and embed on a worker
(:func:`~hyperrag_fast.indexing.pipeline.worker_partition`, no cross-partition state); the
client assembles the partitions in order, exactly as the single-process build does, so
the index is the same. The extractor and embedder are scattered once to every worker
(the embedder with one intra-op thread per worker thread). At most ``2 x workers``
partitions are in flight, so the client's memory stays bounded.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Iterator, Sequence

from ..embed.base import Embedder
from ..extract.base import Extractor
from .flat import GroupOf
from ..config import BuildOptions
from .partition import worker_partition

_EXTRA = 'the distributed build needs Dask: pip install "hyperrag_fast[distributed]"'


def _dask():
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as e:
        raise ImportError(f"{_EXTRA} ({e})") from None
    return Client, LocalCluster


def _for_workers(embedder: Embedder, threads: int) -> Embedder:
    """The embedder as workers should run it: one intra-op thread per worker thread."""
    with_threads = getattr(embedder, "with_threads", None)
    return with_threads(threads) if with_threads is not None else embedder


def dask_partitions(parts: Sequence[Sequence[Any]], extractor: Extractor, embedder: Embedder,
                    max_tokens: int, overlap: int, group_of: GroupOf | None,
                    options: BuildOptions) -> Iterator[tuple]:
    """``worker_partition`` results, one per partition, in partition order."""
    Client, LocalCluster = _dask()
    cluster = None
    if options.scheduler:
        client = Client(options.scheduler)
    else:
        cluster = LocalCluster(n_workers=options.workers, threads_per_worker=options.threads_per_worker,
                               processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        n_workers = max(1, len(client.scheduler_info()["workers"]))
        ex_f, emb_f = client.scatter([extractor, _for_workers(embedder, options.threads_per_worker)],
                                     broadcast=True, hash=False)
        window = 2 * n_workers * options.threads_per_worker
        pending: deque = deque()
        todo = iter(parts)

        def submit() -> None:
            part = next(todo, None)
            if part is not None:
                pending.append(client.submit(worker_partition, list(part), ex_f, emb_f,
                                             max_tokens, overlap, group_of,
                                             options.chunk_vectors != "pooled", pure=False))

        for _ in range(window):
            submit()
        while pending:
            fut = pending.popleft()
            out = fut.result()
            fut.release()
            submit()
            yield out
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
