"""``hyperrag serve``: the query side as an HTTP service (docs/architecture.md §11).

Modules: :mod:`.options` (request -> ``QueryOptions``, validated by ``config``),
:mod:`.pool` (bounded worker pool and admission queue), :mod:`.registry` (one live
index per name, following its ``CURRENT``), :mod:`.metrics` (Prometheus),
:mod:`.app` (the FastAPI routes) and :mod:`.main` (uvicorn, the CLI entry). This
package file imports nothing heavy: :func:`require` checks the ``serve`` extra first.
"""
from __future__ import annotations

import importlib.util

EXTRA = "serve"
_NEEDED = ("fastapi", "uvicorn", "prometheus_client")


def require() -> None:
    """ImportError naming the ``serve`` extra unless its packages are installed."""
    missing = [m for m in _NEEDED if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(f"hyperrag serve needs the {EXTRA} extra (missing: "
                          f"{', '.join(missing)}): pip install \"hyperrag_fast[{EXTRA}]\"")
