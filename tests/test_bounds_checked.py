"""The kernel twin tests once more with Numba's bounds checking on (NUMBA_BOUNDSCHECK=1), in
a subprocess that compiles afresh (``kernels._config`` caches nothing then): an index out of
bounds in a kernel raises IndexError there, where an unchecked run reads or writes memory
it does not own (``topk_desc(x, 0)`` did, before it was fixed)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FILES = ("test_dense_kernels.py", "test_ppr_topk.py", "test_ppr_factored.py", "test_kernels_twins.py")


def test_kernel_twins_pass_with_bounds_checking():
    here = Path(__file__).resolve().parent
    # from the repository root, as ``python -m pytest`` is run (the checkout's
    # hyperrag_fast/kernels link makes it the same program as the installed package)
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        *(str(here / f) for f in FILES)],
                       env=env, capture_output=True, text=True, cwd=here.parent, timeout=1200)
    assert r.returncode == 0, (r.stdout[-4000:], r.stderr[-4000:])


def test_cached_kernels_are_keyed_on_every_file_of_the_folder(tmp_path):
    """A kernel's cache entry goes stale when any kernels/*.py changes, not only its own
    file (Numba's default: a caller kept the machine code of a callee that changed)."""
    from hyperrag_fast.kernels import _config
    from hyperrag_fast.kernels.query import stitch_query
    if not _config.CACHE:
        pytest.skip("on-disk caching is off in this process")
    locator = stitch_query._cache._impl.locator
    assert type(locator).__name__.startswith("HyperragKernels")
    assert locator.get_source_stamp() == _config.folder_stamp()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("y = 2\n")
    before = _config.folder_stamp(tmp_path)
    (tmp_path / "b.py").write_text("y = 3\n")  # the other file, same size
    assert _config.folder_stamp(tmp_path) != before
