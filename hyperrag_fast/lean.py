"""Process-wide trims for a one-shot process such as ``hyperrag query`` (docs/architecture.md
§3, "Cold start"). The CLI calls them; the library never does on its own (a host
application owns its process).

* :func:`skip_blas_probe`: Numba's first compile or cache load imports ``numba.np.arraymath``,
  which imports ``scipy.linalg`` (~0.15 s CPU, ~15 MB) only to learn whether BLAS backs
  ``np.convolve`` / ``np.correlate`` in compiled code. No kernel of this library uses them
  (nor ``np.dot``, which would import SciPy itself when compiled), so the probe is
  answered "no BLAS" and SciPy stays unimported; kernels compile to the same code.
* ``mmaps.trim_heap``: glibc keeps freed heap pages resident; onnxruntime's session setup
  frees ~60 MB of them (graph optimisation). ``malloc_trim(0)`` returns them.
* the garbage collector: importing Numba and loading its cached kernels creates ~10^5
  objects, and collecting them over and over (during imports, and at interpreter exit)
  cost ~0.3 s of CPU per ``hyperrag query``. The console entry (``cli.run``) starts with
  the collector off; :func:`settle` freezes what the setup made (``gc.freeze``: kept for
  the life of the process, never scanned) and turns it back on, so a long
  ``--questions`` batch is collected as usual; ``run`` freezes again before exiting.
"""
from __future__ import annotations

import gc
import sys

from .mmaps import trim_heap

_BLAS = "scipy.linalg.cython_blas"


def skip_blas_probe() -> bool:
    """Import ``numba.np.arraymath`` with SciPy's BLAS hidden, unless either is already
    imported; True when SciPy was kept out. ``sys.modules`` is restored at once, so a
    later ``import scipy`` works as usual."""
    if "numba.np.arraymath" in sys.modules or _BLAS in sys.modules:
        return False
    sys.modules[_BLAS] = None  # type: ignore[assignment]  # ImportError, parents untouched
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        if sys.modules.get(_BLAS, 0) is None:
            del sys.modules[_BLAS]
    return True


def settle() -> None:
    """After an index is loaded: ``mmaps.trim_heap``; when the console entry turned the
    collector off, freeze the objects made so far and turn it back on."""
    trim_heap()
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
