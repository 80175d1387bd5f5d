"""The Dask build: a 2-worker LocalCluster (and a scheduler address) gives the same index
as the single-process build; a missing extra is named."""
from __future__ import annotations

import sys

import pytest

from hyperrag_fast.config import BuildOptions
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.index import HyperIndex

from test_index import A, B, C, assert_same

pytest.importorskip("dask.distributed")


def _build(docs, **opts):
    return HyperIndex.build(docs, RegexExtractor(), HashingEmbedder(), progress=False,
                            options=BuildOptions(**opts))


def test_local_cluster_build_equals_single_process():
    docs = A + B + C
    want = _build(docs)
    got = _build(docs, partition_docs=1, workers=2)
    assert_same(want, got)
    assert got.report.embedded_texts >= want.report.embedded_texts
    assert got.report.stages["stages"]["assemble"]["calls"] >= 1


def test_scheduler_address_and_add():
    from dask.distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        ix = _build(A, partition_docs=1, scheduler=cluster.scheduler_address)
        ix.add(B + C, progress=False,
               options=BuildOptions(partition_docs=1, scheduler=cluster.scheduler_address))
    assert_same(_build(A + B + C), ix)


def test_missing_extra_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    with pytest.raises(ImportError, match=r"hyperrag_fast\[distributed\]"):
        _build(A, workers=2)


def test_cli_workers_flag(tmp_path):
    from hyperrag_fast.cli import main
    src = tmp_path / "docs.jsonl"
    import json
    src.write_text("\n".join(json.dumps(d) for d in A + B))
    assert main(["index", str(src), str(tmp_path / "ix"), "--extractor", "regex",
                 "--embedder", "hashing", "--workers", "2", "--partition-docs", "1",
                 "--quiet"]) == 0
    assert main(["index", str(src), str(tmp_path / "ix2"), "--extractor", "regex",
                 "--embedder", "hashing", "--workers", "1", "--scheduler", "tcp://x:1",
                 "--quiet"]) == 2


def test_local_cluster_pooled_build_equals_single_process():
    docs = A + B + C
    assert_same(_build(docs, chunk_vectors="pooled"),
                _build(docs, partition_docs=1, workers=2, chunk_vectors="pooled"))
