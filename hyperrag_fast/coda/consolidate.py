"""Knowledge consolidation (CodaRAG §3.2): entity type discovery and fragmented entity
merging, with an inspectable, reversible merge table.

Merging: candidate pairs are entity pairs whose vectors have cosine >= ``gate``
(exact top-``k`` neighbours per entity, batched); a judge decides each pair. The
LLM judge (``llm_extract.LLMMergeJudge``) is the paper's step. The offline
stand-in, :func:`offline_rule`, is deterministic: merge when the two entities have
the same type (or one is untyped) and one normalised name is a contiguous token
subsequence of the other (``google`` / ``google inc``), or when cosine >= ``high_gate``;
value-like types (dates, numbers: :data:`VALUE_TYPES`) and names without letters are
never merged by it.

The decisions are a :class:`MergeTable` (pairs + decision + reason + score +
source) saved as JSON next to the raw KG and applied when the graph is assembled
(``graph.consolidate(..., group_of=table.group_of)``), never baked in:
:meth:`MergeTable.override` and :meth:`MergeTable.unmerge` change it afterwards.
"""
from __future__ import annotations

import json
import os
import re
import threading
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable, Iterable, Protocol, Sequence

import numpy as np

from ..lexical import normalize_name
from .raw_kg import DEFAULT_TYPE, RawKG

MERGE, KEEP = "merge", "keep"
#: value-like spaCy labels the offline rule never merges ("1472" vs "1476" are not
#: fragments of one entity; measured on 2Wiki: most bad merges were dates/numbers).
VALUE_TYPES = frozenset({"DATE", "TIME", "CARDINAL", "ORDINAL", "MONEY", "QUANTITY", "PERCENT"})


@dataclass(frozen=True)
class MergeRow:
    """One judged candidate pair (normalised name keys ``a`` < ``b``)."""

    a: str
    b: str
    decision: str
    reason: str
    score: float
    source: str  # "rule", "llm", "override"


_ROW_FIELDS = tuple(f.name for f in fields(MergeRow))


@dataclass
class MergeTable:
    """Merge decisions; ``weights[key]`` (chunk counts) choose each group's canonical
    key: the heaviest member, ties by the smallest key."""

    rows: list[MergeRow] = field(default_factory=list)
    weights: dict[str, float] = field(default_factory=dict)

    # ------------------------------------------------------------- grouping
    def canonical(self) -> dict[str, str]:
        """key -> canonical key for every key in a merged pair (union-find over merges)."""
        parent: dict[str, str] = {}

        def find(x: str) -> str:
            parent.setdefault(x, x)
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for r in self._effective():
            if r.decision == MERGE:
                ra, rb = find(r.a), find(r.b)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
        groups: dict[str, list[str]] = {}
        for k in list(parent):
            groups.setdefault(find(k), []).append(k)
        out = {}
        for mem in groups.values():
            head = min(mem, key=lambda k: (-self.weights.get(k, 0.0), k))
            for k in mem:
                out[k] = head
        return out

    def group_of(self) -> Callable[[str], str]:
        """A ``key -> merged entity id`` function (identity outside the table)."""
        m = self.canonical()
        return lambda key: m.get(key, key)

    def groups(self) -> list[list[str]]:
        """Merged groups (two or more keys), each sorted, canonical first."""
        by: dict[str, list[str]] = {}
        for k, h in self.canonical().items():
            by.setdefault(h, []).append(k)
        return [[h] + sorted(k for k in ks if k != h) for h, ks in sorted(by.items())]

    def _effective(self) -> list[MergeRow]:
        """The last row per pair wins (overrides are appended)."""
        last: dict[tuple[str, str], MergeRow] = {}
        for r in self.rows:
            last[(r.a, r.b)] = r
        return list(last.values())

    def decision(self, a: str, b: str) -> MergeRow | None:
        a, b = sorted((normalize_name(a), normalize_name(b)))
        got = [r for r in self.rows if (r.a, r.b) == (a, b)]
        return got[-1] if got else None

    # ------------------------------------------------------------ overrides
    def override(self, a: str, b: str, decision: str, reason: str = "manual override") -> None:
        """Force a decision for the pair (names are normalised)."""
        if decision not in (MERGE, KEEP):
            raise ValueError(f"decision must be {MERGE!r} or {KEEP!r}, got {decision!r}")
        a, b = sorted((normalize_name(a), normalize_name(b)))
        if not a or not b or a == b:
            raise ValueError("override needs two different non-empty names")
        prev = self.decision(a, b)
        self.rows.append(MergeRow(a, b, decision, reason, prev.score if prev else float("nan"),
                                  "override"))

    def unmerge(self, name: str, reason: str = "unmerged") -> int:
        """Detach ``name`` from its group: every merge touching it becomes keep.
        Returns the number of pairs overridden."""
        key = normalize_name(name)
        hit = [r for r in self._effective() if r.decision == MERGE and key in (r.a, r.b)]
        for r in hit:
            self.rows.append(MergeRow(r.a, r.b, KEEP, reason, r.score, "override"))
        return len(hit)

    # ---------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike) -> None:
        p = Path(path)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps({"rows": [{f: getattr(r, f) for f in _ROW_FIELDS}
                                            for r in self.rows],  # asdict's dicts, no deep copy
                                   "weights": self.weights}, indent=0), encoding="utf-8")
        os.replace(tmp, p)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "MergeTable":
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls([MergeRow(**r) for r in d["rows"]], dict(d.get("weights", {})))


