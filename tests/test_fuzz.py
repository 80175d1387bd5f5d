"""The bad-input suite (issue 24 item 8): random byte flips, zeroed runs and truncations
of every file of a generation (the usearch graphs, the manifest and its seal, and every
file of the prebuilt structures in ``<gen>/prebuilt/`` included), crafted manifests (the
``files`` / ``ann_files`` / ``prebuilt`` lists among them) and pointers, each opened and
queried by tests/fuzz_worker.py in a subprocess (a damaged structure file with the
methods reading it). Verdicts: an index error with a one-line message, or the unchanged results;
changed results only where the checksums were recomputed (a crafted folder) or
verification was off. Never a crash (a signal), another exception (a traceback in the
CLI), or a hang. A sample of the cases is replayed through ``hyperrag query`` for the
exit status and the one stderr line."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hyperrag_fast.ann import AnnParams
from hyperrag_fast.embed.hashing import HashingEmbedder
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.index import HyperIndex
from hyperrag_fast.prebuilt import build_prebuilt
from hyperrag_fast.store import generation_dir

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "hyperrag_fast" / "data" / "examples"
WORKER = HERE / "fuzz_worker.py"
# per file: verified flips (checksums must catch them), flips with the checksums
# recomputed (structural validation must), unverified flips, zeroed runs, truncations
FLIPS_VERIFIED, FLIPS_CRAFTED, FLIPS_UNVERIFIED, ZEROS = 12, 16, 12, 3
KEEP = (0.0, 0.01, 0.5, 0.97)
POINTERS = ["", "\n", "gen-000001-zzzzzzzz\n", "gen-999999-deadbeef\n", "../../etc\n",
            "gen-000001-" + "a" * 5000, "\x00\x01\x02\xff" * 40, "root:x:0:0:secret\n",
            "symlink:/etc/hostname", "symlink:gen-does-not-exist"]
BUDGET = 900  # seconds for the whole suite (2,438 cases; a 2,652-case variant ran in 325 s at load 10)


def _cases(gen: Path) -> list[dict]:
    files = sorted(p.relative_to(gen).as_posix() for p in gen.rglob("*") if p.is_file())
    out: list[dict] = []

    def add(**c):
        out.append({"id": len(out), **c})

    for f in files:
        for s in range(FLIPS_VERIFIED):
            add(op="flip", file=f, seed=s, resum=False, verify=True)
        if f != "manifest.json":
            for s in range(FLIPS_CRAFTED // 2 if f.startswith("prebuilt/coda/") else FLIPS_CRAFTED):
                add(op="flip", file=f, seed=100 + s, resum=True, verify=True)
            for s in range(ZEROS):
                add(op="zero", file=f, seed=200 + s, resum=True, verify=True)
            for k in KEEP:
                add(op="truncate", file=f, keep=k, resum=True, verify=True)
        for s in range(FLIPS_UNVERIFIED):
            add(op="flip", file=f, seed=300 + s, resum=False, verify=False)
        for k in KEEP[:2]:
            add(op="truncate", file=f, keep=k, resum=False, verify=False)
    from fuzz_worker import EDITS
    for e in EDITS:
        for verify in (True, False):
            add(op="manifest", edit=e, resum=True, verify=verify)
        add(op="manifest", edit=e, resum=False, verify=True)
    for f in ("manifest.json", "lexical.json"):
        for resum in (False, True):
            add(op="nest", file=f, verify=True, resum=resum)
    for v in POINTERS:
        for verify in (True, False):
            add(op="pointer", value=v, verify=verify, resum=False)
    return out


def run_cases(pristine: Path, work: Path, cases: list[dict], budget: float) -> dict[int, dict]:
    """{case id: verdict}; a worker that dies is restarted after the case it died on."""
    verdicts: dict[int, dict] = {}
    todo = list(cases)
    deadline = time.time() + budget
    while todo:
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(pristine, work, symlinks=True)
        p = subprocess.Popen([sys.executable, str(WORKER), str(work), str(pristine)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=work.parent)
        try:
            out, err = p.communicate("".join(json.dumps(c) + "\n" for c in todo),
                                     timeout=max(deadline - time.time(), 1))
            hung = False
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            hung = True
        lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        started = [x["start"] for x in lines if "start" in x]
        for x in lines:
            if "outcome" in x:
                verdicts[x["id"]] = x
        done = set(verdicts)
        if p.returncode == 0 and not hung:
            break
        if not any("ready" in x for x in lines):
            raise AssertionError(f"the worker failed before any case: {err[-2000:]}")
        last = started[-1] if started else None
        if last is not None and last not in done:
            verdicts[last] = {"id": last, "outcome": "hang" if hung else
                              f"crashed (status {p.returncode})", "msg": err[-300:]}
        if hung:
            break
        todo = [c for c in todo if c["id"] not in verdicts]
    return verdicts


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    pristine = d / "ix"
    ix = HyperIndex.build(EXAMPLES, RegexExtractor(), HashingEmbedder(), progress=False,
                          max_tokens=64, ann_params=AnnParams(backend="usearch"))
    ix.save(pristine)
    build_prebuilt(ix, ["merge_full", "merge_none", "coda", "consolidated"]).save(pristine)
    cases = _cases(generation_dir(pristine))
    t = time.time()
    verdicts = run_cases(pristine, d / "work", cases, BUDGET)
    return cases, verdicts, time.time() - t, pristine


def _allowed(case: dict) -> set[str]:
    if case["verify"] and not case["resum"]:
        return {"error", "same"}  # verified: a change the checksums miss is a finding
    return {"error", "same", "different"}


def test_fuzz_cases_never_crash_nor_raise_nor_change_verified_results(fuzzed):
    cases, verdicts, seconds, _ = fuzzed
    assert len(cases) >= 2000
    bad = []
    for c in cases:
        v = verdicts.get(c["id"], {"outcome": "not run"})
        if v["outcome"] not in _allowed(c):
            bad.append((c, v))
        elif v["outcome"] == "error" and (v["lines"] != 1 or v["length"] > 600):
            bad.append((c, v))
    summary = {}
    for c, v in bad:
        key = (c["op"], c.get("file", c.get("edit", c.get("value", ""))[:20]), v["outcome"],
               v.get("type"))
        summary[key] = summary.get(key, 0) + 1
    assert not bad, (f"{len(bad)} of {len(cases)} cases failed in {seconds:.0f} s: "
                     f"{sorted(summary.items())[:40]}; first: {bad[:3]}")


def test_fuzz_covers_every_file_and_is_caught(fuzzed):
    cases, verdicts, _, _ = fuzzed
    by_file: dict[str, set[str]] = {}
    for c in cases:
        if "file" in c and c["op"] != "nest":
            by_file.setdefault(c["file"], set()).add(verdicts[c["id"]]["outcome"])
    assert {"ann/chunk_vec.usearch", "ann/node_vec.usearch", "ann/edge_vec.usearch",
            "texts.sqlite", "manifest.json", "manifest.xxh3", "prebuilt/coda/raw_ent_vec.npy",
            "prebuilt/merge_full/arrays.npz", "prebuilt/consolidated/graph.json"} <= set(by_file)
    for f, outcomes in by_file.items():
        assert "error" in outcomes, f  # every file's damage is seen


CLI_SAMPLE = [  # (case, expected exit status) replayed through the command line
    {"op": "truncate", "file": "ann/chunk_vec.usearch", "keep": 0.97, "resum": True, "verify": True},
    {"op": "truncate", "file": "ann/node_vec.usearch", "keep": 0.5, "resum": True, "verify": True},
    {"op": "truncate", "file": "arrays/edge_nodes.npy", "keep": 0.5, "resum": True, "verify": False},
    {"op": "flip", "file": "texts.sqlite", "seed": 3, "resum": False, "verify": True},
    {"op": "manifest", "edit": "ann_escape", "resum": True, "verify": True},
    {"op": "manifest", "edit": "counts_nodes", "resum": True, "verify": True},
    {"op": "pointer", "value": "symlink:/etc/hostname", "resum": False, "verify": True},
    {"op": "pointer", "value": "root:x:0:0:secret\n", "resum": False, "verify": True},
    {"op": "flip", "file": "manifest.json", "seed": 1, "resum": False, "verify": True},
    {"op": "truncate", "file": "prebuilt/merge_full/arrays.npz", "keep": 0.5, "resum": True,
     "verify": True, "method": "merge_full"},
    {"op": "truncate", "file": "prebuilt/coda/graph/ent_vec.npy", "keep": 0.97, "resum": False,
     "verify": False, "method": "coda"},  # the vectors a CODA query reads (issue 23 item 3)
    {"op": "manifest", "edit": "prebuilt_escape", "resum": True, "verify": True,
     "method": "merge_full"},
]


@pytest.mark.parametrize("case", CLI_SAMPLE, ids=lambda c: f"{c['op']}-{c.get('file', c.get('edit', 'ptr'))}")
def test_cli_reports_bad_index_in_one_line_with_status_2(tmp_path, fuzzed, case):
    from fuzz_worker import apply
    pristine = fuzzed[3]
    ix = tmp_path / "ix"
    shutil.copytree(pristine, ix, symlinks=True)
    apply(ix, case)
    argv = [sys.executable, "-m", "hyperrag_fast.cli", "query", str(ix), "Ada Lovelace father",
            "--quiet", "--method", case.get("method", "stitch"),
            *([] if case["verify"] else ["--no-verify"])]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr[-1500:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hyperrag: error:"), r.stderr[-1500:]
    assert "secret" not in r.stderr and "Traceback" not in r.stderr
