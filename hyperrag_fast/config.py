"""Configuration: every query option, both presets, candidate budgets, and (re-exported from
:mod:`.settings`) ANN parameters, how an index build runs, CODA's options and the LLM run-time defaults.

The API (:class:`QueryOptions` defaults), the CLI (its option defaults), ``ask``, ``demo``,
``eval`` and the benchmarks all read this module; nothing else holds a default. A bare
options object is the library default (:data:`TUNED`, chosen on the 2WikiMultiHopQA dev
split); the paper's values only by name: :data:`PAPER`, ``StitchOptions.paper()``,
``HybridOptions.paper()`` (STITCH-RAG §3.3 / Alg. 1; docs/architecture.md §6).
No imports of query or build code: a leaf every layer may read.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .settings import (  # noqa: F401  (part of config: read them from here)
    BACKENDS, ANN_STORAGES, CHUNK_VECTORS, DEFAULT_CHUNK_VECTORS, EXACT_THRESHOLD, MERGES,
    DEFAULT_MERGE, DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP, LLM_TIMEOUT_S, LLM_CONCURRENCY,
    EVAL_LLM_CONCURRENCY, EMBED_TIMEOUT_S, LOCK_TIMEOUT_S, MODEL_CACHE_ENV, DAMAGED_GRAPHS,
    CODA_LAYER_MAJOR, CODA_LAYER_MAJOR_BLOCK, CODA_LAYER_MAJOR_ENV, DEFAULT_DAMAGED_GRAPH, AnnParams, BuildOptions, CodaOptions, _one_of, EXACT_CODES_MIN_ROWS,
    CODA_ALIGNS, CODA_CALIBRATIONS, CODA_PAPER, CODA_EXACT, LINK_FEATURES, TOP_LINKS, BRIDGE_TITLE_SOURCES, GRAPH_MIXES, RANK_SPLITS, FastRPParams,
)

#: enumerated option values (the kernel codes are in ``hyperrag_fast.kernels.params``)
DECAYS = ("tanh", "exp", "sigmoid")
PPRS = ("none", "power", "push", "factored", "auto")
ALPHAS = ("ratio", "fixed", "log")
WEIGHTS = ("log1p", "idf")
GRAPH_WEIGHTS = ("uniform", "inverse_size")
PRIORS = ("continuous", "binary")
SEED_MODES = ("none", "ngram")
HOP_WEIGHTS = ("uniform", "sim")
#: a(v) = (A + a_space + a_time) / 3: the mean of the three STIBP channels (STITCH-RAG §3.3),
#: also when an ablation turns a channel off
STIBP_DIVISOR = 3.0
#: STITCH-RAG §3.3 / Alg. 1 as published (``StitchOptions.paper()``): the fields that differ from the library defaults
_PAPER_STITCH = dict(delta=0.5, lam=0.3, damping=0.85, alpha="ratio", group_weight="log1p",
                     temporal_max_group=math.inf, temporal_from_space=0.0,
                     graph_max_group=math.inf, graph_weight="uniform", ppr="power", tol=1e-6)
#: no query-side signal (``HybridOptions.paper()``)
_PAPER_HYBRID = dict(seeds="none", seed_value=1.0, seed_max_group=math.inf, bm25_weight=0.0,
                     k_bm25=0, ngram_min_words=1, title_words=False, hop_chunks=0,
                     hop_value=1.0, hop_max_group=2, hop_weight="sim", title_chunks=0.0,
                     hop_titles=False, rank_weights=(), title_top=0, graph_gate=False,
                     hop_idf=0.0, title_max=0, hop_bridge=0.0, hop_bridge_max=20, hop_bridge_chunks=1,
                     hop_rounds=1, hop_bridge_titles=False, mmr=0.0, hop_dense=0, hop_dense_weight=0.0,
                     hop_query=0, hop_query_bm25=0, hop_query_weight=0.0, rank_links=(),
                     graph_mix="off", rank_split="off")

@dataclass(frozen=True)
class StitchOptions:
    """Options of one STITCH query. Defaults = the library's dev-tuned values (:data:`TUNED`,
    docs/architecture.md §6); the paper's constants (STITCH-RAG §3.3 / Alg. 1) only by name:
    :meth:`paper`, :data:`PAPER_STITCH`.

    delta: activation threshold; lam: weight of max(0, sim(q, c)) in the prior;
    damping: PPR d; top_k: chunks returned; decay: f(alpha dt), "tanh" = exp(-tanh),
    "exp" = exp(-x), "sigmoid" = 2/(1+e^x) (Tables 8-9); alpha: "ratio" = n_u / n_bar,
    "fixed" = ``alpha_value`` (the setting of Proposition 2, which tests/test_propositions.py
    checks; in no preset), "log" = ln(1 + n_u / n_bar); spatial / temporal: the two STIBP
    channels, a(v) = (A + a_space + a_time) / 3 (:data:`STIBP_DIVISOR`); prior: "continuous" (paper) or "binary" 1[Score > 0];
    group_weight: projection weight, "log1p" = ln(1 + N_v) (paper), "idf" =
    ln(N_C / chunks of the group); temporal_max_group: groups with more
    states skip temporal bridging; temporal_from_space: beta > 0 makes spatially bridged
    nodes temporal sources with strength beta * a_space (ours, two hops; 0 = paper);
    graph_max_group: groups spanning more chunks make no
    chunk-graph edges; graph_weight: "uniform" (paper) or "inverse_size"; ppr: "power"
    (paper: power iteration to max-abs-change < tol, stopped earlier once its top-k order
    is certified equal to the exact solve's, ``kernels.ppr.ppr_power_topk``), "push"
    (local forward push, per-node threshold lowered until the top-k order is certified,
    else down to r(v) <= tol * wsum(v), every score then within tol * wsum(v);
    ``kernels.ppr_local``), "factored" (the same power iteration, same results
    to rounding, on the chunk-group incidences instead of the deduplicated arcs: a name
    group of s chunks costs s, not s (s - 1); needs graph_weight "inverse_size";
    ``kernels.ppr_factored``), "auto" (push or power by the measured rule
    :func:`ppr_solver`) or "none" (rank by prior).
    """

    delta: float = 0.85
    lam: float = 0.3
    damping: float = 0.2
    top_k: int = 8
    decay: str = "tanh"
    alpha: str = "log"
    alpha_value: float = 1.0
    spatial: bool = True
    temporal: bool = True
    prior: str = "continuous"
    group_weight: str = "idf"
    temporal_max_group: float = 50
    temporal_from_space: float = 2.0
    graph_max_group: float = 20
    graph_weight: str = "inverse_size"
    ppr: str = "power"
    tol: float = 1e-6
    max_iter: int = 10_000

    def __post_init__(self) -> None:
        _one_of("decay", self.decay, DECAYS)
        _one_of("alpha", self.alpha, ALPHAS)
        _one_of("prior", self.prior, PRIORS)
        _one_of("group_weight", self.group_weight, WEIGHTS)
        _one_of("graph_weight", self.graph_weight, GRAPH_WEIGHTS)
        _one_of("ppr", self.ppr, PPRS)
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
        if self.alpha == "fixed" and not self.alpha_value >= 0:
            raise ValueError("alpha_value must be >= 0")

    @classmethod
    def paper(cls, **changes) -> "StitchOptions":
        """STITCH-RAG exactly as published (§3.3): delta .5, lambda .3, d .85, alpha ratio,
        ln(1 + N_v) group weights, no group caps, uniform arcs, power PPR."""
        return cls(**{**_PAPER_STITCH, **changes})

    def replace(self, **changes) -> "StitchOptions":
        return replace(self, **changes)


@dataclass(frozen=True)
class HybridOptions:
    """The query-side signals (docs/architecture.md §5). Defaults = the library's dev-tuned
    values (:data:`TUNED`); every signal off (the paper) only by name: :meth:`paper`.

    seeds: "none"; "ngram" = every word n-gram (n <= 6) of the question whose normalised form is a
    name-group key. n-grams shorter than ``ngram_min_words`` words are not matched unless, with
    ``title_words``, they are the name of a passage title (a one-word title). Matched groups spanning
    more than ``seed_max_group`` chunks are not seeded; their states get A(v) >= ``seed_value``.
    bm25_weight: the prior term bm25_weight * s / max(s) over the ``k_bm25`` best BM25 chunks, which also join C0.

    hop_chunks > 0 runs a second round (ours, docs/architecture.md §5): the names in the first round's
    ``hop_chunks`` best chunks that span at most ``hop_max_group`` chunks become seeds (A(v) >=
    hop_value x weight) and STITCH runs again on the same candidates. hop_weight "uniform" = 1;
    "sim" = max(0, sim(q, v)) / max over the hop chunk's states (the name the question asks about).
    hop_idf > 0 (ours, issue 21): a second-round seed of a group of n_g chunks (of N_C) is
    scaled by (ln(1 + N_C / n_g) / ln(1 + N_C)) ** hop_idf (a name of many chunks lifts less).
    hop_bridge > 0 (ours, issue 21): the second round's candidates also hold the chunks
    of the bridge names of the first round's ``hop_bridge_chunks`` top chunks (a chunk's
    name groups that neither the question nor its own title names, spanning at most
    ``hop_bridge_max`` chunks), each with the prior term hop_bridge x hop_bridge_decay ** j (j = 0 for
    the top source) x (the group's ``hop_idf`` weight at exponent 1, x the "sim" weight) x max(0, sim(q, c));
    a source j >= 1 counts only if its first-round score >= hop_bridge_near x the top's (issue 21, §5).
    hop_rounds > 1, further bridge rounds from the best chunk not yet a source, each only while the last round's
    two top chunks hold at most hop_round_cover of the question's idf-weighted terms (session 18, docs/architecture.md
    §5, "A further hop round"; 1 = always; ``engine.later_rounds``; bge-small 2 at .4, session 19). Off in both
    presets (issue 21, lost on the dev families; ``methods/offpreset.py``): hop_bridge_titles, bridges also from each named title's most similar chunk; hop_dense,
    that many chunks nearest q + v(top chunk) (prior term hop_dense_weight x sim); mmr > 0,
    the ranker's top-k by maximal marginal relevance (mu = mmr); hop_query / hop_query_bm25,
    the chunks nearest / BM25-best for "question + the top chunk's best bridge name" (prior term hop_query_weight x sim or score share; one more embed call).
    hop_titles: the second round also starts from the chunks whose title the question names (``title_chunks``), so a question naming two pages carries both bridges.

    title_chunks > 0 (ours, docs/architecture.md §5): a chunk whose whole title the
    question contains (name keys; a disambiguator such as "(song)" included, and a title
    inside a longer matched title dropped) joins C0 with its share of the prior term
    title_chunks: a title's term is split over its chunks by max(0, sim(q, c)).
    title_top > 0: only each named title's ``title_top`` chunks most similar to q join
    (a page of many paragraphs; 0 = all of them; a one-chunk title is unchanged).

    rank_weights (ours, off = empty): the final ranking is bias + w . x over C_q's
    per-chunk features x (``methods.stitch.FEATURES``: prior and PPR shares and ranks,
    dense rank, similarity, STIBP score, BM25 and title terms, then the ``rank_links``
    columns), weights ``(bias, *w)`` learned on the dev families (``benchmarks/train_ranker.py``).
    rank_links (ours, issue 21): named :data:`LINK_FEATURES` columns appended to x;
    "bridge_title" = a chunk whose page's title is a bridge name of one of the first round's
    :data:`BRIDGE_TITLE_SOURCES` top chunks, "bridge_title_words" = the same when title and
    name contain one another as whole words (``lexical.GroupLookup.bridge_titles``); :data:`TOP_LINKS` (session 17,
    docs/architecture.md §5, "Ranker features inside C_q"): read off the first round's top chunk (``lexical.top_links``).
    graph_mix (ours, issue 21; docs/architecture.md §5, "Graph floor"): the ranker's PPR
    share and rank columns become g x graph + (1 - g) x prior with a per-query g in [0, 1]:
    "prior_flat" g = 1 - max I / sum I, "ppr_focus" g = min(1, (max pi / sum pi) /
    (max I / sum I)), "prior_only" g = 0 (the ranker on the prior alone), "off" = the columns as they are (``methods.stitch.graph_mixed``).
    rank_split (session 20; docs/architecture.md §5, "Question style split"): the ranker's columns ("all") or its rank_links columns ("links")
    appear twice, the copy x u, u = 1 when the question names no page title (an unnamed bridge): weights per question style (``engine.style_split``).
    wide_chunks > k_chunks (issue 21; docs/architecture.md §5, "Candidate recall"): with a flat first-round
    prior (max p(c) <= wide_flat) round two also gets the similarity ranks k_chunks..wide_chunks.
    Off in both presets (issue 21): title_max > 0, a chunk whose page already has ``title_max``
    chunks ranked above it moves after every chunk that does not (order kept within both
    parts); graph_gate, without ``rank_weights`` C_q ranked by (1 - g) prior / max(prior) +
    g pi / max(pi), g = 1 - max(prior) / sum(prior) (docs/architecture.md §5). Removed after
    measurement (issue 22; benchmarks/README.md): spaCy NER seeds, rare single-word names, accent/article near-matches and embedded question phrases (lost or tied on the dev families)."""

    seeds: str = "ngram"
    seed_value: float = 1.0
    seed_max_group: float = 2
    bm25_weight: float = 0.1
    k_bm25: int = 20
    ngram_min_words: int = 2
    title_words: bool = True
    hop_chunks: int = 1
    hop_value: float = 1.0
    hop_max_group: float = 2
    hop_weight: str = "sim"
    title_chunks: float = 0.3
    hop_titles: bool = True
    rank_weights: tuple[float, ...] = (
        -2.890963, 0.884091, 0.884091, 5.467172, 5.467172, 2.317221, 3.374416, 0.158688, 0.0,
        8.772217, 5.75218, 2.905036, 2.706654, 6.566655)
    title_top: int = 0
    graph_gate: bool = False
    hop_idf: float = 0.0
    title_max: int = 0
    hop_bridge: float = 1.0
    hop_bridge_max: float = 20
    hop_bridge_chunks: int = 1
    hop_bridge_decay: float = 1.0
    hop_bridge_near: float = 0.0
    hop_rounds: int = 1
    hop_round_cover: float = 1.0
    hop_bridge_titles: bool = False
    mmr: float = 0.0
    hop_dense: int = 0
    hop_dense_weight: float = 0.0
    hop_query: int = 0
    hop_query_bm25: int = 0
    hop_query_weight: float = 0.0
    rank_links: tuple[str, ...] = ("bridge_title", "bridge_title_words", "residual_cover", "residual_cover2")
    graph_mix: str = "prior_only"
    rank_split: str = "off"
    wide_chunks: int = 0
    wide_flat: float = 1.0

    def __post_init__(self) -> None:
        if self.title_top < 0:
            raise ValueError("title_top must be >= 0")
        if not self.hop_bridge >= 0 or not self.hop_bridge_max >= 1 or self.hop_bridge_chunks < 1:
            raise ValueError("hop_bridge must be >= 0, hop_bridge_max and hop_bridge_chunks >= 1")
        if self.title_max < 0 or not self.hop_idf >= 0 or self.hop_rounds < 1 or min(
                self.hop_dense, self.hop_dense_weight, self.mmr, self.hop_query, self.hop_query_bm25,
                self.hop_query_weight, self.wide_chunks, self.wide_flat, self.hop_bridge_decay, self.hop_bridge_near, self.hop_round_cover) < 0:
            raise ValueError("title_max, hop_idf, hop_dense(_weight), hop_query*, mmr, wide_* >= 0; hop_rounds >= 1")
        if any(n not in LINK_FEATURES for n in self.rank_links) or len(set(self.rank_links)) < len(self.rank_links):
            raise ValueError(f"rank_links: distinct names of {LINK_FEATURES}")
        if self.rank_weights and not all(math.isfinite(w) for w in self.rank_weights):
            raise ValueError("rank_weights must be finite")
        _one_of("hop_weight", self.hop_weight, HOP_WEIGHTS)
        _one_of("graph_mix", self.graph_mix, GRAPH_MIXES)
        _one_of("rank_split", self.rank_split, RANK_SPLITS)
        if self.hop_chunks < 0 or self.hop_value < 0 or not self.hop_max_group >= 1:
            raise ValueError("hop_chunks and hop_value must be >= 0 and hop_max_group >= 1")
        if self.seeds not in SEED_MODES:
            raise ValueError(f"seeds must be one of {SEED_MODES}, got {self.seeds!r}")
        if self.ngram_min_words < 1:
            raise ValueError("ngram_min_words must be >= 1")
        if self.seed_value < 0 or self.bm25_weight < 0 or self.k_bm25 < 0 or not self.title_chunks >= 0:
            raise ValueError("seed_value, bm25_weight, k_bm25 and title_chunks must be >= 0")

    @classmethod
    def paper(cls, **changes) -> "HybridOptions":
        """No query-side signal (STITCH-RAG as published): no seeds, no BM25 term, no titles,
        no second round."""
        return cls(**{**_PAPER_HYBRID, **changes})


# ------------------------------------------------------------------ PPR solver rule
#: ppr="auto" runs the local push (``kernels.ppr_local``) on a chunk graph of at least
#: PUSH_MIN_CHUNKS chunks whose prior is nonzero on at most ``push_max_fraction(d)`` of
#: them, else the power iteration. Measured single-threaded, both solvers on the same
#: graphs and priors in one run, both with the exact solve's top-8 in order (wall clock;
#: CPU time equals it): ``OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python
#: benchmarks/bench_ppr.py --sizes 1000 10000 100000 --repeats 5 --prior-nnz 300 0 --out
#: ppr.json ppr_dense_prior.json --graph-cache indexes/push_graphs`` (d1d49c3, load 8-9;
#: the local push with its refined certificate, timed from the prior's nonzeros). With 300
#: prior chunks push wins at 9,969 chunks (3.0 %) at every damping (d .85 / .5 / .2: 0.94
#: vs 2.52, 0.14 vs 0.98, 0.082 vs 0.42 ms), at 99,658 chunks (0.62 vs 115, 0.13 vs 19.2,
#: 0.042 vs 5.9 ms) and at 1M (merged run, benchmarks/README.md: 5.2 vs 2,693, 0.20 vs 436, 0.10 vs 56 ms);
#: at 1,009 chunks it loses at d .85 / .5 (0.98 vs 0.17, 0.14 vs 0.082 ms) and ties at .2 (0.043 vs 0.043). With a prior on every chunk (as a query's prior over C_q is) push loses at
#: 1,009 and 9,969 chunks at every damping (10k: 7.8 vs 4.0, 2.8 vs 1.0, 0.70 vs 0.45 ms)
#: and at 99,658 chunks with d .5 / .2 (24.3 vs 21.3, 18.7 vs 9.2 ms); it wins there at
#: d .85 (22.0 vs 82.3 ms), a single point the rule leaves to power. Between the winning
#: 3 % and the losing 100 % the crossover is not measured. A 2Wiki query (|C_q| ~ 50, the
#: whole corpus 6,119 chunks) therefore always runs power: on the corpora the presets were
#: measured on "auto" is "power", so the presets keep the name their recorded results carry.
PUSH_MIN_CHUNKS = 9_969
#: (largest damping, largest prior support / chunks) pairs, by increasing damping
PUSH_MAX_FRACTION = ((1.0, 300 / 9_969),)


def push_max_fraction(damping: float) -> float:
    """The largest prior support (as a fraction of the chunks) for which ppr="auto" pushes."""
    for d_max, frac in PUSH_MAX_FRACTION:
        if damping <= d_max:
            return frac
    return 0.0


def ppr_solver(damping: float, n_chunks: int, prior_nnz: int) -> str:
    """"push" or "power": the solver ppr="auto" runs (the rule above)."""
    push = n_chunks >= PUSH_MIN_CHUNKS and prior_nnz <= push_max_fraction(damping) * n_chunks
    return "push" if push else "power"


# ------------------------------------------------------------------ BLAS threads
#: Threads NumPy's BLAS may use while a query runs (0: as the process set it): the ``hyperrag query`` process starts BLAS so (unless OPENBLAS_NUM_THREADS is set), and
#: ``CodaRetriever.retrieve`` limits BLAS to it meanwhile, a build keeping every core
#: (docs/architecture.md §3, "BLAS threads").
QUERY_BLAS_THREADS = 1


# ------------------------------------------------------------------------ presets
#: STITCH-RAG §3.3 constants: delta .5, lambda .3, d .85, tanh decay, power PPR; no question seeds, no BM25 term. Only by name.
PAPER_STITCH = StitchOptions.paper()
PAPER_HYBRID = HybridOptions.paper()

#: The dev-tuned configuration (``TUNED``, the MiniLM preset), chosen on the three dev
#: families by the worst family's lift over dense; its history, figures and tuning files:
#: docs/architecture.md §6, "How the presets were chosen". Session 14: the 16-point grid of ``benchmarks/
#: quality_grid.py`` (tuning file ``experiments/results/quality_grid/quality_grid_minilm.json``), ``graph_mix="prior_only"`` (PPR picks the first hop's sources,
#: the final score is the ranker's on the prior), the ranker at C = 0.01; session 17 (``ranker_top_links_minilm.json``):
#: + "residual_cover"; session 19 (``all_options_minilm.json``, docs §6 "The selection rule"): + "residual_cover2",
#: the ranker at C = .001 with train_ranker.Prior("all", 1). The values are the dataclass defaults.
TUNED_STITCH = StitchOptions()
TUNED_HYBRID = HybridOptions()
#: candidate budgets K_V (entity states) and K_C (chunks), STITCH-RAG §3.3 step 1
TUNED_K_NODES = 25
TUNED_K_CHUNKS = 50
#: the method the API and the CLI run when none is named
DEFAULT_METHOD = "stitch"
#: the names ``hyperrag_fast.methods.METHODS`` registers (tests/test_layout.py checks), so the
#: CLI's parser offers them without importing the query kernels
METHOD_NAMES = (
    "binary_ppr", "binary_prior", "bm25", "coda", "coda_base", "coda_lexical_all", "coda_window",
    "coda_no_contextual", "coda_no_cover", "coda_no_elimination", "coda_no_functional", "coda_no_semantic",
    "coda_paper", "coda_paper_base", "coda_paper_no_contextual", "coda_paper_no_elimination",
    "coda_paper_no_functional", "coda_paper_no_semantic", "decay_exp", "decay_sigmoid", "decay_tanh",
    "dense", "merge_full", "merge_none", "merge_semi", "no_ppr", "no_spatial", "no_stibp",
    "no_temporal", "stitch", "stitch_consolidated", "stitch_paper")
#: the embedder kind (``embed.registry.make_embedder``) the CLI and the eval harness use when none is named
DEFAULT_EMBEDDER = "minilm"


@dataclass(frozen=True)
class QueryOptions:
    """One query's configuration: STITCH options, the query-side signals (``hybrid``,
    docs/architecture.md §5), candidate budgets K_V (``k_nodes``) and K_C (``k_chunks``)
    and the method name (checked against the registry when the query runs). Defaults =
    :data:`TUNED`; :data:`PAPER` is the published method."""

    stitch: StitchOptions = field(default_factory=StitchOptions)
    hybrid: HybridOptions = field(default_factory=HybridOptions)
    k_nodes: int = TUNED_K_NODES
    k_chunks: int = TUNED_K_CHUNKS
    method: str = DEFAULT_METHOD

    def __post_init__(self) -> None:
        for name in ("k_nodes", "k_chunks"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
        if not isinstance(self.method, str):
            raise ValueError(f"method must be a name, got {self.method!r}")

    @property
    def top_k(self) -> int:
        return self.stitch.top_k

    def with_top_k(self, k: int) -> "QueryOptions":
        return replace(self, stitch=self.stitch.replace(top_k=k))


#: the library default (API ``QueryOptions()``, CLI ``hyperrag query``): method ``stitch``
TUNED = QueryOptions()
#: STITCH-RAG as published (method ``stitch_paper``: the paper's constants, no signals)
PAPER = QueryOptions(stitch=PAPER_STITCH, hybrid=PAPER_HYBRID, method="stitch_paper")

#: The preset per shipped embedder (issue 21; docs/architecture.md §6), each chosen with that
#: embedder's indexes on the three dev families by the same rule; ``TUNED`` stays MiniLM's.
#: bge-small (session 14, ``quality_grid_bge.json``): delta .85, the named-title term 1, ``hop_bridge`` 1,
#: ``graph_mix="prior_only"``, the ranker at C = 0.01; session 17 (``ranker_top_links_bge.json``, then
#: ``joint_top_links_title_top_bge.json``): residual_cover, hop_rank, top_bridge, title_top 1; session 19: ``hop_rounds``
#: 2 gated at .4; session 20 (``all_options_s20_bge.json``): ``rank_split="all"``, ranker C = .001 under the prior.
TUNED_BGE = QueryOptions(
    stitch=TUNED_STITCH,
    hybrid=replace(TUNED_HYBRID, title_chunks=1.0, title_top=1, hop_rounds=2, hop_round_cover=0.4, rank_links=(
        "bridge_title", "bridge_title_words", *TOP_LINKS), rank_split="all", rank_weights=(
        -2.381973, 1.0678, 1.0678, 4.748015, 4.748015, 3.173282, 9.777291, 0.477713, 0.89362, 8.984029,
        6.952592, 2.450766, 4.922505, 0.667049, 1.676949, -0.010306, -0.010306, -1.35291, -1.35291, 0.405804,
        -1.132037, -2.979633, -0.131566, 0.0, -5.956708, -0.861264, 0.377396, -0.081167, 0.357395)))
PRESETS = {"minilm": TUNED, "bge-small": TUNED_BGE}
#: embedder name (an index manifest's ``embedder.name``) prefix -> preset key
PRESET_NAMES = (("all-MiniLM-L6-v2", "minilm"), ("bge-small-en-v1.5", "bge-small"))


def preset_for(embedder_name: str | None) -> QueryOptions:
    """The preset of the embedder an index was built with (its manifest's
    ``embedder.name``): :data:`PRESETS` by name prefix; any other embedder (hashing, an
    OpenAI-compatible service) gets :data:`TUNED`, the MiniLM preset."""
    for prefix, kind in PRESET_NAMES:
        if embedder_name and embedder_name.startswith(prefix):
            return PRESETS[kind]
    return TUNED


