"""Plain records that flow through the pipeline: chunks in, extractions out.

Data flows one way (docs/architecture.md §1): documents -> :class:`Chunk` -> :class:`Extraction`
(segments of a topic sentence and its entity states) -> symbolic index arrays.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Chunk:
    """One retrieval unit. ``text`` is what is embedded and returned.

    ``chunk_id`` is stable: it depends only on ``doc_id``, the span and the text.
    ``start``/``end`` are character offsets of the chunk in its document's text.
    """

    chunk_id: str
    doc_id: str
    title: str
    text: str
    start: int
    end: int
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Segment:
    """One topic hyperedge (STITCH-RAG §3.2): a knowledge sentence and its entities.

    ``entities`` holds ``(name, description)`` pairs; the description is the
    context-specific one for this chunk (psi in the paper).
    """

    topic: str
    entities: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Extraction:
    """The extraction of one chunk. ``error`` is set (and ``segments`` empty)
    when the chunk's extractor output stayed unusable: a recorded skip.

    ``ner``: ``(surface text, label)`` of every named entity the extractor's NER found in
    the chunk, in text order (the offline spaCy extractor records them; CODA's offline
    type discovery reads them instead of running spaCy again, docs/architecture.md §7);
    None: not recorded (another extractor, or an index saved before they were)."""

    segments: tuple[Segment, ...]
    error: str | None = None
    ner: tuple[tuple[str, str], ...] | None = None


def chunk_passage(chunk: Chunk) -> str:
    """The text embedded for a chunk: ``title + "\\n" + text`` when it has a title."""
    return f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text
