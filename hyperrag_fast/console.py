"""The ``hyperrag`` console entry: :func:`hyperrag_fast.cli.main` under the exit rules of
:mod:`hyperrag_fast.cli_errors` (one line per error, 130 on SIGINT, quiet on a closed
pipe), with the garbage collector handled as :mod:`hyperrag_fast.lean` explains. The
CLI's modules are imported inside those rules, so Ctrl-C while they load is one line too.

``hyperrag query`` is a one-shot process (docs/architecture.md §3, "Cold start"):

* NumPy's BLAS starts ``config.QUERY_BLAS_THREADS`` threads (``OPENBLAS_NUM_THREADS``
  unless the variable is set; it is read when NumPy loads, so here, before any import of
  it): OpenBLAS's workers busy-wait at start-up (~65 ms CPU on 2 cores) and after each
  threaded call (docs/architecture.md §3, "BLAS threads").
* Once its output is flushed, the process runs the ``atexit`` handlers and ends
  (``os._exit``) instead of tearing the interpreter down module by module (~30 ms of CPU
  freeing what the process is about to drop anyway); the query's retriever (the ONNX
  session, the index's memory maps and SQLite connection) is kept to that end
  (``cli_errors.keep_until_exit``) rather than freed when the command returns (~10 ms).
"""
from __future__ import annotations

import os
import sys

from .cli_errors import ends_without_teardown, run_console  # a leaf: NumPy is not loaded yet

BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


def _main() -> int:
    from .cli import main
    return main()


def _end(rc: int) -> None:
    """Flush, run the ``atexit`` handlers, and end the process with status ``rc``."""
    import atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(rc)


def run() -> int:
    """The console script: ``hyperrag ARGS``. For ``query`` it ends the process itself
    (module docstring); in-process callers use :func:`hyperrag_fast.cli.main`."""
    query = sys.argv[1:2] == ["query"]
    if query:
        ends_without_teardown()
        from .config import QUERY_BLAS_THREADS  # a leaf without NumPy
        if QUERY_BLAS_THREADS > 0:
            os.environ.setdefault(BLAS_THREADS_ENV, str(QUERY_BLAS_THREADS))
    rc = run_console(_main)
    if query:
        _end(rc)
    return rc


if __name__ == "__main__":
    sys.exit(run())
