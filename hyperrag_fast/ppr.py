"""Top-k personalized PageRank on a graph of any size by local push (docs/architecture.md
§4, "Local push"): validates the graph once, keeps a reusable scratch, and calls
:func:`hyperrag_fast.kernels.ppr_local.local_push_topk` per query.

    lp = LocalPush(ptr, nbr, w)          # out-arcs of node i: nbr[ptr[i]:ptr[i+1]], weights w
    res = lp.topk(p, d=0.85, k=8)        # p: dense prior (or LocalPush.topk_sparse(ids, vals))
    res.top, res.certified               # top-k, and whether its order is the exact solve's
    res = lp.approx(p, d=0.85, eps=1e-6) # every node within [x, x + d eps wsum] (symmetric w)
    lp.topk_sparse(ids, vals, d, k)      # from the prior's nonzeros: nothing read per node
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from .kernels.ppr_local import (APPROX_SHRINK, JUMP, PASS_FRACTION, REFINE_BUDGET, SHRINK, arc_scale,
                                local_push_prior, local_push_topk)


@dataclass(frozen=True)
class PushResult:
    """Touched nodes ``ids`` with lower bounds ``x`` (pushed mass plus (1 - d) r) and widths
    ``b``: the exact score of ``ids[i]`` lies in [x[i], x[i] + b[i]], of any other node in
    [0, b_rest]. ``top``: the top-k of x (ties by lower id); ``certified``: its order is the
    exact one."""

    ids: np.ndarray
    x: np.ndarray
    b: np.ndarray
    b_rest: float
    top: np.ndarray
    certified: bool
    eps: float
    pushes: int
    residual: float

    def dense(self, n: int) -> np.ndarray:
        out = np.zeros(n)
        out[self.ids] = self.x
        return out


class LocalPush:
    """A graph prepared for local-push PPR (one scratch per thread, O(n) once)."""

    def __init__(self, ptr, nbr, w, wsum=None, symmetric: bool | None = None,
                 pass_fraction: float = PASS_FRACTION) -> None:
        ptr = np.ascontiguousarray(ptr, dtype=np.int64)
        nbr = np.ascontiguousarray(nbr, dtype=np.int32)
        w = np.ascontiguousarray(w, dtype=np.float64)
        n = ptr.shape[0] - 1
        if n < 0 or ptr[0] != 0 or np.any(np.diff(ptr) < 0) or ptr[-1] != nbr.shape[0]:
            raise ValueError("ptr must start at 0, be non-decreasing and end at len(nbr)")
        if w.shape != nbr.shape:
            raise ValueError("w must have one weight per arc")
        if nbr.size and (nbr.min() < 0 or nbr.max() >= n):
            raise ValueError(f"nbr holds ids outside [0, {n})")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("arc weights must be finite and >= 0")
        row_sums = np.bincount(np.repeat(np.arange(n), np.diff(ptr)), weights=w, minlength=n)
        if wsum is None:
            wsum = row_sums
        wsum = np.ascontiguousarray(wsum, dtype=np.float64)
        if wsum.shape != (n,) or not np.allclose(wsum, row_sums, rtol=1e-12, atol=0):
            raise ValueError("wsum must be the row sums of w")
        self.ptr, self.nbr, self.w, self.wsum, self.n = ptr, nbr, w, wsum, n
        self.wn = arc_scale(ptr, nbr, w, wsum)
        self.wmax = float(wsum.max()) if n else 0.0
        self.symmetric = is_symmetric(ptr, nbr, w) if symmetric is None else bool(symmetric)
        if not 0.0 <= pass_fraction:
            raise ValueError("pass_fraction must be >= 0")
        #: pushes in a round from which it runs as node-order passes (0: always)
        self.pass_min = int(np.ceil(n * pass_fraction)) if np.isfinite(pass_fraction) else 2**62
        self._local = threading.local()

    def _scratch(self):
        sc = getattr(self._local, "scratch", None)
        if sc is None:
            n = self.n
            sc = (np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.uint8),
                  np.empty(n + 1, dtype=np.int32), np.empty(n, dtype=np.int32))
            self._local.scratch = sc
        return sc

    def topk(self, p, d: float, k: int, eps_min: float = 1e-12, shrink: float = SHRINK,
             jump: float = JUMP) -> PushResult:
        """Certified top-k from the dense prior ``p`` (non-negative): push with a threshold
        lowered by ``shrink`` (or to rho*, at most by ``jump``: kernels/ppr_local.py) until
        the top-k order is certified or eps reaches ``eps_min``. The prior's nonzeros are
        found inside the kernel call."""
        p = np.ascontiguousarray(p, dtype=np.float64).reshape(-1)
        if p.shape[0] != self.n:
            raise ValueError(f"p must have {self.n} entries, got {p.shape[0]}")
        _check(d, k, eps_min, shrink, jump)
        bad, out = local_push_prior(self.ptr, self.nbr, self.wn, self.wsum, self.wmax, self.symmetric, p,
                                    float(d), 0.0, float(eps_min), float(shrink), float(jump), int(k),
                                    self.pass_min, REFINE_BUDGET, *self._scratch())
        if bad:
            raise ValueError("prior values must be finite and >= 0")
        return _result(out)

    def approx(self, p, d: float, eps: float) -> PushResult:
        """Push down to threshold ``eps``: 0 <= pi(v) - x(v) <= d eps wsum(v) on a symmetric
        graph, <= d times the residual on any graph (both in ``b``)."""
        return self.topk(p, d, 0, eps_min=eps, shrink=APPROX_SHRINK, jump=APPROX_SHRINK)

    def topk_sparse(self, ids, vals, d: float, k: int, eps_min: float = 1e-12, shrink: float = SHRINK,
                    eps0: float = 0.0, jump: float = JUMP) -> PushResult:
        """:meth:`topk` from the prior's nonzeros (distinct ``ids``, values ``vals`` >= 0);
        ``eps0`` > 0: the first threshold (default: max p / wsum / shrink)."""
        ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
        vals = np.ascontiguousarray(vals, dtype=np.float64).reshape(-1)
        if ids.shape != vals.shape:
            raise ValueError("ids and vals differ in length")
        if ids.size and (ids.min() < 0 or ids.max() >= self.n):
            raise ValueError(f"prior ids outside [0, {self.n})")
        if not np.all(np.isfinite(vals)) or np.any(vals < 0):
            raise ValueError("prior values must be finite and >= 0")
        _check(d, k, eps_min, shrink, jump)
        return _result(local_push_topk(self.ptr, self.nbr, self.wn, self.wsum, self.wmax, self.symmetric, ids, vals,
                                       float(d), float(eps0), float(eps_min), float(shrink), float(jump), int(k),
                                       self.pass_min, REFINE_BUDGET, *self._scratch()))

    def approx_sparse(self, ids, vals, d: float, eps: float) -> PushResult:
        """:meth:`approx` from the prior's nonzeros (distinct ``ids``, values ``vals`` >= 0):
        no read of a dense prior, so the call costs only what the push touches."""
        return self.topk_sparse(ids, vals, d, 0, eps_min=eps, shrink=APPROX_SHRINK, jump=APPROX_SHRINK)


def _check(d, k, eps_min, shrink, jump) -> None:
    if not 0.0 <= d < 1.0:
        raise ValueError(f"damping must be in [0, 1), got {d}")
    if not eps_min > 0 or not shrink > 1 or not jump >= shrink or k < 0:
        raise ValueError("eps_min must be > 0, shrink > 1, jump >= shrink and k >= 0")


def _result(out) -> PushResult:
    i, xs, bs, b_rest, top, cert, eps, pushes, rsum, _rho = out
    return PushResult(i, xs, bs, float(b_rest), top, bool(cert), float(eps), int(pushes), float(rsum))


def is_symmetric(ptr, nbr, w, rtol: float = 1e-12) -> bool:
    """Whether w_ij = w_ji for every arc (up to ``rtol``; a missing arc weighs 0)."""
    n = ptr.shape[0] - 1
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    dst = nbr.astype(np.int64)
    a = np.lexsort((dst, src))
    b = np.lexsort((src, dst))
    if not (np.array_equal(src[a], dst[b]) and np.array_equal(dst[a], src[b])):
        return False
    return bool(np.allclose(w[a], w[b], rtol=rtol, atol=0))
