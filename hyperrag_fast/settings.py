"""Settings outside one query's options: how an index is chunked and built
(:class:`BuildOptions`), the ANN parameters (:class:`AnnParams`), CODA's options
(:class:`CodaOptions`, CodaRAG §3.3-3.4) and the run-time defaults of LLM and embedding
calls. Part of :mod:`hyperrag_fast.config`, which re-exports every name here (read them
from there); kept apart only to keep both files small. A leaf: no package imports.
"""
from __future__ import annotations

from dataclasses import dataclass

BACKENDS = ("auto", "exact", "usearch")
#: usearch HNSW vector storage; the graph's own copy of the vectors only steers the walk
#: (hits are rescored with the exact float32 matrix), so half precision halves its memory.
ANN_STORAGES = ("f16", "f32")
#: chunk (passage) vectors: "text" embeds the passage, "pooled" averages its sentences'
#: vectors and its title's (docs/architecture.md §10)
CHUNK_VECTORS = ("text", "pooled")
DEFAULT_CHUNK_VECTORS = "text"
#: default size below which exact search is used (see ``hyperrag_fast.ann``).
EXACT_THRESHOLD = 10_000
#: exact search of a matrix of at least this many rows scans its int8 codes first and
#: rescores in float32 only the rows the codes' error bound cannot rule out
#: (``kernels.dense.code_topk``: the same ids and similarities as the float32 scan, a
#: quarter of the bytes read); the codes are made at the matrix's second exact search, so
#: a one-shot query does not pay for them. 0: always scan float32.
EXACT_CODES_MIN_ROWS = 2048

#: chunking and merging of a new index (``HyperIndex.build``, ``hyperrag index``)
MERGES = ("semi", "full", "none")
DEFAULT_MERGE = "semi"
DEFAULT_MAX_TOKENS = 256
DEFAULT_OVERLAP = 0
#: LLM calls (extraction, answers, CODA's LLM steps): seconds per request, requests in flight
LLM_TIMEOUT_S = 120.0
LLM_CONCURRENCY = 8
#: answer generation and judging in the evaluation: requests in flight
EVAL_LLM_CONCURRENCY = 4
#: requests to an OpenAI-compatible embedding endpoint: seconds each
EMBED_TIMEOUT_S = 60.0
#: environment variable naming the folder of saved pre-optimised ONNX models
#: (``embed/onnx_cache.py``; default ``$XDG_CACHE_HOME/hyperrag_fast``)
MODEL_CACHE_ENV = "HYPERRAG_FAST_CACHE"
#: CODA's build step embeds the names a batch-1 ONNX encoder (bge-small) lacks
#: layer-major (``embed/layer_major.py``; docs/architecture.md §7, "Layer-major name runs"):
#: the same vectors bit for bit, the model cut once into one piece per layer (needs the
#: ``onnx`` package for the cut), blocks of ``CODA_LAYER_MAJOR_BLOCK`` names per piece.
#: On (issue 23 item 3, consolidation wall share); the environment variable
#: ``CODA_LAYER_MAJOR_ENV`` ("1" / "0") overrides it for one process.
CODA_LAYER_MAJOR = True
CODA_LAYER_MAJOR_BLOCK = 256
CODA_LAYER_MAJOR_ENV = "HYPERRAG_FAST_LAYER_MAJOR"
#: how long a writer waits for another writer of the index (0: refuse at once; < 0: forever)
LOCK_TIMEOUT_S = 0.0
#: what opening an index does with a damaged usearch HNSW graph (checksum mismatch or
#: failed structural check, ``hyperrag_fast.hnsw_check``): "error" (the default: a clear
#: IndexCorruptedError) or "exact" (search that kind exactly on its float32 vectors, with
#: a DamagedGraphWarning); ``IndexReader.open(damaged_graph=...)``, ``--damaged-graph``
DAMAGED_GRAPHS = ("error", "exact")
DEFAULT_DAMAGED_GRAPH = "error"


def _one_of(name: str, value: str, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}, got {value!r}")