def consolidated_group_of(table: MergeTable) -> Callable[[str], str]:
    """For STITCH: ``build_hypergraph(extractions, group_of=consolidated_group_of(t))``
    maps a normalised name key to its merged entity id (docs/architecture.md §2)."""
    return table.group_of()


# ------------------------------------------------------------------ candidates
def candidate_pairs(vec: np.ndarray, gate: float, k: int = 10, batch: int = 256
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (i < j) among each row's exact top-``k + 1`` other rows with cosine >= gate,
    best first (score, then i, then j). Exact, in bounded memory: blocks of ``batch``
    rows against the rows from that block on (each product once: the upper triangle), and
    only the cosines >= gate are kept, so the per-row top cut runs over those few
    (docs/architecture.md §7). O(n^2 d / 2) time, O(batch n) memory per core: the blocks
    run on one thread per core, each product with one BLAS thread (the same products)."""
    v = np.ascontiguousarray(vec, np.float32)
    n = v.shape[0]
    keep = min(k + 1, n - 1)
    if n < 2 or keep < 1:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)

    mine = threading.local()  # each thread's product and mask buffers, reused per block:
    # a fresh ~40 MB product per block cost its page faults every time (the build step maps
    # every large allocation anew: mmaps.map_large_allocations); the same products

    def block(b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        e = min(b + batch, n)
        if not hasattr(mine, "sims"):
            mine.sims, mine.hit = np.empty(batch * n, np.float32), np.empty(batch * n, bool)
        size = (e - b) * (n - b)
        sims = np.matmul(v[b:e], v[b:].T,  # rows b..e against columns b..n
                         out=mine.sims[:size].reshape(e - b, n - b))
        sims[np.arange(e - b), np.arange(e - b)] = -np.inf
        hit = np.greater_equal(sims, gate, out=mine.hit[:size].reshape(e - b, n - b))
        # np.nonzero's (row, column) pairs, in its order, from the flat positions: the
        # 2-d np.nonzero is ~6x slower than np.flatnonzero over these wide blocks
        r, c = np.divmod(np.flatnonzero(hit), n - b)
        c_abs = c + b
        up = c_abs > r + b  # each unordered pair once (the block's own square is symmetric)
        return r[up] + b, c_abs[up], sims[r[up], c[up]]

    starts = range(0, n, batch)
    workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1,
                  len(starts))
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        from ..blas import blas_threads
        with blas_threads(1), ThreadPoolExecutor(workers) as pool:
            got = list(pool.map(block, starts))  # in block order
    else:
        got = [block(b) for b in starts]
    I, J, S = zip(*got)
    del got
    i, j, s = np.concatenate(I), np.concatenate(J), np.concatenate(S)
    # a pair is a candidate when j is among i's top ``keep`` (or i among j's)
    src = np.concatenate([i, j])
    dst = np.concatenate([j, i])
    sim = np.concatenate([s, s])
    o = np.lexsort((dst, -sim, src))  # per source row: best first
    src, dst, sim = src[o], dst[o], sim[o]
    first = np.searchsorted(src, src, side="left")
    top = (np.arange(src.size) - first) < keep
    a, bb, sc = np.minimum(src[top], dst[top]), np.maximum(src[top], dst[top]), sim[top]
    key = a.astype(np.int64) * n + bb
    _, u = np.unique(key, return_index=True)
    a, bb, sc = a[u].astype(np.int64), bb[u].astype(np.int64), sc[u]
    o = np.lexsort((bb, a, -sc))
    return a[o], bb[o], sc[o]


def _token_subsequence(short: list[str], long: list[str]) -> bool:
    n = len(short)
    return 0 < n <= len(long) and any(long[i:i + n] == short for i in range(len(long) - n + 1))


def offline_rule(kg: RawKG, i: int, j: int, sim: float, high_gate: float = 0.95
                 ) -> tuple[str, str]:
    """Offline stand-in for the LLM merge judge (see the module docstring)."""
    ti, tj = kg.ent_type[i], kg.ent_type[j]
    if ti in VALUE_TYPES or tj in VALUE_TYPES:
        return KEEP, f"value type ({ti}, {tj}) never merged by the offline rule"
    if not any(c.isalpha() for c in kg.ent_key[i] + kg.ent_key[j]):
        return KEEP, "names without letters"
    if ti != tj and DEFAULT_TYPE not in (ti, tj):
        return KEEP, f"types differ ({ti} vs {tj})"
    a, b = kg.ent_key[i].split(), kg.ent_key[j].split()
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    if _token_subsequence(short, long):
        return MERGE, f"name {' '.join(short)!r} is a token subsequence of {' '.join(long)!r}"
    if sim >= high_gate:
        return MERGE, f"cosine {sim:.3f} >= high gate {high_gate}"
    return KEEP, "names differ and cosine below the high gate"


_ABBR = re.compile(r"\(([A-Z][A-Za-z0-9&\-]{1,7})\)")
_ALIAS = re.compile(r"([A-Z][\w'\-]*(?: [A-Z][\w'\-]*){0,4}),? (?:also|otherwise|commonly|better) "
                    r"(?:known|called|referred to) as (?:the )?([A-Z][\w'\-]*(?: [A-Z][\w'\-]*){0,4})")


def alias_pairs(texts: Iterable[str]) -> Counter:
    """Offline alias discovery (ours, docs/architecture.md §7): ``long form (ABBR)``
    where the abbreviation's capitals are the initials of the words before it
    (``basal cell carcinoma (BCC)``), and ``X, also known as Y``. Returns a Counter of
    (long key, alias key) normalised name pairs."""
    out: Counter = Counter()
    for t in texts:
        for m in _ABBR.finditer(t):
            abbr = m.group(1)
            caps = [c for c in abbr if c.isupper() or c.isdigit()]
            if len(caps) < 2:
                continue
            words = re.findall(r"[A-Za-z0-9][\w'\-]*", t[max(0, m.start() - 120):m.start()])
            n = len(caps)
            cand = words[-n:] if len(words) >= n else []
            if cand and all(w[0].lower() == c.lower() for w, c in zip(cand, caps)):
                a, b = normalize_name(" ".join(cand)), normalize_name(abbr)
                if a and b and a != b:
                    out[(a, b)] += 1
        for m in _ALIAS.finditer(t):
            a, b = normalize_name(m.group(1)), normalize_name(m.group(2))
            if a and b and a != b:
                out[(a, b)] += 1
    return out


def alias_rows(kg: RawKG, pairs: Counter) -> list[MergeRow]:
    """Merge rows (source ``"alias"``) for discovered pairs whose both names are entities."""
    keys = set(kg.ent_key)
    rows = []
    for (a, b), n in sorted(pairs.items()):
        if a in keys and b in keys:
            x, y = sorted((a, b))
            rows.append(MergeRow(x, y, MERGE, f"alias seen {n}x in the text", float("nan"), "alias"))
    return rows


class MergeJudge(Protocol):
    """Decides candidate pairs: ``judge(kg, pairs) -> [(decision, reason)]``."""

    name: str

    def judge(self, kg: RawKG, pairs: Sequence[tuple[int, int, float]]
              ) -> list[tuple[str, str]]: ...


def merge_entities(kg: RawKG, ent_vec: np.ndarray, judge: MergeJudge | None = None,
                   gate: float = 0.85, high_gate: float = 0.95, k: int = 10,
                   aliases: Counter | None = None) -> MergeTable:
    """Fragmented entity merging (CodaRAG §3.2): gate by cosine, then judge each pair
    (LLM judge, or :func:`offline_rule` when ``judge`` is None); ``aliases``
    (:func:`alias_pairs`) add merges found in the text."""
    a, b, s = candidate_pairs(ent_vec, gate, k)
    pairs = [(int(x), int(y), float(z)) for x, y, z in zip(a, b, s)]
    if judge is None:
        decided = [offline_rule(kg, i, j, sim, high_gate) for i, j, sim in pairs]
        source = "rule"
    else:
        decided = judge.judge(kg, pairs)
        source = "llm"
    rows = []
    for (i, j, sim), (dec, why) in zip(pairs, decided):
        x, y = sorted((kg.ent_key[i], kg.ent_key[j]))
        rows.append(MergeRow(x, y, dec, why, round(sim, 6), source))
    if aliases:
        rows += alias_rows(kg, aliases)
    keys = {k for r in rows for k in (r.a, r.b)}
    weights = {kg.ent_key[i]: float(len(kg.ent_chunks[i])) for i in range(kg.n_entities)
               if kg.ent_key[i] in keys}
    return MergeTable(rows, weights)


# ---------------------------------------------------------------- type discovery
def label_types(ents: Iterable[tuple[str, str]]) -> tuple[dict[str, str], Counter]:
    """(normalised name -> its most frequent label, label counts) of ``(text, label)``
    entity mentions (ties: the label seen first)."""
    counts: dict[tuple[str, str], int] = {}  # (name, label) pairs, first seen first
    inventory: Counter = Counter()
    for text, label in ents:
        key = normalize_name(text)
        if key:
            counts[(key, label)] = counts.get((key, label), 0) + 1
            inventory[label] += 1
    best: dict[str, tuple[int, str]] = {}  # one small tuple per name, no Counter each
    for (key, label), c in counts.items():
        if key not in best or c > best[key][0]:
            best[key] = (c, label)
    del counts
    return {k: label for k, (_, label) in best.items()}, inventory


def spacy_types(texts: Iterable[str], nlp) -> tuple[dict[str, str], Counter]:
    """Offline type discovery: the spaCy NER label inventory. Returns (normalised name
    -> its most frequent label, label counts). ``nlp`` is a loaded spaCy pipeline
    (e.g. ``OfflineExtractor().nlp``)."""
    return label_types((e.text, e.label_) for doc in nlp.pipe(texts, batch_size=64)
                       for e in doc.ents)


def record_types(extractions) -> tuple[dict[str, str], Counter] | None:
    """:func:`spacy_types` from the NER mentions the build recorded in the extractions
    (``Extraction.ner``, the same spaCy pass over the same chunk texts), without running
    spaCy again; None when some usable extraction has none recorded."""
    if any(e.ner is None for e in extractions if e.error is None):
        return None
    return label_types(m for e in extractions if e.ner for m in e.ner)
