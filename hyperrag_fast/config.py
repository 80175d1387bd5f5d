"""Configuration: every query option, both presets, candidate budgets, ANN parameters and
how an index build runs (:class:`BuildOptions`).

The API (:class:`QueryOptions` defaults), the CLI (its option defaults), ``ask``, ``demo``,
``eval`` and the benchmarks all read this module; nothing else holds a default. Two named
presets: :data:`PAPER` (STITCH-RAG exactly as published, §3.3 / Alg. 1) and :data:`TUNED`
(the library default, chosen on the 2WikiMultiHopQA dev split; docs/architecture.md §6).
No imports of query or build code: a leaf every layer may read.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

#: enumerated option values (the kernel codes are in ``hyperrag_fast.kernels.params``)
DECAYS = ("tanh", "exp", "sigmoid")
PPRS = ("none", "power", "push", "factored", "auto")
ALPHAS = ("ratio", "fixed", "log")
WEIGHTS = ("log1p", "idf", "none")
GRAPH_WEIGHTS = ("uniform", "inverse_size")
PRIORS = ("continuous", "binary")
SEED_MODES = ("none", "ngram", "ner", "ner+ngram")
HOP_WEIGHTS = ("uniform", "sim")
MERGES = ("semi", "full", "none")
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
    (local forward push, per-node threshold lowered until the top-k order is certified,
    else down to r(v) <= tol * wsum(v), every score then within tol * wsum(v);
    ``kernels.ppr_local``), "factored" (the same power iteration, same results
    to rounding, on the chunk-group incidences instead of the deduplicated arcs: a name
    group of s chunks costs s, not s (s - 1); needs graph_weight "inverse_size";
    ``kernels.ppr_factored``), "auto" (push or power by the measured rule
    :func:`ppr_solver`) or "none" (rank by prior).
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


@dataclass(frozen=True)
class HybridOptions:
    """seeds: "none"; "ngram" = every word n-gram (n <= 6) of the question whose
    normalised form is a name-group key; "ner" = spaCy entities of the question,
    normalised (needs the offline extra), skipping entities whose spaCy label is in
    ``seed_skip_labels`` (e.g. CARDINAL, ORDINAL); "ner+ngram" = both. n-grams shorter
    than ``ngram_min_words`` words are not matched unless their group spans at most
    ``rare_words_max_group`` chunks (0 = never; a rare single-word name), or, with
    ``title_words``, when they are the name of a passage title (a one-word title).
    ``near_matches`` also matches names that differ only in accents or a leading article
    (``lexical.loose_key``). Matched
    groups spanning more than ``seed_max_group`` chunks are not seeded; their states get
    A(v) >= ``seed_value``.
    bm25_weight: the prior term bm25_weight * s / max(s) over the ``k_bm25`` best BM25
    chunks, which also join C0.

    hop_chunks > 0 runs a second round (ours, docs/architecture.md §5): the names in the
    first round's ``hop_chunks`` best chunks that span at most ``hop_max_group`` chunks
    become seeds (A(v) >= hop_value x weight) and STITCH runs again on the same
    candidates. hop_weight "uniform" = 1; "sim" = max(0, sim(q, v)) / max over the hop
    chunk's states, so the name in the sentence the question asks about weighs most.
    hop_titles: the second round also starts from the chunks whose title the question
    names (``title_chunks``), so a question naming two pages carries both bridges.

    title_chunks > 0 (ours, docs/architecture.md §5): a chunk whose whole title the
    question contains (name keys; a disambiguator such as "(song)" included, and a title
    inside a longer matched title dropped) joins C0 with its share of the prior term
    title_chunks: a title's term is split over its chunks by max(0, sim(q, c)).
    title_top > 0: only each named title's ``title_top`` chunks most similar to q join
    (a page of many paragraphs; 0 = all of them; a one-chunk title is unchanged).

    rank_weights (ours, off = empty): the final ranking is bias + w . x over C_q's
    per-chunk features x (``methods.stitch.FEATURES``: prior and PPR shares and ranks,
    dense rank, similarity, STIBP score, BM25 and title terms), weights
    ``(bias, *w)`` learned on the dev families (``benchmarks/train_ranker.py``).

    phrase_sim > 0 (ours): the question's capitalised phrases that name no group exactly
    are embedded (one embedder call per question) and seed the groups of the entity states
    whose vectors they match with cosine >= phrase_sim (``PHRASE_K`` nearest each)."""

    seeds: str = "none"
    seed_value: float = 1.0
    seed_max_group: float = math.inf
    bm25_weight: float = 0.0
    k_bm25: int = 0
    seed_skip_labels: tuple[str, ...] = ()
    ngram_min_words: int = 1
    rare_words_max_group: float = 0
    title_words: bool = False
    near_matches: bool = False
    hop_chunks: int = 0
    hop_value: float = 1.0
    hop_max_group: float = 2
    hop_weight: str = "sim"
    title_chunks: float = 0.0
    hop_titles: bool = False
    phrase_sim: float = 0.0
    rank_weights: tuple[float, ...] = ()
    title_top: int = 0

    def __post_init__(self) -> None:
        if self.title_top < 0:
            raise ValueError("title_top must be >= 0")
        if self.rank_weights and not all(math.isfinite(w) for w in self.rank_weights):
            raise ValueError("rank_weights must be finite")
        _one_of("hop_weight", self.hop_weight, HOP_WEIGHTS)
        if self.hop_chunks < 0 or self.hop_value < 0 or not self.hop_max_group >= 1:
            raise ValueError("hop_chunks and hop_value must be >= 0 and hop_max_group >= 1")
        if self.seeds not in SEED_MODES:
            raise ValueError(f"seeds must be one of {SEED_MODES}, got {self.seeds!r}")
        if self.ngram_min_words < 1:
            raise ValueError("ngram_min_words must be >= 1")
        if not self.rare_words_max_group >= 0:
            raise ValueError("rare_words_max_group must be >= 0")
        if self.seed_value < 0 or self.bm25_weight < 0 or self.k_bm25 < 0 or not self.title_chunks >= 0:
            raise ValueError("seed_value, bm25_weight, k_bm25 and title_chunks must be >= 0")
        if not 0.0 <= self.phrase_sim <= 1.0:
            raise ValueError(f"phrase_sim must be in [0, 1] (0 = off), got {self.phrase_sim}")


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


# ------------------------------------------------------------------ PPR solver rule
#: ppr="auto" runs the local push (``kernels.ppr_local``) on a chunk graph of at least
#: PUSH_MIN_CHUNKS chunks whose prior is nonzero on at most ``push_max_fraction(d)`` of
#: them, else the power iteration. Measured single-threaded, both solvers on the same
#: graphs and priors in one run, both with the exact solve's top-8 in order
#: (``OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_ppr.py --repeats 5
#: --prior-nnz 300 0 --out ppr.json ppr_dense_prior.json``, CPU time, load ~16-22):
#: with a prior on every chunk (as a query's prior over C_q is) push loses at every size
#: and damping (1k-100k: 1.2-18x slower); with 300 prior chunks it loses at 1,009 chunks
#: (d .85 / .5 / .2: 3.39 vs 0.17, 0.26 vs 0.085, 0.054 vs 0.033 ms) and at 9,969 chunks
#: with d = .85 (7.9 vs 2.9 ms), and wins at 9,969 chunks (3.0 %) with d = .5 / .2 (0.37 vs
#: 1.05, 0.12 vs 0.54 ms) and at 99,658 chunks (0.30 %) at every damping (1.3 vs 108,
#: 1.3 vs 24, 0.37 vs 6.6 ms). The thresholds are those measured winning points; between
#: them and the losing ones the crossover is not measured. A 2Wiki query (|C_q| ~ 50, the
#: whole corpus 6,119 chunks) therefore always runs power: on the corpora the presets were
#: measured on "auto" is "power", so the presets keep the name their recorded results carry.
PUSH_MIN_CHUNKS = 9_969
#: (largest damping, largest prior support / chunks) pairs, by increasing damping
PUSH_MAX_FRACTION = ((0.5, 300 / 9_969), (1.0, 300 / 99_658))


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


def _one_of(name: str, value: str, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}, got {value!r}")


# ------------------------------------------------------------------------ presets
#: STITCH-RAG §3.3 constants: delta .5, lambda .3, d .85, tanh decay, power PPR; no
#: question seeds, no BM25 term (the dataclass defaults are the paper's values).
PAPER_STITCH = StitchOptions()
PAPER_HYBRID = HybridOptions()

#: The dev-tuned configuration (2WikiMultiHopQA dev = first 200 questions), chosen by
#: ``python benchmarks/tune_stitch.py --index-dir indexes/2wiki --cache-dir cache``
#: (coordinate search from the paper's constants, objective mean of R@2/5/8; every
#: setting tried is in ``benchmarks/results/tuning_stitch_dev.{md,json}``). Best there:
#: dev R@2/5/8 .650/.868/.934 with question seeds from spaCy NER plus 2+-word n-grams.
#: We take n-gram seeds alone (.644/.863/.927, inside the ~1-point noise of 200
#: questions) because they keep spaCy off the query path: half the per-query latency on
#: dev and no GIL-bound NER. The same rule (the cheaper option when the gap is inside
#: the noise) kept ``temporal_max_group=50``, which bounds the temporal scan of hub names.
#: Issue 15 recalibrated delta .6 -> .8 with ``benchmarks/quality_search.py`` (local
#: mode: delta x lambda, then the second round, on dev only): dev .644/.863/.927 ->
#: .679/.877/.921, and out of sample 2Wiki test .662/.870/.932 -> .695/.887/.929,
#: HotpotQA .640/.875/.940 -> .680/.890/.935. The second round (``hop_chunks``) won on
#: dev (.709/.881/.941) but lost on HotpotQA (.665/.880/.920), so it stayed off: an
#: option the default keeps must hold on both datasets
#: (``benchmarks/experiments/results/quality_search/quality_search_minilm_*.md``). Then question-side
#: linking: ``title_words`` (a one-word title) and ``title_chunks`` (a named title's
#: chunks get a prior term), both gaining on dev and HotpotQA; with them the second round
#: (1 chunk, value 1) won on dev and on HotpotQA too, so it is on, and a fourth stage then
#: started it from the named titles' chunks as well (``hop_titles``: dev objective
#: +.007, HotpotQA +.003). The search's title stage takes the weakest value within .005
#: of the dev best; with ``hop_titles`` on that is .3 (was 3), and a further pass changes
#: nothing (``experiments/results/quality_search/quality_search_minilm_{title_chunks,hop_titles,second_pass,
#: fixed_point}.md``).
#: Issue 21 (three dev families: 2Wiki dev, the HotpotQA sample, MuSiQue dev; the worst
#: family's lift over dense, no family losing more than .01 objective; MiniLM tuning file
#: ``benchmarks/experiments/results/quality_search/quality_search_minilm.{md,json}``):
#: delta .8 -> .85 and the calibrated final ranking (``rank_weights``, trained on the
#: three families): R@5 2Wiki dev .912 -> .915, HotpotQA .900 -> .920, MuSiQue dev .690
#: -> .705; 2Wiki test (never searched) .901 -> .902.
TUNED_STITCH = StitchOptions(
    delta=0.85,
    lam=0.3,
    damping=0.2,
    alpha="log",
    group_weight="idf",
    temporal_max_group=50,
    temporal_from_space=2.0,
    graph_max_group=20,
    graph_weight="inverse_size",
    ppr="power",
    tol=1e-6,
)
TUNED_HYBRID = HybridOptions(seeds="ngram", ngram_min_words=2, seed_value=1.0, seed_max_group=2,
                             bm25_weight=0.1, k_bm25=20, title_words=True, title_chunks=0.3,
                             hop_chunks=1, hop_value=1.0, hop_max_group=2, hop_weight="sim",
                             hop_titles=True, rank_weights=(
                                 -1.819011, -20.043877, 21.183009, 12.882177, -0.235017,
                                 1.516375, 3.35763, 0.706335, 0.229618, 0.889873))
#: candidate budgets K_V (entity states) and K_C (chunks), STITCH-RAG §3.3 step 1
TUNED_K_NODES = 25
TUNED_K_CHUNKS = 50
#: the method the API and the CLI run when none is named
DEFAULT_METHOD = "stitch"
#: the names ``hyperrag_fast.methods.METHODS`` registers (tests/test_layout.py checks), so the
#: CLI's parser offers them without importing the query kernels
METHOD_NAMES = (
    "binary_ppr", "binary_prior", "bm25", "coda", "coda_no_contextual", "coda_no_elimination",
    "coda_no_functional", "coda_no_semantic", "coda_paper", "coda_paper_no_contextual",
    "coda_paper_no_elimination", "coda_paper_no_functional", "coda_paper_no_semantic", "decay_exp", "decay_sigmoid", "decay_tanh",
    "dense", "merge_full", "merge_none", "merge_semi", "no_ppr", "no_spatial", "no_stibp",
    "no_temporal", "stitch", "stitch_consolidated", "stitch_paper")
#: the embedder kind (``embed.registry.make_embedder``) the CLI and the eval harness use
#: when none is named
DEFAULT_EMBEDDER = "minilm"


@dataclass(frozen=True)
class QueryOptions:
    """One query's configuration: STITCH options, the query-side signals (``hybrid``,
    docs/architecture.md §5), candidate budgets K_V (``k_nodes``) and K_C (``k_chunks``)
    and the method name (checked against the registry when the query runs). Defaults =
    :data:`TUNED`; :data:`PAPER` is the published method."""

    stitch: StitchOptions = field(default_factory=lambda: TUNED_STITCH)
    hybrid: HybridOptions = field(default_factory=lambda: TUNED_HYBRID)
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

#: The preset per shipped embedder (issue 21; docs/architecture.md §6): each chosen by
#: ``benchmarks/quality_search.py`` with that embedder's indexes on the three dev families
#: by the worst family's lift over dense (its tuning file is named beside each preset).
#: ``TUNED`` (= ``QueryOptions()``) stays the MiniLM preset.
#: bge-small: ``benchmarks/experiments/results/quality_search/quality_search_bge.{md,json}``
#: (HotpotQA sample and MuSiQue dev; its 2Wiki index was not built in time, so 2Wiki dev
#: did not vote). Against bge's dense, PPR never earned its place (damping 0: rank by the
#: prior), the dense term weighs more (lambda 1), and the calibrated ranker (weights
#: trained on those two families, ``train_ranker.py``) orders C_q.
TUNED_BGE = QueryOptions(
    stitch=TUNED_STITCH.replace(delta=0.8, lam=1.0, damping=0.0, ppr="none"),
    hybrid=replace(TUNED_HYBRID, title_words=False, rank_weights=(
        -0.330978, 0.431038, 0.431038, 5.680973, 5.680973, 0.613683, 11.806037, -0.592513,
        0.668383, -0.832443)))
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


@dataclass(frozen=True)
class BuildOptions:
    """How a build runs and, through ``chunk_vectors`` alone, what it computes.

    ``chunk_vectors``: "text" (embed each passage, ``title + "\\n" + text``) or "pooled"
    (the L2-normalised mean of the L2-normalised vectors of the chunk's topic sentences
    and its title, docs/architecture.md §10); ``None`` = "text" for a new index and the
    index's own representation for ``add`` (it is in the manifest). ``partition_docs``:
    documents per partition (memory is bounded by a partition's texts and vectors);
    ``pipeline``: embed partition p on a thread while partition p+1
    is extracted (off by default: with onnxruntime on every core the overlap bought
    nothing on a 2-core machine and slowed the embed stage, benchmarks/README.md);
    ``workers``: run partitions on a local Dask cluster of that many single-threaded
    workers; ``scheduler``: the address of an existing Dask scheduler instead.
    """

    partition_docs: int = 512
    pipeline: bool = False
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
    ppr_solver: str = "power"  # 2Wiki dev (40k entities): power p50 104 ms, push 452 ms, same recall
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
    graph_weight: float = 0.01
    dense_pool: int = 20
    align_items: str = "relations"
    align_pool: str = "max"
    dedup_sim: float = 0.0

    def __post_init__(self) -> None:
        if self.align not in CODA_ALIGNS:
            raise ValueError(f"align must be one of {CODA_ALIGNS}, got {self.align!r}")
        if self.elim_calibration not in CODA_CALIBRATIONS:
            raise ValueError(f"elim_calibration must be one of {CODA_CALIBRATIONS}, "
                             f"got {self.elim_calibration!r}")
        if self.align_items not in ("all", "relations") or self.align_pool not in ("sum", "max"):
            raise ValueError("align_items must be 'all' or 'relations', align_pool 'sum' or 'max'")
        if min(self.dense_weight, self.lexical_weight, self.graph_weight) < 0 or self.dense_pool < 0:
            raise ValueError("dense_weight, lexical_weight, graph_weight and dense_pool must be >= 0")
        for name in ("k_entry", "k_entry_relations", "k_context", "k_functional"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
        if not 0.0 <= self.ppr_d < 1.0:
            raise ValueError(f"ppr_d must be in [0, 1), got {self.ppr_d}")
        if not 0.0 <= self.elim_keep_frac <= 1.0:
            raise ValueError(f"elim_keep_frac must be in [0, 1], got {self.elim_keep_frac}")
        if self.ppr_solver not in ("push", "power"):
            raise ValueError(f"ppr_solver must be 'push' or 'power', got {self.ppr_solver!r}")



#: the published mechanisms (CodaRAG §3.3-3.4 as read above): count alignment, raw
#: top-fraction elimination. The defaults above were chosen on GraphRAG-Bench Medical
#: (dev) by offline coverage: benchmarks/results/tuning_coda_gbench_minilm*.json.
CODA_PAPER = CodaOptions(align="count", elim_calibration="raw")
