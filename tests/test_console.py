"""The ``hyperrag`` console entry of a one-shot query (``hyperrag_fast.console``,
``hyperrag_fast.lean``; docs/architecture.md §3, "Cold start"): the same answer as the
CLI in-process, NumPy's BLAS on one thread, Numba's cached kernels loaded without its
compile registries, SciPy, PyYAML, the modules of Numba's array implementations, numpy.ma,
usearch's downloader (http.client) and progress bars (tqdm), and Numba's entry-point
scan (importlib.metadata) never imported, the index reader never torn down, and the process ended (atexit
handlers run) once its output is flushed (a closed pipe: tests/test_cli_bad_input.py). The regex extractor and hashing embedder keep
it fast."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hyperrag_fast.cli import main

# the child reports from an atexit handler: the console's own ending must run those
REPORT = """
import atexit, gc, json, os, sys
def report():
    from numba.core import caching
    gc.unfreeze()  # what the console froze after loading (hyperrag_fast.lean.settle)
    sys.stderr.write("REPORT " + json.dumps({
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "lean_loads": bool(getattr(caching.Cache.load_overload, "lean", False)),
        # the query's index is never torn down (the process ends with os._exit)
        "reader_alive": any(type(o).__name__ == "IndexReader" for o in gc.get_objects()),
        "imported": sorted(m for m in ("scipy", "yaml", "numba.np.arraymath", "numba.np.arrayobj",
                                       "numpy.ma", "http.client", "importlib.metadata", "tqdm")
                           if vars(sys.modules.get(m, sys)).get("__file__")),  # a stand-in has none
    }) + "\\n")
