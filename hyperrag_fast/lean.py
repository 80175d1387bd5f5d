"""Process-wide trims for a one-shot process such as ``hyperrag query`` (docs/architecture.md
§3, "Cold start"). The CLI calls them; the library never does on its own (a host
application owns its process). None changes a result: the kernels run the same machine
code, the embedder the same session.

* :func:`import_numba`: ``import numba`` imports SciPy only to check its version, and
  PyYAML only to read a ``.numba_config.yaml`` in the working directory (~30 ms CPU
  together); both are hidden while Numba loads (PyYAML not when such a file is there).
* :func:`lean_cache_loads`: before loading a kernel from its cache, Numba refreshes its
  compile registries: it imports and installs the implementation of every Python and NumPy
  feature it can compile (~0.1 s CPU once per process, ``numba.np.arraymath`` among them).
  Cached machine code needs none of them, only Numba's runtime (NRT, whose symbols the
  code links to), so a cache load starts that alone; a kernel missing from the cache is
  compiled as usual (Numba's compiler refreshes the registries itself). The loaded code
  is the same bytes either way.
* :func:`skip_blas_probe` (when :func:`lean_cache_loads` cannot be installed): Numba's
  registry refresh imports ``numba.np.arraymath``, which imports ``scipy.linalg`` (~0.15 s
  CPU, ~15 MB) only to learn whether BLAS backs ``np.convolve`` / ``np.correlate`` in
  compiled code. No kernel of this library uses them (nor ``np.dot``, which would import
  SciPy itself when compiled), so the probe is answered "no BLAS"; kernels compile to the
  same code.
* ``mmaps.trim_heap``: glibc keeps freed heap pages resident; onnxruntime's session setup
  frees ~60 MB of them (graph optimisation). ``malloc_trim(0)`` returns them.
* the garbage collector: importing Numba and loading its cached kernels creates ~10^5
  objects, and collecting them over and over (during imports, and at interpreter exit)
  cost ~0.3 s of CPU per ``hyperrag query``. The console entry (``console.run``) starts
  with the collector off; :func:`settle` freezes what the setup made (``gc.freeze``: kept
  for the life of the process, never scanned) and turns it back on, so a long
  ``--questions`` batch is collected as usual.

The console entry also sets NumPy's BLAS to one thread and ends a query process without
the interpreter's teardown (:mod:`hyperrag_fast.console`).
"""
from __future__ import annotations

import gc
import os
import sys
from contextlib import contextmanager

from .mmaps import trim_heap

_BLAS = "scipy.linalg.cython_blas"
NUMBA_CONFIG_FILE = ".numba_config.yaml"  # what Numba's config reads PyYAML for


@contextmanager
def _hidden(*names: str):
    """``import NAME`` raises ImportError inside the block for each of ``names`` not yet
    imported (its parents untouched); ``sys.modules`` is restored on leaving, so a later
    import works as usual."""
    hide = [n for n in names if n not in sys.modules]
    for n in hide:
        sys.modules[n] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for n in hide:
            if sys.modules.get(n, 0) is None:
                del sys.modules[n]


def import_numba() -> None:
    """``import numba`` with SciPy (and PyYAML, unless ``.numba_config.yaml`` is in the
    working directory) hidden; nothing when Numba is imported already."""
    if "numba" in sys.modules:
        return
    yaml = () if os.path.exists(NUMBA_CONFIG_FILE) else ("yaml",)
    with _hidden("scipy", *yaml):
        import numba  # noqa: F401


def lean_cache_loads() -> bool:
    """Make Numba's cache loads skip the registry refresh (module docstring); True when
    installed (False when this Numba lacks the private ``Cache._load_overload`` it calls:
    loads then refresh as before)."""
    import_numba()
    from numba.core import caching
    from numba.core.runtime import nrt
    cache = caching.Cache
    if getattr(cache.load_overload, "lean", False):
        return True
    if not callable(getattr(cache, "_load_overload", None)):
        return False

    def load_overload(self, sig, target_context):
        nrt.rtsys.initialize(target_context)  # the runtime the cached code calls into
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    load_overload.lean = True  # type: ignore[attr-defined]
    cache.load_overload = load_overload
    return True


def skip_blas_probe() -> bool:
    """Import ``numba.np.arraymath`` with SciPy's BLAS hidden, unless either is already
    imported; True when SciPy was kept out."""
    if "numba.np.arraymath" in sys.modules or _BLAS in sys.modules:
        return False
    import_numba()
    with _hidden(_BLAS):
        import numba.np.arraymath  # noqa: F401
    return True


def settle() -> None:
    """After an index is loaded: ``mmaps.trim_heap``; when the console entry turned the
    collector off, freeze the objects made so far and turn it back on."""
    trim_heap()
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
