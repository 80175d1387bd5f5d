"""The package layout: checkout = install (one kernels folder), no import cycle, no import
side effects in the registry, one configuration the CLI and the API share, a query route
of at most five modules before the kernels, a read side that imports no write side
(docs/architecture.md §1)."""
from __future__ import annotations

import ast
import re
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "hyperrag_fast"


def test_checkout_and_install_resolve_the_same_kernels():
    import hyperrag_fast.kernels as k
    here = Path(os.path.realpath(k.__file__)).parent
    if here != ROOT / "kernels":  # an installed (non-editable) copy: the same files
        for f in sorted((ROOT / "kernels").glob("*.py")):
            assert (here / f.name).read_bytes() == f.read_bytes(), f.name
    # from the repository root (the source tree first on sys.path) ...
    code = "import os, hyperrag_fast.kernels.query as q; print(os.path.realpath(q.__file__))"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert r.stdout.strip() == os.path.realpath(ROOT / "kernels" / "query.py")
    # ... and the install rule maps the same folder (pyproject package-dir)
    text = (ROOT / "pyproject.toml").read_text()
    assert '"hyperrag_fast.kernels" = "kernels"' in text
    assert (PKG / "kernels").is_symlink() and os.readlink(PKG / "kernels") == "../kernels"


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` (typing only)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if (isinstance(child, ast.If) and isinstance(child.test, ast.Name)
                    and child.test.id == "TYPE_CHECKING"):
                todo.extend(child.orelse)
            else:
                todo.append(child)


def _imports(path: Path, module: str, typing: bool = True) -> set[str]:
    """Package modules ``module`` imports (any depth of the file, relative or absolute;
    without ``typing``, those under ``if TYPE_CHECKING:`` are left out)."""
    out = set()
    pkg = module.split(".")
    if path.name != "__init__.py":
        pkg = pkg[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in (ast.walk(tree) if typing else _runtime_nodes(tree)):
        if isinstance(node, ast.ImportFrom):
            base = pkg[:len(pkg) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            if node.level == 0:
                name = node.module or ""
            for a in node.names:
                out.add(f"{name}.{a.name}")
                out.add(name)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.startswith("hyperrag_fast")}


def _modules() -> dict[str, Path]:
    mods = {}
    for p in PKG.rglob("*.py"):
        if "kernels" in p.relative_to(PKG).parts[:1]:
            continue
        rel = p.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def test_no_import_cycle_in_the_package():
    mods = _modules()
    graph = {m: {i for i in _imports(p, m) if i in mods and i != m} for m, p in mods.items()}
    # a package's __init__ importing its own submodules is a tree, not a cycle
    for m in graph:
        graph[m] = {i for i in graph[m] if not i.startswith(m + ".")}
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for n in graph[m]:
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack + [m, n]))
            if n not in state:
                visit(n, stack + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_methods_never_import_the_query_layer_and_build_never_imports_query():
    mods = _modules()
    for m, p in mods.items():
        imp = _imports(p, m)
        if m.startswith("hyperrag_fast.methods"):
            assert not any(i.startswith("hyperrag_fast.retriever") for i in imp), m
    for m in ("hyperrag_fast.prebuilt", "hyperrag_fast.coda.system", "hyperrag_fast.hypergraph"):
        imp = _imports(mods[m], m)
        assert not any(i.startswith(q) for i in imp for q in
                       ("hyperrag_fast.retriever", "hyperrag_fast.methods", "hyperrag_fast.engine")), m


#: the write side: building, updating, saving an index and its prebuilt structures
WRITE_SIDE = ("hyperrag_fast.index", "hyperrag_fast.indexing", "hyperrag_fast.prebuilt",
              "hyperrag_fast.publish", "hyperrag_fast.chunking", "hyperrag_fast.intake",
              "hyperrag_fast.extract", "hyperrag_fast.coda.system", "hyperrag_fast.coda.consolidate",
              "hyperrag_fast.coda.llm_extract", "hyperrag_fast.coda.kg_vectors",
              "hyperrag_fast.kernels.build")
#: the read side: opening one generation and answering queries over it
READ_SIDE = ("hyperrag_fast.reader", "hyperrag_fast.retriever", "hyperrag_fast.methods",
             "hyperrag_fast.ann", "hyperrag_fast.lexical", "hyperrag_fast.engine",
             "hyperrag_fast.hypergraph", "hyperrag_fast.store", "hyperrag_fast.texts",
             "hyperrag_fast.validate", "hyperrag_fast.checksums", "hyperrag_fast.prebuilt_reader",
             "hyperrag_fast.config", "hyperrag_fast.records", "hyperrag_fast.embed.base",
             "hyperrag_fast.serve")
#: (read-side module, write-side module) imports that stay, each for a stated reason
READ_WRITE_EXCEPTIONS: set = set()  # none: a CODA query opens saved graphs (§7)


def _is(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_read_side_never_imports_the_write_side():
    """At any depth of a file (lazy imports included; type hints under TYPE_CHECKING
    excepted), the read side imports no write-side module: a query process loads none."""
    mods = _modules()
    seen = set()
    for m, p in mods.items():
        if not _is(m, READ_SIDE):
            continue
        seen.add(m)
        for i in _imports(p, m, typing=False):
            if _is(i, WRITE_SIDE) and not any(m == a and _is(i, (b,)) for a, b in READ_WRITE_EXCEPTIONS):
                raise AssertionError(f"{m} (read side) imports {i} (write side)")
    assert {"hyperrag_fast.reader", "hyperrag_fast.retriever", "hyperrag_fast.methods.stitch"} <= seen


def test_architecture_states_the_read_write_exceptions_the_import_test_allows():
    """docs/architecture.md §1 says which read -> write imports remain: each pair of
    ``READ_WRITE_EXCEPTIONS`` named there, or, with none, that none remains."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    s1 = " ".join(doc.split("\n## §1 ", 1)[1].split("\n## ", 1)[0].split())
    allowed = sorted(READ_WRITE_EXCEPTIONS) or "none"
    if READ_WRITE_EXCEPTIONS:
        assert "No exception remains" not in s1, allowed
        for a, b in READ_WRITE_EXCEPTIONS:
            assert a.removeprefix("hyperrag_fast.") in s1 and b.removeprefix("hyperrag_fast.") in s1, (a, b)
    else:  # says so, once, and claims no exception elsewhere
        assert s1.count("No exception remains") == 1 == s1.count("exception remains"), (
            f"§1 must state the read -> write imports the import test allows: {allowed}")


def _modules_after(code: str, *args: str) -> list[str]:
    r = subprocess.run([sys.executable, "-c", code + "\nimport sys\n"
                        "print(' '.join(sorted(m for m in sys.modules if m.startswith('hyperrag_fast'))))",
                        *args], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.split("\n")[-2].split()


def _save_two_doc_index(path) -> None:
    """The two-page regex/hashing index (dim 32) the import-graph tests query."""
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.extract.offline import RegexExtractor
    from hyperrag_fast.index import HyperIndex
    docs = [{"doc_id": "a", "title": "Ada Lovelace", "text": "Ada Lovelace was born in London. Her father was Lord Byron."},
            {"doc_id": "b", "title": "Lord Byron", "text": "Lord Byron died in Missolonghi in Greece."}]
    HyperIndex.build(docs, RegexExtractor(), HashingEmbedder(dim=32), progress=False).save(path)


def test_a_stitch_query_loads_no_write_side_module(tmp_path):
    """A process that opens a saved index and answers a ``stitch`` query imports no build,
    intake, chunking, extraction or CODA-build module (nor the write side's HyperIndex)."""
    _save_two_doc_index(tmp_path / "ix")
    code = ("import sys\n"
            "from hyperrag_fast.embed.hashing import HashingEmbedder\n"
            "from hyperrag_fast.reader import IndexReader\n"
            "from hyperrag_fast.retriever import Retriever\n"
            "from hyperrag_fast.config import QueryOptions\n"
            "r = Retriever(IndexReader.open(sys.argv[1]), HashingEmbedder(dim=32))\n"
            "res = r.retrieve(\"Where did Ada Lovelace's father die?\", QueryOptions(method='stitch'))\n"
            "assert res.chunks and res.chunks[0].doc_id in 'ab'")
    loaded = _modules_after(code, str(tmp_path / "ix"))
    assert "hyperrag_fast.methods.stitch" in loaded and "hyperrag_fast.reader" in loaded
    assert not [m for m in loaded if _is(m, WRITE_SIDE)], loaded
    assert not [m for m in loaded if m.startswith("hyperrag_fast.coda")], loaded


def test_a_coda_query_opens_saved_graphs_and_loads_no_write_side_module(tmp_path):
    """A process answering ``coda`` and ``coda_base`` queries over a saved index with its
    CODA structure imports no write-side module (no CODA build code) and assembles no
    graph: it opens what ``build-methods`` saved (docs/architecture.md §7)."""
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.prebuilt import ensure_prebuilt
    _save_two_doc_index(tmp_path / "ix")
    ensure_prebuilt(tmp_path / "ix", HyperIndex.load(tmp_path / "ix", HashingEmbedder(dim=32)), ["coda"])
    code = ("import sys\n"
            "import hyperrag_fast.coda.graph as G\n"
            "def no(*a, **k): raise AssertionError('assembled at query time')\n"
            "G.consolidate = G.graph_parts = G.fastrp_rows = G._merged_rows = no\n"
            "from hyperrag_fast.embed.hashing import HashingEmbedder\n"
            "from hyperrag_fast.reader import IndexReader\n"
            "from hyperrag_fast.retriever import Retriever\n"
            "from hyperrag_fast.prebuilt_reader import load_prebuilt\n"
            "from hyperrag_fast.config import QueryOptions\n"
            "r = Retriever(IndexReader.open(sys.argv[1]), HashingEmbedder(dim=32), prebuilt=load_prebuilt(sys.argv[1]))\n"
            "for m in ('coda', 'coda_base'):\n"
            "    res = r.retrieve(\"Where did Ada Lovelace's father die?\", QueryOptions(method=m))\n"
            "    assert res.chunks and res.chunks[0].doc_id in 'ab'")
    loaded = _modules_after(code, str(tmp_path / "ix"))
    assert "hyperrag_fast.methods.coda" in loaded and "hyperrag_fast.coda.retrieve" in loaded
    assert not [m for m in loaded if _is(m, WRITE_SIDE)], loaded


def test_the_cli_parser_loads_no_query_code_for_index():
    """``hyperrag index`` parses its arguments without the method registry, the engine or
    any compiled kernel (the method names come from ``config.METHOD_NAMES``)."""
    loaded = _modules_after("from hyperrag_fast.cli import build_parser\n"
                            "build_parser().parse_args(['index', 'docs', 'ix'])")
    assert "hyperrag_fast.cli_parser" in loaded
    bad = [m for m in loaded if _is(m, ("hyperrag_fast.kernels", "hyperrag_fast.methods",
                                        "hyperrag_fast.engine", "hyperrag_fast.retriever",
                                        "hyperrag_fast.ann", "hyperrag_fast.lexical"))]
    assert not bad, bad


def test_method_names_are_the_registry():
    from hyperrag_fast.config import METHOD_NAMES
    from hyperrag_fast.methods import METHODS
    assert sorted(METHOD_NAMES) == sorted(METHODS)


def test_registry_import_has_no_side_effects():
    code = ("import sys; import hyperrag_fast.methods as M; "
            "print(sorted(M.METHODS) == sorted({**M.baselines.METHODS, **M.stitch_variants.METHODS, **M.coda.METHODS}), "
            "'hyperrag_fast.retriever' in sys.modules, 'spacy' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["True", "False", "False"]


def test_cli_defaults_are_the_api_defaults():
    from hyperrag_fast.cli import build_parser, query_options
    from hyperrag_fast.config import PAPER, TUNED, QueryOptions
    a = build_parser().parse_args(["query", "some_index", "a question"])
    assert query_options(a) == QueryOptions() == TUNED
    ask = build_parser().parse_args(["ask", "some_index", "a question"])
    assert (ask.method, ask.top_k) == (TUNED.method, TUNED.top_k)
    assert PAPER.method == "stitch_paper" and PAPER != TUNED


def test_query_route_crosses_at_most_five_modules(tmp_path):
    """Every package function run by one ``Retriever.retrieve`` (default method, after
    warm-up), outside the embedder and the compiled kernels, lies in five modules."""
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.extract.offline import RegexExtractor
    from hyperrag_fast.index import HyperIndex
    from hyperrag_fast.retriever import Retriever

    emb = HashingEmbedder(dim=32)
    docs = [{"doc_id": "a", "title": "Ada Lovelace", "text": "Ada Lovelace was born in London. Her father was Lord Byron."},
            {"doc_id": "b", "title": "Lord Byron", "text": "Lord Byron died in Missolonghi in Greece."}]
    r = Retriever(HyperIndex.build(docs, RegexExtractor(), emb, progress=False), emb)
    r.warmup()
    r.retrieve("Where did Ada Lovelace's father die?")
    seen = set()

    def prof(frame, event, arg):
        if event == "call":
            seen.add(frame.f_code.co_filename)

    sys.setprofile(prof)
    try:
        r.retrieve("Where did Ada Lovelace's father die?")
    finally:
        sys.setprofile(None)
    import hyperrag_fast
    pkg = Path(os.path.realpath(hyperrag_fast.__file__)).parent  # checkout or install
    kern = {pkg / "kernels", ROOT / "kernels"}
    mods = set()
    for f in seen:
        f = Path(os.path.realpath(f))
        if not f.is_file():
            continue
        if any(k in f.parents for k in kern):
            mods.add(os.path.join("kernels", f.name))
        elif pkg in f.parents:
            mods.add(os.path.join("hyperrag_fast", f.relative_to(pkg).as_posix()))
    route = {m for m in mods if not m.startswith(("kernels" + os.sep, "hyperrag_fast/embed/"))}
    assert route <= {"hyperrag_fast/retriever.py", "hyperrag_fast/methods/stitch.py",
                     "hyperrag_fast/ann.py", "hyperrag_fast/lexical.py", "hyperrag_fast/engine.py"}, route


def test_no_package_file_over_400_lines():
    """Small modules (a package file over ~400 lines is split; docs/architecture.md §1)."""
    root = Path(__file__).resolve().parents[1]
    files = sorted({p.resolve() for d in ("hyperrag_fast", "kernels") for p in (root / d).rglob("*.py")})
    long = {p.relative_to(root).as_posix(): n for p in files
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert not long, f"split these modules: {long}"


_THIN = re.compile(r"^[\s)\]}(\[{,:;.]*$")  # lone punctuation
_IMPORT = re.compile(r"^(import\s|from\s+\S+\s+import\s)")


def _windows(files, n: int = 6) -> dict[tuple[str, ...], tuple[str, int]]:
    """Every run of ``n`` consecutive lines of ``files`` -> where it first stands (file,
    line). Lines are compared with white space folded; blank lines, comments, lone
    punctuation and import lines are passed over (as the ``duplicates`` tool does)."""
    out: dict[tuple[str, ...], tuple[str, int]] = {}
    for p in files:
        kept = [(i, s) for i, raw in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                if (s := " ".join(raw.split())) and not s.startswith("#")
                and not _THIN.match(s) and not _IMPORT.match(s)]
        for k in range(len(kept) - n + 1):
            out.setdefault(tuple(s for _, s in kept[k:k + n]), (p.relative_to(ROOT).as_posix(),
                                                                 kept[k][0]))
    return out


def test_no_block_of_six_lines_repeated_between_package_and_benchmarks():
    """Benchmarks import what they measure: no run of six lines of the package (its
    kernels included) stands again in benchmarks/ (issue 22)."""
    def py(folder: Path) -> list[Path]:
        return sorted(Path(d) / f for d, _, fs in os.walk(folder, followlinks=True)
                      for f in fs if f.endswith(".py"))
    pkg, bench = _windows(py(PKG)), _windows(py(ROOT / "benchmarks"))
    assert len(pkg) > 1_000 and len(bench) > 1_000  # both trees were read
    shared = sorted({(pkg[w], bench[w]) for w in pkg.keys() & bench.keys()})
    assert not shared, f"blocks of the package repeated in benchmarks/ (first line of each): {shared[:10]}"
