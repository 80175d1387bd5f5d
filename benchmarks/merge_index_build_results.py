"""Fold a finished ``bench_index_build.py`` result file from another checkout (e.g. a
benchmark worktree pinned at one commit) into ``results/index_build.json``, keeping every
section's own command, commit and machine.

    python benchmarks/merge_index_build_results.py OTHER/benchmarks/results/index_build.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

try:
    from . import bench_index_build as B
except ImportError:
    import bench_index_build as B


def main() -> None:
    other = json.loads(Path(sys.argv[1]).read_text())
    res = json.loads(B.OUT.read_text()) if B.OUT.exists() else {}
    res.setdefault("corpora", {}).update(other.get("corpora", {}))
    for k in ("add", "add_1pct_over_full", "workers", "embed_ab", "machine"):
        if k in other:
            res[k] = other[k]
    res["growth_exponents"] = B.growth(res["corpora"])
    res["growth_exponent"] = res["growth_exponents"].get("wall")
    B.OUT.write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {B.OUT}")


if __name__ == "__main__":
    main()
