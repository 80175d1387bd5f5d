"""``hyperrag serve``: the query side as an HTTP service (docs/architecture.md §11).

Modules: :mod:`.options` (request -> ``QueryOptions``, validated by ``config``),
:mod:`.pool` (bounded worker pool and admission queue), :mod:`.registry` (one live
index per name, following its ``CURRENT``), :mod:`.metrics` (Prometheus),
:mod:`.app` (the FastAPI routes) and :mod:`.main` (uvicorn, the CLI entry). This
package file imports nothing heavy: :func:`require` checks the ``serve`` extra first.
"""
from __future__ import annotations

import importlib.util
from typing import Sequence

EXTRA = "serve"
NEEDED = ("fastapi", "uvicorn", "prometheus_client")  #: what the extra installs


def require(needed: Sequence[str] = NEEDED) -> None:
    """ImportError naming the ``serve`` extra unless the packages ``needed`` (the extra's)
    can be imported (``importlib.util.find_spec``: a package set to None in
    ``sys.modules`` counts as missing, as ``import`` treats it)."""
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(f"hyperrag serve needs the {EXTRA} extra (missing: "
                          f"{', '.join(missing)}): pip install \"hyperrag_fast[{EXTRA}]\"")
