"""Speedup in ``n`` (full participation) and in ``m`` (partial participation, ``n`` fixed)
for Fed-EF-SGD (Corollary 1 and Theorem 4.4; spec fed-ef.md 3.5-3.6).

Learning rates as the rates prescribe (``c_eta``, ``c_l`` free constants):

* full participation (Corollary 1): ``eta = c_eta sqrt(K n)``, ``eta_l = c_l / (K sqrt(T))``,
  rate ``O(1/sqrt(T K n))`` -> slope ``-1/2`` in ``n`` at fixed ``T`` (once ``T`` is large
  enough for the ``sigma_g^2`` term to vanish, ``T >= K n sigma_g^2 / sigma^2``);
* partial participation (Theorem 4.4): ``eta = c_eta sqrt(K m)``, ``eta_l = c_l sqrt(m) /
  (K sqrt(T n))``, rate ``O(sqrt(n/m) / sqrt(T K m)) = O(sqrt(n) / (m sqrt(T K)))`` -> slope
  ``-1`` in ``m`` at fixed ``n`` (super-linear: the extra ``sqrt(n/m)`` of the stale error).

On a quadratic the effective step ``gamma = eta eta_l K`` is ``c_eta c_l sqrt(K n / T)``
(full) and ``c_eta c_l m sqrt(K / (T n))`` (partial), so the rounds needed to shrink the
gradient by a fixed factor scale like ``1/gamma``: ``n^(-1/2)`` and ``m^(-1)``, the slopes
the theory predicts for the bound.
"""
from __future__ import annotations

import math

THEORY_SLOPE = {"full": -0.5, "partial": -1.0}


def learning_rates(setting: str, K: int, T: int, n: int, m: int | None = None,
                   c_eta: float = 1.0, c_l: float = 1.0) -> tuple[float, float]:
    """``(eta, eta_l)`` of Corollary 1 (``setting="full"``) or Theorem 4.4 (``"partial"``)."""
    if setting == "full":
        return c_eta * math.sqrt(K * n), c_l / (K * math.sqrt(T))
    if setting == "partial":
        if m is None:
            raise ValueError("partial participation needs m")
        return c_eta * math.sqrt(K * m), c_l * math.sqrt(m) / (K * math.sqrt(T * n))
    raise ValueError(f"setting must be full or partial, got {setting!r}")


def theory_rate(setting: str, K: int, T: int, n: int, m: int | None = None) -> float:
    """The rate's leading factor without constants: ``1/sqrt(TKn)`` or
    ``sqrt(n/m)/sqrt(TKm)``."""
    if setting == "full":
        return 1.0 / math.sqrt(T * K * n)
    return math.sqrt(n / m) / math.sqrt(T * K * m)
