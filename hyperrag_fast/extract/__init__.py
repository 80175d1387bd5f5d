"""Extractors: chunk text -> topic segments with entity states."""
from .base import Extractor

__all__ = ["Extractor"]
