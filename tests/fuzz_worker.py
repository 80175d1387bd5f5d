"""The worker of tests/test_fuzz.py: applies each bad-input case (JSON lines on stdin) to
the index folder argv[1], opens it and queries it, restores it, and prints one verdict
line per case. Run in a subprocess: a crash kills only this process (the harness
restarts it after the case it crashed on)."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np

from hyperrag_fast import checksums
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.errors import IndexError_
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.methods import needs
from hyperrag_fast.prebuilt_reader import MissingPrebuilt, load_prebuilt
from hyperrag_fast.retriever import QueryOptions, Retriever
from hyperrag_fast.store import generation_dir

QUERIES = ["In which town did Ada Lovelace's father die?", "Marie Curie river",
           "Jacquard loom Lyon punched cards"]
METHODS = ["dense", "bm25", "stitch", "binary_ppr", "no_stibp"]
#: the methods reading each prebuilt structure (a case damaging one queries these)
PREBUILT_METHODS = {"merge_full": ["merge_full"], "merge_none": ["merge_none"],
                    "coda": ["coda"], "consolidated": ["stitch_consolidated"]}
ALL_METHODS = METHODS + [m for ms in PREBUILT_METHODS.values() for m in ms]


def methods_for(case: dict) -> list[str]:
    """What a case queries: the methods of the structure whose file it damages, all of
    them for a crafted prebuilt list, else the index's own methods (a CODA system is
    consolidated when it is loaded, ~0.5 s: loaded only where a case can change it)."""
    f = case.get("file", "")
    if f.startswith("prebuilt/"):
        return PREBUILT_METHODS[f.split("/")[1]]
    return ALL_METHODS if case.get("edit", "").startswith("prebuilt_") else METHODS


def results(ix_dir: str, verify: bool, methods: list[str]) -> dict[str, list]:
    ix = HyperIndex.load(ix_dir, HashingEmbedder(), verify=verify)
    structures = sorted({s for m in methods for s in needs(m, ix.merge)})
    r = Retriever(ix, prebuilt=load_prebuilt(ix_dir, structures, verify, ix.generation))
    out = {}
    for m in methods:
        out[m] = []
        for q in QUERIES:
            res = r.retrieve(q, QueryOptions(method=m))
            out[m].append([(c.chunk_id, c.text[:40], round(float(c.score), 9))
                           for c in res.chunks])
    return out


def resum(gen: Path) -> None:
    """Recompute the manifest's checksums (a crafted folder), over the files it lists,
    the prebuilt structures' included, and seal it again."""
    mf = gen / "manifest.json"
    m = json.loads(mf.read_text(encoding="utf-8"))
    files = [gen / r for r in m["files"] if (gen / r).is_file()]
    m.update(checksums.manifest_checksums(gen, files))
    for listed in m.get("prebuilt", {}).values():
        for rel in listed:
            if (gen / rel).is_file():
                listed[rel] = checksums.file_digest(gen / rel, checksums.FAST)
    checksums.write_manifest(gen, m)


