"""How infinite moments show up in finite samples (FedAda2 spec 2.8): every estimate below
is finite for any number of paths ``M``; what separates a finite moment from an infinite
one is how the estimate moves as ``M`` grows.

* :func:`running_mean` -- the sample mean over the first ``M`` paths, on a grid of ``M``:
  converges for a finite moment, drifts upward (about ``c log M`` for the second moment of a
  ``t_2`` component) for an infinite one;
* :func:`block_median` -- the median over disjoint blocks of ``M`` paths of the block mean:
  the *typical* estimate with ``M`` paths, a smooth version of the running mean;
* :func:`running_max` -- grows like ``sqrt(M)`` (``t_2``) or ``M`` (Cauchy) or stays under
  an a.s. bound;
* :func:`largest_share` -- the largest path's share of the sum: stays of order one when the
  moment is infinite (single big jump), falls like ``1/M`` otherwise;
* :func:`hill` -- the Hill tail-index estimate from the top ``k`` order statistics (about 2
  for ``t_2``, 1 for Cauchy, large for bounded laws);
* :func:`survival` -- the empirical ``P(|X| > a)`` on a grid of levels.
"""
from __future__ import annotations

import numpy as np


def log_grid(total: int, points: int = 40, start: int = 10) -> np.ndarray:
    """Distinct integers from ``start`` to ``total``, evenly spaced in log."""
    start = min(start, total)
    return np.unique(np.round(np.geomspace(start, total, points)).astype(np.int64))


def running_mean(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    csum = np.cumsum(np.asarray(values, dtype=np.float64))
    return csum[grid - 1] / grid


def running_max(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    return np.maximum.accumulate(np.asarray(values, dtype=np.float64))[grid - 1]


def largest_share(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``max_{p <= M} v_p / sum_{p <= M} v_p`` for nonnegative ``v``."""
    v = np.asarray(values, dtype=np.float64)
    return running_max(v, grid) / np.maximum(np.cumsum(v)[grid - 1], 1e-300)


def block_median(values: np.ndarray, sizes) -> np.ndarray:
    """For each block size ``b``: the median over the ``floor(M / b)`` disjoint blocks of the
    block mean (sizes with fewer than 5 blocks give ``nan``)."""
    v = np.asarray(values, dtype=np.float64)
    out = []
    for b in sizes:
        blocks = len(v) // int(b)
        out.append(np.median(v[: blocks * b].reshape(blocks, b).mean(1)) if blocks >= 5
                   else np.nan)
    return np.asarray(out)


def hill(values: np.ndarray, k: int) -> float:
    """Hill's estimate of the tail index ``alpha`` of ``|values|`` from the top ``k`` order
    statistics: ``1 / mean_{j <= k} log(X_(j) / X_(k+1))`` (``inf`` if they are all equal)."""
    x = np.abs(np.asarray(values, dtype=np.float64))
    if not 1 <= k < len(x):
        raise ValueError(f"Hill needs 1 <= k < n, got k={k}, n={len(x)}")
    top = np.partition(x, len(x) - k - 1)[len(x) - k - 1:]
    threshold = top.min()
    if threshold <= 0:
        return float("nan")
    mean_log = np.mean(np.log(np.sort(top)[1:] / threshold))
    return float(1.0 / mean_log) if mean_log > 0 else float("inf")


def survival(values: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Empirical ``P(|X| > a)`` at each level ``a``."""
    x = np.sort(np.abs(np.asarray(values, dtype=np.float64)))
    return 1.0 - np.searchsorted(x, levels, side="right") / len(x)
