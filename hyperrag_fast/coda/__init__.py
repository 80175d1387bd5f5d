"""CODA (CodaRAG §3): consolidated entity-relation graph and associative retrieval.

Build side: :mod:`.system` (and :mod:`hyperrag_fast.prebuilt`); query side:
:mod:`.retrieve` and the methods in :mod:`hyperrag_fast.methods.coda`. Importing this
package registers nothing.
"""
