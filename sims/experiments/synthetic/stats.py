"""Small statistics shared by the synthetic experiments: log-log slopes, rounds to a target,
and the staleness law of partial participation (Fed-EF Sec. 4.3)."""
from __future__ import annotations

import math

import numpy as np


def loglog_slope(x, y) -> tuple[float, float]:
    """Least-squares slope and intercept of ``log y`` on ``log x`` (finite positive pairs)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2:
        return math.nan, math.nan
    slope, icpt = np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)
    return float(slope), float(icpt)


def rounds_to_target(rounds, curve, target: float) -> float:
    """The first round at which ``curve <= target`` (``nan`` if never)."""
    rounds, curve = np.asarray(rounds), np.asarray(curve)
    hit = np.flatnonzero(curve <= target)
    return float(rounds[hit[0]]) if len(hit) else math.nan


def staleness_pmf(p: float, rounds: int, gmax: int | None = None) -> np.ndarray:
    """Expected law of the recorded staleness ``g = 1, 2, ...`` in a run of ``rounds`` rounds
    where each client takes part in each round with probability ``p = m/n`` independently
    across rounds (uniform sampling of ``m`` of ``n`` without replacement every round).

    The gap between two participations of a client is Geometric(p) on ``{1, 2, ...}`` (mean
    ``1/p = n/m``); a gap of length ``g`` is recorded only when it ends inside the run, at one
    of ``rounds - g`` rounds, so the recorded law is ``(rounds - g) p (1-p)^(g-1)``
    normalised (the window's bias towards short gaps, negligible for ``rounds >> n/m``).
    Returns ``pmf[g - 1]`` for ``g = 1..gmax`` (default ``rounds - 1``)."""
    gmax = rounds - 1 if gmax is None else min(gmax, rounds - 1)
    g = np.arange(1, rounds)
    w = (rounds - g) * p * (1 - p) ** (g - 1)
    w = w / w.sum()
    return w[:gmax]


def geometric_pmf(p: float, gmax: int) -> np.ndarray:
    g = np.arange(1, gmax + 1)
    return p * (1 - p) ** (g - 1)


def staleness_fit(samples, p: float, rounds: int, min_expected: float = 5.0) -> dict:
    """Compare recorded staleness samples with :func:`staleness_pmf`: mean against the
    window-corrected mean and ``1/p``, a chi-square goodness-of-fit over bins with at least
    ``min_expected`` expected counts (the tail pooled), and the largest pmf difference."""
    from scipy import stats

    samples = np.asarray(samples, dtype=int)
    N = len(samples)
    pmf = staleness_pmf(p, rounds)
    g = np.arange(1, len(pmf) + 1)
    expected = N * pmf
    observed = np.bincount(samples, minlength=len(pmf) + 1)[1:len(pmf) + 1].astype(float)
    keep = int(np.max(np.flatnonzero(expected >= min_expected), initial=0)) + 1
    obs = np.append(observed[:keep], N - observed[:keep].sum())
    exp = np.append(expected[:keep], N - expected[:keep].sum())
    if exp[-1] < min_expected:
        obs[-2] += obs[-1]
        exp[-2] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    chi2, pval = stats.chisquare(obs, exp)
    mean_window = float((g * pmf).sum())
    sd = float(np.sqrt((g * g * pmf).sum() - mean_window ** 2))
    return {"n_samples": N, "mean": float(samples.mean()), "mean_theory": 1.0 / p,
            "mean_window": mean_window, "se": sd / math.sqrt(max(N, 1)),
            "chi2": float(chi2), "dof": len(obs) - 1, "p_value": float(pval),
            "max_abs_pmf_diff": float(np.max(np.abs(observed / max(N, 1) - pmf)))}


def seed_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of per-seed values (nan ones dropped) with its
    Student-t interval at ``level`` (``low = high = nan`` with fewer than two values)."""
    from scipy import stats as st

    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return math.nan, math.nan, math.nan
    mean = float(v.mean())
    if len(v) < 2:
        return mean, math.nan, math.nan
    half = float(st.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
    return mean, mean - half, mean + half


def fmt_interval(iv, digits: int = 2) -> str:
    """``"-0.52 [-0.61, -0.43]"`` (``"-0.52 (one seed: no interval)"`` without an interval)."""
    mean, lo, hi = iv
    if not np.isfinite(lo):
        return f"{mean:.{digits}f} (one seed: no interval)"
    return f"{mean:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
