"""How a ``hyperrag`` process ends (docs/architecture.md §12, "How the CLI fails").

* A known error (:func:`is_user_error`: the library's own error types, a bad argument, a
  missing file, an OS error with its path, a missing optional package) is one line on
  stderr, ``hyperrag: error: ...``, exit status 2.
* SIGINT (Ctrl-C) is one line, ``hyperrag: interrupted``, exit status 130.
* A closed output pipe (``hyperrag query ... | head -1``) ends quietly: nothing on
  stderr, exit status 141 (128 + SIGPIPE, what a shell reports for a killed writer).
* Anything else is a defect of ours: still one line, naming the exception type and
  saying how to see the traceback (``HYPERRAG_DEBUG=1``), exit status 1.

``HYPERRAG_DEBUG=1`` in the environment re-raises every error with its traceback.
This module is a leaf: the console entry (:mod:`hyperrag_fast.console`) imports it before
the rest of the package, so an interrupt during those imports is handled too.
"""
from __future__ import annotations

import os
import sys
from typing import Callable

DEBUG_ENV = "HYPERRAG_DEBUG"
EXIT_USER = 2
EXIT_INTERNAL = 1
EXIT_INTERRUPTED = 130
EXIT_PIPE = 141


_no_teardown = False  # ends_without_teardown() was called: the process ends with os._exit
_kept: list = []  # what keep_until_exit keeps


def ends_without_teardown() -> None:
    """Declare that this process ends with ``os._exit`` (the console's one-shot query,
    :mod:`hyperrag_fast.console`): what :func:`keep_until_exit` is given is never freed."""
    global _no_teardown
    _no_teardown = True


def keep_until_exit(obj) -> None:
    """Keep ``obj`` alive until a process that :func:`ends_without_teardown` ends (freeing
    a query's ONNX session, memory maps and SQLite connection costs ~10 ms of CPU);
    elsewhere (in-process callers) nothing."""
    if _no_teardown:
        _kept.append(obj)


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


def debug() -> bool:
    """Whether ``HYPERRAG_DEBUG`` asks for tracebacks."""
    return os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")


def one_line(text: str) -> str:
    """``text`` on one line (newlines of a nested message folded into spaces)."""
    return " ".join(str(text).split())


def user_error_types() -> tuple[type[BaseException], ...]:
    """The errors printed as one line with exit status 2. LLMError counts only when the
    LLM client was imported (a query never imports it: ~17 ms of http/email modules)."""
    from .errors import IndexError_
    client = sys.modules.get(f"{__package__}.llm.client")
    return ((IndexError_, OSError, ImportError, ValueError, CliError)
            + ((client.LLMError,) if client is not None else ()))


def is_user_error(e: BaseException) -> bool:
    """A known error (exit 2); a closed output pipe is not one (:func:`run_cli`)."""
    return isinstance(e, user_error_types()) and not isinstance(e, BrokenPipeError)


def report(e: BaseException) -> int:
    """Print ``e`` as one line on stderr; its exit status (2 known, 1 internal)."""
    if is_user_error(e):
        msg = str(e) if not isinstance(e, OSError) or e.filename is None or not e.strerror \
            else f"{e.filename}: {e.strerror}"
        _say(f"hyperrag: error: {one_line(msg) or type(e).__name__}")
        return EXIT_USER
    _say(f"hyperrag: internal error: {type(e).__name__}: {one_line(e)[:300]} "
         f"(a bug; rerun with {DEBUG_ENV}=1 for the traceback)")
    return EXIT_INTERNAL


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed too: the exit status still tells
        pass


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of what is still
    buffered for the closed pipe raises nothing at exit."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass


def _warn_line(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings (e.g. ``DamagedGraphWarning``) as one stderr line, like errors."""
    _say(f"hyperrag: warning: {one_line(message)}")


def run_cli(main: Callable[[], int]) -> int:
    """``main()`` (which prints known errors itself) under the rules of this module."""
    import warnings
    warnings.showwarning = _warn_line
    try:
        rc = main()
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return rc
    except BrokenPipeError:
        if debug():
            raise
        _quiet_stdout()
        return EXIT_PIPE
    except KeyboardInterrupt:
        if debug():
            raise
        _say("hyperrag: interrupted")
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - one line; HYPERRAG_DEBUG=1 re-raises
        if debug():
            raise
        return report(e)


def run_console(main: Callable[[], int]) -> int:
    """:func:`run_cli` with the garbage collector handled as :mod:`hyperrag_fast.lean`
    explains (a one-shot process: off, then frozen for the interpreter's exit)."""
    import gc
    gc.disable()
    try:
        return run_cli(main)
    finally:
        gc.freeze()  # the interpreter's exit then scans nothing it need not
