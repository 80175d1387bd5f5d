"""The name key phi for the build side: re-exported from :mod:`hyperrag_fast.lexical`,
where the query side's name matching lives (one definition, docs/architecture.md §2)."""
from .lexical import normalize_name

__all__ = ["normalize_name"]
