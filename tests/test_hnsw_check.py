"""The usearch graph files are checked before usearch reads them (issue 24 item 2): a
crafted graph file (checksums recomputed, so a verified load reads it) gives
IndexCorruptedError, never a segfault; the random byte flips over every graph file are
in tests/test_fuzz.py."""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from hyperrag_fast import checksums
from hyperrag_fast.ann import AnnParams
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.store import IndexCorruptedError, generation_dir

EXAMPLES = Path(__file__).resolve().parents[1] / "hyperrag_fast" / "data" / "examples"

QUERY = textwrap.dedent("""
    import sys
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import QueryOptions, Retriever
    from hyperrag_fast.store import IndexCorruptedError
    try:
        r = Retriever(HyperIndex.load(sys.argv[1], HashingEmbedder(), verify=sys.argv[2] == "1"))
        for m in ("dense", "stitch"):
            r.retrieve("Where did Ada Lovelace's father die?", QueryOptions(method=m))
    except IndexCorruptedError as e:
        print("corrupted:", e)
    else:
        print("ok")
""")


@pytest.fixture(scope="module")
def graph_index(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hnsw") / "ix"
    HyperIndex.build(EXAMPLES, RegexExtractor(), HashingEmbedder(), progress=False,
                     max_tokens=64, ann_params=AnnParams(backend="usearch")).save(d)
    return d


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def resum(ix: Path) -> None:
    """Recompute the manifest's checksums: what a crafted index folder looks like."""
    gen = generation_dir(ix)
    mf = gen / "manifest.json"
    m = json.loads(mf.read_text())
    m.update(checksums.manifest_checksums(gen, [gen / r for r in m["files"]]))
    if hasattr(checksums, "write_manifest"):  # sealed (so this runs on older mains too)
        checksums.write_manifest(mf.parent, m)
    else:
        mf.write_text(json.dumps(m))


def _layout(data: bytes) -> dict[str, int]:
    """Offsets in a usearch 2.x file with a uint32-sized vector matrix (as saved here)."""
    rows, cols = struct.unpack_from("<II", data, 0)
    head = 8 + rows * cols
    assert data[head:head + 7] == b"usearch"
    core = head + 64
    n, conn, base = struct.unpack_from("<QQQ", data, core)
    first_node = core + 40 + 2 * n
    return {"n": n, "base": base, "core": core, "first_node": first_node,
            "first_neighbour": first_node + 10 + 4}


def _query(ix: Path, verify: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", QUERY, str(ix), "1" if verify else "0"],
                          capture_output=True, text=True, timeout=300, cwd=ix.parent)


@pytest.mark.parametrize("kind", ["chunk_vec", "node_vec"])
@pytest.mark.parametrize("damage", ["neighbour", "count", "level", "entry", "truncate"])
def test_crafted_graph_file_is_refused_not_a_crash(graph_index, tmp_path, kind, damage):
    ix = _copy(graph_index, tmp_path / "ix")
    f = generation_dir(ix) / "ann" / f"{kind}.usearch"
    data = bytearray(f.read_bytes())
    lay = _layout(bytes(data))
    if damage == "neighbour":  # the first node's first neighbour: a slot far out of range
        struct.pack_into("<I", data, lay["first_neighbour"], 1 << 30)
    elif damage == "count":  # the first node lists more neighbours than it has room for
        struct.pack_into("<I", data, lay["first_node"] + 10, 1 << 20)
    elif damage == "level":  # the first node claims many levels in the levels block
        struct.pack_into("<h", data, lay["core"] + 40, 30000)
    elif damage == "entry":
        struct.pack_into("<Q", data, lay["core"] + 32, 1 << 40)
    else:
        del data[len(data) // 2:]
    f.write_bytes(bytes(data))
    resum(ix)
    for verify in (True, False):
        r = _query(ix, verify)
        assert r.returncode == 0, f"rc {r.returncode}: {r.stderr[-800:]}"
        assert r.stdout.startswith("corrupted:") and f"{kind}.usearch" in r.stdout, r.stdout
        assert len(r.stdout.strip().splitlines()) == 1


def test_valid_graph_files_pass_and_give_the_same_results(graph_index, tmp_path):
    from hyperrag_fast.hnsw_check import check_hnsw
    gen = generation_dir(graph_index)
    m = json.loads((gen / "manifest.json").read_text())
    assert set(m["ann_files"]) == {"chunk_vec", "node_vec", "edge_vec"}
    for kind, rel in m["ann_files"].items():
        rows = np.load(gen / "arrays" / f"{kind}_rep.npy").shape[0]
        assert check_hnsw(gen / rel, 64, rows) == rows
        with pytest.raises(IndexCorruptedError, match="expected 32"):
            check_hnsw(gen / rel, 32)
        with pytest.raises(IndexCorruptedError, match="expected"):
            check_hnsw(gen / rel, 64, rows + 1)
    assert _query(graph_index).stdout.strip() == "ok"


@pytest.mark.parametrize("storage", ["f16", "f32"])
@pytest.mark.parametrize("n", [0, 1, 2, 300])
def test_usearch_files_of_every_size_pass(tmp_path, storage, n):
    from usearch.index import Index

    from hyperrag_fast.hnsw_check import check_hnsw
    ix = Index(ndim=8, metric="cos", dtype=storage, connectivity=4)
    if n:
        v = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        ix.add(np.arange(n, dtype=np.uint64), v)
    ix.save(str(tmp_path / "g.usearch"))
    assert check_hnsw(tmp_path / "g.usearch", 8, n) == n
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(IndexCorruptedError, match="too short"):
        check_hnsw(tmp_path / "empty", 8)