EDITS = {  # crafted manifests: name -> edit of the parsed manifest (then checksums resummed)
    "drop_files": lambda m: m.pop("files"),
    "drop_counts": lambda m: m.pop("counts"),
    "drop_embedder": lambda m: m.pop("embedder"),
    "drop_chunking": lambda m: m.pop("chunking"),
    "drop_ann": lambda m: m.pop("ann"),
    "drop_merge": lambda m: m.pop("merge"),
    "files_list": lambda m: m.__setitem__("files", list(m["files"])),
    "ann_files_list": lambda m: m.__setitem__("ann_files", ["ann/chunk_vec.usearch"]),
    "ann_escape": lambda m: m["ann_files"].__setitem__("chunk_vec", "../../x/ann/chunk_vec.usearch"),
    "ann_absolute": lambda m: m["ann_files"].__setitem__("chunk_vec", "/etc/hostname"),
    "ann_swap": lambda m: m["ann_files"].update(chunk_vec=m["ann_files"]["node_vec"]),
    "ann_to_texts": lambda m: m["ann_files"].__setitem__("chunk_vec", "texts.sqlite"),
    "ann_to_vectors": lambda m: m["ann_files"].__setitem__("chunk_vec", "vectors/chunk_vec.npy"),
    "ann_drop_one": lambda m: m["ann_files"].pop("node_vec"),
    "files_escape": lambda m: m["files"].__setitem__("../CURRENT", "0" * 64),
    "files_drop_texts": lambda m: m["files"].pop("texts.sqlite"),
    "files_drop_array": lambda m: m["files"].pop("arrays/node_chunk.npy"),
    "files_drop_vec": lambda m: m["files"].pop("vectors/node_vec.npy"),
    "files_add_missing": lambda m: m["files"].__setitem__("arrays/extra.npy", "0" * 64),
    "files_drop_rep": lambda m: m["files"].pop("arrays/chunk_vec_rep.npy"),
    "ann_files_to_rep": lambda m: m["ann_files"].__setitem__("chunk_vec", "arrays/chunk_vec_rep.npy"),
    "version_str": lambda m: m.__setitem__("format_version", "4" * 5000),
    "version_3": lambda m: m.__setitem__("format_version", 3),
    "version_none": lambda m: m.__setitem__("format_version", None),
    "counts_chunks": lambda m: m["counts"].__setitem__("chunks", m["counts"]["chunks"] + 1),
    "counts_nodes": lambda m: m["counts"].__setitem__("nodes", 1 << 40),
    "counts_negative": lambda m: m["counts"].__setitem__("edges", -1),
    "counts_str": lambda m: m["counts"].__setitem__("groups", "many"),
    "counts_list": lambda m: m.__setitem__("counts", [1, 2, 3]),
    "dim_zero": lambda m: m["embedder"].__setitem__("dim", 0),
    "dim_big": lambda m: m["embedder"].__setitem__("dim", 1 << 31),
    "dim_str": lambda m: m["embedder"].__setitem__("dim", "64"),
    "embedder_str": lambda m: m.__setitem__("embedder", "hashing"),
    "merge_bad": lambda m: m.__setitem__("merge", "weird"),
    "chunking_str": lambda m: m.__setitem__("chunking", "x"),
    "ann_params_bad": lambda m: m["ann"].__setitem__("connectivity", -5),
    "ann_params_str": lambda m: m["ann"].__setitem__("expansion_search", "many"),
    "ann_params_unknown": lambda m: m["ann"].__setitem__("surprise", 1),
    "ann_storage_bad": lambda m: m["ann"].__setitem__("storage", "f8"),
    "ann_backend_bad": lambda m: m["ann"].__setitem__("backend", "faiss"),
    "ann_threshold": lambda m: m["ann"].__setitem__("exact_threshold", 10 ** 30),
    "extractor_obj": lambda m: m.__setitem__("extractor", {"x": 1}),
    "chunk_vectors_bad": lambda m: m.__setitem__("chunk_vectors", "sideways"),
    "manifest_list": lambda m: (m.clear(), m.__setitem__("format_version", 4)),
    # the prebuilt structures' file lists (issue 24 item 3)
    "prebuilt_list": lambda m: m.__setitem__("prebuilt", ["merge_full"]),
    "prebuilt_files_list": lambda m: m["prebuilt"].__setitem__("merge_full", ["a"]),
    "prebuilt_empty": lambda m: m["prebuilt"].__setitem__("merge_full", {}),
    "prebuilt_bad_name": lambda m: m["prebuilt"].__setitem__("../x", m["prebuilt"]["coda"]),
    "prebuilt_escape": lambda m: m["prebuilt"]["merge_full"].__setitem__(
        "prebuilt/merge_full/../../../../x.npz", "0" * 32),
    "prebuilt_absolute": lambda m: m["prebuilt"]["merge_full"].__setitem__("/etc/hostname", "0"),
    "prebuilt_swap": lambda m: m["prebuilt"].update(merge_full=m["prebuilt"]["merge_none"]),
    "prebuilt_into_index": lambda m: m["prebuilt"]["merge_full"].__setitem__(
        "prebuilt/merge_full/../../texts.sqlite", "0" * 32),
    "prebuilt_drop_file": lambda m: m["prebuilt"]["coda"].pop("prebuilt/coda/raw_ent_vec.npy"),
    "prebuilt_add_missing": lambda m: m["prebuilt"]["coda"].__setitem__(
        "prebuilt/coda/extra.npy", "0" * 32),
    "prebuilt_drop_structure": lambda m: m["prebuilt"].pop("consolidated"),
    "prebuilt_hash_int": lambda m: m["prebuilt"]["merge_none"].__setitem__(
        "prebuilt/merge_none/graph.json", 5),
    "prebuilt_hash_wrong": lambda m: m["prebuilt"]["merge_none"].__setitem__(
        "prebuilt/merge_none/graph.json", "0" * 32),
    "prebuilt_unknown": lambda m: m["prebuilt"].__setitem__(
        "merge_semi", {"prebuilt/merge_semi/graph.json": "0" * 32}),
}


