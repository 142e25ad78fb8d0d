"""Fed-EF's compression discrepancy ``q_A`` (Assumption 3) on simulated client vectors
(App. C.1, Figures 16-18; spec fed-ef.md 4.10).

``n = 5`` clients, ``d = 1100``; every client's vector (playing ``Delta_{t,i} + e_{t,i}``)
has i.i.d. coordinates ``N(0, gamma^2)`` (``gamma = 0.01``) or ``Laplace(0, lambda)``
(``lambda = 0.01``, the numpy scale, variance ``2 lambda^2``), and its "strong" coordinates
multiplied by ``s in {2, 10, 100}``. Which coordinates are strong is not stated in the paper
(spec 4.10); two layouts:

* ``disjoint`` (default): the ``d`` coordinates are cut into ``n`` consecutive blocks of
  ``d / n = 220``, client ``i``'s block is its strong one (every coordinate is strong for
  exactly one client);
* ``partial``: client ``i``'s strong block is ``[100 i, 100 (i + 1))``, the remaining 600
  coordinates are weak for every client.

Per draw ``q_A^2 = ||mean_i C(x_i) - mean_i x_i||^2 / ||mean_i x_i||^2`` and
``q_C^2 = ||C(xbar) - xbar||^2 / ||xbar||^2`` ("compression of the average"); the figure is
the mean of the per-draw ratios over the draws (spec 6.19). TopK keeps ``floor(0.1 d) = 110``
coordinates of each vector, Sign is one group (``M = 1``). The compressors are those of
:mod:`sims.rules.compress`.

Randomness: chunk ``c`` of ``CHUNK`` draws uses ``numpy.random.default_rng([seed, c])``; the
same base draws serve every ``s`` and both compressors (common random numbers).
"""
from __future__ import annotations

import numpy as np
import torch

from ...rules.compress import Sign, TopK
from ...core.params import ParamLayout

CHUNK = 1000
#: "well below 1" (Fig. 19's words for q_A in training) read as ``q_A^2 <= 0.5``
#: (``q_A <= 0.71``): there Theorem 4.4's ``C_1 = q^2/(1-q^2)^3`` is 4, not unbounded.
WELL_BELOW = 0.5
LAYOUTS = ("disjoint", "partial")
DISTS = ("gaussian", "laplace")


def strong_mask(n: int, d: int, layout: str = "disjoint", width: int = 100) -> np.ndarray:
    """``[n, d]`` boolean: client ``i``'s strong coordinates."""
    mask = np.zeros((n, d), dtype=bool)
    if layout == "disjoint":
        edges = np.linspace(0, d, n + 1).round().astype(int)
        for i in range(n):
            mask[i, edges[i]:edges[i + 1]] = True
    elif layout == "partial":
        if n * width > d:
            raise ValueError(f"partial layout needs n * width <= d, got {n} * {width} > {d}")
        for i in range(n):
            mask[i, i * width:(i + 1) * width] = True
    else:
        raise ValueError(f"unknown layout {layout!r}; use one of {LAYOUTS}")
    return mask


def base_draws(rng: np.random.Generator, draws: int, n: int, d: int, dist: str,
               scale: float = 0.01) -> np.ndarray:
    if dist == "gaussian":
        return scale * rng.standard_normal((draws, n, d), dtype=np.float32)
    if dist == "laplace":
        return rng.laplace(0.0, scale, (draws, n, d)).astype(np.float32)
    raise ValueError(f"unknown distribution {dist!r}; use one of {DISTS}")


def client_vectors(base: np.ndarray, mask: np.ndarray, s: float) -> np.ndarray:
    return base * np.where(mask, np.float32(s), np.float32(1.0))


def compressors(k: float = 0.1) -> dict:
    return {f"topk-{k:g}": TopK(k), "sign": Sign()}


def ratios(x: np.ndarray, comp) -> tuple[np.ndarray, np.ndarray]:
    """Per-draw ``(q_A^2, q_C^2)`` for client vectors ``x`` of shape ``[B, n, d]``."""
    B, n, d = x.shape
    layout = ParamLayout.single(d)
    xt = torch.from_numpy(x)
    mean = xt.mean(1)
    mean_c = comp(xt.reshape(B * n, d), layout).reshape(B, n, d).mean(1)
    denom = (mean.double() ** 2).sum(1)
    qa = ((mean_c - mean).double() ** 2).sum(1) / denom
    qc = ((comp(mean, layout) - mean).double() ** 2).sum(1) / denom
    return qa.numpy(), qc.numpy()


def simulate(dist: str, scales, draws: int, seed: int, *, n: int = 5, d: int = 1100,
             layout: str = "disjoint", k: float = 0.1, noise_scale: float = 0.01,
             progress=None) -> dict:
    """``{(s, compressor): {"qA2": per-draw array, "qC2": per-draw array}}``."""
    mask = strong_mask(n, d, layout)
    comps = compressors(k)
    out = {(s, c): {"qA2": [], "qC2": []} for s in scales for c in comps}
    for c_idx, lo in enumerate(range(0, draws, CHUNK)):
        rng = np.random.default_rng([seed, c_idx])
        base = base_draws(rng, min(CHUNK, draws - lo), n, d, dist, noise_scale)
        for s in scales:
            x = client_vectors(base, mask, s)
            for name, comp in comps.items():
                qa, qc = ratios(x, comp)
                out[(s, name)]["qA2"].append(qa)
                out[(s, name)]["qC2"].append(qc)
        if progress is not None:
            progress(min(CHUNK, draws - lo) / draws)
    return {key: {k: np.concatenate(v) for k, v in val.items()} for key, val in out.items()}
