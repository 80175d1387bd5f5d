"""A query's BLAS threads (``config.QUERY_BLAS_THREADS``, ``hyperrag_fast.blas``;
docs/architecture.md §3, "BLAS threads"): CODA's products run on that many threads inside
``CodaRetriever.retrieve`` (seen from its keyword extractor, an object the caller passes
in), the process's count is back once the last query leaves, and 0 leaves BLAS alone."""
from __future__ import annotations

import threading

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from hyperrag_fast import config
from hyperrag_fast.coda.graph import consolidate
from hyperrag_fast.coda.kg_vectors import raw_vectors
from hyperrag_fast.coda.raw_kg import ChunkKG, RawKG
from hyperrag_fast.coda.retrieve import CodaOptions, CodaRetriever
from hyperrag_fast.embed.hashing import HashingEmbedder

EMB = HashingEmbedder(dim=64)


def blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


class RecordingKeywords:
    """An LLM keyword extractor that records the BLAS threads it runs under."""

    def __init__(self):
        self.seen = []

    def keywords(self, query: str):
        self.seen.append(blas_threads())
        return ["Paris"], ["office"]


def coda_retriever(keywords) -> CodaRetriever:
    ck = [ChunkKG((("Google", "org", "Google the firm"), ("Paris", "place", "city")),
                  (("Google", "Paris", "office", "", 1.0),))]
    kg = RawKG.from_chunk_kgs(ck)
    ev, rv = raw_vectors(kg, EMB, {}, EMB.dim)
    return CodaRetriever(consolidate(kg, ev, rv), EMB, keywords)


def query(r: CodaRetriever):
    q = EMB.embed(["where is the office"])[0]
    return r.retrieve(q, "where is the office", 2, CodaOptions(fill_dense=False))


@pytest.fixture
def two_blas_threads():
    """A process whose BLAS runs on two threads (as OpenBLAS starts on 2+ cores)."""
    if not blas_threads():
        pytest.skip("NumPy has no BLAS threadpoolctl can see")
    with threadpool_limits(limits=2, user_api="blas"):
        assert set(blas_threads()) == {2}
        yield


def test_a_coda_query_runs_blas_on_the_configured_threads_and_restores(two_blas_threads):
    kw = RecordingKeywords()
    query(coda_retriever(kw))
    assert kw.seen == [[config.QUERY_BLAS_THREADS] * len(blas_threads())]
    assert set(blas_threads()) == {2}  # a build after the query keeps its threads


def test_zero_leaves_blas_as_the_process_set_it(two_blas_threads, monkeypatch):
    monkeypatch.setattr(config, "QUERY_BLAS_THREADS", 0)
    kw = RecordingKeywords()
    query(coda_retriever(kw))
    assert kw.seen == [[2] * len(blas_threads())]


def test_concurrent_queries_keep_the_limit_until_the_last_leaves(two_blas_threads):
    from hyperrag_fast.blas import query_blas
    inside, leave, seen = threading.Event(), threading.Event(), []

    def first():
        with query_blas():
            inside.set()
            leave.wait(30)

    t = threading.Thread(target=first)
    t.start()
    assert inside.wait(30)
    with query_blas():
        pass  # a second query ends while the first is still inside
    seen.append(set(blas_threads()))
    leave.set()
    t.join(30)
    assert seen == [{1}] and set(blas_threads()) == {2}
