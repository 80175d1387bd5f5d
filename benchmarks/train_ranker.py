"""The calibrated final ranking (``HybridOptions.rank_weights``): a logistic regression
over the per-chunk features of ``methods.stitch.FEATURES`` (docs/architecture.md §5).

Used by ``quality_search.py``: :func:`collect` runs ``stitch`` with ``detail`` on one
family's questions and keeps every C_q chunk's features with its label (gold or not);
:func:`fit` trains on the chosen families (each family weighs the same, each question
the same within it) and returns ``(bias, *weights)`` for the raw features, the
standardisation folded in, so a query pays one dot product. ``loss`` (session 21):
"pointwise" (the logistic regression), or a within-question loss ("listwise": softmax
cross-entropy over each question's C_q, ListNet; "pairwise": logistic on (gold, non-gold)
pairs of one question), which sees only the order inside a question, as R@k does.
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


#: the keys of a ``--ranker`` spec (quality_grid.py "C|KEY=V;...") that choose the loss
LOSS_KEYS = ("loss", "top")
LOSSES = ("pointwise", "listwise", "pairwise")


def parse_fit(spec: str) -> tuple[Prior | None, dict]:
    """``"signed=all;center=1;loss=listwise"`` -> (Prior or None, fit keywords ``loss``/``top``)."""
    kw = dict(x.split("=", 1) for x in spec.split(";") if x)
    rest = ";".join(f"{k}={v}" for k, v in kw.items() if k not in LOSS_KEYS)
    fk = {"loss": kw["loss"]} if "loss" in kw else {}
    if "top" in kw:
        fk["top"] = int(kw["top"])
    return (Prior.parse(rest) if rest else None), fk


def fit(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], c: float = 1.0,
        weighting: str = "family", prior: Prior | None = None, loss: str = "pointwise",
        top: int = 0) -> tuple[float, ...]:
    """Weights (bias, *w) of a logistic regression on ``parts`` (one per family);
    ``weighting`` "family": each family weighs the same, "question": each question does
    (a family weighs by its question count; measured in experiments/lofo_decompose.py);
    ``prior``: fitted with bounds and a shifted L2 centre (:class:`Prior`), else sklearn's fit.
    ``loss`` "listwise" / "pairwise" (``top`` > 0: each gold only against the ``top``
    highest-scoring non-golds of its question): :func:`_fit_within`, the same weighting,
    prior and C scale (the data term's question weights sum to the row count)."""
    from sklearn.linear_model import LogisticRegression
    if weighting not in ("family", "question"):
        raise ValueError(f"weighting {weighting!r}")
    if loss not in LOSSES:
        raise ValueError(f"loss {loss!r}: one of {LOSSES}")
    if loss != "pointwise":
        return _fit_within(parts, c, weighting, prior, loss, top)
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


def _fit_within(parts, c: float, weighting: str, prior: Prior | None, loss: str, top: int):
    """A within-question ranker (no bias: a per-question shift changes no order), by L-BFGS-B:
    C * sum_q v_q L_q + ||w - w0||^2 / 2, w0 and bounds from ``prior`` as in :func:`_fit_prior`;
    v_q: each family 1 (``weighting`` "family") or each question 1, scaled to sum to the rows.
    listwise L_q = -sum_i t_i log softmax(s)_i over q's C_q, t = y / sum y; pairwise L_q = mean
    over (gold i, non-gold j) of log(1 + exp(s_j - s_i)). A question with no gold (or no
    non-gold) in C_q carries no order and is left out. ``top``: hard negatives, re-chosen from
    the current fit (three rounds after the all-pairs fit)."""
    from scipy.optimize import minimize
    from scipy.special import expit
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts]) > 0
    fam = np.concatenate([np.full(p[1].shape[0], i) for i, p in enumerate(parts)])
    q = np.concatenate([p[2] for p in parts]).astype(np.int64)
    _, g = np.unique(fam * (int(q.max()) + 1) + q, return_inverse=True)  # question id 0..G-1
    order = np.argsort(g, kind="stable")
    X, y, g, fam = X[order], y[order], g[order], fam[order]
    n_g = np.bincount(g)
    pos_g = np.bincount(g, weights=y.astype(np.float64))
    keep = (pos_g > 0) & (pos_g < n_g)
    rows = keep[g]
    X, y, fam = X[rows], y[rows], fam[rows]
    g = np.unique(g[rows], return_inverse=True)[1]
    G, n_rows = int(g.max()) + 1, X.shape[0]
    fam_g = np.zeros(G, np.int64)
    fam_g[g] = fam
    n_q = np.array([len(np.unique(p[2])) for p in parts], np.float64)
    v = 1.0 / (n_q[fam_g] if weighting == "family" else np.full(G, n_q.sum()))
    v = v * n_rows / v.sum()
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    Z = (X - mu) / sd
    d = Z.shape[1]
    if prior is not None and (prior.signed or prior.center):
        if len(prior.names) != d:
            raise ValueError(f"prior names {prior.names} for {d} columns")
        on = prior.mask(prior.names)
        w0 = np.where(on, prior.center, 0.0)
        bounds = [(0.0, None) if x else (None, None) for x in on]
    else:
        w0, bounds = np.zeros(d), None
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    t = y / pos_g[keep][g]

    def listwise(w):
        s = Z @ w
        m = np.maximum.reduceat(s, starts)
        e = np.exp(s - m[g])
        S = np.add.reduceat(e, starts)
        L = (m + np.log(S))[g] * t - t * s  # sum_i t_i (lse - s_i), t sums to 1 per question
        gs = c * v[g] * (e / S[g] - t)
        return c * (v[g] * L).sum() + 0.5 * ((w - w0) ** 2).sum(), Z.T @ gs + (w - w0)

    def pairs(w):  # (gold rows, non-gold rows) of each question; top: the best-scored non-golds
        s = None if w is None else Z @ w
        gi, gj = [], []
        for a, b in zip(starts, np.r_[starts[1:], n_rows]):
            idx = np.arange(a, b)
            P, N = idx[y[a:b]], idx[~y[a:b]]
            if top and s is not None and N.shape[0] > top:
                N = N[np.argsort(-s[N], kind="stable")[:top]]
            gi.append(np.repeat(P, N.shape[0]))
            gj.append(np.tile(N, P.shape[0]))
        gi, gj = np.concatenate(gi), np.concatenate(gj)
        return gi, gj, v[g[gi]] / np.bincount(g[gi], minlength=G)[g[gi]]

    def pairwise(w, gi, gj, pw):
        s = Z @ w
        m = s[gi] - s[gj]
        gp = -c * pw * expit(-m)
        gs = np.bincount(gi, gp, n_rows) - np.bincount(gj, gp, n_rows)
        return c * (pw * np.logaddexp(0.0, -m)).sum() + 0.5 * ((w - w0) ** 2).sum(), Z.T @ gs + (w - w0)

    def solve(f, w_start):
        r = minimize(f, w_start, jac=True, method="L-BFGS-B", bounds=bounds,
                     options={"maxiter": 5000, "gtol": 1e-8})
        if not r.success and "ABNORMAL" not in str(r.message):
            raise RuntimeError(f"{loss} ranker fit: {r.message}")
        return r.x
    w = np.maximum(w0, 0.0) if bounds else w0.copy()
    if loss == "listwise":
        w = solve(listwise, w)
    else:
        P = pairs(None)
        w = solve(lambda x: pairwise(x, *P), w)
        if top:  # hard negatives chosen once, by the all-pairs fit
            P = pairs(w)
            w = solve(lambda x: pairwise(x, *P), w)
    ws = w / sd
    return tuple(round(float(x), 6) for x in (-float((ws * mu).sum()), *ws))


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
