"""STITCH query options: every constant of STITCH-RAG §3.3 by name, plus our switchable
improvements (DESIGN §8). ``StitchOptions.paper()`` is the method exactly as published."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .kernels import params as P

_DECAYS = {"tanh": P.DECAY_TANH, "exp": P.DECAY_EXP, "sigmoid": P.DECAY_SIGMOID}
_PPRS = {"none": P.PPR_NONE, "power": P.PPR_POWER, "push": P.PPR_PUSH, "factored": P.PPR_FACTORED}
_ALPHAS = ("ratio", "fixed", "log")
_WEIGHTS = ("log1p", "idf", "none")
_GRAPH_WEIGHTS = {"uniform": 0, "inverse_size": 1}
_PRIORS = {"continuous": 0, "binary": 1}


@dataclass(frozen=True)
class StitchOptions:
    """Options of one STITCH query (defaults = the paper, STITCH-RAG §3.3 / Alg. 1).

    delta: activation threshold; lam: weight of max(0, sim(q, c)) in the prior;
    damping: PPR d; top_k: chunks returned; decay: f(alpha dt), "tanh" = exp(-tanh),
    "exp" = exp(-x), "sigmoid" = 2/(1+e^x) (Tables 8-9); alpha: "ratio" = n_u / n_bar,
    "fixed" = ``alpha_value``, "log" = ln(1 + n_u / n_bar); spatial / temporal: the two
    STIBP channels; agg_divisor: a(v) = (A + a_space + a_time) / agg_divisor (3: the
    paper's mean); prior: "continuous" (paper) or "binary" 1[Score > 0];
    group_weight: projection weight, "log1p" = ln(1 + N_v) (paper), "idf" =
    ln(N_C / chunks of the group), "none" = 1; temporal_max_group: groups with more
    states skip temporal bridging; temporal_from_space: beta > 0 makes spatially bridged
    nodes temporal sources with strength beta * a_space (ours, two hops; 0 = paper);
    graph_max_group: groups spanning more chunks make no
    chunk-graph edges; graph_weight: "uniform" (paper) or "inverse_size"; ppr: "power"
    (paper: power iteration to max-abs-change < tol, stopped earlier once its top-k order
    is certified equal to the exact solve's, ``kernels.ppr.ppr_power_topk``), "push"
    (forward push, L1 error <= tol), "factored" (the same power iteration, same results
    to rounding, on the chunk-group incidences instead of the deduplicated arcs: a name
    group of s chunks costs s, not s (s - 1); needs graph_weight "inverse_size";
    ``kernels.ppr_factored``) or "none" (rank by prior).
    """

    delta: float = 0.5
    lam: float = 0.3
    damping: float = 0.85
    top_k: int = 8
    decay: str = "tanh"
    alpha: str = "ratio"
    alpha_value: float = 1.0
    spatial: bool = True
    temporal: bool = True
    agg_divisor: float = 3.0
    prior: str = "continuous"
    group_weight: str = "log1p"
    temporal_max_group: float = math.inf
    temporal_from_space: float = 0.0
    graph_max_group: float = math.inf
    graph_weight: str = "uniform"
    ppr: str = "power"
    tol: float = 1e-6
    max_iter: int = 10_000

    def __post_init__(self) -> None:
        _one_of("decay", self.decay, _DECAYS)
        _one_of("alpha", self.alpha, _ALPHAS)
        _one_of("prior", self.prior, _PRIORS)
        _one_of("group_weight", self.group_weight, _WEIGHTS)
        _one_of("graph_weight", self.graph_weight, _GRAPH_WEIGHTS)
        _one_of("ppr", self.ppr, _PPRS)
        if self.ppr == "factored" and self.graph_weight != "inverse_size":
            raise ValueError('ppr="factored" needs graph_weight="inverse_size" (additive arc weights)')
        if not 0.0 <= self.damping < 1.0:
            raise ValueError(f"damping must be in [0, 1), got {self.damping}")
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if not self.tol > 0 or self.max_iter < 1:
            raise ValueError("tol must be > 0 and max_iter >= 1")
        if not self.temporal_from_space >= 0:
            raise ValueError("temporal_from_space must be >= 0")
        if not self.agg_divisor > 0:
            raise ValueError("agg_divisor must be > 0")
        if self.alpha == "fixed" and not self.alpha_value >= 0:
            raise ValueError("alpha_value must be >= 0")

    @classmethod
    def paper(cls, **changes) -> "StitchOptions":
        """STITCH-RAG exactly as published (§3.3): delta .5, lambda .3, d .85, power PPR."""
        return replace(cls(), **changes)

    def replace(self, **changes) -> "StitchOptions":
        return replace(self, **changes)

    def to_params(self) -> np.ndarray:
        """The float64 vector the query kernel reads (layout: ``kernels.params``)."""
        p = np.zeros(P.N_PARAMS, dtype=np.float64)
        p[P.DELTA], p[P.LAMBDA], p[P.DAMPING] = self.delta, self.lam, self.damping
        p[P.DECAY] = _DECAYS[self.decay]
        p[P.SPATIAL], p[P.TEMPORAL] = float(self.spatial), float(self.temporal)
        p[P.AGG_DIV] = self.agg_divisor
        p[P.PRIOR] = _PRIORS[self.prior]
        p[P.TEMPORAL_MAX_GROUP] = self.temporal_max_group
        p[P.TEMPORAL_FROM_SPACE] = self.temporal_from_space
        p[P.GRAPH_MAX_GROUP] = self.graph_max_group
        p[P.GRAPH_WEIGHT] = _GRAPH_WEIGHTS[self.graph_weight]
        p[P.PPR] = _PPRS[self.ppr]
        p[P.TOL], p[P.MAX_ITER], p[P.TOPK] = self.tol, self.max_iter, self.top_k
        return p


def _one_of(name: str, value: str, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}, got {value!r}")


def group_weights(kind: str, group_sizes: np.ndarray, group_chunks: np.ndarray, n_chunks: int) -> np.ndarray:
    """Per-group projection weight w(g): ln(1 + N_g) (paper), IDF ln(N_C / chunks of g), or 1."""
    if kind == "log1p":
        return np.log1p(group_sizes.astype(np.float64))
    if kind == "idf":
        return np.log(max(n_chunks, 1) / np.maximum(group_chunks, 1).astype(np.float64))
    return np.ones(group_sizes.shape[0], dtype=np.float64)


def group_alphas(kind: str, value: float, group_sizes: np.ndarray) -> np.ndarray:
    """Per-group decay rate alpha: n_u / n_bar (paper), fixed, or ln(1 + n_u / n_bar)."""
    n_bar = float(group_sizes.mean()) if group_sizes.size else 1.0
    ratio = group_sizes.astype(np.float64) / max(n_bar, 1e-12)
    if kind == "ratio":
        return ratio
    if kind == "log":
        return np.log1p(ratio)
    return np.full(group_sizes.shape[0], float(value))
