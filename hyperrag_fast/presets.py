"""The dev-tuned STITCH configuration (default of ``QueryOptions``).

Chosen on the 2WikiMultiHopQA dev split only (first 200 questions) by
``python benchmarks/tune_stitch.py --index-dir indexes/2wiki --cache-dir cache``
(coordinate search from the paper's constants, objective mean of R@2/5/8; every
setting tried is in ``benchmarks/results/tuning_stitch_dev.{md,json}``). Best there:
dev R@2/5/8 .619/.790/.840 with no temporal cap; we take ``temporal_max_group=50``
(.613/.787/.839, 0.34 points lower, inside the ~1-point noise of 200 questions)
because it bounds the temporal scan of hub names, the main per-query cost
(benchmarks/results/speed.json). The paper's constants stay available as
``StitchOptions.paper()`` / method ``stitch_paper``.
"""
from __future__ import annotations

from .hybrid import HybridOptions
from .options import StitchOptions

TUNED_STITCH = StitchOptions(
    delta=0.6,
    lam=0.3,
    damping=0.2,
    alpha="log",
    group_weight="idf",
    temporal_max_group=50,
    graph_max_group=5,
    graph_weight="inverse_size",
    ppr="power",
    tol=1e-6,
)
TUNED_HYBRID = HybridOptions(seeds="ner", seed_value=0.75, seed_max_group=100,
                             bm25_weight=0.2, k_bm25=50)
#: candidate budgets K_V (entity states) and K_C (chunks)
TUNED_K_NODES = 200
TUNED_K_CHUNKS = 100
