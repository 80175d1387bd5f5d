"""The CODA build step's leaner code paths (issue 23 item 3, docs/architecture.md §7) against
twins written the plain way they replaced: the same values bit for bit."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperrag_fast.coda.consolidate import label_types
from hyperrag_fast.coda.graph import (FastRPParams, _merged_relations, _merged_rows, consolidate,
                                     graph_parts, save_graph, write_graph)
from hyperrag_fast.coda.kg_vectors import KnownRows, embed_known, embed_missing, raw_vectors
from hyperrag_fast.coda.raw_kg import (MAX_PIECES, ChunkKG, RawKG, RowTable, l2_rows, l2_rows_inplace,
                                      segment_sum)
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.prebuilt import savez_blocks

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EMB = HashingEmbedder(dim=16)
NAMES = ["Ada", "ada ", "Bob", "Carl", "Dora", "Eve", "Finn", "Gus"]
SENTS = ["s one.", "s two.", "s three.", "s four.", "Ada", ""]


@st.composite
def chunk_kgs(draw):
    out = []
    for _ in range(draw(st.integers(1, 6))):
        ents = tuple((draw(st.sampled_from(NAMES)), "entity", draw(st.sampled_from(SENTS)))
                     for _ in range(draw(st.integers(0, 5))))
        rels = tuple((draw(st.sampled_from(NAMES)), draw(st.sampled_from(NAMES)),
                      draw(st.sampled_from(SENTS)), draw(st.sampled_from(["", "kw"])),
                      draw(st.sampled_from([1.0, 0.5, 2.25])))
                     for _ in range(draw(st.integers(0, 6))))
        out.append(ChunkKG(ents, rels))
    return out


def _dense_twin(kg: RawKG, known: dict) -> tuple[np.ndarray, np.ndarray]:
    """Every piece and name looked up or embedded row by row, summed, normalised."""
    def vec(t):
        v = known.get(t)
        return np.asarray(EMB.embed([t])[0] if v is None else v, np.float32)

    def means(descs):
        rows = []
        for d in descs:
            p = np.array([vec(t) for t in d[:MAX_PIECES]], np.float32).reshape(-1, EMB.dim)
            rows.append(l2_rows(segment_sum(np.array([0, len(p)]), np.arange(len(p)), p))[0])
        return np.array(rows, np.float32).reshape(-1, EMB.dim)
    ent = means(kg.ent_desc)
    ent += np.array([vec(t) for t in kg.ent_name], np.float32).reshape(-1, EMB.dim)
    return l2_rows(ent), means(kg.rel_desc)


@SETTINGS
@given(chunk_kgs(), st.sets(st.sampled_from(SENTS + NAMES)))
def test_raw_vectors_match_the_dense_twin(kgs, known_texts):
    """Pieces looked up once per distinct text and names added in place (no name matrix)
    give the per-row values of the plain computation."""
    kg = RawKG.from_chunk_kgs(kgs)
    known = {t: EMB.embed([t])[0] * 0.5 for t in known_texts}  # not what embedding gives
    ev, rv = raw_vectors(kg, EMB, dict(known), EMB.dim)
    want_e, want_r = _dense_twin(kg, known)
    assert np.array_equal(ev, want_e)
    assert np.array_equal(np.asarray(rv), want_r)


def _relations_twin(kg: RawKG, raw_to_ent: np.ndarray):
    """The Python loop the arrays replaced: a dict of node pairs in first-seen order."""
    rindex, members = {}, []
    for j in range(kg.n_relations):
        a, b = int(raw_to_ent[kg.rel_src[j]]), int(raw_to_ent[kg.rel_tgt[j]])
        if a == b:
            continue
        r = rindex.setdefault((min(a, b), max(a, b)), len(rindex))
        if r == len(members):
            members.append([])
        members[r].append(j)
    strength = [sum(kg.rel_strength[j] for j in m) for m in members]
    return list(rindex), members, strength


@SETTINGS
@given(chunk_kgs(), st.data())
def test_merged_relations_match_the_loop(kgs, data):
    kg = RawKG.from_chunk_kgs(kgs)
    groups = data.draw(st.lists(st.integers(0, 3), min_size=kg.n_entities,
                                max_size=kg.n_entities))
    _, raw_to_ent = np.unique(np.array(groups, np.int64), return_inverse=True)
    raw_to_ent = raw_to_ent.reshape(-1).astype(np.int64)
    n = int(raw_to_ent.max()) + 1 if kg.n_entities else 0
    ptr, idx, src, tgt, strength = _merged_relations(kg, raw_to_ent, n)
    pairs, members, want = _relations_twin(kg, raw_to_ent)
    assert list(zip(src.tolist(), tgt.tolist())) == pairs
    assert [idx[a:b].tolist() for a, b in zip(ptr, ptr[1:])] == members
    assert strength.dtype == np.float64 and strength.tolist() == want


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(NAMES + ["", "  "]), st.sampled_from("ABC"))))
def test_label_types_match_counters(ents):
    """One (name, label) count table instead of a Counter per name: the same labels,
    ties to the label seen first, the same key order."""
    from hyperrag_fast.lexical import normalize_name
    per: dict = {}
    for text, label in ents:
        if normalize_name(text):
            per.setdefault(normalize_name(text), Counter())[label] += 1
    want = {k: c.most_common(1)[0][0] for k, c in per.items()}
    got, inventory = label_types(ents)
    assert list(got.items()) == list(want.items())
    assert inventory == Counter(label for text, label in ents if normalize_name(text))


def _raw_twin(kgs) -> dict:
    """RawKG.from_chunk_kgs as it was: a list and a Counter per item."""
    from hyperrag_fast.coda.raw_kg import DEFAULT_TYPE, add_unique
    from hyperrag_fast.lexical import normalize_name
    d = {k: [] for k in ("ent_key", "ent_desc", "ent_chunks", "rel_src", "rel_tgt", "rel_desc",
                         "rel_kw", "rel_strength", "rel_chunks")}
    index, rindex, names, types, errors = {}, {}, [], [], []

    def entity(name, typ, desc, c):
        key = normalize_name(name)
        if not key:
            return None
        if key not in index:
            index[key] = len(d["ent_key"])
            d["ent_key"].append(key), d["ent_desc"].append([]), d["ent_chunks"].append([])
            names.append(Counter()), types.append(Counter())
        i = index[key]
        names[i][name.strip()] += 1
        if typ:
            types[i][typ] += 1
        add_unique(d["ent_desc"][i], desc.strip())
        if not d["ent_chunks"][i] or d["ent_chunks"][i][-1] != c:
            d["ent_chunks"][i].append(c)
        return i
    for c, ck in enumerate(kgs):
        if ck.error is not None:
            errors.append((c, ck.error))
            continue
        for name, typ, desc in ck.entities:
            entity(name, typ, desc, c)
        for src, tgt, desc, kw, strength in ck.relations:
            a, b = entity(src, None, "", c), entity(tgt, None, "", c)
            if a is None or b is None or a == b:
                continue
            pair = (min(a, b), max(a, b))
            if pair not in rindex:
                rindex[pair] = len(d["rel_src"])
                for k, v in (("rel_src", pair[0]), ("rel_tgt", pair[1]), ("rel_desc", []),
                             ("rel_kw", []), ("rel_strength", 0.0), ("rel_chunks", [])):
                    d[k].append(v)
            j = rindex[pair]
            add_unique(d["rel_desc"][j], desc.strip())
            add_unique(d["rel_kw"][j], kw.strip())
            d["rel_strength"][j] += float(strength)
            if not d["rel_chunks"][j] or d["rel_chunks"][j][-1] != c:
                d["rel_chunks"][j].append(c)
    d["ent_name"] = [n.most_common(1)[0][0] for n in names]
    d["ent_type"] = [t.most_common(1)[0][0] if t else DEFAULT_TYPE for t in types]
    d["errors"], d["n_chunks"] = errors, len(kgs)
    return d


@SETTINGS
@given(chunk_kgs(), st.lists(st.sampled_from(["ORG", "PERSON", ""]), max_size=40))
def test_raw_kg_matches_the_list_per_item_twin(kgs, labels):
    """Lists made only for items with two values, shared among equal ones, and a Counter
    only for names seen with two surface forms or types: the same KG and the same JSON."""
    it = iter(labels)
    kgs = [ChunkKG(tuple((n, next(it, "entity"), d) for n, _, d in ck.entities), ck.relations,
                   "failed" if ck.relations and len(ck.relations) == 5 else None)
           for ck in kgs]
    kg = RawKG.from_chunk_kgs(kgs)
    want = _raw_twin(kgs)
    got = kg.to_json()
    assert {k: got[k] for k in want} == want
    assert json.dumps(got) == json.dumps(RawKG.from_json(json.loads(json.dumps(want))).to_json())
    for k in ("rel_desc", "rel_kw", "rel_chunks"):
        lists = getattr(kg, k)
        assert len({id(x) for x in lists}) == len({tuple(x) for x in lists})


def _merged_rows_twin(rep: np.ndarray, ptr: np.ndarray, rows: np.ndarray):
    """The tuple-per-relation code the arrays replaced: a dict of member-row tuples in
    first-seen order, then one L2 segment sum per distinct tuple."""
    ids: dict[tuple, int] = {}
    of = [ids.setdefault(tuple(rows[a:b].tolist()), len(ids)) for a, b in zip(ptr, ptr[1:])]
    uniq = list(ids)
    uptr = np.zeros(len(uniq) + 1, np.int64)
    uptr[1:] = np.cumsum([len(t) for t in uniq])
    idx = np.array([x for t in uniq for x in t], np.int64)
    out = segment_sum(uptr, idx, rep) if uniq else np.zeros((0, rep.shape[1]), np.float32)
    return l2_rows(out), np.array(of, np.int32)


@SETTINGS
@given(st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=4), max_size=30),
       st.integers(0, 2 ** 31 - 1))
def test_merged_rows_match_the_tuple_twin(members, seed):
    """Relation rows grouped with arrays (one-member relations by row id, only the rest
    as tuples) = one row per distinct member tuple in first-seen order, bit for bit."""
    rep = np.random.default_rng(seed).normal(size=(6, 5)).astype(np.float32)
    ptr = np.zeros(len(members) + 1, np.int64)
    ptr[1:] = np.cumsum([len(m) for m in members])
    rows = np.array([x for m in members for x in m], np.int32)
    got = _merged_rows(RowTable(rep, np.arange(6, dtype=np.int32)), ptr, rows)
    want_rep, want_of = _merged_rows_twin(rep, ptr, rows)
    assert got.of.dtype == np.int32 and got.of.tolist() == want_of.tolist()
    assert got.rep.dtype == np.float32 and got.rep.tobytes() == want_rep.tobytes()


@SETTINGS
@given(st.integers(0, 9000), st.integers(1, 40), st.sampled_from([np.float32, np.float64]),
       st.integers(0, 2 ** 31 - 1))
def test_l2_rows_in_blocks_match_the_whole_matrix(n, d, dtype, seed):
    """Row norms a block at a time = over the whole matrix (each row's norm is its own)."""
    x = (np.random.default_rng(seed).normal(size=(n, d)) * 10.0 ** (seed % 7 - 3)).astype(dtype)
    x[::5] = 0
    assert l2_rows_inplace(x.copy()).tobytes() == l2_rows(x).tobytes()


@SETTINGS
@given(chunk_kgs(), st.data())
def test_graph_written_part_by_part_is_the_saved_graph(tmp_path_factory, kgs, data):
    """write_graph(graph_parts(...)) (the build step: nothing held whole) writes byte for
    byte what save_graph(consolidate(...)) writes, merged or not."""
    kg = RawKG.from_chunk_kgs(kgs)
    ev, rv = raw_vectors(kg, EMB, {}, EMB.dim)
    heads = data.draw(st.lists(st.sampled_from(kg.ent_key or ["-"]), min_size=kg.n_entities,
                               max_size=kg.n_entities))
    group = dict(zip(kg.ent_key, heads))
    tmp = tmp_path_factory.mktemp("g")
    for i, go in enumerate((None, group.get)):
        save_graph(tmp / f"a{i}", consolidate(kg, ev, rv, go, FastRPParams(dim=8)))
        write_graph(tmp / f"b{i}", kg.n_chunks, graph_parts(kg, ev, rv, go, FastRPParams(dim=8)))
        files = sorted(p.name for p in (tmp / f"a{i}").iterdir())
        assert files == sorted(p.name for p in (tmp / f"b{i}").iterdir()) and len(files) == 18
        for f in files:
            assert (tmp / f"a{i}" / f).read_bytes() == (tmp / f"b{i}" / f).read_bytes(), f


@SETTINGS
@given(st.lists(st.sampled_from(SENTS + NAMES), max_size=60), st.integers(1, 9),
       st.sets(st.sampled_from(SENTS + NAMES)))
def test_known_rows_in_blocks_match_embed_known(texts, block, known_texts):
    """``KnownRows`` (the consolidated hypergraph's node vectors, made a block at a time)
    gives ``embed_known``'s rows; ``embed_missing`` embeds what ``embed_known`` would."""
    known = {t: EMB.embed([t])[0] for t in known_texts}
    want, mask = embed_known(texts, EMB, dict(known), 16)
    assert mask.all()
    got = dict(known)
    assert embed_missing(texts, EMB, got) == []
    assert embed_missing(texts, None, dict(known)) == [t for t in dict.fromkeys(texts)
                                                         if t not in known]
    rows = KnownRows(texts, got, 16, block=block)
    parts = list(rows.blocks())
    assert all(len(p) <= block for p in parts)
    np.testing.assert_array_equal(np.concatenate(parts) if parts else np.zeros((0, 16), np.float32),
                                  want)
    np.testing.assert_array_equal(np.asarray(rows), want)


@SETTINGS
@given(st.integers(0, 300), st.integers(1, 8), st.integers(1, 70), st.integers(0, 2 ** 31))
def test_savez_blocks_writes_np_savez_bytes(tmp_path_factory, n, d, block, seed):
    """A matrix streamed block by block into the npz gives ``np.savez``'s file, byte for
    byte (the other members, their headers and order included)."""
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, d)).astype(np.float32)
    other = {"a": rng.integers(0, 9, n).astype(np.int64), "b": np.zeros(0, np.int32)}
    tmp = tmp_path_factory.mktemp("npz")
    np.savez(tmp / "want.npz", node_vec=m, **other)

    class Blocks:
        shape, dtype = m.shape, m.dtype

        def blocks(self):
            return (m[b:b + block] for b in range(0, n, block))
    savez_blocks(tmp / "got.npz", {"node_vec": Blocks(), **other})
    assert (tmp / "got.npz").read_bytes() == (tmp / "want.npz").read_bytes()
