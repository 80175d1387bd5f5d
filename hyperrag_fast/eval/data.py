"""Evaluation datasets (``../shared/data/README.md``): corpora, questions, labels, splits.

Each corpus record is one :class:`~hyperrag_fast.chunking.Document` (``doc_id`` = title)
and exactly one :class:`~hyperrag_fast.records.Chunk` whose passage
(:func:`~hyperrag_fast.chunking.chunk_passage`) is ``title + "\\n" + text``. Chunks are built
directly, not by :func:`~hyperrag_fast.chunking.chunk_documents`, which strips outer
whitespace (one HotpotQA passage has some). A :class:`Question` carries only what the
retriever may see; its :class:`Label` (gold passages, type) is kept apart.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..chunking import Document, chunk_id, chunk_passage, word_spans
from ..records import Chunk

DATASETS = ("2wikimultihopqa", "hotpotqa_train", "musique_dev")
SPLITS = {"2wikimultihopqa": ("dev", "test", "all"), "hotpotqa_train": ("test", "all"),
          "musique_dev": ("dev", "all")}
DEV_SIZE_2WIKI = 200  # data README: dev = the first 200 questions in file order
ENV_VAR = "HYPERRAG_DATA_DIR"


@dataclass(frozen=True)
class Question:
    """What a query may see: the question string (and an id for reports)."""

    qid: str
    question: str


@dataclass(frozen=True)
class Label:
    """Labels of one question: gold passage strings and the question type ("" if none)."""

    gold: frozenset[str]
    qtype: str = ""

    @property
    def n_gold(self) -> int:
        return len(self.gold)


@dataclass
class Dataset:
    """A loaded dataset split: corpus (documents, chunks, passages) and aligned questions/labels."""

    name: str
    split: str
    documents: list[Document]
    chunks: list[Chunk]
    questions: list[Question]
    labels: list[Label]

    @property
    def passages(self) -> list[str]:
        return [chunk_passage(c) for c in self.chunks]

    @property
    def max_words(self) -> int:
        """Largest passage text in words: a chunking budget that splits no passage."""
        return max(len(word_spans(d.text)) for d in self.documents)

    def corpus_sha256(self) -> str:
        """Checksum of the corpus as indexed: (doc_id, passage) of every chunk, in order."""
        return corpus_checksum(self.chunks)


def corpus_checksum(chunks: Sequence[Chunk]) -> str:
    h = hashlib.sha256()
    for c in chunks:
        h.update(json.dumps([c.doc_id, chunk_passage(c)], ensure_ascii=False).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """``data_dir``, else ``$HYPERRAG_DATA_DIR``, else ``../shared/data`` from the repo root
    or the cwd. FileNotFoundError naming every place tried."""
    if data_dir is not None:
        tried = [Path(data_dir)]
    elif os.environ.get(ENV_VAR):
        tried = [Path(os.environ[ENV_VAR])]
    else:
        repo_root = Path(__file__).resolve().parents[2]
        tried = [repo_root.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"]
    for p in tried:
        if p.is_dir():
            return p
    raise FileNotFoundError(
        "evaluation data not found; tried " + ", ".join(str(p) for p in tried)
        + f". Pass --data-dir or set {ENV_VAR} to the folder holding {' and '.join(DATASETS)}/")


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"missing data file {path}")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _make_chunks(docs: list[Document]) -> list[Chunk]:
    """One chunk per document, spanning its whole text; checks passage == title + "\\n" + text."""
    chunks = []
    for d in docs:
        if not d.title:
            raise ValueError(f"passage {d.doc_id!r} has an empty title")
        c = Chunk(chunk_id(d.doc_id, 0, len(d.text), d.text), d.doc_id, d.title, d.text,
                  0, len(d.text), {})
        if chunk_passage(c) != d.title + "\n" + d.text:
            raise AssertionError(f"chunk passage of {d.doc_id!r} is not title + '\\n' + text")
        chunks.append(c)
    if len({c.chunk_id for c in chunks}) != len(chunks):
        raise ValueError("duplicate chunk ids in the corpus")
    return chunks


def _documents(pairs: list[tuple[str, str]], where: Path) -> list[Document]:
    titles = [t for t, _ in pairs]
    if len(set(titles)) != len(titles):
        raise ValueError(f"{where}: titles are not unique")
    return [Document(t, t, x) for t, x in pairs]


def _split(name: str, split: str, n: int) -> slice:
    if split not in SPLITS[name]:
        raise ValueError(f"unknown split {split!r} for {name}; choose from {SPLITS[name]}")
    if split == "all" or name != "2wikimultihopqa":  # HotpotQA: test = all; MuSiQue: dev = all
        return slice(0, n)
    if n <= DEV_SIZE_2WIKI:
        raise ValueError(f"{name} has {n} questions: too few for a dev/test split")
    return slice(0, DEV_SIZE_2WIKI) if split == "dev" else slice(DEV_SIZE_2WIKI, n)


def _check_gold(labels: list[Label], qs: list[Question], passages: set[str], where: Path) -> None:
    for q, lab in zip(qs, labels):
        if not lab.gold:
            raise ValueError(f"{where}: question {q.qid!r} has no gold passage")
        if not lab.gold <= passages:
            raise ValueError(f"{where}: question {q.qid!r} has gold passages not in the corpus")


_CMP = re.compile(r"(, .+ or .+\?$)|(^(Are|Is|Do|Did|Were|Was) (both|the)\b)"
                  r"|(^(Are|Do|Did|Were) .+ and .+ (both|the same|from the same))")
_BRIDGE = re.compile(r"\b(directors?|composers?|performers?|producers?|creators?|authors?|"
                     r"father|mother|spouse)\b")
_INFER = re.compile(r"\b(grand(father|mother|son|daughter|child|parent)s?|[a-z]+-in-law|uncle|"
                    r"aunt|nephew|niece|step(mother|father|son|daughter))\b")


def twowiki_type(question: str) -> str:
    """2WikiMultiHopQA's question type (comparison, bridge_comparison, inference,
    compositional) recovered from its question templates: the sample carries no type
    field. A label for reports only, never shown to a retriever. On the 1,000 questions
    it puts exactly the 235 four-gold questions in bridge_comparison."""
    q = question.strip()
    if _CMP.search(q):  # relation words are lower case; titles in the questions are not
        return "bridge_comparison" if _BRIDGE.search(q) else "comparison"
    return "inference" if _INFER.search(q) else "compositional"


def load_2wiki(root: Path, split: str) -> Dataset:
    """2WikiMultiHopQA: corpus list of {title, text}; gold = passages of supporting titles."""
    d = root / "2wikimultihopqa"
    corpus = _read_json(d / "corpus.json")
    docs = _documents([(p["title"], p["text"]) for p in corpus], d / "corpus.json")
    by_title = {doc.title: doc.title + "\n" + doc.text for doc in docs}
    recs = _read_json(d / "questions.json")
    recs = recs[_split("2wikimultihopqa", split, len(recs))]
    qs, labels = [], []
    for r in recs:
        missing = [t for t in r["supporting_facts"] if t not in by_title]
        if missing:
            raise ValueError(f"{d}: question {r['id']!r}: supporting titles not in corpus: {missing}")
        qs.append(Question(str(r["id"]), r["question"]))
        labels.append(Label(frozenset(by_title[t] for t in set(r["supporting_facts"])),
                            twowiki_type(r["question"])))
    chunks = _make_chunks(docs)
    _check_gold(labels, qs, set(by_title.values()), d)
    return Dataset("2wikimultihopqa", split, docs, chunks, qs, labels)


def load_hotpotqa(root: Path, split: str) -> Dataset:
    """HotpotQA sample: corpus {title: [sentences]}; gold from context of supporting titles."""
    d = root / "hotpotqa_train"
    corpus = _read_json(d / "corpus.json")
    docs = _documents([(t, "".join(s)) for t, s in corpus.items()], d / "corpus.json")
    recs = _read_json(d / "questions.json")
    recs = recs[_split("hotpotqa_train", split, len(recs))]
    qs, labels = [], []
    for r in recs:
        g = {sf[0] for sf in r["supporting_facts"]}
        gold = frozenset(t + "\n" + "".join(s) for t, s in r["context"] if t in g)
        qs.append(Question(str(r["_id"]), r["question"]))
        labels.append(Label(gold, str(r["type"])))
    chunks = _make_chunks(docs)
    _check_gold(labels, qs, {doc.title + "\n" + doc.text for doc in docs}, d)
    return Dataset("hotpotqa_train", split, docs, chunks, qs, labels)


def load_musique(root: Path, split: str) -> Dataset:
    """MuSiQue dev sample: corpus list of {title, text} whose titles repeat (several
    paragraphs of one page); gold = the passages at ``gold_ids``; type = ``"<n>hop"``.
    Each record is its own document (``doc_id`` = its corpus index) with its page title."""
    d = root / "musique_dev"
    corpus = _read_json(d / "corpus.json")
    docs = [Document(str(i), p["title"], p["text"]) for i, p in enumerate(corpus)]
    passages = [doc.title + "\n" + doc.text for doc in docs]
    if len(set(passages)) != len(passages):
        raise ValueError(f"{d}: (title, text) pairs are not unique")
    recs = _read_json(d / "questions.json")
    recs = recs[_split("musique_dev", split, len(recs))]
    qs, labels = [], []
    for r in recs:
        if any(not 0 <= i < len(docs) for i in r["gold_ids"]):
            raise ValueError(f"{d}: question {r['id']!r}: gold ids outside the corpus")
        qs.append(Question(str(r["id"]), r["question"]))
        labels.append(Label(frozenset(passages[i] for i in r["gold_ids"]), f"{r['n_hops']}hop"))
    chunks = _make_chunks(docs)
    _check_gold(labels, qs, set(passages), d)
    return Dataset("musique_dev", split, docs, chunks, qs, labels)


_LOADERS = {"2wikimultihopqa": load_2wiki, "hotpotqa_train": load_hotpotqa,
            "musique_dev": load_musique}


def load_dataset(name: str, split: str, data_dir: str | os.PathLike | None = None) -> Dataset:
    """Load ``name`` (one of :data:`DATASETS`) restricted to ``split``."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose from {DATASETS}")
    root = resolve_data_dir(data_dir)
    return _LOADERS[name](root, split)
