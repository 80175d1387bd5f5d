"""CODA (CodaRAG §3): consolidated entity-relation graph and associative retrieval.

Importing this package registers the CODA retriever methods (see :mod:`.methods`).
"""
from . import methods  # noqa: F401  (registers coda* and stitch_consolidated)
