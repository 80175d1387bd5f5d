"""The extractor interface: chunks in, one :class:`Extraction` per chunk out."""
from __future__ import annotations

from typing import Callable, Protocol, Sequence, runtime_checkable

from ..records import Chunk, Extraction

#: progress callback: called with the number of chunks just finished.
Progress = Callable[[int], None]


@runtime_checkable
class Extractor(Protocol):
    """Turns chunks into topic segments with entity states (STITCH-RAG §3.2).

    ``name`` identifies the extractor and its settings (it goes into the index
    manifest and into cache keys); two extractors with the same name must give
    the same output for the same chunk text.
    """

    name: str

    def extract(
        self, chunks: Sequence[Chunk], progress: Progress | None = None
    ) -> list[Extraction]:
        """One Extraction per chunk, in order. Never raises for one bad chunk:
        an unusable chunk gives ``Extraction((), error=reason)``."""
        ...