def apply(root: Path, case: dict) -> None:
    gen = generation_dir(root)
    op = case["op"]
    if op == "pointer":
        cur = root / "CURRENT"
        cur.unlink()
        v = case["value"]
        if v.startswith("symlink:"):
            cur.symlink_to(v[len("symlink:"):])
        else:
            cur.write_bytes(v.encode("latin-1"))
        return
    if op == "manifest":
        mf = gen / "manifest.json"
        m = json.loads(mf.read_text(encoding="utf-8"))
        EDITS[case["edit"]](m)
        mf.write_text(json.dumps(m), encoding="utf-8")
        if case["resum"]:
            try:
                resum(gen)
            except Exception:  # noqa: BLE001 - an edit checksums cannot be recomputed over:
                checksums.write_manifest(gen, m)  # sealed as it is
        return
    if op == "nest":
        mf = gen / case["file"]
        mf.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
        if case["resum"]:  # a crafted folder: sealed / checksummed as it is
            if case["file"] == "manifest.json":
                (gen / checksums.SEAL).write_text(checksums.seal_text(mf.read_bytes()))
            else:
                resum(gen)
        return
    path = gen / case["file"]
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(case.get("seed", 0))
    if op == "flip":
        lo = 0 if case["seed"] % 3 == 0 or len(data) < 256 else 128  # mostly past headers
        for _ in range(1 + case["seed"] % 3):
            data[int(rng.integers(lo, len(data)))] ^= int(rng.integers(1, 256))
    elif op == "truncate":
        del data[int(case["keep"] * len(data)):]
    elif op == "zero":
        a = int(rng.integers(0, len(data)))
        data[a:a + 64] = bytes(len(data[a:a + 64]))
    path.write_bytes(bytes(data))
    if case["resum"] and case["file"] != "manifest.json":
        resum(gen)


def restore(root: Path, pristine: Path, case: dict) -> None:
    """Put back what a case touched (its file, the manifest and its seal, or CURRENT)
    from the pristine copy; anything else differing means a full copy."""
    gen = generation_dir(pristine)
    cur = root / "CURRENT"
    if case["op"] == "pointer":
        cur.unlink()
        shutil.copy2(pristine / "CURRENT", cur)
        return
    for rel in {case.get("file", "manifest.json"), "manifest.json", checksums.SEAL}:
        shutil.copy2(gen / rel, root / gen.name / rel)


def main() -> None:
    root = Path(sys.argv[1])
    pristine = Path(sys.argv[2])
    base = results(str(pristine), True, ALL_METHODS)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        case = json.loads(line)
        print(json.dumps({"start": case["id"]}), flush=True)
        apply(root, case)
        methods = methods_for(case)
        try:
            got = results(str(root), case["verify"], methods)
            out = {"outcome": "same" if got == {m: base[m] for m in methods} else "different"}
        except (IndexError_, MissingPrebuilt) as e:
            msg = str(e)
            out = {"outcome": "error", "type": type(e).__name__, "msg": msg[:300],
                   "lines": len(msg.splitlines()), "length": len(msg)}
        except Exception as e:  # noqa: BLE001 - any other exception is a finding
            out = {"outcome": "exception", "type": type(e).__name__, "msg": str(e)[:300]}
        restore(root, pristine, case)
        print(json.dumps({"id": case["id"], **out}), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
