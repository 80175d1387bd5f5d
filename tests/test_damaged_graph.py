"""A damaged usearch HNSW graph (issue 24 item 2): a clear index error by default; with
the explicit option (``damaged_graph="exact"`` in the API, ``--damaged-graph exact`` on
the command line, ``config.DEFAULT_DAMAGED_GRAPH`` the default both read) that kind is
searched exactly on its float32 vectors, with a warning. Whatever the damage (checksum
mismatch, a crafted file with the checksums recomputed, a truncation read unverified)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from hyperrag_fast import checksums, config
from hyperrag_fast.ann import AnnParams
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.errors import DamagedGraphWarning, IndexCorruptedError
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.reader import IndexReader
from hyperrag_fast.store import generation_dir

EXAMPLES = Path(__file__).resolve().parents[1] / "hyperrag_fast" / "data" / "examples"
GRAPH = "ann/chunk_vec.usearch"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    ix = tmp_path_factory.mktemp("dg") / "ix"
    HyperIndex.build(EXAMPLES, RegexExtractor(), HashingEmbedder(), progress=False,
                     max_tokens=64, ann_params=AnnParams(backend="usearch")).save(ix)
    return ix


def _resum(gen: Path) -> None:
    m = json.loads((gen / "manifest.json").read_text())
    m.update(checksums.manifest_checksums(gen, [gen / r for r in m["files"]]))
    checksums.write_manifest(gen, m)


def _damage(pristine: Path, tmp: Path, how: str) -> Path:
    ix = tmp / "ix"
    shutil.copytree(pristine, ix)
    f = generation_dir(ix) / GRAPH
    data = bytearray(f.read_bytes())
    if how == "flip":  # the checksum catches it
        data[len(data) // 2] ^= 0xFF
    else:  # "crafted" / "truncated": the structural check catches it
        del data[int(len(data) * 0.9):]
    f.write_bytes(bytes(data))
    if how == "crafted":
        _resum(generation_dir(ix))
    return ix


@pytest.mark.parametrize("how", ["flip", "crafted", "truncated"])
def test_damaged_graph_is_an_error_by_default_and_exact_search_on_request(pristine, tmp_path, how):
    ix = _damage(pristine, tmp_path, how)
    verify = how != "truncated"
    with pytest.raises(IndexCorruptedError, match="chunk_vec"):
        IndexReader.open(ix, HashingEmbedder(), verify=verify)
    with pytest.warns(DamagedGraphWarning, match="searching chunk_vec exactly"):
        r = IndexReader.open(ix, HashingEmbedder(), verify=verify, damaged_graph="exact")
    assert set(r.damaged_graphs) == {"chunk_vec"}
    assert r.ann["chunk_vec"].backend == "exact" and r.ann["node_vec"].backend == "usearch"
    good = IndexReader.open(pristine, HashingEmbedder())
    q = good.chunk_vec[3]
    for a, b in zip(r.ann["chunk_vec"].search(q, 5), good.ann["chunk_vec"].search(q, 5, exact=True)):
        np.testing.assert_array_equal(a, b)


def test_an_intact_index_opens_with_the_option_without_warning(pristine):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = HyperIndex.load(pristine, HashingEmbedder(), damaged_graph="exact")
    assert r.damaged_graphs == {} and r.ann["chunk_vec"].backend == "usearch"


def test_the_option_is_configuration_and_checked():
    assert config.DEFAULT_DAMAGED_GRAPH == "error" and config.DAMAGED_GRAPHS == ("error", "exact")
    import inspect
    assert inspect.signature(IndexReader.open).parameters["damaged_graph"].default == \
        config.DEFAULT_DAMAGED_GRAPH
    from hyperrag_fast.cli import build_parser
    a = build_parser().parse_args(["query", "ix", "q"])
    assert a.damaged_graph == config.DEFAULT_DAMAGED_GRAPH
    with pytest.raises(ValueError, match="damaged_graph"):
        IndexReader.open(EXAMPLES, damaged_graph="ignore")


def test_cli_error_by_default_and_one_warning_line_with_the_option(pristine, tmp_path):
    ix = _damage(pristine, tmp_path, "crafted")
    argv = [sys.executable, "-m", "hyperrag_fast.cli", "query", str(ix), "Ada Lovelace father",
            "--quiet"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr[-800:]
    assert "usearch graph is corrupted" in r.stderr
    r = subprocess.run([*argv, "--damaged-graph", "exact"], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-800:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hyperrag: warning:") and \
        "searching chunk_vec exactly" in lines[0], r.stderr
    assert json.loads(r.stdout)["chunks"]
