"""The dev-tuned STITCH configuration (default of ``QueryOptions``).

Chosen on the 2WikiMultiHopQA dev split only (first 200 questions); the search that
chose it is recorded in ``benchmarks/results/tuning_stitch_dev.md`` with its command
(``python benchmarks/tune_stitch.py``). The paper's constants stay available as
``StitchOptions.paper()`` / method ``stitch_paper``.
"""
from __future__ import annotations

from .hybrid import HybridOptions
from .options import StitchOptions

TUNED_STITCH = StitchOptions(
    delta=0.5,
    lam=0.3,
    damping=0.2,
    group_weight="idf",
    graph_max_group=10,
    graph_weight="inverse_size",
    ppr="push",
    tol=1e-6,
)
TUNED_HYBRID = HybridOptions(seeds="ner", seed_value=1.0, bm25_weight=0.15, k_bm25=50)
