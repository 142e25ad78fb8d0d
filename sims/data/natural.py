"""A natural-like partition: skewed client sizes and skewed label mixes at once.

Natural federated splits (StackOverflow users, GLD-v2 photographers) differ from the usual
synthetic ones in two ways together: a few clients hold much more data than most, and each
client's labels concentrate on a few classes. :func:`natural_like` draws both:

1. sizes: ``w_i ~ LogNormal(0, size_sigma)``, ``n_i = min_size + round((N' ) w_i / sum w)``
   with ``N' = N_used - n_clients * min_size`` (largest-remainder rounding, so the sizes sum to
   ``N_used``); ``size_sigma = 1.0`` gives a max/median size ratio around 10 for 400 clients,
   as heavy-tailed per-user counts;
2. label mixes: client ``i`` draws ``q_i ~ Dir(alpha 1_C)`` and fills its ``n_i`` slots with
   samples of classes drawn from ``q_i`` restricted to classes with samples left (the
   per-client Dirichlet filler of :func:`sims.data.partition.dirichlet`'s ``per_client``
   variant, which is reused here with unequal sizes).

``fraction`` < 1 uses a random subset of the samples (``N_used = floor(fraction N)``).
Pure function of its arguments and ``seed``; every used sample goes to exactly one client.
"""
from __future__ import annotations

import numpy as np

from .errors import PartitionError
from .partition import _finish, _labels, _per_client_assign

__all__ = ["natural_like", "natural_sizes"]


def natural_sizes(n_samples: int, n_clients: int, size_sigma: float, min_size: int,
                  rng: np.random.Generator) -> np.ndarray:
    """Log-normal client sizes summing to ``n_samples``, each at least ``min_size``."""
    if n_clients * min_size > n_samples:
        raise PartitionError(f"min_size={min_size} for {n_clients} clients needs "
                             f"{n_clients * min_size} samples, only {n_samples} available")
    w = rng.lognormal(0.0, size_sigma, n_clients)
    spare = n_samples - n_clients * min_size
    exact = spare * w / w.sum()
    base = np.floor(exact).astype(np.int64)
    short = spare - int(base.sum())
    base[np.argsort(-(exact - base), kind="stable")[:short]] += 1
    return base + min_size


def natural_like(labels, n_clients: int = 400, *, seed: int, size_sigma: float = 1.0,
                 alpha: float = 0.5, min_size: int = 10, fraction: float = 1.0) -> list[np.ndarray]:
    """Partition ``labels`` among ``n_clients`` with log-normal sizes (``size_sigma``) and
    ``Dir(alpha)`` label mixes (module docstring); sorted int64 index arrays."""
    y = _labels(labels)
    if not (isinstance(n_clients, (int, np.integer)) and n_clients >= 1):
        raise PartitionError(f"n_clients must be a positive integer, got {n_clients!r}")
    if not (np.isfinite(size_sigma) and size_sigma >= 0):
        raise PartitionError(f"size_sigma must be >= 0, got {size_sigma!r}")
    if not (np.isfinite(alpha) and alpha > 0):
        raise PartitionError(f"alpha must be a finite number > 0, got {alpha!r}")
    if not 0 < fraction <= 1:
        raise PartitionError(f"fraction must be in (0, 1], got {fraction!r}")
    rng = np.random.default_rng(seed)
    used = np.sort(rng.permutation(len(y))[: int(np.floor(fraction * len(y)))])
    sizes = natural_sizes(len(used), int(n_clients), float(size_sigma), int(min_size), rng)
    classes, y_idx = np.unique(y[used], return_inverse=True)
    pools = [rng.permutation(used[y_idx == c]) for c in range(len(classes))]
    parts = [np.array(p, dtype=np.int64) for p in _per_client_assign(pools, sizes, float(alpha), rng)]
    if fraction == 1:
        return _finish(parts, len(y))
    return [np.sort(p) for p in parts]
