"""Why a family's own-tuned best beats the setting chosen on the other two (issue 21,
leave-one-family-out; docs/architecture.md §6): selection and in-sample optimism, or a
real per-family optimum?

    python benchmarks/experiments/lofo_bias.py --embedder minilm \
        --index 2wikimultihopqa=indexes/2wiki_minilm \
        --index hotpotqa_train=indexes/quality_hotpot_minilm \
        --index musique_dev=indexes/quality_musique_minilm --cache-dir cache/quality_search \
        --out benchmarks/experiments/results/quality_grid/lofo_bias_minilm

The grid and the procedure are ``quality_grid.py``'s (32 settings, the ranker retrained
per setting, the worst-family rule with its noise guard). For each family f:

* ``transfer``: ``choose`` on the other two families, scored on f (the LOFO figure);
* ``own_in_sample``: ``choose`` on f alone, scored on the same questions (quality_grid's
  ``own_best``: both the grid point and the ranker were fitted on the questions scored);
* ``own_cross_validated``: f's questions split in random halves ``--repeats`` times; on
  each half the grid point is chosen and the ranker trained on that half alone, and both
  are scored on the other half (every question scored once per repeat).

gap = own_in_sample - transfer = optimism (own_in_sample - own_cross_validated) + the
part a per-family choice really earns on unseen questions (own_cross_validated -
transfer), given with its paired standard error over questions. Per grid option: on each
family, the mean R@5 change of switching the option (the 16 pairs of grid points that
differ only there, ranker trained on all three families) and how many pairs win / lose
by more than the guard.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import quality_grid  # noqa: E402
from quality_grid import Features, choose, grid  # noqa: E402
from quality_search import FAMILIES, KS, Bench  # noqa: E402
from train_ranker import fit  # noqa: E402

from hyperrag_fast.config import TUNED  # noqa: E402
from hyperrag_fast.embed.registry import make_embedder  # noqa: E402
from hyperrag_fast.eval.harness import _git, machine_info, run_method  # noqa: E402


def per_question(part, golds, w) -> np.ndarray:
    """(n_questions, len(KS)) recall of ranking each C_q by bias + X @ w (0: empty C_q)."""
    X, y, q = part
    s = X @ np.asarray(w[1:]) + w[0]
    q = q.astype(np.int64)
    out = np.zeros((len(golds), len(KS)))
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    for a, b in zip(starts, np.r_[starts[1:], q.shape[0]]):
        i = int(q[a])
        hits = y[a:b][np.argsort(-s[a:b], kind="stable")]
        out[i] = [hits[:k].sum() / len(golds[i]) for k in KS]
    return out


def subset(part, idx: np.ndarray):
    X, y, q = part
    m = np.isin(q.astype(np.int64), idx)
    return X[m], y[m], q[m]


def dense_pq(b: Bench) -> np.ndarray:
    out = run_method(b.r, "dense", replace(TUNED, method="dense"), b.ds, b.qvecs, max(KS),
                     progress=False)
    return np.array([[len(set(r[:k]) & set(g)) / len(g) for k in KS]
                     for r, g in zip(out["ranked"], b.golds)])


def cv_own(f, settings, feats, b, dpq, rng, repeats, guard, c=1.0) -> tuple[np.ndarray, list]:
    """Per question, the mean over repeats of its recall when the grid point and the
    ranker were chosen on the other half; and the chosen grid indices."""
    n = len(b.golds)
    acc, picks = np.zeros((n, len(KS))), []
    parts = [feats.get(o, f) for _, o in settings]
    for _ in range(repeats):
        perm = rng.permutation(n)
        halves = (np.sort(perm[: n // 2]), np.sort(perm[n // 2:]))
        for tr, te in (halves, halves[::-1]):
            cands = []
            for j, part in enumerate(parts):
                w = fit([subset(part, tr)], c=c)
                pq = per_question(part, b.golds, w)
                cands.append((pq[tr].mean() - dpq[tr].mean(), j, pq))
            top = max(c[0] for c in cands)
            near = [c for c in cands if c[0] >= top - guard]
            _, j, pq = max(near, key=lambda c: (c[0], -c[1]))
            picks.append(j)
            acc[te] += pq[te]
    return acc / repeats, picks


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--index", action="append", required=True, help="DATASET=INDEX_DIR")
    p.add_argument("--cache-dir", default="cache")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--features-cache", default=None)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-gain", type=float, default=0.005)
    p.add_argument("--axis", action="append", default=[], help="NAME=JSON list (quality_grid.py --axis)")
    p.add_argument("--c", type=float, default=1.0, help="the ranker's inverse L2 strength")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.axis:
        quality_grid.AXES = tuple((n, tuple(json.loads(v))) for n, v in (x.split("=", 1) for x in a.axis))
    AXES = quality_grid.AXES
    index = dict(x.split("=", 1) for x in a.index)
    emb = make_embedder(a.embedder)
    benches = {f: Bench(ds, sp, index[ds], emb, a.cache_dir, a.data_dir)
               for f, (ds, sp) in FAMILIES.items() if ds in index}
    fams = tuple(benches)
    dense = {f: b.score(replace(TUNED, method="dense")) for f, b in benches.items()}
    dpq = {f: dense_pq(b) for f, b in benches.items()}
    settings = grid()
    feats = Features(benches, a.features_cache)
    rng = np.random.default_rng(a.seed)
    k5 = KS.index(5)
    res = {}
    for f in fams:
        b = benches[f]
        rest = tuple(x for x in fams if x != f)
        o_r, i_r, _ = choose(rest, settings, feats, benches, dense, a.min_gain, a.c)
        o_o, i_o, _ = choose((f,), settings, feats, benches, dense, a.min_gain, a.c)
        tr = per_question(feats.get(settings[i_r][1], f), b.golds, o_r.hybrid.rank_weights)
        own = per_question(feats.get(settings[i_o][1], f), b.golds, o_o.hybrid.rank_weights)
        cv, picks = cv_own(f, settings, feats, b, dpq[f], rng, a.repeats, a.min_gain, a.c)
        d = cv[:, k5] - tr[:, k5]
        res[f] = {"n_questions": len(b.golds), "dense_recall@5": round(float(dpq[f][:, k5].mean()), 4),
                  "transfer_recall@5": round(float(tr[:, k5].mean()), 4),
                  "transfer_setting": settings[i_r][0],
                  "own_in_sample_recall@5": round(float(own[:, k5].mean()), 4),
                  "own_in_sample_setting": settings[i_o][0],
                  "own_cross_validated_recall@5": round(float(cv[:, k5].mean()), 4),
                  "gap_in_sample": round(float(own[:, k5].mean() - tr[:, k5].mean()), 4),
                  "optimism": round(float(own[:, k5].mean() - cv[:, k5].mean()), 4),
                  "gap_cross_validated": round(float(d.mean()), 4),
                  "gap_cross_validated_se": round(float(d.std(ddof=1) / np.sqrt(d.shape[0])), 4),
                  "cv_picks": {json.dumps(settings[j][0]): picks.count(j) for j in sorted(set(picks))},
                  "cv_picks_transfer_point": picks.count(i_r)}
        print(f, json.dumps(res[f]), file=sys.stderr, flush=True)
    # per option, on each family: the R@5 change of switching it (ranker on all three)
    o_all, _, table = choose(fams, settings, feats, benches, dense, a.min_gain, a.c)
    r5 = {f: np.array([t["scores"][f]["recall"][5] for t in table]) for f in fams}
    obj = {f: np.array([t["scores"][f]["objective"] for t in table]) for f in fams}
    options = {}
    for name, (v0, v1) in AXES:
        lo = [i for i, (s, _) in enumerate(settings) if s[name] == v0]
        hi = [next(j for j, (s2, _) in enumerate(settings)
                   if s2[name] == v1 and all(s2[n] == settings[i][0][n] for n, _ in AXES if n != name))
              for i in lo]
        options[f"{name} {v0} -> {v1}"] = {f: {
            "mean_recall@5_change": round(float((r5[f][hi] - r5[f][lo]).mean()), 4),
            "wins": int(((obj[f][hi] - obj[f][lo]) > a.min_gain).sum()),
            "losses": int(((obj[f][hi] - obj[f][lo]) < -a.min_gain).sum()), "pairs": len(lo)}
            for f in fams}
    out = {"command": "python benchmarks/experiments/lofo_bias.py " + " ".join(argv or sys.argv[1:]),
           "machine": machine_info(), "git_commit": _git("rev-parse", "HEAD"),
           "git_dirty": bool(_git("status", "--porcelain")), "embedder": emb.name,
           "axes": {n: list(v) for n, v in AXES}, "c": a.c, "repeats": a.repeats, "seed": a.seed, "min_gain": a.min_gain,
           "families": res, "options": options}
    Path(a.out + ".json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
