"""The ``hyperrag serve`` arguments (argparse only: the :mod:`hyperrag_fast.serve` package is
imported by the command itself, never by the other subcommands)."""
from __future__ import annotations

import argparse
from typing import Sequence


def add_serve_parser(sub, parents: Sequence[argparse.ArgumentParser], methods: Sequence[str],
                     func) -> None:
    from .cli_answers import add_llm_args
    from .config import TUNED
    s = sub.add_parser("serve", parents=list(parents),
                       help="serve indexes over HTTP (extra: serve); follows their updates")
    s.add_argument("indexes", nargs="+", metavar="[NAME=]INDEX",
                   help="index folders; the first is the default (/v1/query), each is also "
                        "/v1/indexes/NAME/query (NAME: the folder's name unless given)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000, help="0: an ephemeral port (printed)")
    s.add_argument("--port-file", default=None, help="write the bound port to this file")
    s.add_argument("--preset", choices=("tuned", "paper"), default="tuned",
                   help="the options a request starts from (config.TUNED / config.PAPER)")
    s.add_argument("--method", choices=sorted(methods), default=None,
                   help=f"the default method (default: the preset's, {TUNED.method})")
    s.add_argument("--methods", nargs="*", choices=sorted(methods), default=[],
                   help="more methods to load prebuilt structures for (hyperrag build-methods)")
    s.add_argument("--workers", type=int, default=0, help="query threads (default: the cores)")
    s.add_argument("--queue", type=int, default=None,
                   help="requests waiting beyond the workers before 503 (default 2 x workers: "
                        "an accepted request waits for at most 2 others per worker)")
    s.add_argument("--max-wait", type=float, default=0.0,
                   help="also 503 a request that waited this many seconds for a worker "
                        "(default 0: no limit; the queue depth bounds the wait)")
    s.add_argument("--timeout", type=float, default=10.0, help="seconds per request")
    s.add_argument("--max-batch", type=int, default=64, help="questions per request")
    s.add_argument("--embed-threads", type=int, default=1,
                   help="ONNX intra-op threads per query (default 1: one per query thread)")
    s.add_argument("--poll", type=float, default=0.1,
                   help="seconds between checks of each index's CURRENT")
    s.add_argument("--grace", type=float, default=30.0,
                   help="seconds to finish in-flight requests on SIGTERM/SIGINT")
    s.add_argument("--no-verify", action="store_true", help="skip checksums when loading")
    s.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    add_llm_args(s)
    s.add_argument("--llm-timeout", type=float, default=60.0, help="seconds per LLM request")
    s.add_argument("--llm-concurrency", type=int, default=4, help="/v1/ask requests at once")
    s.set_defaults(func=func)
