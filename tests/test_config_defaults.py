"""One source of every default (docs/architecture.md §6): a bare options object is the
library default, the paper's values only by name, and no package file outside
``config.py`` / ``settings.py`` spells a literal default for an option they define."""
from __future__ import annotations

import ast
import dataclasses
import math
from dataclasses import asdict
from pathlib import Path

import pytest

from hyperrag_fast import config

PKG = Path(__file__).resolve().parents[1] / "hyperrag_fast"
#: parameter / CLI option names whose default config.py (or settings.py) defines
CONFIG_OPTIONS = {"merge", "index_merge", "max_tokens", "overlap", "timeout", "lock_timeout",
                  "concurrency", "max_concurrency", "top_k", "k_nodes", "k_chunks", "method",
                  "embedder", "chunk_vectors", "partition_docs", "workers", "scheduler"}
#: ... and every field of an options class config.py defines (StitchOptions, CodaOptions, ...)
FIELDS = {f.name for v in vars(config).values() if isinstance(v, type) and dataclasses.is_dataclass(v)
          and v.__module__ in ("hyperrag_fast.config", "hyperrag_fast.settings")
          for f in dataclasses.fields(v)}
#: (file, name) literals that share a name with a config field, each for a stated reason
NOT_CONFIG = {
    ("lexical.py", "ngram_min_words"): "question_groups' 1 = every n-gram; its one package "
                                       "caller passes HybridOptions.ngram_min_words",
    ("embed/onnx_cache.py", "threads"): "ONNX session threads, not AnnParams/BuildOptions.threads",
    ("embed/hashing.py", "dim"): "the hashing test embedder's width, not FastRPParams.dim",
    ("embed/hashing.py", "seed"): "the hashing test embedder's hash key, not FastRPParams.seed",
    ("coda/llm_extract.py", "seed"): "the type-discovery sample's seed, not FastRPParams.seed",
}
HOMES = {"config.py", "settings.py"}
#: the service's own settings (request timeout, worker threads) live in serve/options.py
OWN_SETTINGS = ("serve", "cli_serve.py")


def _literal(node: ast.AST | None) -> bool:
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant) and node.value is not None and not isinstance(node.value, bool)


def _literal_defaults(tree: ast.AST):
    """(line, option name) of every literal default in function signatures, in
    ``add_argument(..., default=...)`` calls and of class fields (``top_k: int = 8``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value:
                    yield st.value.lineno, st.target.id, st.value
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            pos = a.posonlyargs + a.args
            for arg, d in zip(pos[len(pos) - len(a.defaults):], a.defaults):
                yield d.lineno, arg.arg, d
            for arg, d in zip(a.kwonlyargs, a.kw_defaults):
                if d is not None:
                    yield d.lineno, arg.arg, d
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "add_argument"):
            flags = [x.value for x in node.args if isinstance(x, ast.Constant) and isinstance(x.value, str)]
            name = next((f.lstrip("-").replace("-", "_") for f in flags if f.startswith("--")),
                        flags[0] if flags else "")
            for kw in node.keywords:
                if kw.arg == "default":
                    yield kw.value.lineno, name, kw.value


def test_no_literal_default_outside_config():
    found, excused = [], set()
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG).parts
        if p.name in HOMES and p.parent == PKG or rel[0] == "kernels" or rel[0] in OWN_SETTINGS:
            continue
        for line, name, d in _literal_defaults(ast.parse(p.read_text(encoding="utf-8"))):
            if name in CONFIG_OPTIONS | FIELDS and _literal(d):
                if (key := ("/".join(rel), name)) in NOT_CONFIG:
                    excused.add(key)
                    continue
                found.append(f"{p.relative_to(PKG)}:{line} {name}={ast.unparse(d)}")
    assert not found, "literal defaults outside config.py (read them from there):\n" + "\n".join(found)
    assert excused == set(NOT_CONFIG), f"stale NOT_CONFIG entries: {set(NOT_CONFIG) - excused}"


def test_the_checker_sees_a_literal_default():
    tree = ast.parse("def f(a, merge='semi', *, top_k=8, timeout=X.Y, delta=0.5): pass\n"
                     "p.add_argument('--max-tokens', type=int, default=256)\n"
                     "class O:\n    k_entry: int = 10\n    tau: float = C.TAU\n")
    got = {(n, _literal(d)) for _, n, d in _literal_defaults(tree)}
    assert got == {("merge", True), ("top_k", True), ("timeout", False), ("max_tokens", True),
                   ("delta", True), ("k_entry", True), ("tau", False)}
    # every option field config.py defines is checked, not only the names listed by hand
    assert {"delta", "k_entry", "tau", "ppr_solver", "connectivity"} <= FIELDS


def test_a_bare_options_object_is_the_library_default():
    assert config.StitchOptions() == config.TUNED_STITCH == config.TUNED.stitch
    assert config.HybridOptions() == config.TUNED_HYBRID == config.TUNED.hybrid
    assert config.QueryOptions() == config.TUNED
    # the former trap: changing one field keeps every other tuned value
    o = config.QueryOptions(stitch=config.StitchOptions(top_k=5))
    assert asdict(o.stitch) == {**asdict(config.TUNED_STITCH), "top_k": 5}
    assert config.StitchOptions(top_k=5).delta == config.TUNED_STITCH.delta != 0.5


def test_the_paper_only_by_name():
    """STITCH-RAG §3.3 / Alg. 1 as published, spelled out here once more on purpose."""
    p = config.StitchOptions.paper()
    assert (p.delta, p.lam, p.damping, p.decay, p.alpha, p.group_weight, p.prior) == (
        0.5, 0.3, 0.85, "tanh", "ratio", "log1p", "continuous")
    assert (p.spatial, p.temporal, config.STIBP_DIVISOR, p.ppr, p.tol, p.graph_weight) == (
        True, True, 3.0, "power", 1e-6, "uniform")
    assert p.temporal_max_group == p.graph_max_group == math.inf and p.temporal_from_space == 0.0
    h = config.HybridOptions.paper()
    assert (h.seeds, h.bm25_weight, h.k_bm25, h.title_words, h.title_chunks, h.hop_chunks,
            h.hop_titles) == ("none", 0.0, 0, False, 0.0, 0, False)
    assert config.PAPER.stitch == p and config.PAPER.hybrid == h and config.PAPER.method == "stitch_paper"
    assert config.StitchOptions.paper(top_k=3) == config.StitchOptions(**{**asdict(p), "top_k": 3})
    assert config.PAPER != config.TUNED


def test_pruned_options_are_gone():
    """Options in no preset and no paper ablation were removed (issue 22): asking for one
    fails loudly instead of running something nobody measured."""
    with pytest.raises(TypeError):
        config.StitchOptions(agg_divisor=2.0)
    with pytest.raises(ValueError, match="group_weight"):
        config.StitchOptions(group_weight="none")
    for gone in ("phrase_sim", "near_matches", "rare_words_max_group"):
        with pytest.raises(TypeError):
            config.HybridOptions(**{gone: 1})
    with pytest.raises(TypeError):
        config.BuildOptions(pipeline=True)
