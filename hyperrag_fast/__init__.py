"""hyperrag_fast: compiled-core multi-hop retrieval (STITCH and CODA)."""
__version__ = "0.1.0"
