"""prebuilt/ is checksummed and validated before a query reads it, and build-methods
takes the writer lock (issue 24 item 3). Queries run in subprocesses: a crash fails the
test instead of killing pytest."""
from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from hyperrag_fast import publish
from hyperrag_fast.checksums import FAST, file_digest

EXAMPLES = Path(__file__).resolve().parents[1] / "hyperrag_fast" / "data" / "examples"
QUERY = textwrap.dedent("""
    import sys
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.errors import IndexError_
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.prebuilt import load_prebuilt
    from hyperrag_fast.retriever import QueryOptions, Retriever
    ix_dir, method = sys.argv[1], sys.argv[2]
    try:
        ix = HyperIndex.load(ix_dir, HashingEmbedder())
        r = Retriever(ix, prebuilt=load_prebuilt(ix_dir))
        res = r.retrieve("Where did Ada Lovelace's father die?", QueryOptions(method=method))
        print("ok", [c.chunk_id for c in res.chunks])
    except IndexError_ as e:
        print("error:", e)
""")


def _cli(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "hyperrag_fast.cli", *map(str, argv), "--quiet"],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pre")
    ix = d / "ix"
    assert _cli("index", EXAMPLES, ix, "--extractor", "regex", "--embedder", "hashing",
                "--max-tokens", "64", cwd=d).returncode == 0
    r = _cli("build-methods", ix, "--json", cwd=d)
    assert r.returncode == 0, r.stderr
    return ix


def _query(ix: Path, method: str) -> str:
    r = subprocess.run([sys.executable, "-c", QUERY, str(ix), method], capture_output=True,
                       text=True, timeout=300, cwd=ix.parent)
    assert r.returncode == 0, f"rc {r.returncode}: {r.stderr[-1000:]}"
    return r.stdout.strip()


def _resum(ix: Path) -> None:
    """Recompute prebuilt/CHECKSUMS.json (a crafted folder)."""
    root = ix / "prebuilt"
    sums = {p.relative_to(root).as_posix(): file_digest(p, FAST) for p in sorted(root.rglob("*"))
            if p.is_file() and p.parent != root}
    (root / "CHECKSUMS.json").write_text(json.dumps({FAST: sums}))


def _rewrite_npz(f: Path, **changes) -> None:
    with np.load(f) as z:
        arrays = {k: z[k] for k in z.files}
    for k, fn in changes.items():
        arrays[k] = fn(arrays[k].copy())
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    f.write_bytes(buf.getvalue())


@pytest.fixture
def ix(built, tmp_path) -> Path:
    shutil.copytree(built, tmp_path / "ix")
    return tmp_path / "ix"


def test_intact_structures_answer(ix):
    for m in ("merge_full", "merge_none", "coda", "stitch_consolidated"):
        assert _query(ix, m).startswith("ok"), m


@pytest.mark.parametrize("resum", [True, False])
def test_out_of_range_ids_in_a_variant_graph_are_refused(ix, resum):
    def big(a):
        a[0] = 1 << 30
        return a
    _rewrite_npz(ix / "prebuilt" / "merge_full" / "arrays.npz", edge_nodes=big)
    if resum:
        _resum(ix)
    out = _query(ix, "merge_full")
    assert out.startswith("error:") and "merge_full" in out, out


@pytest.mark.parametrize("resum", [True, False])
def test_nan_vectors_are_refused(ix, resum):
    f = ix / "prebuilt" / "coda" / "raw_ent_vec.npy"
    a = np.load(f)
    a[:] = np.nan
    np.save(f, a)
    if resum:
        _resum(ix)
    out = _query(ix, "coda")
    assert out.startswith("error:") and "raw_ent_vec" in out, out
    _rewrite_npz(ix / "prebuilt" / "merge_none" / "arrays.npz",
                 node_vec=lambda v: np.full_like(v, np.inf))
    _resum(ix)
    assert "node_vec" in _query(ix, "merge_none")


@pytest.mark.parametrize("checksums", [True, False])
def test_flipped_byte_in_arrays_npz_is_an_index_error(ix, checksums):
    f = ix / "prebuilt" / "merge_full" / "arrays.npz"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x5A
    f.write_bytes(bytes(data))
    if not checksums:  # saved before CHECKSUMS.json: structural checks still apply
        (ix / "prebuilt" / "CHECKSUMS.json").unlink()
    out = _query(ix, "merge_full")
    assert out.startswith(("error:", "ok")), out
    if checksums:
        assert out.startswith("error:") and "CHECKSUMS" in out, out


def test_npz_that_is_not_a_zip_is_an_index_error(ix):
    (ix / "prebuilt" / "merge_full" / "arrays.npz").write_bytes(b"not a zip at all")
    (ix / "prebuilt" / "CHECKSUMS.json").unlink()
    out = _query(ix, "merge_full")
    assert out.startswith("error:") and "unreadable prebuilt graph" in out, out


def test_build_methods_takes_the_writer_lock(ix):
    with publish.writer_lock(ix):
        r = _cli("build-methods", ix, "merge_full", cwd=ix.parent)
    assert r.returncode == 2 and "being written" in r.stderr, r.stderr[-800:]
    assert len(r.stderr.strip().splitlines()) == 1