@dataclass(frozen=True)
class AnnParams:
    """usearch HNSW parameters (docs/architecture.md §8) and the exact/approximate switch.

    ``backend``: "auto" (exact below ``exact_threshold`` rows, else usearch),
    "exact" or "usearch". ``expansion_search`` was tuned so recall@50 against exact
    search stays >= 0.98 on the 2Wiki dev data (tests/test_ann.py): 64 gave 0.964,
    128 gave 0.993 (usearch never searches narrower than k).
    """

    backend: str = "auto"
    exact_threshold: int = EXACT_THRESHOLD
    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 128
    threads: int = 0  # usearch build/search threads; 0 = all cores
    storage: str = "f16"  # HNSW vector storage (ANN_STORAGES); an index saved without it: f32

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.storage not in ANN_STORAGES:
            raise ValueError(f"storage must be one of {ANN_STORAGES}, got {self.storage!r}")
        for name in ("connectivity", "expansion_add", "expansion_search"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.exact_threshold < 0 or self.threads < 0:
            raise ValueError("exact_threshold and threads must be >= 0")

    def use_usearch(self, n: int) -> bool:
        if self.backend == "auto":
            return n >= self.exact_threshold
        return self.backend == "usearch"


@dataclass(frozen=True)
class BuildOptions:
    """How a build runs and, through ``chunk_vectors`` alone, what it computes.

    ``chunk_vectors``: "text" (embed each passage, ``title + "\\n" + text``) or "pooled"
    (the L2-normalised mean of the L2-normalised vectors of the chunk's topic sentences
    and its title, docs/architecture.md §10); ``None`` = "text" for a new index and the
    index's own representation for ``add`` (it is in the manifest). ``partition_docs``:
    documents per partition (memory is bounded by a partition's texts and vectors);
    ``workers``: run partitions on a local Dask cluster of that many single-threaded
    workers; ``scheduler``: the address of an existing Dask scheduler instead.
    """

    partition_docs: int = 512
    workers: int = 0
    scheduler: str | None = None
    threads_per_worker: int = 1
    chunk_vectors: str | None = None

    def __post_init__(self) -> None:
        if self.chunk_vectors is not None:
            _one_of("chunk_vectors", self.chunk_vectors, CHUNK_VECTORS)
        if self.partition_docs < 1:
            raise ValueError(f"partition_docs must be >= 1, got {self.partition_docs}")
        if self.workers < 0 or self.threads_per_worker < 1:
            raise ValueError("workers must be >= 0 and threads_per_worker >= 1")
        if self.workers and self.scheduler:
            raise ValueError("give either workers (a local cluster) or scheduler, not both")

    @property
    def distributed(self) -> bool:
        return bool(self.workers or self.scheduler)


#: CODA alignment modes and elimination calibrations (coda/retrieve.py, docs/architecture.md §7)
CODA_ALIGNS = ("count", "relevance")
CODA_CALIBRATIONS = ("raw", "zscore")
CODA_PPR_SOLVERS = ("power", "push", "local")
CODA_SIMS = ("full", "lazy")


@dataclass(frozen=True)
class CodaOptions:
    """Switches (one per pathway, for the ablations of CodaRAG Table 2) and knobs."""

    semantic: bool = True
    contextual: bool = True
    functional: bool = True
    elimination: bool = True
    k_entry: int = 10
    k_entry_relations: int = 10
    alpha: float = 0.5
    beta: float = 0.4
    tau: float = 0.35
    ppr_d: float = 0.85
    ppr_tol: float = 1e-6
    #: "power" (the published reading), "push" (kernels/ppr.py's global push), "local"
    #: (the default: a documented approximation, docs/architecture.md §7 "CODA query cost")
    ppr_solver: str = "local"
    #: ppr_solver="local": local push (hyperrag_fast.ppr.LocalPush.approx_sparse) down to
    #: this residual threshold: every score within d * ppr_eps * wsum(v) below the exact one
    ppr_eps: float = 1e-5
    #: "full": the query scored against every entity and relation (the published reading);
    #: "lazy": exact top-k scans and similarities only where read (coda/fast.py)
    sims: str = "lazy"
    #: sims="lazy" only: "all" entities are functional candidates, or only those the
    #: local push "touched" (ppr_solver="local"; an approximation)
    functional_scope: str = "touched"
    k_context: int = 10
    k_functional: int = 10
    elim_keep_frac: float = 0.5
    elim_min_sim: float = -1.0
    fill_dense: bool = True
    align: str = "relevance"
    elim_calibration: str = "zscore"
    elim_min_z: float = 1.0
    dense_weight: float = 1.0
    lexical_weight: float = 0.3
    graph_weight: float = 0.03
    dense_pool: int = 20
    align_items: str = "all"
    align_pool: str = "max"
    dedup_sim: float = 0.99
    #: a chunk's selection value gains ``fact_weight`` x its best sentence's sim with the
    #: question (docs/architecture.md §7; 0.6 since session 19, issue 23: the selection
    #: rule's pick over ``coda``'s own pool, benchmarks/results/coda_select_grid.json)
    fact_weight: float = 0.6
    diversity: float = 0.0
    #: question-term coverage of the chosen set (coda/select.py ``_cover``; docs/
    #: architecture.md §7): a chunk's selection value gains ``cover_weight`` x the idf
    #: share of the question's BM25 terms it holds that no chosen chunk holds (0 = off;
    #: 0.3 since session 19, the grid's pick as ``fact_weight``; ablation row ``coda_no_cover``)
    cover_weight: float = 0.3
    #: with ``cover_weight`` > 0, a chunk's selection value also gains ``cover_pairs`` x the
    #: share (weights idf_a x idf_b) of the question's BM25 term pairs it holds both terms
    #: of that no chosen chunk holds both of (coda/select.py ``_pairs``; docs/architecture.md
    #: §7; 0.3 since session 19, the grid's pick as ``fact_weight``)
    cover_pairs: float = 0.3
    #: "top": ``lexical_weight`` x BM25 / the best BM25 for the best ``max(dense_pool,
    #: top_k)`` BM25 chunks only (the rest of the candidates gain 0); "all": for every
    #: candidate (coda/select.py ``add_lexical``; docs/architecture.md §7; session 21)
    lexical_scope: str = "top"
    #: a chunk's selection value gains ``window_weight`` x the idf share of the question's
    #: BM25 terms its best 3-sentence window holds (coda/windows.py; docs/architecture.md
    #: §7; session 21; 0 = off)
    window_weight: float = 0.0

    def __post_init__(self) -> None:
        if self.align not in CODA_ALIGNS:
            raise ValueError(f"align must be one of {CODA_ALIGNS}, got {self.align!r}")
        if self.elim_calibration not in CODA_CALIBRATIONS:
            raise ValueError(f"elim_calibration must be one of {CODA_CALIBRATIONS}, "
                             f"got {self.elim_calibration!r}")
        if self.lexical_scope not in ("top", "all"):
            raise ValueError(f"lexical_scope must be 'top' or 'all', got {self.lexical_scope!r}")
        if self.align_items not in ("all", "relations") or self.align_pool not in ("sum", "max"):
            raise ValueError("align_items must be 'all' or 'relations', align_pool 'sum' or 'max'")
        if min(self.dense_weight, self.lexical_weight, self.graph_weight,
               self.fact_weight, self.diversity, self.cover_weight,
               self.cover_pairs, self.window_weight) < 0 or self.dense_pool < 0:
            raise ValueError("dense_weight, lexical_weight, graph_weight, fact_weight, diversity, "
                             "cover_weight, cover_pairs, window_weight and dense_pool must be >= 0")
        for name in ("k_entry", "k_entry_relations", "k_context", "k_functional"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
        if not 0.0 <= self.ppr_d < 1.0:
            raise ValueError(f"ppr_d must be in [0, 1), got {self.ppr_d}")
        if not 0.0 <= self.elim_keep_frac <= 1.0:
            raise ValueError(f"elim_keep_frac must be in [0, 1], got {self.elim_keep_frac}")
        if self.ppr_solver not in CODA_PPR_SOLVERS:
            raise ValueError(f"ppr_solver must be one of {CODA_PPR_SOLVERS}, got {self.ppr_solver!r}")
        if self.sims not in CODA_SIMS:
            raise ValueError(f"sims must be one of {CODA_SIMS}, got {self.sims!r}")
        if self.functional_scope not in ("all", "touched"):
            raise ValueError(f"functional_scope must be 'all' or 'touched', got {self.functional_scope!r}")
        if not self.ppr_eps > 0:
            raise ValueError(f"ppr_eps must be > 0, got {self.ppr_eps}")



#: the published mechanisms (CodaRAG §3.3-3.4 as read above): count alignment, raw
#: top-fraction elimination. The defaults above were chosen on GraphRAG-Bench (dev), both
#: subsets at once, by offline coverage, the worst cell (subset x {all, Complex
#: Reasoning}) deciding: benchmarks/results/tuning_coda_gbench_minilm.json (session 10:
#: graph_weight 0.03 and align_items "all" over 0.01 / "relations"; fact_weight 0.2 and
#: dedup_sim 0.99 from session 9's benchmarks/coda_signals.py on Medical).
CODA_PAPER = CodaOptions(align="count", elim_calibration="raw", ppr_solver="power", sims="full",
                         functional_scope="all")
#: the published query mechanics with this library's alignment and elimination: the
#: full scans and the power PPR of ``coda`` before the fast path (docs/architecture.md §7)
CODA_EXACT = CodaOptions(ppr_solver="power", sims="full", functional_scope="all")
#: ``window_weight`` of the method row ``coda_window`` (``coda`` with it on; session 21)
CODA_WINDOW_ROW = 0.3


@dataclass(frozen=True)
class FastRPParams:
    """FastRP settings of CODA's consolidated graph (CodaRAG §3.1, Chen et al. 2019): width,
    iteration weights (N_1..N_k), per-iteration row L2 normalisation, degree exponent beta
    on R's rows, seed of the sparse random projection."""

    dim: int = 128
    iter_weights: tuple[float, ...] = (0.0, 1.0, 1.0, 1.0)
    normalize: bool = True
    beta: float = -0.5
    seed: int = 0


#: ``HybridOptions.rank_links``' feature names: the first two are computed on the query path
#: (``lexical.GroupLookup.bridge_titles``), the rest were measured and are off in both presets
#: (``methods.offpreset.more_link_features``; issue 21, docs/architecture.md §5);
#: "title_best" (session 14): a named page's paragraph scored by its title share over the
#: page's best share (``offpreset.title_best``: 1 on the paragraph most similar to q);
#: "residual_cover", "hop_rank", "top_bridge" (session 17): read off the first round's top
#: chunk (``lexical.top_links``; docs/architecture.md §5, "Ranker features inside C_q")
LINK_FEATURES = ("bridge_title", "bridge_title_words", "q_names", "r1_link", "r1_rank",
                 "page_rank", "page_count", "pi_mass", "prior_mass", "sim_rank", "top_page",
                 "bridge_title_top", "top_sim", "hop_sim", "bridge_title_final", "title_best",
                 "residual_cover", "hop_rank", "top_bridge", "hop2_rank", "residual_cover2", "chain_bridge")
#: the ``rank_links`` columns read off the first round's top chunk (``lexical.top_links``)
TOP_LINKS = ("residual_cover", "hop_rank", "top_bridge")
#: the ``rank_links`` columns read off the chain's second link t1 too (session 18,
#: ``engine.chain_links``; docs/architecture.md §5, "Ranker features inside C_q")
CHAIN_LINKS = ("hop2_rank", "residual_cover2", "chain_bridge")
#: the first round's top chunks (PPR order) whose bridge names "bridge_title" reads
BRIDGE_TITLE_SOURCES = 3
#: ``HybridOptions.graph_mix`` values (docs/architecture.md §5, "Graph floor")
GRAPH_MIXES = ("off", "prior_flat", "ppr_focus", "prior_only")
#: ``HybridOptions.rank_split`` values (session 20; docs/architecture.md §5, "Question style split")
RANK_SPLITS = ("off", "all", "links")