atexit.register(report)
sys.argv = ["hyperrag", *sys.argv[1:]]
from hyperrag_fast.console import run
run()
raise SystemExit("run() returned: the query process was not ended")
"""


@pytest.fixture(scope="module")
def ix(tiny_index):
    return tiny_index


def console(*argv, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
    return subprocess.run([sys.executable, "-c", REPORT, *map(str, argv)], capture_output=True,
                          text=True, timeout=300, env=env)


def _report(r: subprocess.CompletedProcess) -> dict:
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("REPORT ")]
    assert len(line) == 1, r.stderr[-2000:]
    return json.loads(line[0][len("REPORT "):])


def test_a_console_query_answers_as_the_cli_and_ends_lean(ix, capsys):
    assert main(["query", str(ix), "Where did Lord Byron die?", "--json"]) == 0
    want = json.loads(capsys.readouterr().out)
    r = console("query", ix, "Where did Lord Byron die?", "--json",
                env={"OPENBLAS_NUM_THREADS": None})
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert [(c["chunk_id"], c["score"]) for c in got["chunks"]] == \
        [(c["chunk_id"], c["score"]) for c in want["chunks"]] and want["chunks"]
    assert _report(r) == {"blas_threads": "1", "lean_loads": True, "reader_alive": True,
                          "imported": []}


def test_a_blas_thread_count_the_user_set_is_kept(ix):
    r = console("query", ix, "Lord Byron", "--json", env={"OPENBLAS_NUM_THREADS": "2"})
    assert r.returncode == 0 and _report(r)["blas_threads"] == "2", r.stderr[-2000:]


def test_the_console_starts_blas_on_config_query_blas_threads(ix):
    """``config.QUERY_BLAS_THREADS`` is the count (docs/architecture.md §3, "BLAS threads");
    0 leaves OpenBLAS's own default."""
    for threads, want in ((3, "3"), (0, None)):
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
        script = f"import hyperrag_fast.config as c; c.QUERY_BLAS_THREADS = {threads}\n" + REPORT
        r = subprocess.run([sys.executable, "-c", script, "query", str(ix), "Lord Byron", "--json"],
                           capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0 and _report(r)["blas_threads"] == want, r.stderr[-2000:]


def test_a_failed_console_query_is_one_line_and_status_2(tmp_path):
    r = console("query", tmp_path / "missing", "Lord Byron")
    lines = [ln for ln in r.stderr.splitlines() if not ln.startswith("REPORT ")]
    assert r.returncode == 2 and lines == [f"hyperrag: error: no index directory at "
                                           f"{tmp_path / 'missing'}"], r.stderr[-2000:]
    _report(r)  # the atexit handlers ran


def test_the_lean_trims_install_on_this_numba():
    """A Numba without the private method the cache-load trim calls would quietly load
    slower (lean.lean_cache_loads returns False): this says so instead."""
    code = ("import sys; from hyperrag_fast import lean; lean.import_numba(); "
            "print(sorted(m for m in ('scipy', 'yaml') if m in sys.modules), "
            "lean.lean_cache_loads()); import yaml, scipy; print('later imports work')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines() == ["[] True", "later imports work"]


def test_usearch_progress_bars_work_after_the_lean_import():
    """tqdm, left out of the lean usearch import (hyperrag_fast.lean), is imported when
    usearch draws a progress bar."""
    pytest.importorskip("usearch")
    code = ("import sys; from hyperrag_fast import lean; lean.import_usearch(); "
            "print('tqdm' in sys.modules); import numpy as np; from usearch.index import Index; "
            "ix = Index(ndim=4); ix.add(np.arange(3), np.eye(3, 4, dtype=np.float32), log=True); "
            "print(len(ix), 'tqdm' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["False", "3", "True"] and "Add" in r.stderr


def test_numba_keeps_reading_a_config_file_in_the_working_directory(tmp_path):
    (tmp_path / ".numba_config.yaml").write_text("debug_cache: 0\n")
    code = "import sys; from hyperrag_fast import lean; lean.import_numba(); print('yaml' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr[-2000:]


def test_the_symbols_read_from_a_kernel_object_are_the_ones_llvm_lists():
    """The lean cache load takes a kernel's defined symbols from its ELF object instead of
    parsing its bitcode (hyperrag_fast.lean): the same names."""
    import llvmlite.binding as ll
    from numba import njit

    from hyperrag_fast.lean import elf_defined_symbols

    @njit
    def f(x):
        return np.empty(x.shape[0]) + x.sum()

    import numpy as np
    f(np.ones(3))
    name, kind, (obj, bitcode) = f.overloads[f.signatures[0]].library.serialize_using_object_code()
    mod = ll.parse_bitcode(bitcode)
    want = {g.name for gs in (mod.functions, mod.global_variables) for g in gs
            if not g.is_declaration}
    got = elf_defined_symbols(obj)
    if got is None:
        pytest.skip("not an ELF64 platform: the lean load parses the bitcode as Numba does")
    assert got == want and len(want) > 2


LINKED = """
import sys
sys.path.insert(0, sys.argv[1])
from hyperrag_fast import lean
if sys.argv[2] == "lean":
    assert lean.lean_cache_loads()
import numpy as np
from numba import njit
from cached_mod import inner
x = np.arange(5.0)
print(inner(x))                 # a cached kernel, loaded (lean in the second process)
scanned = lambda: bool(vars(sys.modules.get("importlib.metadata", sys)).get("__file__"))
print("scanned" if scanned() else "not-scanned")  # Numba's entry points (lean: on compiling)
@njit
def outer(x):                   # compiled here: links against the loaded kernel's bitcode
    return inner(x) * 2.0
print(outer(x))
print("scanned" if scanned() else "not-scanned")
"""


def test_code_compiled_after_a_lean_cache_load_links_against_the_loaded_kernel(tmp_path):
    (tmp_path / "cached_mod.py").write_text(
        "import numpy as np\nfrom numba import njit\n\n@njit(cache=True)\n"
        "def inner(x):\n    out = np.empty(x.shape[0])\n    for i in range(x.shape[0]):\n"
        "        out[i] = x[i] * x[i]\n    return out.sum()\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    outs = []
    for mode in ("fill", "lean", "lean"):  # the first lean load saves Numba's runtime, the next reads it
        r = subprocess.run([sys.executable, "-c", LINKED, str(tmp_path), mode], capture_output=True,
                           text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append(r.stdout.split())
    assert outs == [["30.0", "scanned", "60.0", "scanned"]] + \
        [["30.0", "not-scanned", "60.0", "scanned"]] * 2
    assert list((tmp_path / "cache").rglob("*.nbc"))  # the lean processes loaded it
    assert len(list((tmp_path / "cache").rglob("hyperrag-nrt-*.nbo"))) == 1


def test_a_damaged_saved_runtime_is_compiled_again(tmp_path):
    """The saved Numba runtime (hyperrag_fast.lean) is checked against its digest: a
    damaged file is compiled again and replaced, and the kernels run the same."""
    (tmp_path / "cached_mod.py").write_text(
        "import numpy as np\nfrom numba import njit\n\n@njit(cache=True)\n"
        "def inner(x):\n    return np.empty(3).shape[0] + x.sum()\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    run = lambda: subprocess.run([sys.executable, "-c", LINKED, str(tmp_path), "lean"],  # noqa: E731
                                 capture_output=True, text=True, timeout=300, env=env)
    first = run()
    saved, = (tmp_path / "cache").rglob("hyperrag-nrt-*.nbo")
    good = saved.read_bytes()
    saved.write_bytes(good[:40] + bytes([good[40] ^ 1]) + good[41:])
    again = run()
    assert first.returncode == again.returncode == 0, again.stderr[-2000:]
    # the first process compiles ``inner`` (Numba's entry points scanned), the second loads it
    assert first.stdout.split() == ["13.0", "scanned", "26.0", "scanned"]
    assert again.stdout.split() == ["13.0", "not-scanned", "26.0", "scanned"]
    assert saved.read_bytes() == good
