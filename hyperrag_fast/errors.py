"""The index errors (a leaf module: the store, validation and the CLI read it)."""
from __future__ import annotations


class IndexError_(Exception):
    """Base of the index loading errors (the name avoids shadowing builtins.IndexError)."""


class IndexCorruptedError(IndexError_):
    """A file of the index directory is missing, truncated or fails its checksum."""


class IndexMismatchError(IndexError_):
    """The index was written by another format version, embedder or extractor."""


class IndexLockedError(IndexError_):
    """Another writer holds the index's lock (and did not release it within the timeout)."""


class DamagedGraphWarning(UserWarning):
    """An index was opened with ``damaged_graph="exact"`` and a usearch HNSW graph failed
    its checksum or structural check: that kind is searched exactly instead."""
