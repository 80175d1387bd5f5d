"""The calibrated final ranking (``HybridOptions.rank_weights``): a logistic regression
over the per-chunk features of ``methods.stitch.FEATURES`` (docs/architecture.md §5).

Used by ``quality_search.py``: :func:`collect` runs ``stitch`` with ``detail`` on one
family's questions and keeps every C_q chunk's features with its label (gold or not);
:func:`fit` trains on the chosen families (each family weighs the same, each question
the same within it) and returns ``(bias, *weights)`` for the raw features, the
standardisation folded in, so a query pays one dot product.
"""
from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np

from hyperrag_fast.config import QueryOptions
from hyperrag_fast.methods import METHODS


def collect(bench, o: QueryOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X, y, question index) over every C_q chunk of every question of ``bench``."""
    o = replace(o, hybrid=replace(o.hybrid, rank_weights=()))
    fn, state, passages = METHODS[o.method], bench.r.state, bench.ds.passages
    xs, ys, qs = [], [], []
    for i, (v, q, gold) in enumerate(zip(bench.qvecs, bench.ds.questions, bench.golds)):
        out = fn(state, v, q.question, o, True)
        cq, X = np.asarray(out.detail["cq"]), out.detail["features"]
        xs.append(X)
        ys.append(np.array([passages[int(c)] in gold for c in cq], dtype=np.float64))
        qs.append(np.full(cq.shape[0], i))
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(qs)


class Prior(NamedTuple):
    """A label-free prior on the ranker's weights (issue 21, leave-one-family-out; measured
    in ``quality_grid.py --prior``), in standardised units: the columns ``signed`` (``"all"``:
    every column) are held >= 0 (each is a score where larger means more likely gold, so a
    negative weight is a fit to one family's correlations) and their L2 penalty pulls them
    toward ``center`` instead of 0 (a family-agnostic ranker: every signed column the same
    weight); ``names``: the feature columns in order (``FEATURES`` + rank_links)."""
    signed: tuple[str, ...] = ()
    center: float = 0.0
    names: tuple[str, ...] = ()

    @classmethod
    def parse(cls, spec: str) -> Prior:
        """``"signed=all;center=1"`` / ``"signed=bridge_title+bridge_title_words"``."""
        kw = dict(x.split("=", 1) for x in spec.split(";") if x)
        if set(kw) - {"signed", "center"}:
            raise ValueError(f"prior {spec!r}: keys signed, center")
        return cls(tuple(n for n in kw.get("signed", "").split("+") if n), float(kw.get("center", 0.0)))

    def mask(self, names: tuple[str, ...]) -> np.ndarray:
        if self.signed == ("all",):  # a rank_split copy ("unnamed:...") is a change, not a score
            return np.array([not n.startswith("unnamed:") for n in names])
        if any(n not in names for n in self.signed):
            raise ValueError(f"prior columns {self.signed} not all in {names}")
        return np.array([n in self.signed for n in names])


def fit(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], c: float = 1.0,
        weighting: str = "family", prior: Prior | None = None) -> tuple[float, ...]:
    """Weights (bias, *w) of a logistic regression on ``parts`` (one per family);
    ``weighting`` "family": each family weighs the same, "question": each question does
    (a family weighs by its question count; measured in experiments/lofo_decompose.py);
    ``prior``: fitted with bounds and a shifted L2 centre (:class:`Prior`), else sklearn's fit."""
    from sklearn.linear_model import LogisticRegression
    if weighting not in ("family", "question"):
        raise ValueError(f"weighting {weighting!r}")
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    n_all = sum(len(np.unique(p[2])) for p in parts)
    sw = []
    for X_, y_, q_ in parts:  # each family 1, each question 1 within it, positives balanced
        n_q = len(np.unique(q_)) if weighting == "family" else n_all
        per_q = np.bincount(q_.astype(np.int64))[q_.astype(np.int64)]
        w = 1.0 / (n_q * per_q)
        pos = y_ > 0
        w = np.where(pos, w * (w[~pos].sum() / max(w[pos].sum(), 1e-12)), w)
        sw.append(w)
    sw = np.concatenate(sw)
    sw = sw / sw.mean()
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    if prior is not None and (prior.signed or prior.center):
        b0, coef = _fit_prior((X - mu) / sd, y, sw, c, prior)
    else:
        m = LogisticRegression(C=c, max_iter=2000).fit((X - mu) / sd, y, sample_weight=sw)
        b0, coef = float(m.intercept_[0]), m.coef_[0]
    w = coef / sd
    b = float(b0 - (w * mu).sum())
    return tuple(round(float(x), 6) for x in (b, *w))


def _fit_prior(Z: np.ndarray, y: np.ndarray, sw: np.ndarray, c: float, prior: Prior):
    """sklearn's objective (C * sum sw * log-loss + ||w - w0||^2 / 2, bias unpenalised) with
    w0 = ``center`` and w >= 0 on the prior's columns, by L-BFGS-B."""
    from scipy.optimize import minimize
    from scipy.special import expit
    if len(prior.names) != Z.shape[1]:
        raise ValueError(f"prior names {prior.names} for {Z.shape[1]} columns")
    on = prior.mask(prior.names)
    w0 = np.where(on, prior.center, 0.0)
    s = 2.0 * y - 1.0

    def f(t):
        m = s * (t[0] + Z @ t[1:])
        loss = c * (sw * np.logaddexp(0.0, -m)).sum() + 0.5 * ((t[1:] - w0) ** 2).sum()
        g = -c * sw * s * expit(-m)
        return loss, np.r_[g.sum(), Z.T @ g + (t[1:] - w0)]
    bounds = [(None, None)] + [(0.0, None) if x else (None, None) for x in on]
    r = minimize(f, np.r_[0.0, np.maximum(w0, 0.0)], jac=True, method="L-BFGS-B",
                 bounds=bounds, options={"maxiter": 5000, "gtol": 1e-8})
    if not r.success:
        raise RuntimeError(f"ranker fit with prior: {r.message}")
    return float(r.x[0]), r.x[1:]


def main(argv=None) -> int:
    """Leave-one-family-out for the ranker stage alone: the embedder's preset upstream of
    the ranker fixed, the ranker trained on two dev families and scored (through the
    query path) on the third, beside the ranker trained on all three and no ranker.

        python benchmarks/train_ranker.py --embedder minilm \\
            --index 2wikimultihopqa=indexes/2wiki_minilm --index hotpotqa_train=... \\
            --index musique_dev=... --cache-dir cache/minilm --out ranker_lofo_minilm
    """
    import argparse
    import json
    import sys
    from pathlib import Path

    from quality_search import FAMILIES, KS, Bench, plain
    from hyperrag_fast.config import preset_for
    from hyperrag_fast.embed.registry import make_embedder
    from hyperrag_fast.eval.harness import _git, machine_info
    p = argparse.ArgumentParser(description="ranker leave-one-family-out")
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--index", action="append", required=True, help="DATASET=INDEX_DIR")
    p.add_argument("--cache-dir", default="cache")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--c", type=float, default=1.0, help="inverse L2 strength of the regression")
    p.add_argument("--out", required=True, help="output stem (.json)")
    a = p.parse_args(argv)
    commit, dirty = _git("rev-parse", "HEAD"), bool(_git("status", "--porcelain"))  # the code run
    index = dict(x.split("=", 1) for x in a.index)
    emb = make_embedder(a.embedder)
    preset = preset_for(emb.name)
    base = replace(preset, hybrid=replace(preset.hybrid, rank_weights=()))
    benches = {f: Bench(ds, sp, index[ds], emb, a.cache_dir, a.data_dir)
               for f, (ds, sp) in FAMILIES.items() if ds in index}
    data = {f: collect(b, base) for f, b in benches.items()}
    rec = lambda sc: {f"recall@{k}": sc["recall"][k] for k in KS}  # noqa: E731
    w_all = fit(list(data.values()), c=a.c)
    out = {"command": "python benchmarks/train_ranker.py " + " ".join(argv or sys.argv[1:]),
           "machine": machine_info(), "git_commit": commit,
           "git_dirty": dirty, "embedder": emb.name,
           "upstream": plain(base), "weights_all": list(w_all), "families": {}}
    for held, b in benches.items():
        w = fit([data[f] for f in benches if f != held], c=a.c)
        out["families"][held] = {
            "trained_on_others": {"weights": list(w), **rec(b.score(replace(
                base, hybrid=replace(base.hybrid, rank_weights=w))))},
            "trained_on_all": rec(b.score(replace(base, hybrid=replace(base.hybrid, rank_weights=w_all)))),
            "no_ranker": rec(b.score(base)),
            "shipped_preset": rec(b.score(preset))}
        print(held, json.dumps({k: v for k, v in out["families"][held].items() if k != "trained_on_others"}),
              out["families"][held]["trained_on_others"]["recall@5"], file=sys.stderr, flush=True)
    Path(a.out + ".json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    import sys as _sys
    _sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
    _sys.exit(main())
