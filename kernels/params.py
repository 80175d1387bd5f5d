"""Layout of the float64 parameter vector the STITCH query kernel reads.

One flat array keeps the kernel signature stable (one cached compilation) while the
Python layer exposes every option by name (``hyperrag_fast.config.StitchOptions``; the
presets, the paper's included, live there only: docs/architecture.md §6).
"""
from __future__ import annotations

DELTA = 0  # activation threshold delta (STITCH-RAG §3.3)
LAMBDA = 1  # weight of max(0, sim(q, c)) in the prior
DAMPING = 2  # PPR damping d
DECAY = 3  # 0: exp(-tanh(a dt)) (paper), 1: exp(-a dt), 2: sigmoid gate 2/(1+exp(a dt))
SPATIAL = 4  # 1: spatial channel on
TEMPORAL = 5  # 1: temporal channel on
AGG_DIV = 6  # divisor of A + a_space + a_time (paper: 3, the mean)
PRIOR = 7  # 0: continuous I(c) (paper), 1: binary 1[Score(c) > 0]
TEMPORAL_MAX_GROUP = 8  # groups with more members skip temporal bridging (inf: none skip)
GRAPH_MAX_GROUP = 9  # groups in more chunks make no chunk-graph edges (inf: all do)
GRAPH_WEIGHT = 10  # 0: unweighted deduplicated adjacency (paper), 1: sum of 1/|chunks of g|
PPR = 11  # 0: none (rank by prior), 1: power iteration (paper; certified top-k stop), 2: forward push,
#          3: power iteration on the factored chunk graph (inverse_size weights only), 4: auto
#          (local push when the graph has >= PUSH_MIN_CHUNKS chunks and at most
#          PUSH_MAX_FRACTION of them have a prior > 0, else power; rule in config.ppr_solver)
TOL = 12  # power: max-abs-change stop; push: lowest per-node threshold r(v) / wsum(v)
MAX_ITER = 13  # power-iteration cap
TOPK = 14  # number of chunks returned
TEMPORAL_FROM_SPACE = 15  # beta: spatially bridged nodes are temporal sources with beta*a_space (0: paper)
PUSH_MIN_CHUNKS = 16  # ppr auto: smallest chunk graph that runs the local push
PUSH_MAX_FRACTION = 17  # ppr auto: largest prior support / chunks that runs the local push
N_PARAMS = 18

DECAY_TANH, DECAY_EXP, DECAY_SIGMOID = 0, 1, 2
PPR_NONE, PPR_POWER, PPR_PUSH, PPR_FACTORED, PPR_AUTO = 0, 1, 2, 3, 4
