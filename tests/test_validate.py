"""Structural validation on every load: flipped bytes in any array or vector file of an
index loaded with ``verify=False`` give IndexCorruptedError or the unflipped results,
never a crash in the compiled query (each file is tried in a subprocess, so a segfault
fails the test instead of killing pytest)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.hypergraph import ARRAY_FIELDS
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.store import IndexCorruptedError, generation_dir, load_index
from hyperrag_fast.validate import check_structure

EXAMPLES = Path(__file__).resolve().parents[1] / "hyperrag_fast" / "data" / "examples"
FLIPS = 30  # seeded flips per file

WORKER = textwrap.dedent(r"""
    import json, sys
    import numpy as np
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import QueryOptions, Retriever
    from hyperrag_fast.store import IndexCorruptedError, generation_dir

    ix_dir, n, rels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    QUERIES = ["In which town did Ada Lovelace's father die?", "Marie Curie river",
               "Jacquard loom Lyon punched cards"]
    METHODS = ["stitch", "stitch_paper", "binary_ppr", "no_stibp", "dense"]

    def results():
        ix = HyperIndex.load(ix_dir, HashingEmbedder(), verify=False)
        r = Retriever(ix)
        return [[(c.chunk_id, round(c.score, 12)) for c in r.retrieve(q, QueryOptions(method=m)).chunks]
                for m in METHODS for q in QUERIES]

    base = results()
    for rel in rels:
        path = f"{generation_dir(ix_dir)}/{rel}"
        orig = open(path, "rb").read()
        for seed in range(n):
            rng = np.random.default_rng(seed)
            data = bytearray(orig)
            lo = 0 if seed % 3 == 0 else min(128, len(data) - 1)  # mostly the data area
            for _ in range(1 + seed % 3):
                data[int(rng.integers(lo, len(data)))] ^= int(rng.integers(1, 256))
            open(path, "wb").write(bytes(data))
            print(json.dumps({"file": rel, "seed": seed}), flush=True)
            try:
                out = "same" if results() == base else "different"
            except IndexCorruptedError:
                out = "corrupted"
            except Exception as e:
                out = f"error: {type(e).__name__}: {e}"
            print(json.dumps({"file": rel, "seed": seed, "outcome": out}), flush=True)
        open(path, "wb").write(orig)
""")
FILES = [f"arrays/{k}.npy" for k in ARRAY_FIELDS] + [f"vectors/{k}.npy" for k in
                                                      ("node_vec", "edge_vec", "chunk_vec")]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("validate") / "ix"
    ix = HyperIndex.build(EXAMPLES, RegexExtractor(), HashingEmbedder(), progress=False,
                          max_tokens=64)
    ix.save(d)
    return d


@pytest.fixture(scope="module")
def flips(index_dir, tmp_path_factory):
    """{file: [outcome per seed]} from one worker process (restarted after the file it
    crashed on; that file's outcomes end with "crashed (signal N) at seed S")."""
    work = tmp_path_factory.mktemp("flips") / "ix"
    shutil.copytree(index_dir, work)
    out: dict[str, list[str]] = {f: [] for f in FILES}
    todo = list(FILES)
    while todo:
        r = subprocess.run([sys.executable, "-c", WORKER, str(work), str(FLIPS), *todo],
                           capture_output=True, text=True, timeout=900, cwd=work.parent)
        lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
        for x in lines:
            if "outcome" in x:
                out[x["file"]].append(x["outcome"])
        if r.returncode == 0:
            break
        last = lines[-1]["file"] if lines else todo[0]
        seed = lines[-1]["seed"] if lines else -1
        out[last].append(f"crashed (status {r.returncode}) at seed {seed}: {r.stderr[-500:]}")
        shutil.rmtree(work)
        shutil.copytree(index_dir, work)
        todo = todo[todo.index(last) + 1:]
    return out


@pytest.mark.parametrize("name", ARRAY_FIELDS)
def test_flipped_array_bytes_are_caught_or_harmless(flips, name):
    outcomes = flips[f"arrays/{name}.npy"]
    bad = [o for o in outcomes if o not in ("corrupted", "same")]
    assert not bad, f"{name}: {bad}"
    assert len(outcomes) == FLIPS and "corrupted" in outcomes


@pytest.mark.parametrize("name", ["node_vec", "edge_vec", "chunk_vec"])
def test_flipped_vector_bytes_never_crash(flips, index_dir, name):
    # a flip that leaves the values finite cannot be seen structurally ("different" is
    # allowed); the sha256 check (verify=True, the default) catches those
    outcomes = flips[f"vectors/{name}.npy"]
    assert all(o in ("corrupted", "same", "different") for o in outcomes), outcomes
    assert len(outcomes) == FLIPS
    f = generation_dir(index_dir) / "vectors" / f"{name}.npy"
    orig = f.read_bytes()
    try:
        data = bytearray(orig)
        data[-5] ^= 0x01
        f.write_bytes(bytes(data))
        with pytest.raises(IndexCorruptedError, match=f"{name}.npy"):
            load_index(index_dir, verify=True)
    finally:
        f.write_bytes(orig)


# ---------------------------------------------------------- one rule at a time, in process
@pytest.fixture(scope="module")
def stored(index_dir):
    s = load_index(index_dir, mmap=False)
    return s.manifest, {k: np.array(v) for k, v in s.arrays.items()}, \
        {k: np.array(v) for k, v in s.vectors.items()}


def _broken(stored, rel, change):
    manifest, arrays, vectors = stored
    arrays, vectors = dict(arrays), dict(vectors)
    target = vectors if rel.endswith("_vec") else arrays
    target[rel] = change(target[rel].copy())
    with pytest.raises(IndexCorruptedError, match=rel) as e:
        check_structure(manifest, arrays, vectors, "IX")
    return str(e.value)


def test_valid_index_passes(stored):
    check_structure(*stored)


def _set(i, v):
    def f(a):
        a[i] = v
        return a
    return f


@pytest.mark.parametrize("rel,change,rule", [
    ("node_ptr", _set(0, 1), "start at 0"),
    ("node_ptr", _set(-1, 10**9), "end at"),
    ("edge_ptr", lambda a: _set(1, int(a[-1]) + 1)(a), "non-decreasing"),
    ("chunk_nodes", _set(0, -1), "outside"),
    ("node_edges", _set(0, 10**6), "outside"),
    ("node_chunk", lambda a: a.astype(np.int64), "int32"),
    ("group_ptr", lambda a: a[:-1], "length"),
    ("group_chunks", _set(0, 99), "distinct chunks"),
    ("chunk_vec", _set((0, 0), np.nan), "NaN"),
    ("node_vec", lambda a: a[:, :-1], "shape"),
])
def test_each_rule_names_file_and_rule(stored, rel, change, rule):
    msg = _broken(stored, rel, change)
    assert msg.startswith("IX/") and rule in msg and "\n" not in msg


@pytest.mark.parametrize("name,value", [("bm25_indices", 10**6), ("bm25_indptr", -3)])
def test_bm25_postings_out_of_range_are_caught(index_dir, tmp_path, name, value):
    work = tmp_path / "ix"
    shutil.copytree(index_dir, work)
    f = generation_dir(work) / "arrays" / f"{name}.npy"
    a = np.load(f)
    a[len(a) // 2] = value
    f.unlink()  # generation files may be hard links: never write through them
    np.save(f, a)
    with pytest.raises(IndexCorruptedError, match=name):
        load_index(work, verify=False)
