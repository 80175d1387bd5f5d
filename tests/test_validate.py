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
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.hypergraph import ARRAY_FIELDS
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.store import IndexCorruptedError, generation_dir, load_index
from hyperrag_fast.validate import check_structure

from strategies import extractions

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


def _old_rules(arrays, n_c: int, n_v: int, n_g: int) -> tuple[bool, bool, bool]:
    """The three rules :func:`hyperrag_fast.validate._check_graph` answers without sorting
    when every state has one chunk, as sorted pair keys (the general formulation): the
    chunk listing is the transpose of the state listing, every hyperedge's chunk is a
    chunk of its states (hyperedges in chunk order), ``group_chunks`` counts each group's
    distinct chunks."""
    def rows(ptr):
        return np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
    a = {k: np.asarray(v, np.int64) for k, v in arrays.items()}
    nc_rows, c_rows, e_rows = rows(a["nc_ptr"]), rows(a["chunk_ptr"]), rows(a["edge_ptr"])
    have = np.sort(nc_rows * max(n_c, 1) + a["nc_chunks"])
    transpose = np.array_equal(have, np.sort(a["chunk_nodes"] * max(n_c, 1) + c_rows))
    want = a["edge_nodes"] * max(n_c, 1) + a["edge_chunk"][e_rows]
    edge_in = bool(np.isin(want, have).all()) and not np.any(np.diff(a["edge_chunk"]) < 0)
    pairs = np.unique(a["node_group"][nc_rows] * max(n_c, 1) + a["nc_chunks"])
    counts = np.array_equal(a["group_chunks"], np.bincount(pairs // max(n_c, 1), minlength=n_g))
    return transpose, edge_in, counts


@settings(max_examples=150, deadline=None)
@given(ex=extractions(), merge=st.sampled_from(["semi", "full", "none"]), data=st.data())
def test_the_graph_rules_agree_with_their_sorted_formulation(ex, merge, data):
    """Built graphs (one chunk per state, or several with merge="full") pass; a changed
    hyperedge chunk, group count or chunk listing is caught exactly when the sorted-key
    formulation of the rule breaks."""
    from hyperrag_fast.indexing.hypergraph import build_hypergraph
    from hyperrag_fast.validate import check_graph
    g = build_hypergraph(ex, merge=merge)
    arrays = {k: np.array(getattr(g, k)) for k in ARRAY_FIELDS}
    sizes = (g.n_chunks, g.n_nodes, g.n_edges, len(g.group_key))
    check_graph(arrays, *sizes, {}, 4, "IX")
    name = data.draw(st.sampled_from(["edge_chunk", "group_chunks", "chunk_nodes"]))
    if not arrays[name].size or g.n_chunks < 2 and name != "group_chunks":
        return
    i = data.draw(st.integers(0, arrays[name].size - 1))
    bound = {"edge_chunk": g.n_chunks, "group_chunks": g.n_chunks + 1, "chunk_nodes": g.n_nodes}
    arrays[name][i] = data.draw(st.integers(0, bound[name] - 1))
    ok = all(_old_rules(arrays, g.n_chunks, g.n_nodes, len(g.group_key)))
    try:
        check_graph(arrays, *sizes, {}, 4, "IX")
        caught = False
    except IndexCorruptedError:
        caught = True
    assert caught == (not ok)
