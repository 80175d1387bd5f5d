"""Embedders: text -> L2-normalised float32 vectors."""
from .base import Embedder, l2_normalize

__all__ = ["Embedder", "l2_normalize"]
