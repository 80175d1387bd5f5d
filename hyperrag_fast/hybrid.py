"""Query-side signals beyond the paper's dense activation (DESIGN §8), each switchable:
question-entity seeds (names in the question activate equal-named states) and a BM25
term in the chunk prior. ``HybridOptions()`` switches everything off."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .hypergraph import Hypergraph
from .normalize import normalize_name

SEED_MODES = ("none", "ngram", "ner", "ner+ngram")


@dataclass(frozen=True)
class HybridOptions:
    """seeds: "none"; "ngram" = every word n-gram (n <= 6) of the question whose
    normalised form is a name-group key; "ner" = spaCy entities of the question,
    normalised (needs the offline extra), skipping entities whose spaCy label is in
    ``seed_skip_labels`` (e.g. CARDINAL, ORDINAL); "ner+ngram" = both. n-grams shorter
    than ``ngram_min_words`` words are not matched. Matched groups spanning more than
    ``seed_max_group`` chunks are not seeded; their states get A(v) >= ``seed_value``.
    bm25_weight: the prior term bm25_weight * s / max(s) over the ``k_bm25`` best BM25
    chunks, which also join C0."""

    seeds: str = "none"
    seed_value: float = 1.0
    seed_max_group: float = math.inf
    bm25_weight: float = 0.0
    k_bm25: int = 0
    seed_skip_labels: tuple[str, ...] = ()
    ngram_min_words: int = 1

    def __post_init__(self) -> None:
        if self.seeds not in SEED_MODES:
            raise ValueError(f"seeds must be one of {SEED_MODES}, got {self.seeds!r}")
        if self.ngram_min_words < 1:
            raise ValueError("ngram_min_words must be >= 1")
        if self.seed_value < 0 or self.bm25_weight < 0 or self.k_bm25 < 0:
            raise ValueError("seed_value, bm25_weight and k_bm25 must be >= 0")


class GroupLookup:
    """Name-group id of a normalised name key (exact match), built once per graph."""

    def __init__(self, graph: Hypergraph) -> None:
        self.graph = graph
        self._ids: dict[str, list[int]] = {}
        for g, key in enumerate(graph.group_key):
            self._ids.setdefault(key, []).append(g)
        self.max_words = max((k.count(" ") + 1 for k in self._ids), default=1)

    def groups_of_keys(self, keys: Sequence[str]) -> list[int]:
        out: list[int] = []
        for k in keys:
            out.extend(self._ids.get(k, ()))
        return sorted(set(out))

    def ngram_keys(self, text: str, max_n: int = 6, min_n: int = 1) -> list[str]:
        words = normalize_name(text).split()
        n_max = min(max_n, self.max_words)
        return [" ".join(words[i:i + n]) for n in range(min_n, n_max + 1)
                for i in range(len(words) - n + 1)]

    def seed_nodes(self, groups: Sequence[int], max_chunks: float) -> np.ndarray:
        """All states of the given groups, skipping groups in more than ``max_chunks`` chunks."""
        g = self.graph
        parts = [g.group_nodes[g.group_ptr[x]:g.group_ptr[x + 1]] for x in groups
                 if g.group_chunks[x] <= max_chunks]
        return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, np.int64)


def question_groups(text: str, lookup: GroupLookup, mode: str,
                    ner: Callable[[str], list[tuple[str, str]]] | None = None,
                    skip_labels: tuple[str, ...] = (), ngram_min_words: int = 1) -> list[int]:
    """Group ids named in the question (see :class:`HybridOptions`)."""
    if mode == "none":
        return []
    keys: list[str] = []
    if mode in ("ngram", "ner+ngram"):
        keys += lookup.ngram_keys(text, min_n=ngram_min_words)
    if mode in ("ner", "ner+ngram"):
        if ner is None:
            raise ValueError(f"seeds={mode!r} needs an NER function (the offline extractor's spaCy model)")
        keys += [normalize_name(t) for t, label in ner(text) if label not in skip_labels]
    return lookup.groups_of_keys(keys)


def spacy_entity_texts(nlp) -> Callable[[str], list[tuple[str, str]]]:
    """A question NER function from a loaded spaCy pipeline: (text, label) pairs."""
    def ents(text: str) -> list[tuple[str, str]]:
        return [(e.text, e.label_) for e in nlp(text).ents]
    return ents
