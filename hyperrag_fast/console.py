"""The ``hyperrag`` console entry: :func:`hyperrag_fast.cli.main` under the exit rules of
:mod:`hyperrag_fast.cli_errors` (one line per error, 130 on SIGINT, quiet on a closed
pipe), with the garbage collector handled as :mod:`hyperrag_fast.lean` explains. The
CLI's modules are imported inside those rules, so Ctrl-C while they load is one line too.
"""
from __future__ import annotations

import sys

from .cli_errors import run_console


def _main() -> int:
    from .cli import main
    return main()


def run() -> int:
    return run_console(_main)


if __name__ == "__main__":
    sys.exit(run())
