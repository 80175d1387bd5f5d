"""``python -m hyperrag_fast`` = the ``hyperrag`` command (:mod:`hyperrag_fast.console`)."""
import sys

from .console import run

if __name__ == "__main__":
    sys.exit(run())
